//! The Kubernetes side of virt-handler behind one trait: the VMIs of this node (and those migrating
//! to it) and the `KubeVirt` resources as watch streams, full status writes, label patches, node patches and events. [`KubeClusterApi`] talks to an API server through
//! kube-rs; `FakeClusterApi` (feature `testing`) keeps everything in memory for tests and benchmarks.

#[cfg(any(test, feature = "testing"))]
mod fake;
mod kube_adapter;
pub mod merged_watch;

use std::future::Future;

#[cfg(any(test, feature = "testing"))]
pub use fake::{FakeClusterApi, Write};
use futures::stream::BoxStream;
use kube::runtime::watcher;
pub use kube_adapter::KubeClusterApi;
use kubevirt_api::v1::{KubeVirt, VirtualMachineInstance};

/// Why a call to the API server failed.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The API server refused or could not be reached.
    #[error("{operation} failed: {source}")]
    Kube {
        /// What was attempted, e.g. `update status of default/vmi`.
        operation: String,
        /// Why.
        source: kube::Error,
    },
    /// The object changed since it was read (HTTP 409); read it again.
    #[error("{operation}: the object was modified; will retry with the newer version")]
    Conflict {
        /// What was attempted.
        operation: String,
    },
    /// The watch stream failed.
    #[error("the watch failed: {0}")]
    Watch(#[from] watcher::Error),
    /// The fake was told to fail.
    #[error("{0}")]
    Injected(String),
}

/// A watch event about a VMI of this node.
pub type VmiWatchEvent = watcher::Event<VirtualMachineInstance>;

/// A watch event about a `KubeVirt` resource (the cluster's configuration).
pub type KubeVirtWatchEvent = watcher::Event<KubeVirt>;

/// A Kubernetes event about a VMI, as upstream's recorder emits it (core/v1 Event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmiEvent {
    /// `Normal` or `Warning`.
    pub event_type: &'static str,
    /// E.g. `Created`, `ShuttingDown`, `SyncFailed`.
    pub reason: String,
    /// Human-readable text.
    pub message: String,
}

impl VmiEvent {
    /// A `Normal` event.
    #[must_use]
    pub fn normal(reason: &str, message: impl Into<String>) -> Self {
        Self {
            event_type: "Normal",
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A `Warning` event.
    #[must_use]
    pub fn warning(reason: &str, message: impl Into<String>) -> Self {
        Self {
            event_type: "Warning",
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

/// What virt-handler needs from the API server.
pub trait ClusterApi: Send + Sync + 'static {
    /// Watches the VMIs whose `kubevirt.io/nodeName` or `kubevirt.io/migrationTargetNodeName`
    /// label is `node`, merged ([`merged_watch`]); restarts itself on errors.
    fn watch_vmis(&self, node: &str) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>>;
    /// Watches the `KubeVirt` resources of the install namespace; restarts itself on errors.
    fn watch_kubevirts(&self) -> BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>>;
    /// Sets (`Some`) or removes (`None`) labels of a VMI, guarded by its resourceVersion.
    fn patch_vmi_labels(
        &self,
        vmi: &VirtualMachineInstance,
        labels: std::collections::BTreeMap<String, Option<String>>,
    ) -> impl Future<Output = Result<VirtualMachineInstance, ApiError>> + Send;
    /// Writes `vmi`'s whole status (a full update with its resourceVersion) and returns the stored
    /// object.
    fn update_vmi_status(
        &self,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<VirtualMachineInstance, ApiError>> + Send;
    /// Applies a strategic-merge patch to the node.
    fn patch_node(&self, node: &str, patch: serde_json::Value) -> impl Future<Output = Result<(), ApiError>> + Send;
    /// Records an event about `vmi`, reported by virt-handler on `node`.
    fn record_event(
        &self,
        vmi: &VirtualMachineInstance,
        node: &str,
        event: VmiEvent,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}
