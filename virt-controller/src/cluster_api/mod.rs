//! The Kubernetes side of virt-controller behind one trait: watches of VMIs, VMs, migrations,
//! PersistentVolumeClaims, DataVolumes and launcher pods, DataVolume creation, access reviews, pod creation, deletion and eviction, metadata patches and status writes (the KubeVirt CR's too), and events.
//! [`KubeControllerApi`] talks to an API server; `FakeControllerApi` (feature `testing`) keeps objects in memory and
//! counts every write.

#[cfg(any(test, feature = "testing"))]
mod fake;
mod kube_adapter;
mod kube_storage;

use std::collections::BTreeMap;
use std::future::Future;

use cdi_api::{DataSource, DataVolume};
#[cfg(any(test, feature = "testing"))]
pub use fake::{FakeControllerApi, Write};
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher;
pub use kube_adapter::KubeControllerApi;
use kubevirt_api::instancetype::InstancetypeLookup;
use kubevirt_api::migrations::MigrationPolicy;
use kubevirt_api::v1::{KubeVirt, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};

/// Why a call to the API server failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The API server refused or could not be reached.
    #[error("{operation} failed: {source}")]
    Kube {
        /// What was attempted.
        operation: String,
        /// Why.
        source: kube::Error,
    },
    /// The object changed since it was read.
    #[error("{operation}: the object was modified")]
    Conflict {
        /// What was attempted.
        operation: String,
    },
    /// The object is not there.
    #[error("{0} not found")]
    NotFound(String),
    /// An object of that name exists already.
    #[error("{0}: already exists")]
    AlreadyExists(String),
    /// A watch failed.
    #[error("watch failed: {0}")]
    Watch(#[from] watcher::Error),
    /// The cluster is not set up for the request (no default StorageClass for a VM state claim).
    #[error("{0}")]
    Precondition(String),
}

/// A StorageProfile's claim property sets: each one's volume mode and access modes.
pub type ClaimPropertySets = Vec<(Option<String>, Vec<String>)>;

/// A watch event about a VMI.
pub type VmiWatchEvent = watcher::Event<VirtualMachineInstance>;
/// A watch event about the `KubeVirt` resource.
pub type KubeVirtWatchEvent = watcher::Event<KubeVirt>;
/// A watch event about a VM.
pub type VmWatchEvent = watcher::Event<VirtualMachine>;
/// A watch event about a launcher pod.
pub type PodWatchEvent = watcher::Event<Pod>;
/// A watch event about a migration.
pub type MigrationWatchEvent = watcher::Event<VirtualMachineInstanceMigration>;
/// A watch event about a PersistentVolumeClaim.
pub type ClaimWatchEvent = watcher::Event<PersistentVolumeClaim>;
/// A watch event about a DataVolume.
pub type DataVolumeWatchEvent = watcher::Event<DataVolume>;

/// What a user (a service account) asks to do, as a SubjectAccessReview's resource attributes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceAccess {
    /// The namespace it is asked in.
    pub namespace: String,
    /// `create`, `get`, …
    pub verb: String,
    /// The API group (empty for the core group).
    pub group: String,
    /// The resource (`datavolumes`, `pods`).
    pub resource: String,
    /// The subresource (`source`), or empty.
    pub subresource: String,
}

/// What virt-controller needs from the API server; instance types, preferences and their
/// revisions are read through [`InstancetypeLookup`].
pub trait ControllerApi: InstancetypeLookup + Send + Sync + 'static {
    /// Watches every VMI.
    fn watch_vmis(&self) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>>;
    /// Watches every launcher pod (label `kubevirt.io=virt-launcher`).
    fn watch_launcher_pods(&self) -> BoxStream<'static, Result<PodWatchEvent, ApiError>>;
    /// Creates a pod; returns it as stored (with its name).
    fn create_pod(&self, namespace: &str, pod: &Pod) -> impl Future<Output = Result<Pod, ApiError>> + Send;
    /// Deletes a pod.
    fn delete_pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Applies a JSON merge patch to a VMI's metadata (labels, finalizers), guarded by its
    /// resourceVersion.
    fn patch_vmi_metadata(
        &self,
        vmi: &VirtualMachineInstance,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<VirtualMachineInstance, ApiError>> + Send;
    /// Writes a VMI's status (full update of the status subresource).
    fn update_vmi_status(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<VirtualMachineInstance, ApiError>> + Send;
    /// Watches the `KubeVirt` resources (the cluster's configuration).
    fn watch_kubevirts(&self) -> BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>>;
    /// Watches every VM.
    fn watch_vms(&self) -> BoxStream<'static, Result<VmWatchEvent, ApiError>>;
    /// Creates a VMI; returns it as stored.
    fn create_vmi(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<VirtualMachineInstance, ApiError>> + Send;
    /// Deletes a VMI.
    fn delete_vmi(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Applies a JSON merge patch to a VM (finalizers, `spec.runStrategy`), guarded by its
    /// resourceVersion.
    fn patch_vm(
        &self,
        vm: &VirtualMachine,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<VirtualMachine, ApiError>> + Send;
    /// Writes a VM's status.
    fn update_vm_status(&self, vm: &VirtualMachine) -> impl Future<Output = Result<VirtualMachine, ApiError>> + Send;
    /// Creates a ControllerRevision (an instance type or preference stored for a VM);
    /// [`ApiError::AlreadyExists`] when one of that name exists.
    fn create_controller_revision(
        &self,
        revision: &ControllerRevision,
    ) -> impl Future<Output = Result<ControllerRevision, ApiError>> + Send;
    /// Every `MigrationPolicy` (cluster-scoped), read when a migration's settings are resolved.
    fn list_migration_policies(&self) -> impl Future<Output = Result<Vec<MigrationPolicy>, ApiError>> + Send;
    /// The labels of `namespace` (none when it has none), read as upstream does, from the API
    /// server, when a migration's settings are resolved.
    fn namespace_labels(
        &self,
        namespace: &str,
    ) -> impl Future<Output = Result<BTreeMap<String, String>, ApiError>> + Send;
    /// Watches every PersistentVolumeClaim (what launcher pods need of them: that they exist, and
    /// their volume mode).
    fn watch_claims(&self) -> BoxStream<'static, Result<ClaimWatchEvent, ApiError>>;
    /// Watches every `VirtualMachineInstanceMigration`.
    fn watch_migrations(&self) -> BoxStream<'static, Result<MigrationWatchEvent, ApiError>>;
    /// Applies a JSON merge patch to a migration's metadata (labels, finalizers), guarded by its
    /// resourceVersion.
    fn patch_migration_metadata(
        &self,
        migration: &VirtualMachineInstanceMigration,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<VirtualMachineInstanceMigration, ApiError>> + Send;
    /// Creates a migration (the evacuation's), named from its `generateName`.
    fn create_migration(
        &self,
        namespace: &str,
        migration: &VirtualMachineInstanceMigration,
    ) -> impl Future<Output = Result<VirtualMachineInstanceMigration, ApiError>> + Send;
    /// Deletes a migration (garbage collection of finished ones).
    fn delete_migration(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Writes a migration's status.
    fn update_migration_status(
        &self,
        migration: &VirtualMachineInstanceMigration,
    ) -> impl Future<Output = Result<VirtualMachineInstanceMigration, ApiError>> + Send;
    /// Records an event about a migration.
    fn record_migration_event(
        &self,
        migration: &VirtualMachineInstanceMigration,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Watches every DataVolume. Without CDI's CRD the watch lists nothing (and keeps looking).
    fn watch_data_volumes(&self) -> BoxStream<'static, Result<DataVolumeWatchEvent, ApiError>>;
    /// Creates a DataVolume (a VM's template).
    fn create_data_volume(&self, data_volume: &DataVolume)
    -> impl Future<Output = Result<DataVolume, ApiError>> + Send;
    /// Merge-patches a DataVolume's metadata (a VM adopts it).
    fn patch_data_volume_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Reads a DataSource; `None` when it is not there.
    fn get_data_source(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<DataSource>, ApiError>> + Send;
    /// Whether `user` may do `access` (a SubjectAccessReview).
    fn user_may(&self, user: &str, access: &ResourceAccess) -> impl Future<Output = Result<bool, ApiError>> + Send;
    /// Records an event about a VM.
    fn record_vm_event(
        &self,
        vm: &VirtualMachine,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Creates a PersistentVolumeClaim (a VM state claim).
    fn create_pvc(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> impl Future<Output = Result<PersistentVolumeClaim, ApiError>> + Send;
    /// Deletes a PersistentVolumeClaim.
    fn delete_pvc(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Merge-patches a PersistentVolumeClaim's labels (a `null` value removes one).
    fn patch_pvc_labels(
        &self,
        namespace: &str,
        name: &str,
        labels: serde_json::Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Every StorageClass.
    fn list_storage_classes(&self) -> impl Future<Output = Result<Vec<StorageClass>, ApiError>> + Send;
    /// Reads a StorageClass; `None` when it is not there.
    fn get_storage_class(&self, name: &str) -> impl Future<Output = Result<Option<StorageClass>, ApiError>> + Send;
    /// The claim property sets of CDI's StorageProfile `name`, as (volume mode, access modes);
    /// empty when there is no such profile or CDI is not installed.
    fn storage_profile_sets(&self, name: &str) -> impl Future<Output = Result<ClaimPropertySets, ApiError>> + Send;
    /// Records an event about a VMI.
    fn record_event(
        &self,
        vmi: &VirtualMachineInstance,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Evicts a pod through the Eviction API (a workload update); a pod already gone counts as
    /// evicted.
    fn evict_pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Merge-patches the `KubeVirt` resource's status (the workload updater's count).
    fn patch_kubevirt_status(
        &self,
        kubevirt: &KubeVirt,
        status: serde_json::Value,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}
