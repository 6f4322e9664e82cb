//! The virt-launcher Pod of a VMI, rendered as upstream's `pkg/virt-controller/services/template.go`
//! and `renderresources.go` render it: identity, the `compute` container and the disk sidecars,
//! resources, volumes and placement.
//! Pure: the same VMI and configuration always give the same Pod.

mod config_volumes;
mod containers;
mod migration_target;
mod resources;
mod security;
mod temporary;
mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kubevirt_api::v1::VirtualMachineInstance;
use kubevirt_api::well_known::{annotations, labels};

use crate::claims::ClaimModes;
pub use migration_target::{HOSTNAME_TOPOLOGY, render_target_pod};
pub use resources::{KVM, TUN, VHOST_NET, has_pod_interface};
pub use temporary::temporary;

/// What the cluster decides about launcher pods.
#[derive(Clone, Debug, PartialEq)]
pub struct PodConfig {
    /// The launcher image (virt-controller's `--launcher-image`).
    pub launcher_image: String,
    /// Pull policy of the launcher and disk images.
    pub image_pull_policy: String,
    /// Whether launchers may or must emulate instead of using `/dev/kvm`.
    pub emulation: Emulation,
    /// Base of `--qemu-timeout`, in seconds.
    pub qemu_timeout_seconds: u64,
    /// `--disk-memory-limit`, in bytes (`developerConfiguration.diskVerification.memoryLimit`).
    pub disk_memory_limit: u64,
    /// vCPUs per requested host CPU (`developerConfiguration.cpuAllocationRatio`).
    pub cpu_allocation_ratio: u32,
    /// `additionalGuestMemoryOverheadRatio`.
    pub additional_guest_memory_overhead_ratio: Option<f64>,
    /// `developerConfiguration.memoryOvercommit`, in percent: a VMI without a memory request
    /// requests its guest memory × 100 / this.
    pub memory_overcommit: u32,
    /// Cluster-wide node selectors, under the VMI's own.
    pub node_selectors: BTreeMap<String, String>,
    /// The uid new launchers run as (a VMI's `status.runtimeUser` when its pod is created): 107,
    /// or 0 under the `Root` feature gate.
    pub runtime_user: u32,
    /// The class of VM state claims (`vmStateStorageClass`), when the cluster names one.
    pub vm_state_storage_class: Option<String>,
}

impl PodConfig {
    /// Upstream's defaults with `launcher_image`.
    #[must_use]
    pub fn new(launcher_image: &str) -> Self {
        Self {
            launcher_image: launcher_image.to_owned(),
            image_pull_policy: "IfNotPresent".to_owned(),
            emulation: Emulation::Off,
            qemu_timeout_seconds: 240,
            disk_memory_limit: kubevirt_api::v1::DEFAULT_DISK_VERIFICATION_MEMORY_LIMIT,
            cpu_allocation_ratio: 10,
            additional_guest_memory_overhead_ratio: None,
            memory_overcommit: kubevirt_api::v1::DEFAULT_MEMORY_OVERCOMMIT,
            node_selectors: BTreeMap::new(),
            runtime_user: kubevirt_api::well_known::NON_ROOT_UID,
            vm_state_storage_class: None,
        }
    }

    /// This configuration with the `KubeVirt` resource's settings (upstream's defaults where it
    /// sets none): useEmulation (and our force-emulation annotation), memoryOvercommit,
    /// cpuAllocationRatio and the overhead ratio.
    #[must_use]
    pub fn with_cluster(&self, kubevirt: Option<&kubevirt_api::v1::KubeVirt>) -> Self {
        let configuration = kubevirt.and_then(|k| k.spec.configuration.as_ref());
        let cluster = kubevirt_api::v1::ClusterConfig::from_configuration(configuration);
        let developer = configuration.and_then(|c| c.developer_configuration.as_ref());
        let forced = kubevirt
            .and_then(|k| k.metadata.annotations.as_ref())
            .and_then(|a| a.get(annotations::FORCE_EMULATION))
            .is_some_and(|v| v == "true");
        Self {
            emulation: match (forced, cluster.use_emulation) {
                (true, _) => Emulation::Forced,
                (false, true) => Emulation::WhereKvmIsMissing,
                (false, false) => Emulation::Off,
            },
            memory_overcommit: cluster.memory_overcommit.max(1),
            disk_memory_limit: cluster.disk_verification_memory_limit,
            cpu_allocation_ratio: developer.and_then(|d| d.cpu_allocation_ratio).unwrap_or(10),
            additional_guest_memory_overhead_ratio: configuration
                .and_then(|c| c.additional_guest_memory_overhead_ratio.as_deref())
                .and_then(|r| r.parse().ok()),
            runtime_user: if cluster.is_feature_gate_enabled(kubevirt_api::well_known::ROOT_FEATURE_GATE) {
                0
            } else {
                kubevirt_api::well_known::NON_ROOT_UID
            },
            vm_state_storage_class: configuration
                .and_then(|c| c.vm_state_storage_class.clone())
                .filter(|c| !c.is_empty()),
            ..self.clone()
        }
    }
}

/// Whether launchers emulate (TCG) instead of running guests on `/dev/kvm`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Emulation {
    /// KVM only: launcher pods request `/dev/kvm`.
    #[default]
    Off,
    /// Upstream's `useEmulation`: no `/dev/kvm` request; the launcher emulates where `/dev/kvm`
    /// is missing (`--allow-emulation`).
    WhereKvmIsMissing,
    /// The `kubevirt-rs.io/force-emulation` annotation: no `/dev/kvm` request; the launcher
    /// emulates even where `/dev/kvm` exists (`--force-emulation`).
    Forced,
}

impl Emulation {
    /// Whether launcher pods request `/dev/kvm` (and vhost-net).
    #[must_use]
    pub fn requests_kvm(self) -> bool {
        self == Self::Off
    }

    /// The launcher's flag.
    #[must_use]
    pub fn launcher_flag(self) -> Option<&'static str> {
        match self {
            Self::Off => None,
            Self::WhereKvmIsMissing => Some("--allow-emulation"),
            Self::Forced => Some("--force-emulation"),
        }
    }
}

/// Why a VMI has no launcher pod.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    /// A volume cannot be given to the launcher.
    #[error("{field}: {message}")]
    Volume {
        /// The field, e.g. `spec.volumes[2]`.
        field: String,
        /// Why.
        message: String,
    },
    /// The VMI has no name or UID yet.
    #[error("the VMI has no {0} yet")]
    Identity(&'static str),
    /// The VMI asks for what its unprivileged launcher cannot do (the `Root` gate was turned off
    /// after it was admitted).
    #[error("{0}")]
    Unprivileged(String),
}

/// The pod's grace period beyond the VMI's: the launcher's 15 s, then 15 s more for the kubelet.
pub const POD_GRACE_EXTRA: i64 = 30;

fn pod_labels(vmi: &VirtualMachineInstance, uid: &str) -> BTreeMap<String, String> {
    let mut pod_labels = vmi.metadata.labels.clone().unwrap_or_default();
    pod_labels.insert(labels::APP.to_owned(), labels::APP_VIRT_LAUNCHER.to_owned());
    pod_labels.insert(labels::CREATED_BY.to_owned(), uid.to_owned());
    pod_labels.insert(labels::VM_NAME.to_owned(), kubevirt_api::guest::hostname(vmi));
    pod_labels
}

fn pod_annotations(vmi: &VirtualMachineInstance, name: &str) -> BTreeMap<String, String> {
    let mut pod_annotations: BTreeMap<String, String> = vmi
        .metadata
        .annotations
        .clone()
        .unwrap_or_default()
        .into_iter()
        .filter(|(key, _)| {
            !key.starts_with("kubectl.kubernetes.io")
                && key != annotations::LATEST_OBSERVED_API_VERSION
                && key != annotations::STORAGE_OBSERVED_API_VERSION
        })
        .collect();
    pod_annotations.insert(annotations::DOMAIN.to_owned(), name.to_owned());
    pod_annotations.insert(annotations::DEFAULT_CONTAINER.to_owned(), "compute".to_owned());
    pod_annotations.insert("kubevirt.io/migrationTransportUnix".to_owned(), "true".to_owned());
    pod_annotations
}

/// Renders the launcher pod of `vmi`, whose claims have the modes `claims`
/// ([`crate::claims::ClaimStore::modes_for`]).
///
/// # Errors
/// [`RenderError`] naming the field, when a claim's mode is not known among them.
pub fn render_launcher_pod(
    vmi: &VirtualMachineInstance,
    config: &PodConfig,
    claims: &ClaimModes,
) -> Result<Pod, RenderError> {
    let name = vmi.metadata.name.clone().ok_or(RenderError::Identity("name"))?;
    let uid = vmi.metadata.uid.clone().ok_or(RenderError::Identity("uid"))?;
    let refused = kubevirt_api::support::unprivileged_vmi(&vmi.spec, "spec", vmi.is_non_root());
    if !refused.is_empty() {
        let reasons: Vec<String> = refused.iter().map(ToString::to_string).collect();
        return Err(RenderError::Unprivileged(reasons.join("; ")));
    }
    let hugepages = resources::hugepage_size(vmi).is_some();
    let volumes::PodStorage {
        volumes: mut pod_volumes,
        mut mounts,
        devices,
    } = volumes::volumes(vmi, hugepages, claims)?;
    let config_volumes = config_volumes::config_volumes(vmi)?;
    pod_volumes.extend(config_volumes.volumes);
    mounts.extend(config_volumes.mounts);
    // A serviceAccount volume's token reaches the guest through the kubelet's token mount.
    let automount_token = config_volumes.service_account.is_some();
    let service_account = config_volumes
        .service_account
        .or_else(|| vmi.spec.service_account_name.clone());
    let compute = containers::compute(vmi, config, resources::compute_resources(vmi, config), mounts, devices);
    let mut pod_containers = vec![compute];
    pod_containers.extend(containers::disk_sidecars(vmi, config));
    let init = containers::init_containers(vmi, config);
    let mut node_selector = config.node_selectors.clone();
    node_selector.extend(vmi.spec.node_selector.clone().unwrap_or_default());
    node_selector.insert(labels::NODE_SCHEDULABLE.to_owned(), "true".to_owned());
    if let Some(cpu) = &vmi.spec.domain.cpu {
        if cpu.dedicated_cpu_placement == Some(true) {
            node_selector.insert(labels::CPU_MANAGER.to_owned(), "true".to_owned());
        }
        if cpu.realtime.is_some() {
            node_selector.insert(labels::REALTIME.to_owned(), "true".to_owned());
        }
    }
    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("virt-launcher-{name}-")),
            namespace: vmi.metadata.namespace.clone(),
            labels: Some(pod_labels(vmi, &uid)),
            annotations: Some(pod_annotations(vmi, &name)),
            owner_references: Some(vec![OwnerReference {
                api_version: "kubevirt.io/v1".to_owned(),
                kind: "VirtualMachineInstance".to_owned(),
                name,
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            restart_policy: Some("Never".to_owned()),
            termination_grace_period_seconds: Some(vmi.termination_grace_period_seconds() + POD_GRACE_EXTRA),
            hostname: Some(kubevirt_api::guest::hostname(vmi)),
            subdomain: vmi.spec.subdomain.clone(),
            node_selector: Some(node_selector),
            tolerations: Some(vmi.spec.tolerations.clone()).filter(|t| !t.is_empty()),
            affinity: vmi.spec.affinity.clone(),
            scheduler_name: vmi.spec.scheduler_name.clone(),
            priority_class_name: vmi.spec.priority_class_name.clone(),
            topology_spread_constraints: Some(vmi.spec.topology_spread_constraints.clone()).filter(|t| !t.is_empty()),
            dns_config: vmi.spec.dns_config.clone(),
            dns_policy: vmi.spec.dns_policy.clone(),
            enable_service_links: Some(false),
            service_account_name: service_account,
            automount_service_account_token: Some(automount_token),
            security_context: Some(security::pod_security_context(vmi)),
            containers: pod_containers,
            init_containers: Some(init).filter(|i| !i.is_empty()),
            image_pull_secrets: Some(containers::image_pull_secrets(vmi)).filter(|s| !s.is_empty()),
            volumes: Some(pod_volumes),
            ..PodSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use kubevirt_api::v1::KubeVirt;

    use super::*;

    fn kubevirt(annotations: &serde_json::Value, configuration: &serde_json::Value) -> KubeVirt {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt", "annotations": annotations},
            "spec": {"configuration": configuration}
        }))
        .expect("KubeVirt")
    }

    #[test]
    fn new_launchers_run_as_107_unless_the_root_gate_is_on() {
        let base = PodConfig::new("image");
        assert_eq!(base.with_cluster(None).runtime_user, 107);
        let root = kubevirt(
            &serde_json::json!({}),
            &serde_json::json!({"developerConfiguration": {"featureGates": ["Root"]}}),
        );
        assert_eq!(base.with_cluster(Some(&root)).runtime_user, 0);
    }

    #[test]
    fn the_kubevirt_configuration_sets_emulation_overcommit_and_ratios() {
        let base = PodConfig::new("image");
        let kubevirt = kubevirt(
            &serde_json::json!({}),
            &serde_json::json!({
                "developerConfiguration": {"useEmulation": true, "memoryOvercommit": 150, "cpuAllocationRatio": 4},
                "additionalGuestMemoryOverheadRatio": "1.5"
            }),
        );
        let configured = base.with_cluster(Some(&kubevirt));
        assert_eq!(configured.emulation, Emulation::WhereKvmIsMissing);
        assert_eq!(
            (configured.memory_overcommit, configured.cpu_allocation_ratio),
            (150, 4)
        );
        assert_eq!(configured.additional_guest_memory_overhead_ratio, Some(1.5));
        assert_eq!(configured.launcher_image, "image");
        assert_eq!(
            configured.with_cluster(None),
            base,
            "no configuration: upstream's defaults"
        );
    }

    #[test]
    fn the_force_emulation_annotation_forces_tcg_with_or_without_use_emulation() {
        let base = PodConfig::new("image");
        let forced = serde_json::json!({"kubevirt-rs.io/force-emulation": "true"});
        for use_emulation in [false, true] {
            let configuration = serde_json::json!({"developerConfiguration": {"useEmulation": use_emulation}});
            let configured = base.with_cluster(Some(&kubevirt(&forced, &configuration)));
            assert_eq!(configured.emulation, Emulation::Forced, "useEmulation {use_emulation}");
        }
        let other_value = kubevirt(
            &serde_json::json!({"kubevirt-rs.io/force-emulation": "yes"}),
            &serde_json::json!({}),
        );
        assert_eq!(base.with_cluster(Some(&other_value)).emulation, Emulation::Off);
        let flags: Vec<_> = [Emulation::Off, Emulation::WhereKvmIsMissing, Emulation::Forced]
            .into_iter()
            .map(|e| (e.requests_kvm(), e.launcher_flag()))
            .collect();
        assert_eq!(
            flags,
            [
                (true, None),
                (false, Some("--allow-emulation")),
                (false, Some("--force-emulation"))
            ]
        );
    }

    #[test]
    fn memory_overcommit_lowers_the_request_of_a_vmi_that_sets_none() {
        let vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm", "uid": "u"},
            "spec": {"domain": {"memory": {"guest": "1500Mi"}, "devices": {"autoattachPodInterface": false}}}
        }))
        .expect("VMI");
        let mut config = PodConfig::new("image");
        let plain = resources::compute_resources(&vmi, &config);
        config.memory_overcommit = 150;
        let overcommitted = resources::compute_resources(&vmi, &config);
        let memory = |r: &k8s_openapi::api::core::v1::ResourceRequirements| {
            kubevirt_api::quantity::to_bytes(&r.requests.as_ref().expect("requests")["memory"]).expect("bytes")
        };
        assert_eq!(memory(&plain) - memory(&overcommitted), 1500 * 1024 * 1024 / 3);
    }
}
