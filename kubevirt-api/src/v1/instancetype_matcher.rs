//! A VM's `spec.instancetype` and `spec.preference`, and where its status records the revisions
//! the VM controller chose (`instancetype.kubevirt.io`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.instancetype` of a VM.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancetypeMatcher {
    /// Name of the instance type.
    pub name: Option<String>,
    /// `VirtualMachineInstancetype` or `VirtualMachineClusterInstancetype` (the default).
    pub kind: Option<String>,
    /// A ControllerRevision that pins the instance type's spec.
    pub revision_name: Option<String>,
    /// A volume whose PVC or DataVolume names the instance type in its labels.
    pub infer_from_volume: Option<String>,
    /// `Reject` (the default) or `Ignore` when inference fails.
    pub infer_from_volume_failure_policy: Option<String>,
}

/// `spec.preference` of a VM.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PreferenceMatcher {
    /// Name of the preference.
    pub name: Option<String>,
    /// `VirtualMachinePreference` or `VirtualMachineClusterPreference` (the default).
    pub kind: Option<String>,
    /// A ControllerRevision that pins the preference's spec.
    pub revision_name: Option<String>,
    /// A volume whose PVC or DataVolume names the preference in its labels.
    pub infer_from_volume: Option<String>,
    /// `Reject` (the default) or `Ignore` when inference fails.
    pub infer_from_volume_failure_policy: Option<String>,
}

/// `status.instancetypeRef` and `status.preferenceRef` of a VM.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstancetypeStatusRef {
    /// Name of the object in use.
    pub name: Option<String>,
    /// Its kind.
    pub kind: Option<String>,
    /// The ControllerRevision holding the spec in use.
    pub controller_revision_ref: Option<ControllerRevisionRef>,
    /// The volume it was inferred from.
    pub infer_from_volume: Option<String>,
    /// The inference failure policy in use.
    pub infer_from_volume_failure_policy: Option<String>,
}

/// `…controllerRevisionRef`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerRevisionRef {
    /// Name of the ControllerRevision.
    pub name: Option<String>,
}
