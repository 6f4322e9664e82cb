//! `VolumeUploadSource`: what a claim's `dataSourceRef` names when CDI's upload populator fills
//! it (upstream's volume-populator flow). cdi-controller makes one per DataVolume with an
//! `upload` source into a claim of a CSI class, owned by the DataVolume and named after its UID;
//! cdi-uploadproxy sends such a claim's uploads to its prime claim's upload server.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind a claim's `dataSourceRef` names for an upload.
pub const KIND: &str = "VolumeUploadSource";

/// `spec` of a `VolumeUploadSource`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "VolumeUploadSource",
    plural = "volumeuploadsources",
    singular = "volumeuploadsource",
    namespaced,
    status = "VolumeUploadSourceStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct VolumeUploadSourceSpec {
    /// `kubevirt` or `archive`.
    pub content_type: Option<String>,
    /// Whether the claim's storage is allocated in advance.
    pub preallocation: Option<bool>,
}

/// `status` of a `VolumeUploadSource` (upstream's has no fields).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct VolumeUploadSourceStatus {}
