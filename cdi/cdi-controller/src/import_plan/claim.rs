//! The claim a pass makes for a DataVolume, owned by it and annotated for what fills it, and the
//! claim as the status reads it.

use std::collections::BTreeMap;

use cdi_api::DataVolume;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{IMMEDIATE_BINDING, Transfer, clone};
use crate::claim_annotations::ann;
use crate::import_status::ClaimView;
use crate::importer_pod::{self, ImportSource};

/// The DataVolume as the controlling owner of what it makes.
pub(super) fn owner(data_volume: &DataVolume) -> OwnerReference {
    OwnerReference {
        api_version: format!("{}/{}", cdi_api::GROUP, cdi_api::VERSION),
        kind: "DataVolume".to_owned(),
        name: data_volume.metadata.name.clone().unwrap_or_default(),
        uid: data_volume.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

pub(super) fn claim_of(
    data_volume: &DataVolume,
    spec: PersistentVolumeClaimSpec,
    transfer: &Transfer,
) -> PersistentVolumeClaim {
    let mut annotations = BTreeMap::from([(ann::CONTENT_TYPE.to_owned(), "kubevirt".to_owned())]);
    match transfer {
        Transfer::Import(source) => {
            annotations.insert(ann::SOURCE.to_owned(), source.kind().to_owned());
            annotations.insert(ann::ENDPOINT.to_owned(), source.endpoint().to_owned());
        }
        Transfer::Upload => {
            annotations.insert(ann::UPLOAD_REQUEST.to_owned(), String::new());
        }
        Transfer::Clone { namespace, name } => {
            annotations.extend(clone::claim_annotations(
                namespace,
                name,
                data_volume.metadata.namespace.as_deref().unwrap_or_default(),
                data_volume.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
    }
    // As upstream's, a registry import pulls into scratch space, and an upload server saves a
    // format to convert there: their first pod has one.
    if matches!(transfer, Transfer::Import(ImportSource::Registry(_)) | Transfer::Upload) {
        annotations.insert(ann::REQUIRES_SCRATCH.to_owned(), "true".to_owned());
    }
    if let Some(value) = data_volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(IMMEDIATE_BINDING))
    {
        annotations.insert(IMMEDIATE_BINDING.to_owned(), value.clone());
    }
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: data_volume.metadata.name.clone(),
            namespace: data_volume.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([(
                importer_pod::CDI_LABEL.0.to_owned(),
                importer_pod::CDI_LABEL.1.to_owned(),
            )])),
            annotations: Some(annotations),
            owner_references: Some(vec![owner(data_volume)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

pub(super) fn view(claim: &PersistentVolumeClaim, annotations: BTreeMap<String, String>) -> ClaimView {
    ClaimView {
        name: claim.metadata.name.clone().unwrap_or_default(),
        namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        phase: claim.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default(),
        annotations,
        deleting: claim.metadata.deletion_timestamp.is_some(),
    }
}

pub(crate) fn requested_size(claim: &PersistentVolumeClaim) -> String {
    claim
        .spec
        .as_ref()
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .map(|q| q.0.clone())
        .unwrap_or_default()
}
