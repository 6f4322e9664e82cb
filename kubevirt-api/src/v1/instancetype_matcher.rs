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

/// What an instance type matcher and a preference matcher share, borrowed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MatcherFields<'a> {
    /// `name`.
    pub name: Option<&'a str>,
    /// `kind`.
    pub kind: Option<&'a str>,
    /// `inferFromVolume`.
    pub infer_from_volume: Option<&'a str>,
    /// `inferFromVolumeFailurePolicy`.
    pub failure_policy: Option<&'a str>,
    /// `revisionName`: a revision the user pinned.
    pub revision_name: Option<&'a str>,
}

macro_rules! matcher_fields {
    ($matcher:ty) => {
        impl<'a> From<&'a $matcher> for MatcherFields<'a> {
            fn from(m: &'a $matcher) -> Self {
                Self {
                    name: m.name.as_deref(),
                    kind: m.kind.as_deref(),
                    infer_from_volume: m.infer_from_volume.as_deref(),
                    failure_policy: m.infer_from_volume_failure_policy.as_deref(),
                    revision_name: m.revision_name.as_deref(),
                }
            }
        }
    };
}

matcher_fields!(InstancetypeMatcher);
matcher_fields!(PreferenceMatcher);

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
