//! An in-memory API server for the VMIs of one node: tests and benchmarks add, change and delete
//! VMIs, watchers see them as a real watch would, and every write is recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{KubeVirt, VirtualMachineInstance};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::{ApiError, ClusterApi, KubeVirtWatchEvent, VmiEvent, VmiWatchEvent};

/// One write virt-handler made.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// A status update: the whole object sent.
    VmiStatus(Box<VirtualMachineInstance>),
    /// A node patch.
    NodePatch {
        /// The node.
        node: String,
        /// The patch body.
        patch: serde_json::Value,
    },
    /// An event about a VMI (`namespace/name`).
    Event {
        /// The VMI.
        vmi: String,
        /// The event.
        event: VmiEvent,
    },
    /// A label patch of a VMI (`namespace/name`).
    VmiLabels {
        /// The VMI.
        vmi: String,
        /// The labels set (`Some`) or removed.
        labels: std::collections::BTreeMap<String, Option<String>>,
    },
}

/// One stored VMI, as JSON; shared with the watch streams that have yet to deliver it.
#[derive(Clone, Debug)]
struct Stored(Arc<Vec<u8>>);

impl Stored {
    fn new(vmi: &VirtualMachineInstance) -> Self {
        Self(Arc::new(serde_json::to_vec(vmi).unwrap_or_default()))
    }

    fn get(&self) -> Option<VirtualMachineInstance> {
        serde_json::from_slice(&self.0).ok()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Stored as the API server stores objects: serialized (and so small; benchmarks measure the
    /// handler in the same process).
    vmis: BTreeMap<String, Stored>,
    watchers: Vec<UnboundedSender<Change>>,
    /// The `KubeVirt` resource, when there is one, and the watches of it.
    kubevirt: Option<KubeVirt>,
    kubevirt_watchers: Vec<UnboundedSender<KubeVirtWatchEvent>>,
    writes: Vec<Write>,
    version: u64,
    failing_status_writes: usize,
    write_count: usize,
    keeps_writes: bool,
}

/// What a watch stream delivers, decoded only when the stream is polled (as a real watch reads
/// the API server's stream), so queued events cost their JSON, not a decoded object.
#[derive(Clone, Debug)]
enum Change {
    Init,
    InitApply(Stored),
    InitDone,
    /// The new version, and the one it replaced.
    Apply(Stored, Option<Stored>),
    Delete(Stored),
}

impl Change {
    fn decode(self, node: &str) -> Option<VmiWatchEvent> {
        let on_node = |stored: Stored| stored.get().filter(|vmi| is_on_node(vmi, node));
        match self {
            Self::Init => Some(Event::Init),
            Self::InitDone => Some(Event::InitDone),
            Self::InitApply(stored) => on_node(stored).map(Event::InitApply),
            Self::Apply(stored, before) => match (on_node(stored.clone()), before.and_then(on_node)) {
                (Some(vmi), _) => Some(Event::Apply(vmi)),
                // It left this node's watches (a label changed): the watch reports it deleted.
                (None, Some(_)) => stored.get().map(Event::Delete),
                (None, None) => None,
            },
            Self::Delete(stored) => on_node(stored).map(Event::Delete),
        }
    }
}

impl State {
    fn broadcast(&mut self, change: &Change) {
        self.watchers.retain(|w| w.send(change.clone()).is_ok());
    }

    fn log(&mut self, write: Write) {
        self.write_count += 1;
        if self.keeps_writes {
            self.writes.push(write);
        }
    }

    fn stamp(&mut self, vmi: &mut VirtualMachineInstance) {
        self.version += 1;
        vmi.metadata.resource_version = Some(self.version.to_string());
    }
}

/// The fake. Clones share one state.
#[derive(Clone, Debug)]
pub struct FakeClusterApi {
    state: Arc<Mutex<State>>,
}

impl Default for FakeClusterApi {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeClusterApi {
    /// An empty API server that keeps every write.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                keeps_writes: true,
                ..State::default()
            })),
        }
    }

    /// An empty API server that only counts writes (benchmarks: the log would dwarf the handler).
    #[must_use]
    pub fn counting_writes() -> Self {
        Self::default().with_write_log(false)
    }

    fn with_write_log(self, keeps_writes: bool) -> Self {
        self.lock().keeps_writes = keeps_writes;
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates or replaces (`Some`) or deletes (`None`) the `KubeVirt` resource; watchers see it.
    pub fn set_kubevirt(&self, kubevirt: Option<KubeVirt>) {
        let mut state = self.lock();
        let event = match (&kubevirt, state.kubevirt.take()) {
            (Some(new), _) => Event::Apply(new.clone()),
            (None, Some(old)) => Event::Delete(old),
            (None, None) => return,
        };
        state.kubevirt = kubevirt;
        state.kubevirt_watchers.retain(|w| w.send(event.clone()).is_ok());
    }

    /// Creates or replaces a VMI, as a user or virt-controller would; watchers see it.
    pub fn apply(&self, mut vmi: VirtualMachineInstance) {
        let mut state = self.lock();
        state.stamp(&mut vmi);
        let stored = Stored::new(&vmi);
        let before = state.vmis.insert(vmi.key(), stored.clone());
        state.broadcast(&Change::Apply(stored, before));
    }

    /// Changes a stored VMI in place; watchers see the change.
    pub fn modify(&self, key: &str, change: impl FnOnce(&mut VirtualMachineInstance)) {
        let mut state = self.lock();
        let Some(mut vmi) = state.vmis.get(key).and_then(Stored::get) else {
            return;
        };
        change(&mut vmi);
        state.stamp(&mut vmi);
        let stored = Stored::new(&vmi);
        let before = state.vmis.insert(key.to_owned(), stored.clone());
        state.broadcast(&Change::Apply(stored, before));
    }

    /// Removes a VMI; watchers see it deleted.
    pub fn delete(&self, key: &str) {
        let mut state = self.lock();
        if let Some(stored) = state.vmis.remove(key) {
            state.broadcast(&Change::Delete(stored));
        }
    }

    /// The stored VMI.
    #[must_use]
    pub fn vmi(&self, key: &str) -> Option<VirtualMachineInstance> {
        self.lock().vmis.get(key).and_then(Stored::get)
    }

    /// Every write so far, in order.
    #[must_use]
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    /// How many writes so far.
    #[must_use]
    pub fn write_count(&self) -> usize {
        self.lock().write_count
    }

    /// Makes the next `count` status writes fail.
    pub fn fail_status_writes(&self, count: usize) {
        self.lock().failing_status_writes = count;
    }
}

/// The watches' label selectors: `kubevirt.io/nodeName=<node>` or
/// `kubevirt.io/migrationTargetNodeName=<node>`.
fn is_on_node(vmi: &VirtualMachineInstance, node: &str) -> bool {
    use kubevirt_api::well_known::labels;
    let labels = vmi.metadata.labels.as_ref();
    [labels::NODE_NAME, labels::MIGRATION_TARGET_NODE_NAME]
        .iter()
        .any(|label| labels.and_then(|l| l.get(*label)).is_some_and(|n| n == node))
}

impl ClusterApi for FakeClusterApi {
    fn watch_vmis(&self, node: &str) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>> {
        let (tx, rx) = unbounded_channel();
        let mut state = self.lock();
        let _ = tx.send(Change::Init);
        for stored in state.vmis.values() {
            let _ = tx.send(Change::InitApply(stored.clone()));
        }
        let _ = tx.send(Change::InitDone);
        state.watchers.push(tx);
        let node = node.to_owned();
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
            .filter_map(move |change| std::future::ready(change.decode(&node).map(Ok)))
            .boxed()
    }

    fn watch_kubevirts(&self) -> BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>> {
        let (tx, rx) = unbounded_channel();
        let mut state = self.lock();
        let _ = tx.send(Event::Init);
        if let Some(kubevirt) = &state.kubevirt {
            let _ = tx.send(Event::InitApply(kubevirt.clone()));
        }
        let _ = tx.send(Event::InitDone);
        state.kubevirt_watchers.push(tx);
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(Ok).boxed()
    }

    async fn update_vmi_status(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let mut state = self.lock();
        state.log(Write::VmiStatus(Box::new(vmi.clone())));
        if state.failing_status_writes > 0 {
            state.failing_status_writes -= 1;
            return Err(ApiError::Injected("injected status write failure".to_owned()));
        }
        let key = vmi.key();
        let Some(stored) = state.vmis.get(&key).and_then(Stored::get) else {
            return Err(ApiError::Injected(format!("virtualmachineinstances {key} not found")));
        };
        if stored.metadata.resource_version != vmi.metadata.resource_version {
            return Err(ApiError::Conflict {
                operation: format!("update status of {key}"),
            });
        }
        let mut updated = stored;
        updated.status.clone_from(&vmi.status);
        state.stamp(&mut updated);
        let stored = Stored::new(&updated);
        let before = state.vmis.insert(key, stored.clone());
        state.broadcast(&Change::Apply(stored, before));
        Ok(updated)
    }

    async fn patch_vmi_labels(
        &self,
        vmi: &VirtualMachineInstance,
        labels: std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<VirtualMachineInstance, ApiError> {
        let mut state = self.lock();
        state.log(Write::VmiLabels {
            vmi: vmi.key(),
            labels: labels.clone(),
        });
        let key = vmi.key();
        let Some(mut stored) = state.vmis.get(&key).and_then(Stored::get) else {
            return Err(ApiError::Injected(format!("virtualmachineinstances {key} not found")));
        };
        if stored.metadata.resource_version != vmi.metadata.resource_version {
            return Err(ApiError::Conflict {
                operation: format!("patch the labels of {key}"),
            });
        }
        let target = stored.metadata.labels.get_or_insert_default();
        for (label, value) in labels {
            match value {
                Some(value) => target.insert(label, value),
                None => target.remove(&label),
            };
        }
        state.stamp(&mut stored);
        let new = Stored::new(&stored);
        let before = state.vmis.insert(key, new.clone());
        state.broadcast(&Change::Apply(new, before));
        Ok(stored)
    }

    async fn patch_node(&self, node: &str, patch: serde_json::Value) -> Result<(), ApiError> {
        self.lock().log(Write::NodePatch {
            node: node.to_owned(),
            patch,
        });
        Ok(())
    }

    async fn record_event(&self, vmi: &VirtualMachineInstance, _node: &str, event: VmiEvent) -> Result<(), ApiError> {
        self.lock().log(Write::Event { vmi: vmi.key(), event });
        Ok(())
    }
}
