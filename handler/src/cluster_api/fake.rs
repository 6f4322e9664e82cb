//! An in-memory API server for the VMIs of one node: tests and benchmarks add, change and delete
//! VMIs, watchers see them as a real watch would, and every write is recorded.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::VirtualMachineInstance;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use super::{ApiError, ClusterApi, VmiEvent, VmiWatchEvent};

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
}

#[derive(Debug, Default)]
struct State {
    vmis: BTreeMap<String, VirtualMachineInstance>,
    watchers: Vec<UnboundedSender<Result<VmiWatchEvent, ApiError>>>,
    writes: Vec<Write>,
    version: u64,
    failing_status_writes: usize,
}

impl State {
    fn broadcast(&mut self, event: &VmiWatchEvent) {
        self.watchers.retain(|w| w.send(Ok(event.clone())).is_ok());
    }

    fn stamp(&mut self, vmi: &mut VirtualMachineInstance) {
        self.version += 1;
        vmi.metadata.resource_version = Some(self.version.to_string());
    }
}

/// The fake. Clones share one state.
#[derive(Clone, Debug, Default)]
pub struct FakeClusterApi {
    state: Arc<Mutex<State>>,
}

impl FakeClusterApi {
    /// An empty API server.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates or replaces a VMI, as a user or virt-controller would; watchers see it.
    pub fn apply(&self, mut vmi: VirtualMachineInstance) {
        let mut state = self.lock();
        state.stamp(&mut vmi);
        state.vmis.insert(vmi.key(), vmi.clone());
        state.broadcast(&Event::Apply(vmi));
    }

    /// Changes a stored VMI in place; watchers see the change.
    pub fn modify(&self, key: &str, change: impl FnOnce(&mut VirtualMachineInstance)) {
        let mut state = self.lock();
        let Some(mut vmi) = state.vmis.get(key).cloned() else {
            return;
        };
        change(&mut vmi);
        state.stamp(&mut vmi);
        state.vmis.insert(key.to_owned(), vmi.clone());
        state.broadcast(&Event::Apply(vmi));
    }

    /// Removes a VMI; watchers see it deleted.
    pub fn delete(&self, key: &str) {
        let mut state = self.lock();
        if let Some(vmi) = state.vmis.remove(key) {
            state.broadcast(&Event::Delete(vmi));
        }
    }

    /// The stored VMI.
    #[must_use]
    pub fn vmi(&self, key: &str) -> Option<VirtualMachineInstance> {
        self.lock().vmis.get(key).cloned()
    }

    /// Every write so far, in order.
    #[must_use]
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    /// How many writes so far.
    #[must_use]
    pub fn write_count(&self) -> usize {
        self.lock().writes.len()
    }

    /// Makes the next `count` status writes fail.
    pub fn fail_status_writes(&self, count: usize) {
        self.lock().failing_status_writes = count;
    }
}

impl ClusterApi for FakeClusterApi {
    fn watch_vmis(&self, node: &str) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>> {
        let (tx, rx) = unbounded_channel();
        let mut state = self.lock();
        let on_node = |vmi: &&VirtualMachineInstance| {
            vmi.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(kubevirt_api::well_known::labels::NODE_NAME))
                .is_some_and(|n| n == node)
        };
        let _ = tx.send(Ok(Event::Init));
        for vmi in state.vmis.values().filter(on_node) {
            let _ = tx.send(Ok(Event::InitApply(vmi.clone())));
        }
        let _ = tx.send(Ok(Event::InitDone));
        state.watchers.push(tx);
        let node = node.to_owned();
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx)
            .filter(move |event| {
                let keep = match event {
                    Ok(Event::Apply(vmi) | Event::Delete(vmi) | Event::InitApply(vmi)) => vmi
                        .metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(kubevirt_api::well_known::labels::NODE_NAME))
                        .is_some_and(|n| *n == node),
                    _ => true,
                };
                std::future::ready(keep)
            })
            .boxed()
    }

    async fn update_vmi_status(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let mut state = self.lock();
        state.writes.push(Write::VmiStatus(Box::new(vmi.clone())));
        if state.failing_status_writes > 0 {
            state.failing_status_writes -= 1;
            return Err(ApiError::Injected("injected status write failure".to_owned()));
        }
        let key = vmi.key();
        let Some(stored) = state.vmis.get(&key).cloned() else {
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
        state.vmis.insert(key, updated.clone());
        state.broadcast(&Event::Apply(updated.clone()));
        Ok(updated)
    }

    async fn patch_node(&self, node: &str, patch: serde_json::Value) -> Result<(), ApiError> {
        self.lock().writes.push(Write::NodePatch {
            node: node.to_owned(),
            patch,
        });
        Ok(())
    }

    async fn record_event(&self, vmi: &VirtualMachineInstance, _node: &str, event: VmiEvent) -> Result<(), ApiError> {
        self.lock().writes.push(Write::Event { vmi: vmi.key(), event });
        Ok(())
    }
}
