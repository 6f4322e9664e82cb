//! `VolumeUploadSource`: what a claim's `dataSourceRef` names when CDI's upload populator fills
//! it (upstream's volume-populator flow). cdi-controller makes one per DataVolume with an
//! `upload` source into a claim of a CSI class, owned by the DataVolume and named after its UID;
//! cdi-uploadproxy sends such a claim's uploads to its prime claim's upload server.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The kind a claim's `dataSourceRef` names for an upload.
pub const KIND: &str = "VolumeUploadSource";

/// The annotation with which cdi-controller names a populated claim's prime claim (both
/// populators set it; cdi-uploadproxy reads it to reach the prime's upload server).
pub const PRIME_NAME: &str = "cdi.kubevirt.io/storage.populator.pvcPrime";

/// Whether `claim`'s `dataSourceRef` names a `VolumeUploadSource`: CDI's upload populator fills
/// it.
#[must_use]
pub fn names_upload_source(claim: &k8s_openapi::api::core::v1::PersistentVolumeClaim) -> bool {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.data_source_ref.as_ref())
        .is_some_and(|r| r.api_group.as_deref() == Some(crate::GROUP) && r.kind == KIND)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_cdi_volume_upload_source_reference_is_the_upload_populators() {
        let claim = |group: Option<&str>, kind: &str| {
            serde_json::from_value::<k8s_openapi::api::core::v1::PersistentVolumeClaim>(serde_json::json!({
                "spec": {"dataSourceRef": {"apiGroup": group, "kind": kind, "name": "s"}}
            }))
            .expect("claim")
        };
        assert!(names_upload_source(&claim(
            Some("cdi.kubevirt.io"),
            "VolumeUploadSource"
        )));
        assert!(!names_upload_source(&claim(
            Some("cdi.kubevirt.io"),
            "VolumeImportSource"
        )));
        assert!(!names_upload_source(&claim(Some("example.com"), "VolumeUploadSource")));
        assert!(!names_upload_source(&claim(None, "PersistentVolumeClaim")));
        assert!(!names_upload_source(
            &k8s_openapi::api::core::v1::PersistentVolumeClaim::default()
        ));
    }
}
