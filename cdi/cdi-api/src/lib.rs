//! The Containerized Data Importer's API, `cdi.kubevirt.io/v1beta1`, as upstream CDI defines it:
//! [`DataVolume`] (a claim and the data to fill it with: an HTTP or registry import, an upload, a
//! clone, a blank disk) and [`DataSource`] (a named pointer to a claim, a snapshot, or another
//! DataSource), [`VolumeImportSource`] and [`VolumeUploadSource`] (what the import and upload populators
//! fill a claim from), [`StorageProfile`] (what a StorageClass's claims get), [`CDIConfig`] (the
//! settings CDI's controllers read) and [`CDI`] (what cdi-operator installs from). The schemas,
//! short names and printer columns are upstream's, so that users'
//! manifests apply unmodified; [`crd`] renders the CRDs that `manifests/cdi/crds/` holds.

pub mod cdi;
pub mod cdi_config;
pub mod clone;
pub mod components;
pub mod crd;
pub mod data_source;
pub mod data_volume;
pub mod importer_env;
pub mod storage_profile;
pub mod upload;
pub mod volume_import_source;
pub mod volume_upload_source;

pub use cdi::{CDI, CDISpec, CDIStatus};
pub use cdi_config::{CDIConfig, CDIConfigSpec, CDIConfigStatus, FilesystemOverhead};
pub use data_source::{DataSource, DataSourceSource, DataSourceSpec, DataSourceStatus};
pub use data_volume::{
    DataVolume, DataVolumeCondition, DataVolumePhase, DataVolumeSource, DataVolumeSpec, DataVolumeStatus, StorageSpec,
};
pub use storage_profile::{ClaimPropertySet, StorageProfile, StorageProfileSpec, StorageProfileStatus};
pub use volume_import_source::{VolumeImportSource, VolumeImportSourceSpec};
pub use volume_upload_source::{VolumeUploadSource, VolumeUploadSourceSpec};

/// The API group.
pub const GROUP: &str = "cdi.kubevirt.io";
/// The API version served and stored.
pub const VERSION: &str = "v1beta1";

/// An object schema that keeps unknown fields (for fields kept as given).
pub(crate) fn preserve_unknown_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "nullable": true})
}
