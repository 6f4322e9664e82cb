//! What virt-api talks to behind its routes (its backends), behind traits: the kube API ([`SubresourceCluster`],
//! with [`KubeSubresourceCluster`] and the in-memory `FakeSubresourceCluster` (feature `testing`)) and the
//! virt-handler of a node ([`NodeConnector`], for pause, unpause and the console).

#[cfg(any(test, feature = "testing"))]
mod fake;
#[cfg(any(test, feature = "testing"))]
mod fake_node;
mod kube_adapter;
mod node;

use std::future::Future;

#[cfg(any(test, feature = "testing"))]
pub use fake::{FakeSubresourceCluster, Recorded};
#[cfg(any(test, feature = "testing"))]
pub use fake_node::{FAKE_CONSOLE_BANNER, FakeNodeConnector, NodeCall};
pub use kube_adapter::KubeSubresourceCluster;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};
pub use node::{ConsoleStream, HANDLER_SERVER_NAME, HandlerConnector, NodeConnector, NodeError, VmiAction, pump};
use serde_json::Value;

/// Which object a JSON patch applies to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchTarget {
    /// The VM.
    Vm,
    /// The VM's status subresource.
    VmStatus,
    /// The VMI.
    Vmi,
    /// The VMI's status subresource.
    VmiStatus,
}

/// Marks the VMI `namespace/vmi_name` for evacuation from `node` (the eviction webhook's JSON
/// patch of its status), through `cluster`.
async fn mark_for_evacuation<C: SubresourceCluster>(
    cluster: &C,
    namespace: &str,
    vmi_name: &str,
    node: &str,
    dry_run: bool,
) -> Result<(), kubevirt_api::instancetype::LookupError> {
    let patch = serde_json::json!([{"op": "add", "path": "/status/evacuationNodeName", "value": node}]);
    cluster
        .patch(PatchTarget::VmiStatus, namespace, vmi_name, &patch, dry_run)
        .await
        .map_err(|e| kubevirt_api::instancetype::LookupError(e.to_string()))
}

/// Why a call to the API server failed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClusterError {
    /// A `test` operation did not hold or the object changed (409): someone else changed it.
    #[error("{0}")]
    Conflict(String),
    /// Any other failure.
    #[error("{0}")]
    Failed(String),
}

/// The kube API calls of the subresource API, and the lookups of the VM webhooks.
pub trait SubresourceCluster: crate::admission::lookup::AdmissionLookup + Send + Sync + 'static {
    /// Reads a VM; `None` when it does not exist.
    fn get_vm(&self, ns: &str, name: &str)
    -> impl Future<Output = Result<Option<VirtualMachine>, ClusterError>> + Send;
    /// Reads a VMI; `None` when it does not exist.
    fn get_vmi(
        &self,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<VirtualMachineInstance>, ClusterError>> + Send;
    /// Applies a JSON patch. `dry_run` asks the API server to check it without storing it.
    fn patch(
        &self,
        target: PatchTarget,
        ns: &str,
        name: &str,
        patch: &Value,
        dry_run: bool,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Deletes the running launcher pod of the VMI with this uid, with a grace period of 1 s.
    fn delete_launcher_pod(
        &self,
        ns: &str,
        vmi_uid: &str,
        dry_run: bool,
    ) -> impl Future<Output = Result<(), ClusterError>> + Send;
    /// Asks the API server whether the SubjectAccessReview `spec` is allowed; the reason when not.
    fn review_access(&self, spec: &Value) -> impl Future<Output = Result<Result<(), String>, ClusterError>> + Send;
    /// Creates a migration (with `generateName`); returns it as stored. `dry_run` asks the API
    /// server to admit it without storing it.
    fn create_migration(
        &self,
        ns: &str,
        migration: &VirtualMachineInstanceMigration,
        dry_run: bool,
    ) -> impl Future<Output = Result<VirtualMachineInstanceMigration, ClusterError>> + Send;
    /// The pod IP of the virt-handler on `node`, when one runs there.
    fn handler_address(&self, node: &str) -> impl Future<Output = Result<Option<String>, ClusterError>> + Send;
}
