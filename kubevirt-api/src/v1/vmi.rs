//! `VirtualMachineInstance`: one running (or about to run) virtual machine.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, PodDNSConfig, Toleration, TopologySpreadConstraint};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DomainSpec, Network, Probe, VirtualMachineInstanceStatus, Volume};

/// `spec` of a `VirtualMachineInstance`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachineInstance",
    plural = "virtualmachineinstances",
    singular = "virtualmachineinstance",
    shortname = "vmi",
    shortname = "vmis",
    category = "all",
    namespaced,
    status = "VirtualMachineInstanceStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"IP","type":"string","jsonPath":".status.interfaces[0].ipAddress"}"#,
    printcolumn = r#"{"name":"NodeName","type":"string","jsonPath":".status.nodeName"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#,
    printcolumn = r#"{"name":"Live-Migratable","type":"string","jsonPath":".status.conditions[?(@.type=='LiveMigratable')].status","priority":1}"#,
    printcolumn = r#"{"name":"Paused","type":"string","jsonPath":".status.conditions[?(@.type=='Paused')].status","priority":1}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceSpec {
    /// Priority class of the launcher pod.
    pub priority_class_name: Option<String>,
    /// The virtual hardware.
    pub domain: DomainSpec,
    /// Node labels the launcher pod must match.
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Affinity of the launcher pod.
    pub affinity: Option<Affinity>,
    /// Scheduler for the launcher pod.
    pub scheduler_name: Option<String>,
    /// Tolerations of the launcher pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Topology spread of the launcher pod.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// `LiveMigrate`, `LiveMigrateIfPossible`, `None` or `External`.
    pub eviction_strategy: Option<String>,
    /// `Paused` starts the guest paused.
    pub start_strategy: Option<String>,
    /// Seconds a graceful shutdown may take; 30 when unset.
    pub termination_grace_period_seconds: Option<i64>,
    /// Volumes the disks refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// Restart the VMI when this probe fails.
    pub liveness_probe: Option<Probe>,
    /// Mark the VMI ready when this probe succeeds.
    pub readiness_probe: Option<Probe>,
    /// Guest hostname; the VMI name when unset.
    pub hostname: Option<String>,
    /// DNS subdomain: the guest's FQDN is `<hostname>.<subdomain>.<ns>.svc.<cluster domain>`.
    pub subdomain: Option<String>,
    /// Networks the interfaces connect to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub networks: Vec<Network>,
    /// DNS policy of the launcher pod.
    pub dns_policy: Option<String>,
    /// DNS configuration of the launcher pod.
    pub dns_config: Option<PodDNSConfig>,
    /// SSH keys and passwords injected into the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub access_credentials: Vec<super::AccessCredential>,
    /// CPU architecture, e.g. `amd64`.
    pub architecture: Option<String>,
    /// Service account of the launcher pod (not shown to the guest).
    pub service_account_name: Option<String>,
    /// Dynamic resource claims (DRA) the devices refer to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<ResourceClaim>,
    /// Volumes for KubeVirt's own use (memory dumps, backups), not attached to the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub utility_volumes: Vec<UtilityVolume>,
}

/// One entry of `spec.resourceClaims`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceClaim {
    /// Name the devices use.
    pub name: String,
    /// An existing ResourceClaim.
    pub resource_claim_name: Option<String>,
    /// A ResourceClaimTemplate to create one from.
    pub resource_claim_template_name: Option<String>,
}

/// One entry of `spec.utilityVolumes`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UtilityVolume {
    /// Name.
    pub name: String,
    /// The PVC.
    pub claim_name: String,
    /// Mount it read-only.
    pub read_only: Option<bool>,
    /// `MemoryDump` or `Backup`.
    #[serde(rename = "type")]
    pub volume_type: Option<String>,
}

impl VirtualMachineInstance {
    /// The host CPUs an isolated emulator thread takes beside `vcpus` dedicated vCPUs: none without
    /// `isolateEmulatorThread`, two when the VMI asks for even parity
    /// (`alpha.kubevirt.io/EmulatorThreadCompleteToEvenParity`) and `vcpus` is even, else one. The
    /// launcher pod's CPU count and the launcher's pinning both follow this.
    #[must_use]
    pub fn emulator_thread_cpus(&self, vcpus: u64) -> u64 {
        let isolated = self
            .spec
            .domain
            .cpu
            .as_ref()
            .is_some_and(|c| c.isolate_emulator_thread == Some(true));
        if !isolated {
            return 0;
        }
        let even_parity =
            self.metadata.annotations.as_ref().is_some_and(|a| {
                a.contains_key(crate::well_known::annotations::EMULATOR_THREAD_COMPLETE_TO_EVEN_PARITY)
            });
        if even_parity && vcpus.is_multiple_of(2) { 2 } else { 1 }
    }

    /// `<namespace>/<name>`, the key caches and logs use.
    #[must_use]
    pub fn key(&self) -> String {
        format!(
            "{}/{}",
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.metadata.name.as_deref().unwrap_or_default()
        )
    }

    /// `spec.domain.firmware.kernelBoot.container`: the image the kernel and initrd come from.
    #[must_use]
    pub fn kernel_boot_container(&self) -> Option<&super::KernelBootContainer> {
        self.spec
            .domain
            .firmware
            .as_ref()
            .and_then(|f| f.kernel_boot.as_ref())
            .and_then(|k| k.container.as_ref())
    }

    /// The uid its launcher runs as: `status.runtimeUser` (set when the VMI is created: 107 unless
    /// the `Root` feature gate is on), or 0 for a VMI that never had one.
    #[must_use]
    pub fn runtime_user(&self) -> u32 {
        self.status
            .as_ref()
            .and_then(|s| s.runtime_user)
            .and_then(|uid| u32::try_from(uid).ok())
            .unwrap_or(0)
    }

    /// Whether its launcher runs unprivileged (a non-zero [`Self::runtime_user`]).
    #[must_use]
    pub fn is_non_root(&self) -> bool {
        self.runtime_user() != 0
    }

    /// `spec.terminationGracePeriodSeconds`, or upstream's default of 30.
    #[must_use]
    pub fn termination_grace_period_seconds(&self) -> i64 {
        self.spec
            .termination_grace_period_seconds
            .unwrap_or(crate::well_known::DEFAULT_GRACE_PERIOD_SECONDS)
    }
}
