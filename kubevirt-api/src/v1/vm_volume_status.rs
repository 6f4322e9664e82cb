//! The volume parts of a VM's status: hotplug requests, snapshot support, memory dumps and volume
//! migration.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{DataVolumeSource, Disk, PersistentVolumeClaimSource, StorageMigratedVolumeInfo};

/// One entry of `status.volumeRequests`: add or remove a hotplugged volume.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineVolumeRequest {
    /// Add a volume.
    pub add_volume_options: Option<AddVolumeOptions>,
    /// Remove a volume.
    pub remove_volume_options: Option<RemoveVolumeOptions>,
}

/// `volumeRequests[].addVolumeOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddVolumeOptions {
    /// Volume name.
    pub name: String,
    /// How the guest sees it.
    pub disk: Option<Disk>,
    /// Where its data comes from.
    pub volume_source: Option<HotplugVolumeSource>,
    /// Dry-run directives.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// `addVolumeOptions.volumeSource`: a PVC or a DataVolume.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HotplugVolumeSource {
    /// A PersistentVolumeClaim.
    pub persistent_volume_claim: Option<PersistentVolumeClaimSource>,
    /// A DataVolume.
    pub data_volume: Option<DataVolumeSource>,
}

/// `volumeRequests[].removeVolumeOptions`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemoveVolumeOptions {
    /// Volume name.
    pub name: String,
    /// Dry-run directives.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// One entry of `status.volumeSnapshotStatuses`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeSnapshotStatus {
    /// Volume name.
    pub name: String,
    /// Whether the volume can be snapshotted.
    #[serde(default)]
    pub enabled: bool,
    /// Why not.
    pub reason: Option<String>,
}

/// `status.memoryDumpRequest`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VirtualMachineMemoryDumpRequest {
    /// The PVC that receives the dump.
    pub claim_name: String,
    /// Phase of the dump.
    #[serde(default)]
    pub phase: String,
    /// Remove the dump volume.
    pub remove: Option<bool>,
    /// When it started.
    pub start_timestamp: Option<Time>,
    /// When it ended.
    pub end_timestamp: Option<Time>,
    /// Name of the dump file.
    pub file_name: Option<String>,
    /// A message about it.
    pub message: Option<String>,
}

/// `status.volumeUpdateState`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeUpdateState {
    /// Volumes being migrated.
    pub volume_migration_state: Option<VolumeMigrationState>,
}

/// `volumeUpdateState.volumeMigrationState`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMigrationState {
    /// Each volume and where it moves.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrated_volumes: Vec<StorageMigratedVolumeInfo>,
}
