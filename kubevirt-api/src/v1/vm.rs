//! `VirtualMachine`: a stateful VM whose run strategy decides when a VMI exists.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::VirtualMachineInstanceSpec;

/// `spec` of a `VirtualMachine`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "kubevirt.io",
    version = "v1",
    kind = "VirtualMachine",
    plural = "virtualmachines",
    singular = "virtualmachine",
    shortname = "vm",
    shortname = "vms",
    category = "all",
    namespaced,
    status = "VirtualMachineStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Status","type":"string","jsonPath":".status.printableStatus","description":"Human Readable Status"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type=='Ready')].status"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineSpec {
    /// Legacy switch: true is `Always`, false is `Halted`. Mutually exclusive with `runStrategy`.
    pub running: Option<bool>,
    /// `Always`, `RerunOnFailure`, `Manual`, `Halted`, `Once` or `WaitAsReceiver`.
    pub run_strategy: Option<String>,
    /// Instance type to take the hardware from.
    pub instancetype: Option<super::InstancetypeMatcher>,
    /// Preference to take defaults from.
    pub preference: Option<super::PreferenceMatcher>,
    /// The VMI to create.
    pub template: VirtualMachineInstanceTemplateSpec,
    /// DataVolumes created with the VM and owned by it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_volume_templates: Vec<DataVolumeTemplateSpec>,
    /// `Replacement` or `Migration`.
    pub update_volumes_strategy: Option<String>,
    /// ResourceClaimTemplates (DRA) owned by the VM, whose claims outlive its VMIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claim_templates: Vec<VirtualMachineResourceClaimTemplate>,
}

/// One entry of `spec.resourceClaimTemplates`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineResourceClaimTemplate {
    /// Name the VMI's `resourceClaims` use.
    pub name: String,
    /// The ResourceClaimTemplate.
    pub resource_claim_template_name: Option<String>,
}

/// `spec.template` of a `VirtualMachine`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineInstanceTemplateSpec {
    /// Labels and annotations copied to the VMI.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// The VMI spec.
    pub spec: Option<VirtualMachineInstanceSpec>,
}

/// One entry of `spec.dataVolumeTemplates`. Its spec belongs to CDI and is kept as-is.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeTemplateSpec {
    /// `cdi.kubevirt.io/v1beta1`.
    pub api_version: Option<String>,
    /// `DataVolume`.
    pub kind: Option<String>,
    /// Name and labels of the DataVolume.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub metadata: Option<ObjectMeta>,
    /// CDI `DataVolumeSpec`.
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub spec: serde_json::Value,
    /// CDI `DataVolumeStatus`.
    #[serde(default)]
    #[schemars(schema_with = "crate::schema::preserve_unknown_object")]
    pub status: Option<serde_json::Value>,
}

/// `status` of a `VirtualMachine`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStatus {
    /// Name of a snapshot being taken.
    pub snapshot_in_progress: Option<String>,
    /// Name of a restore in progress.
    pub restore_in_progress: Option<String>,
    /// A VMI exists for this VM.
    pub created: Option<bool>,
    /// The VMI exists and is ready.
    pub ready: Option<bool>,
    /// One-word status for `kubectl get`, e.g. `Running` or `Stopped`.
    pub printable_status: Option<String>,
    /// Conditions copied from the VMI plus the VM's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<VirtualMachineCondition>,
    /// Pending start and stop requests from the subresource API.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state_change_requests: Vec<VirtualMachineStateChangeRequest>,
    /// Pending volume hotplug requests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_requests: Vec<super::VirtualMachineVolumeRequest>,
    /// Snapshot support of each volume.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volume_snapshot_statuses: Vec<super::VolumeSnapshotStatus>,
    /// Crash-loop backoff state.
    pub start_failure: Option<VirtualMachineStartFailure>,
    /// Memory dump request state.
    pub memory_dump_request: Option<super::VirtualMachineMemoryDumpRequest>,
    /// Generation of the VM the current VMI was created from.
    pub observed_generation: Option<i64>,
    /// Generation of the VM the controller last saw.
    pub desired_generation: Option<i64>,
    /// The run strategy in effect.
    pub run_strategy: Option<String>,
    /// Volume migration state.
    pub volume_update_state: Option<super::VolumeUpdateState>,
    /// Changed block tracking.
    pub changed_block_tracking: Option<super::ChangedBlockTrackingStatus>,
    /// The instance type in use and its revision.
    pub instancetype_ref: Option<super::InstancetypeStatusRef>,
    /// The preference in use and its revision.
    pub preference_ref: Option<super::InstancetypeStatusRef>,
}

/// A condition in a VM's `status.conditions`: the same shape as a VMI's.
pub type VirtualMachineCondition = super::VirtualMachineInstanceCondition;

/// One entry of `status.stateChangeRequests`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStateChangeRequest {
    /// `Start` or `Stop`.
    pub action: String,
    /// Extra data, e.g. start options.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    /// For `Stop`: the UID of the VMI to stop.
    pub uid: Option<String>,
}

/// `status.startFailure`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineStartFailure {
    /// UID of the VMI that failed last.
    #[serde(rename = "lastFailedVMIUID")]
    pub last_failed_vmi_uid: Option<String>,
    /// When the next start may happen.
    pub retry_after_timestamp: Option<Time>,
    /// Failures in a row.
    pub consecutive_fail_count: Option<i32>,
}

/// The run strategies of `spec.runStrategy`, as upstream defines them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RunStrategy {
    /// Keep a VMI running, whatever happens to it.
    Always,
    /// Restart the VMI only when it failed.
    RerunOnFailure,
    /// Only the start, stop and restart subresources change the state.
    Manual,
    /// Keep no VMI running.
    Halted,
    /// Run the VMI once; do not restart it.
    Once,
    /// Wait to receive a migrated VM.
    WaitAsReceiver,
}

impl RunStrategy {
    /// Every strategy, for tables and matrix tests.
    pub const ALL: [Self; 6] = [
        Self::Always,
        Self::RerunOnFailure,
        Self::Manual,
        Self::Halted,
        Self::Once,
        Self::WaitAsReceiver,
    ];

    /// The string in `spec.runStrategy`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::RerunOnFailure => "RerunOnFailure",
            Self::Manual => "Manual",
            Self::Halted => "Halted",
            Self::Once => "Once",
            Self::WaitAsReceiver => "WaitAsReceiver",
        }
    }
}

impl fmt::Display for RunStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `spec.runStrategy` value that is not one of upstream's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("Invalid RunStrategy ({0})")]
pub struct InvalidRunStrategy(pub String);

impl FromStr for RunStrategy {
    type Err = InvalidRunStrategy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|strategy| strategy.as_str() == s)
            .ok_or_else(|| InvalidRunStrategy(s.to_owned()))
    }
}

/// Both `spec.running` and `spec.runStrategy` are set.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RunStrategyError {
    /// Upstream's message for the conflict.
    #[error("Running and RunStrategy are mutually exclusive")]
    MutuallyExclusive,
    /// The strategy string is unknown.
    #[error(transparent)]
    Invalid(#[from] InvalidRunStrategy),
}

impl VirtualMachineSpec {
    /// The volumes of the VM's template (none without a template spec).
    #[must_use]
    pub fn template_volumes(&self) -> &[super::Volume] {
        self.template
            .spec
            .as_ref()
            .map(|s| s.volumes.as_slice())
            .unwrap_or_default()
    }

    /// The effective run strategy: `runStrategy`, else `running` (true is Always, false is
    /// Halted), else Halted, as upstream's `VirtualMachine.RunStrategy()`.
    pub fn effective_run_strategy(&self) -> Result<RunStrategy, RunStrategyError> {
        match (&self.running, &self.run_strategy) {
            (Some(_), Some(_)) => Err(RunStrategyError::MutuallyExclusive),
            (_, Some(strategy)) => Ok(strategy.parse()?),
            (Some(true), None) => Ok(RunStrategy::Always),
            (Some(false) | None, None) => Ok(RunStrategy::Halted),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_strategy_parses_every_upstream_name_and_rejects_others() {
        for strategy in RunStrategy::ALL {
            assert_eq!(strategy.as_str().parse::<RunStrategy>(), Ok(strategy));
        }
        assert_eq!(
            "Sometimes".parse::<RunStrategy>().map_err(|e| e.to_string()),
            Err("Invalid RunStrategy (Sometimes)".to_owned())
        );
    }

    #[test]
    fn effective_run_strategy_follows_running_when_no_strategy_is_given() {
        let spec = |running, run_strategy: Option<&str>| VirtualMachineSpec {
            running,
            run_strategy: run_strategy.map(str::to_owned),
            ..VirtualMachineSpec::default()
        };
        assert_eq!(spec(Some(true), None).effective_run_strategy(), Ok(RunStrategy::Always));
        assert_eq!(
            spec(Some(false), None).effective_run_strategy(),
            Ok(RunStrategy::Halted)
        );
        assert_eq!(spec(None, None).effective_run_strategy(), Ok(RunStrategy::Halted));
        assert_eq!(
            spec(None, Some("Manual")).effective_run_strategy(),
            Ok(RunStrategy::Manual)
        );
        assert_eq!(
            spec(Some(true), Some("Always")).effective_run_strategy(),
            Err(RunStrategyError::MutuallyExclusive)
        );
    }
}
