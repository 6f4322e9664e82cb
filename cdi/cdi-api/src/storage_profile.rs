//! `StorageProfile`: one per StorageClass (same name, cluster-scoped), saying which access and
//! volume modes a DataVolume's `spec.storage` gets on that class (its claim property sets), how
//! clones are made, and how the class is recognized, as upstream CDI's.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data_volume::ConditionState;

/// `spec` of a `StorageProfile`: what a user sets to override what CDI derives.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "StorageProfile",
    plural = "storageprofiles",
    singular = "storageprofile",
    status = "StorageProfileStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfileSpec {
    /// `copy`, `snapshot` or `csi-clone`.
    #[schemars(extend("enum" = ["copy", "snapshot", "csi-clone"]))]
    pub clone_strategy: Option<String>,
    /// The access and volume modes to use, best first (at most 8).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 8))]
    pub claim_property_sets: Vec<ClaimPropertySet>,
    /// `snapshot` or `pvc`: how DataImportCrons keep their sources.
    #[schemars(extend("enum" = ["snapshot", "pvc"]))]
    pub data_import_cron_source_format: Option<String>,
    /// The VolumeSnapshotClass for snapshot clones.
    pub snapshot_class: Option<String>,
}

/// One way to claim storage of the class: access modes and a volume mode.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimPropertySet {
    /// `ReadWriteOnce`, `ReadOnlyMany`, `ReadWriteMany`, `ReadWriteOncePod` (at most 4).
    #[schemars(extend("maxItems" = 4))]
    pub access_modes: Vec<String>,
    /// `Block` or `Filesystem`.
    #[schemars(extend("enum" = ["Block", "Filesystem"]))]
    pub volume_mode: Option<String>,
}

/// `status` of a `StorageProfile`: what CDI derived for the class.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfileStatus {
    /// The StorageClass.
    pub storage_class: Option<String>,
    /// Its provisioner.
    pub provisioner: Option<String>,
    /// How clones are made.
    pub clone_strategy: Option<String>,
    /// The access and volume modes a DataVolume gets, best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_property_sets: Vec<ClaimPropertySet>,
    /// How DataImportCrons keep their sources.
    pub data_import_cron_source_format: Option<String>,
    /// The VolumeSnapshotClass for snapshot clones.
    pub snapshot_class: Option<String>,
    /// `Recognized`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<StorageProfileCondition>,
}

/// One condition of a `StorageProfile`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageProfileCondition {
    /// `Recognized`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// Status, reason and times.
    #[serde(flatten)]
    pub state: ConditionState,
}

/// The one condition type: whether CDI knows the class's provisioner.
pub const RECOGNIZED: &str = "Recognized";
