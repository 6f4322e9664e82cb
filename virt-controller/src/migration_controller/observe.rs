//! The migration controller's caches, fed by the watches: migrations, VMIs (with their
//! evacuation marks) and launcher pods, each emptied of what a relist no longer names.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::Clock;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstanceMigration};

use super::{Known, MigrationController, migration_key, vmi_key_of};
use crate::cluster_api::ControllerApi;
use crate::compact::Compact;
use crate::own_writes::{replaces_cached, replaces_cached_pod};
use crate::vmi_controller::{owner_key, pod_view};
use crate::vmi_lifecycle::PodView;

impl<A: ControllerApi, K: Clock> MigrationController<A, K> {
    /// The migrations of the VMI `vmi_key`.
    fn migrations_of(known: &Known, vmi_key: &str) -> Vec<String> {
        known
            .migrations
            .iter()
            .filter(|(_, m)| m.get().is_some_and(|m| vmi_key_of(&m) == vmi_key))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// Takes in a migration watch event; returns the keys to reconcile.
    pub fn on_migration_event(&self, event: Event<VirtualMachineInstanceMigration>) -> Vec<String> {
        let mut known = self.known();
        match event {
            Event::Apply(migration) | Event::InitApply(migration) => {
                let key = migration_key(&migration);
                known.migration_list.saw(&key);
                known.migrations.insert(key.clone(), Compact::new(&migration));
                // A migration that ends lets the next one of the cluster start.
                known
                    .migrations
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .into_iter()
                    .chain([key])
                    .collect()
            }
            Event::Delete(migration) => {
                known.migrations.remove(&migration_key(&migration));
                known.migrations.keys().cloned().collect()
            }
            Event::Init => {
                known.migration_list.start();
                Vec::new()
            }
            Event::InitDone => {
                if let Some(listed) = known.migration_list.finish() {
                    known.migrations.retain(|key, _| listed.contains(key));
                }
                known.migrations.keys().cloned().collect()
            }
        }
    }

    /// Takes in a VMI watch event; returns the keys of its migrations.
    pub fn on_vmi_event(&self, event: Event<VirtualMachineInstance>) -> Vec<String> {
        let mut guard = self.known();
        let known = &mut *guard;
        let key = match event {
            Event::Apply(vmi) | Event::InitApply(vmi) => Self::store_vmi(known, &vmi),
            Event::Delete(vmi) => {
                let key = vmi.key();
                known.vmis.remove(&key);
                known.evacuations.remove(&key);
                key
            }
            Event::Init => {
                known.vmi_list.start();
                return Vec::new();
            }
            Event::InitDone => {
                for key in known.vmi_list.finish_sweep(&mut known.vmis) {
                    known.evacuations.remove(&key);
                }
                return known.migrations.keys().cloned().collect();
            }
        };
        Self::migrations_of(known, &key)
    }

    /// Keeps a VMI this controller wrote, unless the watch already showed it as new or newer
    /// ([`crate::own_writes`]), or showed it deleted.
    pub(super) fn on_vmi_written(&self, vmi: &VirtualMachineInstance) {
        let mut known = self.known();
        let cached = known
            .vmis
            .get(&vmi.key())
            .map(|cached| cached.get().and_then(|cached| cached.metadata.resource_version));
        if cached.is_some_and(|cached| replaces_cached(vmi.metadata.resource_version.as_deref(), cached.as_deref())) {
            Self::store_vmi(&mut known, vmi);
        }
    }

    /// Keeps a migration this controller created, unless the watch already showed it as new or
    /// newer ([`crate::own_writes`]).
    pub(super) fn on_migration_created(&self, migration: &VirtualMachineInstanceMigration) {
        let key = migration_key(migration);
        let mut known = self.known();
        let cached = known
            .migrations
            .get(&key)
            .map(|cached| cached.get().and_then(|cached| cached.metadata.resource_version));
        if let Some(cached) = cached
            && !replaces_cached(migration.metadata.resource_version.as_deref(), cached.as_deref())
        {
            return;
        }
        known.migration_list.saw(&key);
        known.migrations.insert(key, Compact::new(migration));
    }

    /// Keeps `vmi` and its evacuation mark; returns its key.
    fn store_vmi(known: &mut Known, vmi: &VirtualMachineInstance) -> String {
        let key = vmi.key();
        known.vmi_list.saw(&key);
        known.vmis.insert(key.clone(), Compact::new(vmi));
        let mark = vmi
            .status
            .as_ref()
            .and_then(|s| s.evacuation_node_name.clone())
            .filter(|n| !n.is_empty());
        match mark {
            Some(node) => known.evacuations.insert(key.clone(), node),
            None => known.evacuations.remove(&key),
        };
        key
    }

    /// Takes in a launcher pod watch event; returns the keys of its VMI's migrations.
    pub fn on_pod_event(&self, event: Event<Pod>) -> Vec<String> {
        let (pod, gone) = match event {
            Event::Apply(pod) | Event::InitApply(pod) => (pod, false),
            Event::Delete(pod) => (pod, true),
            Event::Init => {
                self.known().pod_list.start();
                return Vec::new();
            }
            Event::InitDone => {
                let mut guard = self.known();
                let known = &mut *guard;
                known.pod_list.finish_sweep_nested(&mut known.pods);
                return known.migrations.keys().cloned().collect();
            }
        };
        let Some(vmi_key) = owner_key(&pod) else {
            return Vec::new();
        };
        let mut known = self.known();
        Self::store_pod(&mut known, &vmi_key, pod_view(&pod), gone);
        Self::migrations_of(&known, &vmi_key)
    }

    /// Keeps a target pod this controller created, unless the watch already showed it as new
    /// or newer ([`crate::own_writes`]): a scheduler's mark must not be lost to the creation's
    /// answer.
    pub(super) fn on_pod_created(&self, pod: &Pod) {
        let Some(vmi_key) = owner_key(pod) else { return };
        let view = pod_view(pod);
        let mut known = self.known();
        if replaces_cached_pod(known.pods.get(&vmi_key), &view) {
            Self::store_pod(&mut known, &vmi_key, view, false);
        }
    }

    fn store_pod(known: &mut Known, vmi_key: &str, view: PodView, gone: bool) {
        known.pod_list.saw(&format!("{vmi_key}/{}", view.name));
        let pods = known.pods.entry(vmi_key.to_owned()).or_default();
        if gone {
            pods.remove(&view.name);
        } else {
            pods.insert(view.name.clone(), view);
        }
        if pods.is_empty() {
            known.pods.remove(vmi_key);
        }
    }
}

#[cfg(test)]
mod tests;
