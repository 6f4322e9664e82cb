//! `VolumeImportSource`: what a claim's `dataSourceRef` names when CDI's import populator fills
//! it (upstream's volume-populator flow). cdi-controller makes one per DataVolume it imports
//! into a claim of a CSI class, owned by the DataVolume and named after its UID.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data_volume::{
    DataVolumeCheckpoint, DataVolumeSourceGcs, DataVolumeSourceHttp, DataVolumeSourceImageIo, DataVolumeSourceRegistry,
    DataVolumeSourceS3, DataVolumeSourceVddk, Empty,
};

/// The kind a claim's `dataSourceRef` names for an import.
pub const KIND: &str = "VolumeImportSource";

/// `spec` of a `VolumeImportSource`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "VolumeImportSource",
    plural = "volumeimportsources",
    singular = "volumeimportsource",
    namespaced,
    status = "VolumeImportSourceStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeImportSourceSpec {
    /// Where the data comes from.
    pub source: Option<ImportSourceType>,
    /// Whether the claim's storage is allocated in advance.
    pub preallocation: Option<bool>,
    /// `kubevirt` or `archive`.
    pub content_type: Option<String>,
    /// The claim a multi-stage import fills.
    pub target_claim: Option<String>,
    /// The stages of a multi-stage import.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<DataVolumeCheckpoint>,
    /// Whether the current checkpoint is the last.
    pub final_checkpoint: Option<bool>,
}

/// `spec.source`: one of the import sources.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportSourceType {
    /// An HTTP(S) URL.
    pub http: Option<DataVolumeSourceHttp>,
    /// An S3 bucket.
    pub s3: Option<DataVolumeSourceS3>,
    /// A container image's disk.
    pub registry: Option<DataVolumeSourceRegistry>,
    /// A Google Cloud Storage object.
    pub gcs: Option<DataVolumeSourceGcs>,
    /// An empty raw disk.
    pub blank: Option<Empty>,
    /// An oVirt disk.
    pub imageio: Option<DataVolumeSourceImageIo>,
    /// A VMware disk.
    pub vddk: Option<DataVolumeSourceVddk>,
}

/// `status` of a `VolumeImportSource` (upstream's has no fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VolumeImportSourceStatus {}
