//! The API server as the import controller sees it: reads of what a pass observes, and the writes
//! its steps make. [`kube::KubeCdiApi`] talks to the API server; [`fake::FakeCdiApi`] (tests only)
//! keeps objects in memory and records every write.

use cdi_api::data_volume::DataVolumeStatus;
use cdi_api::{CDIConfig, DataSource, DataVolume, StorageProfile};

use crate::import_plan::populator::{PopulationSource, SourceKind};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

#[cfg(any(test, feature = "testing"))]
pub mod fake;
pub mod kube;

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The API server refused or could not be reached.
    #[error("{operation} failed: {source}")]
    Kube {
        /// What was attempted.
        operation: String,
        /// Why.
        #[source]
        source: ::kube::Error,
    },
    /// An object of the name wanted belongs to another owner.
    #[error("{what} exists and belongs to another owner")]
    Taken {
        /// The object.
        what: String,
    },
    /// An upload server's certificate could not be made.
    #[error("making the certificate of the upload server {service}: {message}")]
    Certificate {
        /// The upload server's Service.
        service: String,
        /// Why.
        message: String,
    },
}

/// The kind and object an event is about.
#[derive(Clone, Copy, Debug)]
pub struct EventSubject<'a> {
    /// Its API version.
    pub api_version: &'static str,
    /// `DataVolume` or `PersistentVolumeClaim`.
    pub kind: &'static str,
    /// Its metadata.
    pub meta: &'a ObjectMeta,
}

/// The API server.
pub trait CdiApi: Send + Sync {
    /// A DataVolume as the API server has it now; `None` when it is gone.
    fn data_volume(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<DataVolume>, ApiError>> + Send;
    /// A DataSource; `None` when it is not there.
    fn data_source(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<DataSource>, ApiError>> + Send;
    /// A claim; `None` when it is not there.
    fn claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<PersistentVolumeClaim>, ApiError>> + Send;
    /// A pod; `None` when it is not there.
    fn pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<Pod>, ApiError>> + Send;
    /// Every pod of a namespace.
    fn pods(&self, namespace: &str) -> impl Future<Output = Result<Vec<Pod>, ApiError>> + Send;
    /// Every StorageClass.
    fn storage_classes(&self) -> impl Future<Output = Result<Vec<StorageClass>, ApiError>> + Send;
    /// A StorageProfile; `None` when it is not there.
    fn storage_profile(&self, name: &str) -> impl Future<Output = Result<Option<StorageProfile>, ApiError>> + Send;
    /// Every PersistentVolume (a class without a provisioner offers the modes of its volumes).
    fn persistent_volumes(&self) -> impl Future<Output = Result<Vec<PersistentVolume>, ApiError>> + Send;
    /// A PersistentVolume; `None` when it is not there.
    fn persistent_volume(&self, name: &str) -> impl Future<Output = Result<Option<PersistentVolume>, ApiError>> + Send;
    /// Whether a CSIDriver object of this name is there.
    fn csi_driver_exists(&self, name: &str) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// Whether a VolumeImportSource or VolumeUploadSource is there.
    fn population_source_exists(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// A VolumeImportSource or VolumeUploadSource; `None` when it is not there.
    fn population_source(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<PopulationSource>, ApiError>> + Send;
    /// Creates a VolumeImportSource or VolumeUploadSource; one already there of that name counts
    /// as created.
    fn create_population_source(&self, source: &PopulationSource) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes a VolumeImportSource or VolumeUploadSource; one not there counts as deleted.
    fn delete_population_source(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes a claim; one not there counts as deleted.
    fn delete_claim(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Replaces a PersistentVolume with `volume` (refused when `volume` is not the version the API
    /// server has): a prime claim's volume, its `claimRef` moved to the target claim.
    fn replace_persistent_volume(&self, volume: &PersistentVolume)
    -> impl Future<Output = Result<(), ApiError>> + Send;
    /// The CDIConfig `config`; `None` when it is not there.
    fn cdi_config(&self) -> impl Future<Output = Result<Option<CDIConfig>, ApiError>> + Send;
    /// Creates a claim; one already there of that name counts as created.
    fn create_claim(&self, claim: &PersistentVolumeClaim) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Merges `annotations` into a claim's.
    fn annotate_claim(
        &self,
        namespace: &str,
        name: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Merges `labels` into a claim's.
    fn label_claim(
        &self,
        namespace: &str,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Creates a pod; one already there of that name counts as created.
    fn create_pod(&self, pod: &Pod) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Removes the scheduling gate `gate` from a pod, leaving its others.
    fn ungate_pod(&self, namespace: &str, name: &str, gate: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes a pod; one not there counts as deleted.
    fn delete_pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Creates a Service; one already there of that name counts as created.
    fn create_service(&self, service: &Service) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes a Service; one not there counts as deleted.
    fn delete_service(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Deletes a Secret; one not there counts as deleted.
    fn delete_secret(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Whether a Secret is there.
    fn secret_exists(&self, namespace: &str, name: &str) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// Creates a Secret, or replaces the one of that name.
    fn put_secret(&self, secret: &Secret) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Writes a DataVolume's status.
    fn write_status(
        &self,
        namespace: &str,
        name: &str,
        status: &DataVolumeStatus,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Creates a CDIConfig; one already there of that name counts as created.
    fn create_cdi_config(&self, config: &CDIConfig) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Replaces a CDIConfig's status with `config`'s (refused when `config` is not the version
    /// the API server has).
    fn replace_cdi_config_status(&self, config: &CDIConfig) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Replaces a DataSource's status with `data_source`'s (refused when `data_source` is not the
    /// version the API server has).
    fn replace_data_source_status(&self, data_source: &DataSource)
    -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Records an event.
    fn record_event(
        &self,
        subject: EventSubject<'_>,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}
