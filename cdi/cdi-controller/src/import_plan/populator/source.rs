//! What a populated target claim names in its `dataSourceRef`: a `VolumeImportSource` for an
//! import, a `VolumeUploadSource` for an upload, one per DataVolume, owned by it and named after
//! its UID (upstream's names). Pure.

use cdi_api::DataVolume;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, TypedObjectReference};

use super::super::{Transfer, claim_of};
use crate::claim_annotations::ann;

/// Which of CDI's populators fills a claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// The import populator: an importer pod fills the prime claim.
    Import,
    /// The upload populator: an upload server takes the client's upload into the prime claim.
    Upload,
}

impl SourceKind {
    /// The kind of the object the claim's `dataSourceRef` names.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            Self::Import => cdi_api::volume_import_source::KIND,
            Self::Upload => cdi_api::volume_upload_source::KIND,
        }
    }

    /// The populator of a DataVolume filled by `transfer`, if one can fill it (a clone cannot,
    /// here).
    #[must_use]
    pub fn of(transfer: &Transfer) -> Option<Self> {
        match transfer {
            Transfer::Import(_) => Some(Self::Import),
            Transfer::Upload => Some(Self::Upload),
            Transfer::Clone { .. } => None,
        }
    }

    /// The name of the DataVolume's source object (upstream's).
    #[must_use]
    pub fn source_name(self, data_volume: &DataVolume) -> String {
        let prefix = match self {
            Self::Import => "volume-import-source",
            Self::Upload => "volume-upload-source",
        };
        format!("{prefix}-{}", data_volume.metadata.uid.as_deref().unwrap_or_default())
    }
}

/// The object a populated target claim names.
#[derive(Clone, Debug, PartialEq)]
pub enum PopulationSource {
    /// An import's.
    Import(Box<cdi_api::VolumeImportSource>),
    /// An upload's.
    Upload(Box<cdi_api::VolumeUploadSource>),
}

impl PopulationSource {
    /// Its kind.
    #[must_use]
    pub fn kind(&self) -> SourceKind {
        match self {
            Self::Import(_) => SourceKind::Import,
            Self::Upload(_) => SourceKind::Upload,
        }
    }

    /// Its metadata.
    #[must_use]
    pub fn metadata(&self) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        match self {
            Self::Import(source) => &source.metadata,
            Self::Upload(source) => &source.metadata,
        }
    }
}

/// Which populator fills a claim, by its `dataSourceRef`, if one of CDI's does.
#[must_use]
pub fn populated_by(claim: &PersistentVolumeClaim) -> Option<SourceKind> {
    let reference = claim.spec.as_ref()?.data_source_ref.as_ref()?;
    if reference.api_group.as_deref() != Some(cdi_api::GROUP) {
        return None;
    }
    [SourceKind::Import, SourceKind::Upload]
        .into_iter()
        .find(|kind| reference.kind == kind.kind())
}

/// The DataVolume's source object of `kind`, owned by it.
#[must_use]
pub fn population_source(data_volume: &DataVolume, kind: SourceKind) -> PopulationSource {
    let name = kind.source_name(data_volume);
    let mut source = match kind {
        SourceKind::Import => {
            let source = data_volume.spec.source.clone().unwrap_or_default();
            let blank = source.blank.is_some() || (source.http.is_none() && source.registry.is_none());
            PopulationSource::Import(Box::new(cdi_api::VolumeImportSource::new(
                &name,
                cdi_api::VolumeImportSourceSpec {
                    source: Some(cdi_api::volume_import_source::ImportSourceType {
                        http: source.http,
                        registry: source.registry,
                        blank: blank.then(cdi_api::data_volume::Empty::default),
                        ..Default::default()
                    }),
                    preallocation: data_volume.spec.preallocation,
                    content_type: data_volume.spec.content_type.clone(),
                    ..Default::default()
                },
            )))
        }
        SourceKind::Upload => PopulationSource::Upload(Box::new(cdi_api::VolumeUploadSource::new(
            &name,
            cdi_api::VolumeUploadSourceSpec {
                content_type: data_volume.spec.content_type.clone(),
                preallocation: data_volume.spec.preallocation,
            },
        ))),
    };
    let metadata = match &mut source {
        PopulationSource::Import(source) => &mut source.metadata,
        PopulationSource::Upload(source) => &mut source.metadata,
    };
    metadata.namespace.clone_from(&data_volume.metadata.namespace);
    metadata.owner_references = Some(vec![super::super::claim::owner(data_volume)]);
    source
}

/// The target claim: the DataVolume's, naming its source object, without the annotations that
/// ask this controller to fill it in place (the prime claim carries those).
#[must_use]
pub fn target_claim(
    data_volume: &DataVolume,
    mut spec: PersistentVolumeClaimSpec,
    (kind, transfer): (SourceKind, &Transfer),
) -> PersistentVolumeClaim {
    spec.data_source_ref = Some(TypedObjectReference {
        api_group: Some(cdi_api::GROUP.to_owned()),
        kind: kind.kind().to_owned(),
        name: kind.source_name(data_volume),
        namespace: None,
    });
    let mut claim = claim_of(data_volume, spec, transfer);
    if let Some(annotations) = claim.metadata.annotations.as_mut() {
        for key in [ann::SOURCE, ann::ENDPOINT, ann::REQUIRES_SCRATCH, ann::UPLOAD_REQUEST] {
            annotations.remove(key);
        }
    }
    claim
}
