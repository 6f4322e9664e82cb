//! What the webhooks read from the cluster: instance types, preferences and their revisions
//! ([`InstancetypeLookup`]), the PVCs, DataVolumes and DataSources a VM infers them from
//! ([`VolumeLookup`]), a migration's VMI and its other migrations ([`MigrationLookup`]), and an
//! evicted pod and its VMI's evacuation mark ([`EvictionLookup`]).
//! [`NoCluster`] stands in while the cluster cannot be reached: every lookup fails with the
//! reason, so an object that needs one is refused rather than admitted unchecked.

use std::future::Future;

use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::Pod;
use kubevirt_api::instancetype::{InstancetypeLookup, KindNames, LookupError};
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstanceMigration};
use serde_json::Value;

/// An object a VM's volume can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeObject {
    /// A PersistentVolumeClaim.
    PersistentVolumeClaim,
    /// A CDI DataVolume.
    DataVolume,
    /// A CDI DataSource.
    DataSource,
}

impl VolumeObject {
    /// Its kind.
    #[must_use]
    pub fn kind(self) -> &'static str {
        match self {
            Self::PersistentVolumeClaim => "PersistentVolumeClaim",
            Self::DataVolume => "DataVolume",
            Self::DataSource => "DataSource",
        }
    }
}

/// Reads the objects volumes name.
pub trait VolumeLookup: Send + Sync {
    /// The object as JSON, or `None` when it (or its kind) does not exist.
    fn volume_object(
        &self,
        object: VolumeObject,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>, LookupError>> + Send;
}

/// Reads what the migration webhooks check: the VMI, and the migrations of a VMI.
pub trait MigrationLookup: Send + Sync {
    /// The VMI, or `None` when it does not exist.
    fn migrating_vmi(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<VirtualMachineInstance>, LookupError>> + Send;
    /// The migrations labelled with the VMI's name (`kubevirt.io/vmi-name`).
    fn migrations_of(
        &self,
        namespace: &str,
        vmi_name: &str,
    ) -> impl Future<Output = Result<Vec<VirtualMachineInstanceMigration>, LookupError>> + Send;
}

/// What the pod-eviction webhook reads and writes: the pod, and the VMI's evacuation mark.
pub trait EvictionLookup: Send + Sync {
    /// The pod, or `None` when it does not exist.
    fn pod(&self, namespace: &str, name: &str) -> impl Future<Output = Result<Option<Pod>, LookupError>> + Send;
    /// Sets the VMI's `status.evacuationNodeName` to `node` (with `dry_run`, only checks that it
    /// could).
    fn mark_for_evacuation(
        &self,
        namespace: &str,
        vmi_name: &str,
        node: &str,
        dry_run: bool,
    ) -> impl Future<Output = Result<(), LookupError>> + Send;
}

/// Everything the webhooks look up.
pub trait AdmissionLookup: InstancetypeLookup + VolumeLookup + MigrationLookup + EvictionLookup {}

impl<T: InstancetypeLookup + VolumeLookup + MigrationLookup + EvictionLookup> AdmissionLookup for T {}

/// No cluster to look in, and why.
#[derive(Clone, Debug)]
pub struct NoCluster(pub String);

impl InstancetypeLookup for NoCluster {
    async fn object(&self, _: &KindNames, _: &str, _: &str) -> Result<Option<Value>, LookupError> {
        Err(LookupError(self.0.clone()))
    }

    async fn revision(&self, _: &str, _: &str) -> Result<Option<ControllerRevision>, LookupError> {
        Err(LookupError(self.0.clone()))
    }
}

impl VolumeLookup for NoCluster {
    async fn volume_object(&self, _: VolumeObject, _: &str, _: &str) -> Result<Option<Value>, LookupError> {
        Err(LookupError(self.0.clone()))
    }
}

impl MigrationLookup for NoCluster {
    async fn migrating_vmi(&self, _: &str, _: &str) -> Result<Option<VirtualMachineInstance>, LookupError> {
        Err(LookupError(self.0.clone()))
    }

    async fn migrations_of(&self, _: &str, _: &str) -> Result<Vec<VirtualMachineInstanceMigration>, LookupError> {
        Err(LookupError(self.0.clone()))
    }
}

impl EvictionLookup for NoCluster {
    async fn pod(&self, _: &str, _: &str) -> Result<Option<Pod>, LookupError> {
        Err(LookupError(self.0.clone()))
    }

    async fn mark_for_evacuation(&self, _: &str, _: &str, _: &str, _: bool) -> Result<(), LookupError> {
        Err(LookupError(self.0.clone()))
    }
}
