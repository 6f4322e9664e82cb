//! The `KubeVirt` custom resource: the cluster-wide configuration every component reads.
//!
//! Only the keys our components act on are typed; the CRD keeps any other key a cluster sets, so
//! an upstream KubeVirt CR applies unchanged.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec` of the `KubeVirt` resource.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "KubeVirt",
    plural = "kubevirts",
    singular = "kubevirt",
    shortname = "kv",
    shortname = "kvs",
    category = "all",
    namespaced,
    status = "KubeVirtStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtSpec {
    /// Tag of the component images.
    pub image_tag: Option<String>,
    /// Registry of the component images.
    pub image_registry: Option<String>,
    /// Pull policy of the component images.
    pub image_pull_policy: Option<String>,
    /// Cluster configuration.
    pub configuration: Option<KubeVirtConfiguration>,
    /// Where virt-api and virt-controller run (virt-operator's `infra`).
    pub infra: Option<ComponentConfig>,
    /// Where virt-handler runs, and so where VMs can run (virt-operator's `workloads`).
    pub workloads: Option<ComponentConfig>,
    /// What deleting the CR does: `RemoveWorkloads` (also when unset or empty) removes every VM
    /// and VMI with the CRDs; `BlockUninstallIfWorkloadsExist` makes virt-operator's webhook
    /// refuse the deletion while any VMI, VM or VMI replica set exists.
    #[schemars(extend("enum" = ["", "RemoveWorkloads", "BlockUninstallIfWorkloadsExist"]))]
    pub uninstall_strategy: Option<String>,
    /// The lifetimes of KubeVirt's CA and certificates, which virt-api keeps: the CA 168 hours
    /// and the others 24 unless told otherwise, each renewed when a fifth of its life is left.
    pub certificate_rotate_strategy: Option<super::CertificateRotateStrategy>,
    /// How VMIs whose launcher is not the installed one are moved (virt-controller's workload
    /// updater): none by default, else live-migrated or evicted.
    pub workload_update_strategy: Option<WorkloadUpdateStrategy>,
    /// Patches of the components' objects and flags of their commands, applied by virt-operator
    /// to what it renders.
    pub customize_components: Option<super::CustomizeComponents>,
}

/// `spec.workloadUpdateStrategy`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadUpdateStrategy {
    /// `LiveMigrate` (VMIs that can live-migrate are migrated) and `Evict` (the others' launcher
    /// pods are evicted); without either, outdated VMIs stay where they are.
    #[schemars(extend("items" = {"type": "string", "enum": ["LiveMigrate", "Evict"]}))]
    pub workload_update_methods: Option<Vec<String>>,
    /// VMIs evicted per batch (10 when unset).
    #[schemars(range(min = 1))]
    pub batch_eviction_size: Option<i32>,
    /// The time between two eviction batches, a Go duration (`1m0s` when unset).
    pub batch_eviction_interval: Option<String>,
}

/// `spec.infra` and `spec.workloads` of the `KubeVirt` resource.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentConfig {
    /// Node selector, affinity and tolerations added to the components' pods.
    pub node_placement: Option<operator_kit::placement::NodePlacement>,
    /// Replicas of virt-api and virt-controller (`infra` only; upstream's default is 2).
    #[schemars(range(min = 1))]
    pub replicas: Option<u8>,
}

/// `spec.configuration` of the `KubeVirt` resource.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct KubeVirtConfiguration {
    /// Developer and feature-gate settings.
    pub developer_configuration: Option<DeveloperConfiguration>,
    /// Default CPU model for VMIs that name none.
    pub cpu_model: Option<String>,
    /// Default CPU request of the launcher pod, e.g. `100m`.
    pub cpu_request: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// Default machine type.
    pub machine_type: Option<String>,
    /// Network defaults.
    pub network: Option<NetworkConfiguration>,
    /// Default eviction strategy.
    pub eviction_strategy: Option<String>,
    /// Factor applied to the launcher memory overhead, e.g. `"1.5"`.
    pub additional_guest_memory_overhead_ratio: Option<String>,
    /// Memory balloon statistics period in seconds; 10 when unset.
    pub mem_balloon_stats_period: Option<u32>,
    /// Machine types VMIs may ask for, as globs (`q35*`).
    pub emulated_machines: Option<Vec<String>>,
    /// How VM changes reach a running VMI: `LiveUpdate` (upstream's default) or `Stage`.
    pub vm_rollout_strategy: Option<String>,
    /// Live-migration settings.
    pub migrations: Option<super::MigrationConfiguration>,
    /// The StorageClass of VM state claims (persistent TPM and EFI); else the class annotated
    /// `storageclass.kubevirt.io/is-default-virt-class`, else the cluster's default.
    pub vm_state_storage_class: Option<String>,
    /// Whether virt-operator deploys upstream's common instance types and preferences.
    pub common_instancetypes_deployment: Option<CommonInstancetypesDeployment>,
    /// The SMBIOS system strings every guest sees.
    pub smbios: Option<super::SmbiosConfiguration>,
    /// Free page reporting and the serial console log of new VMIs.
    pub virtual_machine_options: Option<super::VirtualMachineOptions>,
}

/// `spec.configuration.commonInstancetypesDeployment`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonInstancetypesDeployment {
    /// Deploy them (true when unset); false deletes the ones virt-operator deployed.
    pub enabled: Option<bool>,
}

/// `spec.configuration.developerConfiguration`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct DeveloperConfiguration {
    /// Feature gates to turn on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<String>,
    /// Use software emulation (TCG) where `/dev/kvm` is absent.
    pub use_emulation: Option<bool>,
    /// Percent of guest memory requested from the node; 100 when unset.
    pub memory_overcommit: Option<u32>,
    /// vCPUs per requested CPU; 10 when unset.
    pub cpu_allocation_ratio: Option<u32>,
    /// How launchers check containerDisk images.
    pub disk_verification: Option<DiskVerification>,
}

/// `spec.configuration.developerConfiguration.diskVerification`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskVerification {
    /// The memory `qemu-img` may use to read an image (the launcher's `--disk-memory-limit`);
    /// 2000Mi when unset.
    pub memory_limit: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
}

/// `spec.configuration.network`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct NetworkConfiguration {
    /// Binding of the default interface: `bridge` (upstream's default) or `masquerade`.
    pub default_network_interface: Option<String>,
    /// Allow the bridge binding on the pod network; true when unset.
    pub permit_bridge_interface_on_pod_network: Option<bool>,
}

/// `status` of the `KubeVirt` resource.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct KubeVirtStatus {
    /// `Deploying`, `Deployed`, `Deleting` or `Deleted`, as virt-operator writes it.
    pub phase: Option<String>,
    /// `Available`, `Progressing`, `Degraded`, `Created` and `Synchronized`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<KubeVirtCondition>,
    /// The version (image tag) deployed and ready.
    pub observed_kube_virt_version: Option<String>,
    /// The version being deployed.
    pub target_kube_virt_version: Option<String>,
    /// The registry deployed and ready.
    pub observed_kube_virt_registry: Option<String>,
    /// The registry being deployed.
    pub target_kube_virt_registry: Option<String>,
    /// The identity of the install deployed and ready (a digest of its objects).
    #[serde(rename = "observedDeploymentID")]
    pub observed_deployment_id: Option<String>,
    /// The identity of the install being deployed.
    #[serde(rename = "targetDeploymentID")]
    pub target_deployment_id: Option<String>,
    /// The settings of the install deployed and ready, as JSON.
    pub observed_deployment_config: Option<String>,
    /// The settings of the install being deployed, as JSON.
    pub target_deployment_config: Option<String>,
    /// virt-operator's own version.
    pub operator_version: Option<String>,
    /// The CR's generation the operator acted on.
    pub observed_generation: Option<i64>,
    /// The generations of the workloads it deployed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generations: Vec<GenerationStatus>,
    /// The running VMIs whose launcher is not the installed one, as virt-controller's workload
    /// updater counts them.
    pub outdated_virtual_machine_instance_workloads: Option<i64>,
}

/// A condition of the `KubeVirt` resource.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtCondition {
    /// `Available`, `Progressing`, `Degraded`, `Created` or `Synchronized`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, as a word (upstream's `AllComponentsReady`, `DeploymentInProgress`, ...).
    pub reason: Option<String>,
    /// Why, as a sentence.
    pub message: Option<String>,
    /// When it was last looked at.
    pub last_probe_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// When it last changed.
    pub last_transition_time: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
}

/// The generation of one object virt-operator deployed, as it last wrote it.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GenerationStatus {
    /// Its API group.
    pub group: String,
    /// Its resource (plural).
    pub resource: String,
    /// Its namespace.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// Its `metadata.generation` after the operator's last write.
    pub last_generation: i64,
    /// A digest of what the operator wrote.
    pub hash: Option<String>,
}

/// The configuration as the components use it, with upstream's defaults applied.
#[allow(
    clippy::struct_excessive_bools,
    reason = "independent cluster settings, each upstream's own switch"
)]
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterConfig {
    /// `developerConfiguration.useEmulation`.
    pub use_emulation: bool,
    /// `developerConfiguration.memoryOvercommit`, in percent.
    pub memory_overcommit: u32,
    /// `developerConfiguration.featureGates`.
    pub feature_gates: Vec<String>,
    /// `machineType`, defaulting to `q35`.
    pub machine_type: String,
    /// `cpuModel`, when the cluster sets one.
    pub cpu_model: Option<String>,
    /// `memBalloonStatsPeriod`, defaulting to 10 s.
    pub mem_balloon_stats_period: u32,
    /// `network.defaultNetworkInterface`, defaulting to `bridge`.
    pub default_network_interface: String,
    /// `network.permitBridgeInterfaceOnPodNetwork`, defaulting to true.
    pub permit_bridge_interface_on_pod_network: bool,
    /// `cpuRequest`, when the cluster sets one.
    pub cpu_request: Option<k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// `evictionStrategy`, when the cluster sets one.
    pub eviction_strategy: Option<String>,
    /// `emulatedMachines`, defaulting to upstream's amd64 list.
    pub emulated_machines: Vec<String>,
    /// `vmRolloutStrategy`, defaulting to `LiveUpdate`.
    pub vm_rollout_strategy: String,
    /// `migrations`, with upstream's defaults.
    pub migrations: crate::migration_settings::MigrationSettings,
    /// `developerConfiguration.diskVerification.memoryLimit` in bytes, 2000 MiB when unset (or not
    /// a quantity).
    pub disk_verification_memory_limit: u64,
    /// The KubeVirt CR carries `alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity` (HCO's
    /// `alignCPUs`): new VMIs with an isolated emulator thread get it too, under the AlignCPUs gate.
    pub emulator_thread_complete_to_even_parity: bool,
    /// `smbios` over upstream's defaults.
    pub smbios: super::Smbios,
    /// `virtualMachineOptions.disableFreePageReporting` is set.
    pub free_page_reporting_disabled: bool,
    /// `virtualMachineOptions.disableSerialConsoleLog` is set.
    pub serial_console_log_disabled: bool,
    /// The KubeVirt CR carries `kubevirt.io/vga-display-efi-x86`: EFI guests get VGA instead of
    /// bochs.
    pub vga_display_for_efi_guests: bool,
}

/// Upstream's `DefaultMemoryOvercommit`.
pub const DEFAULT_MEMORY_OVERCOMMIT: u32 = 100;
/// Upstream's default machine type on x86_64.
pub const DEFAULT_MACHINE_TYPE: &str = "q35";
/// Upstream's `DefaultMemBalloonStatsPeriod`.
pub const DEFAULT_MEM_BALLOON_STATS_PERIOD: u32 = 10;
/// Upstream's `DefaultAMD64EmulatedMachines`.
pub const DEFAULT_EMULATED_MACHINES: [&str; 2] = ["q35*", "pc-q35*"];
/// Upstream's `DefaultDiskVerificationMemoryLimitBytes`.
pub const DEFAULT_DISK_VERIFICATION_MEMORY_LIMIT: u64 = 2000 * 1024 * 1024;
/// Upstream's `DefaultNetworkInterface`.
pub const DEFAULT_NETWORK_INTERFACE: &str = "bridge";

impl Default for ClusterConfig {
    fn default() -> Self {
        Self::from_configuration(None)
    }
}

impl ClusterConfig {
    /// Reads a `KubeVirt` resource's configuration, applying upstream's defaults.
    #[must_use]
    pub fn from_configuration(config: Option<&KubeVirtConfiguration>) -> Self {
        let developer = config.and_then(|c| c.developer_configuration.as_ref());
        let vm_options = config.and_then(|c| c.virtual_machine_options.as_ref());
        Self {
            use_emulation: developer.and_then(|d| d.use_emulation).unwrap_or(false),
            memory_overcommit: developer
                .and_then(|d| d.memory_overcommit)
                .unwrap_or(DEFAULT_MEMORY_OVERCOMMIT),
            feature_gates: developer.map(|d| d.feature_gates.clone()).unwrap_or_default(),
            machine_type: config
                .and_then(|c| c.machine_type.clone())
                .unwrap_or_else(|| DEFAULT_MACHINE_TYPE.to_owned()),
            cpu_model: config.and_then(|c| c.cpu_model.clone()),
            mem_balloon_stats_period: config
                .and_then(|c| c.mem_balloon_stats_period)
                .unwrap_or(DEFAULT_MEM_BALLOON_STATS_PERIOD),
            default_network_interface: config
                .and_then(|c| c.network.as_ref())
                .and_then(|n| n.default_network_interface.clone())
                .unwrap_or_else(|| DEFAULT_NETWORK_INTERFACE.to_owned()),
            permit_bridge_interface_on_pod_network: config
                .and_then(|c| c.network.as_ref())
                .and_then(|n| n.permit_bridge_interface_on_pod_network)
                .unwrap_or(true),
            cpu_request: config.and_then(|c| c.cpu_request.clone()),
            eviction_strategy: config.and_then(|c| c.eviction_strategy.clone()),
            emulated_machines: config
                .and_then(|c| c.emulated_machines.clone())
                .unwrap_or_else(|| DEFAULT_EMULATED_MACHINES.iter().map(|m| (*m).to_owned()).collect()),
            vm_rollout_strategy: config
                .and_then(|c| c.vm_rollout_strategy.clone())
                .unwrap_or_else(|| "LiveUpdate".to_owned()),
            migrations: crate::migration_settings::MigrationSettings::from_configuration(
                config.and_then(|c| c.migrations.as_ref()),
            ),
            disk_verification_memory_limit: developer
                .and_then(|d| d.disk_verification.as_ref())
                .and_then(|v| v.memory_limit.as_ref())
                .and_then(|q| crate::quantity::to_bytes(q).ok())
                .unwrap_or(DEFAULT_DISK_VERIFICATION_MEMORY_LIMIT),
            emulator_thread_complete_to_even_parity: false,
            smbios: super::Smbios::from_configuration(config.and_then(|c| c.smbios.as_ref())),
            free_page_reporting_disabled: vm_options.is_some_and(|o| o.disable_free_page_reporting.is_some()),
            serial_console_log_disabled: vm_options.is_some_and(|o| o.disable_serial_console_log.is_some()),
            vga_display_for_efi_guests: false,
        }
    }

    /// Reads a `KubeVirt` resource: its configuration and the annotations that act as settings.
    #[must_use]
    pub fn from_kubevirt(kubevirt: &KubeVirt) -> Self {
        let annotated = |key: &str| {
            kubevirt
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(key))
        };
        Self {
            emulator_thread_complete_to_even_parity: annotated(
                crate::well_known::annotations::EMULATOR_THREAD_COMPLETE_TO_EVEN_PARITY,
            ),
            vga_display_for_efi_guests: annotated(crate::well_known::annotations::VGA_DISPLAY_FOR_EFI_GUESTS),
            ..Self::from_configuration(kubevirt.spec.configuration.as_ref())
        }
    }

    /// Whether a feature gate is on.
    #[must_use]
    pub fn is_feature_gate_enabled(&self, gate: &str) -> bool {
        self.feature_gates.iter().any(|g| g == gate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_crs_even_parity_annotation_is_a_setting() {
        let kubevirt = |annotations: serde_json::Value| -> KubeVirt {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
                "metadata": {"name": "kubevirt", "annotations": annotations},
                "spec": {"configuration": {"developerConfiguration": {"featureGates": ["AlignCPUs"]}}}
            }))
            .expect("KubeVirt")
        };
        let on = ClusterConfig::from_kubevirt(&kubevirt(
            serde_json::json!({"alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity": ""}),
        ));
        assert!(on.emulator_thread_complete_to_even_parity);
        assert!(on.is_feature_gate_enabled("AlignCPUs"));
        assert!(
            !ClusterConfig::from_kubevirt(&kubevirt(serde_json::json!({}))).emulator_thread_complete_to_even_parity
        );
        assert!(
            ClusterConfig::from_kubevirt(&kubevirt(serde_json::json!({"kubevirt.io/vga-display-efi-x86": ""})))
                .vga_display_for_efi_guests
        );
        assert!(!on.vga_display_for_efi_guests);
    }

    #[test]
    fn virtual_machine_options_and_smbios_are_settings() {
        let spec: KubeVirtConfiguration = serde_json::from_value(serde_json::json!({
            "smbios": {"manufacturer": "Acme"},
            "virtualMachineOptions": {"disableFreePageReporting": {}, "disableSerialConsoleLog": {}}
        }))
        .expect("valid configuration");
        let config = ClusterConfig::from_configuration(Some(&spec));
        assert!(config.free_page_reporting_disabled);
        assert!(config.serial_console_log_disabled);
        assert_eq!(config.smbios.manufacturer, "Acme");
        assert_eq!(config.smbios.product, "None");
        let defaults = ClusterConfig::default();
        assert!(!defaults.free_page_reporting_disabled && !defaults.serial_console_log_disabled);
        assert_eq!(defaults.smbios, crate::v1::Smbios::default());
    }

    #[test]
    fn an_empty_configuration_gets_upstream_defaults() {
        let config = ClusterConfig::default();
        assert!(!config.use_emulation);
        assert_eq!(config.memory_overcommit, 100);
        assert_eq!(config.machine_type, "q35");
        assert_eq!(config.mem_balloon_stats_period, 10);
        assert_eq!(config.default_network_interface, "bridge");
    }

    #[test]
    fn developer_configuration_sets_emulation_overcommit_and_gates() {
        let spec: KubeVirtConfiguration = serde_json::from_value(serde_json::json!({
            "developerConfiguration": {
                "useEmulation": true,
                "memoryOvercommit": 150,
                "featureGates": ["HostDisk"]
            }
        }))
        .expect("valid configuration");
        let config = ClusterConfig::from_configuration(Some(&spec));
        assert!(config.use_emulation);
        assert_eq!(config.memory_overcommit, 150);
        assert!(config.is_feature_gate_enabled("HostDisk"));
        assert!(!config.is_feature_gate_enabled("Snapshot"));
    }
}
