//! `spec.volumes`: where each disk's data comes from.
//!
//! Upstream inlines its `VolumeSource` into `Volume`, so every source is a field of [`Volume`] here
//! and exactly one of them is set. [`Volume::source`] reads that back as an enum.

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, LocalObjectReference};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::EmptyObject;

/// One entry of `spec.volumes`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    /// Name; disks refer to it.
    pub name: String,
    /// A disk image shipped in a container image.
    pub container_disk: Option<ContainerDiskSource>,
    /// A PVC under a throw-away copy-on-write overlay.
    pub ephemeral: Option<EphemeralVolumeSource>,
    /// cloud-init NoCloud data.
    pub cloud_init_no_cloud: Option<CloudInitSource>,
    /// cloud-init ConfigDrive data.
    pub cloud_init_config_drive: Option<CloudInitSource>,
    /// A PersistentVolumeClaim.
    pub persistent_volume_claim: Option<PersistentVolumeClaimSource>,
    /// A CDI DataVolume.
    pub data_volume: Option<DataVolumeSource>,
    /// A sparse disk created empty for this VMI.
    pub empty_disk: Option<EmptyDiskSource>,
    /// A disk image on the node.
    pub host_disk: Option<HostDiskSource>,
    /// A ConfigMap presented as an ISO.
    pub config_map: Option<ConfigMapVolumeSource>,
    /// A Secret presented as an ISO.
    pub secret: Option<SecretVolumeSource>,
    /// A service account token presented as an ISO.
    pub service_account: Option<ServiceAccountVolumeSource>,
    /// Downward API fields presented as an ISO.
    #[serde(rename = "downwardAPI")]
    pub downward_api: Option<DownwardApiVolumeSource>,
    /// Host and VM metrics as a small disk, written `downwardMetrics: {}`.
    pub downward_metrics: Option<EmptyObject>,
    /// Windows sysprep answer files.
    pub sysprep: Option<SysprepSource>,
    /// A PVC that receives memory dumps.
    pub memory_dump: Option<MemoryDumpVolumeSource>,
    /// A path inside the launcher pod, shared with the guest.
    pub container_path: Option<ContainerPathVolumeSource>,
}

/// The kind of a volume's source, borrowed from the [`Volume`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum VolumeSource<'a> {
    /// `containerDisk`.
    ContainerDisk(&'a ContainerDiskSource),
    /// `ephemeral`.
    Ephemeral(&'a EphemeralVolumeSource),
    /// `cloudInitNoCloud`.
    CloudInitNoCloud(&'a CloudInitSource),
    /// `cloudInitConfigDrive`.
    CloudInitConfigDrive(&'a CloudInitSource),
    /// `persistentVolumeClaim`.
    PersistentVolumeClaim(&'a PersistentVolumeClaimSource),
    /// `dataVolume`.
    DataVolume(&'a DataVolumeSource),
    /// `emptyDisk`.
    EmptyDisk(&'a EmptyDiskSource),
    /// `hostDisk`.
    HostDisk(&'a HostDiskSource),
    /// `configMap`.
    ConfigMap(&'a ConfigMapVolumeSource),
    /// `secret`.
    Secret(&'a SecretVolumeSource),
    /// `serviceAccount`.
    ServiceAccount(&'a ServiceAccountVolumeSource),
    /// `downwardAPI`.
    DownwardApi(&'a DownwardApiVolumeSource),
    /// `downwardMetrics`.
    DownwardMetrics,
    /// `sysprep`.
    Sysprep(&'a SysprepSource),
    /// `memoryDump`.
    MemoryDump(&'a MemoryDumpVolumeSource),
    /// `containerPath`.
    ContainerPath(&'a ContainerPathVolumeSource),
}

/// Why a volume has no usable source.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VolumeSourceError {
    /// No source field is set (or only one this version does not know).
    #[error("volume has no known source")]
    Missing,
    /// More than one source field is set.
    #[error("volume has more than one source: {0}")]
    Several(String),
}

impl Volume {
    /// The one source this volume sets.
    pub fn source(&self) -> Result<VolumeSource<'_>, VolumeSourceError> {
        let candidates: [(&str, Option<VolumeSource<'_>>); 16] = [
            (
                "containerDisk",
                self.container_disk.as_ref().map(VolumeSource::ContainerDisk),
            ),
            ("ephemeral", self.ephemeral.as_ref().map(VolumeSource::Ephemeral)),
            (
                "cloudInitNoCloud",
                self.cloud_init_no_cloud.as_ref().map(VolumeSource::CloudInitNoCloud),
            ),
            (
                "cloudInitConfigDrive",
                self.cloud_init_config_drive
                    .as_ref()
                    .map(VolumeSource::CloudInitConfigDrive),
            ),
            (
                "persistentVolumeClaim",
                self.persistent_volume_claim
                    .as_ref()
                    .map(VolumeSource::PersistentVolumeClaim),
            ),
            ("dataVolume", self.data_volume.as_ref().map(VolumeSource::DataVolume)),
            ("emptyDisk", self.empty_disk.as_ref().map(VolumeSource::EmptyDisk)),
            ("hostDisk", self.host_disk.as_ref().map(VolumeSource::HostDisk)),
            ("configMap", self.config_map.as_ref().map(VolumeSource::ConfigMap)),
            ("secret", self.secret.as_ref().map(VolumeSource::Secret)),
            (
                "serviceAccount",
                self.service_account.as_ref().map(VolumeSource::ServiceAccount),
            ),
            ("downwardAPI", self.downward_api.as_ref().map(VolumeSource::DownwardApi)),
            (
                "downwardMetrics",
                self.downward_metrics.map(|_| VolumeSource::DownwardMetrics),
            ),
            ("sysprep", self.sysprep.as_ref().map(VolumeSource::Sysprep)),
            ("memoryDump", self.memory_dump.as_ref().map(VolumeSource::MemoryDump)),
            (
                "containerPath",
                self.container_path.as_ref().map(VolumeSource::ContainerPath),
            ),
        ];
        let set: Vec<(&str, VolumeSource<'_>)> = candidates
            .into_iter()
            .filter_map(|(name, src)| src.map(|s| (name, s)))
            .collect();
        match set.as_slice() {
            [] => Err(VolumeSourceError::Missing),
            [(_, only)] => Ok(*only),
            several => Err(VolumeSourceError::Several(
                several.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", "),
            )),
        }
    }
}

/// `volumes[].containerDisk`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerDiskSource {
    /// Image reference; the image holds the disk under `/disk`.
    pub image: String,
    /// Secret for pulling the image.
    pub image_pull_secret: Option<String>,
    /// Path of the disk inside the image, when not the only file under `/disk`.
    pub path: Option<String>,
    /// `Always`, `IfNotPresent` or `Never`.
    pub image_pull_policy: Option<String>,
}

/// `volumes[].ephemeral`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EphemeralVolumeSource {
    /// The claim under the overlay.
    pub persistent_volume_claim: Option<ClaimReference>,
}

/// A claim name and its read-only flag, as in `core/v1`'s `PersistentVolumeClaimVolumeSource`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimReference {
    /// Name of the PVC in the VMI's namespace.
    pub claim_name: String,
    /// Mount it read-only.
    pub read_only: Option<bool>,
}

/// `volumes[].cloudInitNoCloud` and `volumes[].cloudInitConfigDrive`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloudInitSource {
    /// user-data from a Secret.
    pub secret_ref: Option<LocalObjectReference>,
    /// user-data, base64.
    pub user_data_base64: Option<String>,
    /// user-data, plain text.
    pub user_data: Option<String>,
    /// network-data from a Secret.
    pub network_data_secret_ref: Option<LocalObjectReference>,
    /// network-data, base64.
    pub network_data_base64: Option<String>,
    /// network-data, plain text.
    pub network_data: Option<String>,
}

/// `volumes[].persistentVolumeClaim`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimSource {
    /// Name of the PVC in the VMI's namespace.
    pub claim_name: String,
    /// Mount it read-only.
    pub read_only: Option<bool>,
    /// The volume may be hot-unplugged.
    pub hotpluggable: Option<bool>,
}

/// `volumes[].dataVolume`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataVolumeSource {
    /// Name of the DataVolume in the VMI's namespace.
    pub name: String,
    /// The volume may be hot-unplugged.
    pub hotpluggable: Option<bool>,
}

/// `volumes[].emptyDisk`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EmptyDiskSource {
    /// Virtual size of the new disk.
    pub capacity: Quantity,
}

/// `volumes[].hostDisk`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostDiskSource {
    /// Path of the image on the node.
    pub path: String,
    /// `Disk` (must exist) or `DiskOrCreate`.
    #[serde(rename = "type")]
    pub disk_type: String,
    /// Size to create with `DiskOrCreate`.
    pub capacity: Option<Quantity>,
    /// Shared between VMs.
    pub shared: Option<bool>,
}

/// `volumes[].configMap`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapVolumeSource {
    /// Name of the ConfigMap.
    pub name: Option<String>,
    /// Do not fail when it is missing.
    pub optional: Option<bool>,
    /// Label of the ISO file system.
    pub volume_label: Option<String>,
}

/// `volumes[].secret`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretVolumeSource {
    /// Name of the Secret.
    pub secret_name: Option<String>,
    /// Do not fail when it is missing.
    pub optional: Option<bool>,
    /// Label of the ISO file system.
    pub volume_label: Option<String>,
}

/// `volumes[].serviceAccount`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountVolumeSource {
    /// Name of the service account.
    pub service_account_name: Option<String>,
}

/// `volumes[].downwardAPI`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DownwardApiVolumeSource {
    /// Files to project.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<DownwardAPIVolumeFile>,
    /// Label of the ISO file system.
    pub volume_label: Option<String>,
}

/// `volumes[].sysprep`: one of a Secret or a ConfigMap.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SysprepSource {
    /// Secret holding `autounattend.xml` or `unattend.xml`.
    pub secret: Option<LocalObjectReference>,
    /// ConfigMap holding `autounattend.xml` or `unattend.xml`.
    pub config_map: Option<LocalObjectReference>,
}

/// `volumes[].memoryDump`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryDumpVolumeSource {
    /// Name of the PVC.
    pub claim_name: String,
    /// Mount it read-only.
    pub read_only: Option<bool>,
    /// The volume may be hot-unplugged.
    pub hotpluggable: Option<bool>,
}

/// `volumes[].containerPath`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPathVolumeSource {
    /// Path inside the launcher pod.
    pub path: String,
    /// Share it read-only; true when unset.
    pub read_only: Option<bool>,
}
