//! An in-memory [`SubresourceCluster`] for tests and benchmarks: objects are JSON, patches are
//! applied the way the API server applies them (a `test` for `null` holds on a missing field), and
//! every write is recorded so tests can assert exactly what was sent.

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::apps::v1::ControllerRevision;
use kubevirt_api::instancetype::{InstancetypeLookup, KindNames, LookupError};
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};
use serde_json::Value;

use crate::admission::lookup::{EvictionLookup, MigrationLookup, VolumeLookup, VolumeObject};

use super::{ClusterError, PatchTarget, SubresourceCluster};

/// One write the fake received.
#[derive(Clone, Debug, PartialEq)]
pub enum Recorded {
    /// A JSON patch.
    Patch {
        /// Its target.
        target: PatchTarget,
        /// `namespace/name`.
        key: String,
        /// The patch.
        patch: Value,
        /// Whether it was a dry run.
        dry_run: bool,
    },
    /// A migration created.
    CreateMigration {
        /// Its namespace.
        namespace: String,
        /// The migration as sent.
        migration: Value,
        /// Whether it was a dry run.
        dry_run: bool,
    },
    /// A launcher pod deletion for a VMI uid.
    DeleteLauncherPod {
        /// The VMI's uid.
        vmi_uid: String,
        /// Whether it was a dry run.
        dry_run: bool,
    },
}

#[derive(Debug, Default)]
struct State {
    vms: BTreeMap<String, Value>,
    vmis: BTreeMap<String, Value>,
    /// Pods by `namespace/name`.
    pods: BTreeMap<String, Value>,
    handlers: BTreeMap<String, String>,
    writes: Vec<Recorded>,
    denied_users: Vec<String>,
    reviews: Vec<Value>,
    /// Instance types, preferences and ControllerRevisions by `<plural>/<namespace>/<name>`.
    instancetypes: BTreeMap<String, Value>,
    /// PVCs, DataVolumes and DataSources by `<kind>/<namespace>/<name>`.
    volume_objects: BTreeMap<String, Value>,
    /// Migrations by `namespace/name`.
    migrations: BTreeMap<String, Value>,
    /// Why every migration creation fails, when set (an admission webhook's denial).
    migration_refusal: Option<String>,
}

/// The fake API server.
#[derive(Debug, Default)]
pub struct FakeSubresourceCluster {
    state: Mutex<State>,
}

fn key(ns: &str, name: &str) -> String {
    format!("{ns}/{name}")
}

fn ns_name(object: &Value) -> String {
    let meta = &object["metadata"];
    key(
        meta["namespace"].as_str().unwrap_or("default"),
        meta["name"].as_str().unwrap_or_default(),
    )
}

/// Applies a JSON patch as the API server does: a `test` whose value is `null` holds when the
/// path is missing, and a `replace` of a missing object member adds it.
fn apply(doc: &mut Value, patch: &Value) -> Result<(), ClusterError> {
    let ops = patch
        .as_array()
        .ok_or_else(|| ClusterError::Failed("a JSON patch is an array".to_owned()))?;
    let mut candidate = doc.clone();
    for op in ops {
        let missing_null_test = op["op"] == "test"
            && op["value"].is_null()
            && op["path"].as_str().is_some_and(|p| candidate.pointer(p).is_none());
        if missing_null_test {
            continue;
        }
        let mut op = op.clone();
        let target = op["path"].as_str().unwrap_or_default().to_owned();
        let parent_is_object = target
            .rsplit_once('/')
            .is_some_and(|(parent, _)| candidate.pointer(parent).is_some_and(Value::is_object));
        if op["op"] == "replace" && candidate.pointer(&target).is_none() && parent_is_object {
            op["op"] = Value::from("add");
        }
        let one: json_patch::Patch = serde_json::from_value(Value::Array(vec![op.clone()]))
            .map_err(|e| ClusterError::Failed(format!("bad JSON patch: {e}")))?;
        json_patch::patch(&mut candidate, &one).map_err(|e| {
            if op["op"] == "test" {
                ClusterError::Conflict(format!("jsonpatch test operation does not apply: {e}"))
            } else {
                ClusterError::Failed(e.to_string())
            }
        })?;
    }
    *doc = candidate;
    Ok(())
}

impl FakeSubresourceCluster {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores a VM (JSON as the API server returns it).
    pub fn put_vm(&self, vm: Value) {
        let mut state = self.lock();
        state.vms.insert(ns_name(&vm), vm);
    }

    /// Stores a VMI.
    pub fn put_vmi(&self, vmi: Value) {
        let mut state = self.lock();
        state.vmis.insert(ns_name(&vmi), vmi);
    }

    /// Stores an instance type or preference of `kind` (the namespace is ignored for cluster-wide
    /// kinds).
    pub fn put_instancetype_object(&self, kind: &KindNames, namespace: &str, object: Value) {
        let scope = if kind.namespaced { namespace } else { "" };
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        self.lock()
            .instancetypes
            .insert(format!("{}/{scope}/{name}", kind.plural), object);
    }

    /// Stores a ControllerRevision (JSON).
    pub fn put_revision(&self, namespace: &str, revision: Value) {
        let name = revision["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        self.lock()
            .instancetypes
            .insert(format!("controllerrevisions/{namespace}/{name}"), revision);
    }

    /// Stores a PVC, DataVolume or DataSource.
    pub fn put_volume_object(&self, object: VolumeObject, namespace: &str, value: Value) {
        let name = value["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        self.lock()
            .volume_objects
            .insert(format!("{}/{namespace}/{name}", object.kind()), value);
    }

    /// Stores a migration.
    pub fn put_migration(&self, migration: Value) {
        let name = ns_name(&migration);
        self.lock().migrations.insert(name, migration);
    }

    /// Makes every migration creation fail with `message`, as a webhook's denial would.
    pub fn refuse_migrations(&self, message: &str) {
        self.lock().migration_refusal = Some(message.to_owned());
    }

    /// The stored migrations.
    #[must_use]
    pub fn migrations(&self) -> Vec<Value> {
        self.lock().migrations.values().cloned().collect()
    }

    /// Registers the virt-handler pod IP of a node.
    pub fn put_handler(&self, node: &str, address: &str) {
        self.lock().handlers.insert(node.to_owned(), address.to_owned());
    }

    /// SubjectAccessReviews for `user` are denied from now on.
    pub fn deny_user(&self, user: &str) {
        self.lock().denied_users.push(user.to_owned());
    }

    /// Every SubjectAccessReview spec asked, in order.
    #[must_use]
    pub fn reviews(&self) -> Vec<Value> {
        self.lock().reviews.clone()
    }

    /// The stored VM, as JSON.
    #[must_use]
    pub fn vm(&self, ns: &str, name: &str) -> Option<Value> {
        self.lock().vms.get(&key(ns, name)).cloned()
    }

    /// Stores a pod (JSON as the API server returns it).
    pub fn put_pod(&self, pod: Value) {
        let key = ns_name(&pod);
        self.lock().pods.insert(key, pod);
    }

    /// The stored VMI, as JSON.
    #[must_use]
    pub fn vmi(&self, ns: &str, name: &str) -> Option<Value> {
        self.lock().vmis.get(&key(ns, name)).cloned()
    }

    /// Every write so far, in order.
    #[must_use]
    pub fn writes(&self) -> Vec<Recorded> {
        self.lock().writes.clone()
    }
}

fn decode<T: serde::de::DeserializeOwned>(value: Option<Value>) -> Result<Option<T>, ClusterError> {
    value
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| ClusterError::Failed(format!("stored object does not decode: {e}")))
}

impl SubresourceCluster for FakeSubresourceCluster {
    async fn get_vm(&self, ns: &str, name: &str) -> Result<Option<VirtualMachine>, ClusterError> {
        decode(self.vm(ns, name))
    }

    async fn get_vmi(&self, ns: &str, name: &str) -> Result<Option<VirtualMachineInstance>, ClusterError> {
        decode(self.vmi(ns, name))
    }

    async fn patch(
        &self,
        target: PatchTarget,
        ns: &str,
        name: &str,
        patch: &Value,
        dry_run: bool,
    ) -> Result<(), ClusterError> {
        let mut state = self.lock();
        state.writes.push(Recorded::Patch {
            target,
            key: key(ns, name),
            patch: patch.clone(),
            dry_run,
        });
        let store = match target {
            PatchTarget::Vm | PatchTarget::VmStatus => &mut state.vms,
            PatchTarget::Vmi | PatchTarget::VmiStatus => &mut state.vmis,
        };
        let Some(doc) = store.get_mut(&key(ns, name)) else {
            return Err(ClusterError::Failed(format!("{ns}/{name} not found")));
        };
        let mut patched = doc.clone();
        apply(&mut patched, patch)?;
        if !dry_run {
            *doc = patched;
        }
        Ok(())
    }

    async fn delete_launcher_pod(&self, _ns: &str, vmi_uid: &str, dry_run: bool) -> Result<(), ClusterError> {
        self.lock().writes.push(Recorded::DeleteLauncherPod {
            vmi_uid: vmi_uid.to_owned(),
            dry_run,
        });
        Ok(())
    }

    async fn review_access(&self, spec: &Value) -> Result<Result<(), String>, ClusterError> {
        let mut state = self.lock();
        state.reviews.push(spec.clone());
        let user = spec["user"].as_str().unwrap_or_default();
        Ok(if state.denied_users.iter().any(|u| u == user) {
            Err(format!("{user} may not"))
        } else {
            Ok(())
        })
    }

    async fn create_migration(
        &self,
        ns: &str,
        migration: &VirtualMachineInstanceMigration,
        dry_run: bool,
    ) -> Result<VirtualMachineInstanceMigration, ClusterError> {
        let mut state = self.lock();
        let sent = serde_json::to_value(migration).map_err(|e| ClusterError::Failed(e.to_string()))?;
        state.writes.push(Recorded::CreateMigration {
            namespace: ns.to_owned(),
            migration: sent,
            dry_run,
        });
        if let Some(refusal) = state.migration_refusal.clone() {
            return Err(ClusterError::Failed(refusal));
        }
        let mut stored = migration.clone();
        let prefix = migration.metadata.generate_name.clone().unwrap_or_default();
        let number = state.migrations.len() + 1;
        stored
            .metadata
            .name
            .get_or_insert_with(|| format!("{prefix}{number:05}"));
        stored.metadata.namespace = Some(ns.to_owned());
        if !dry_run {
            let name = stored.metadata.name.clone().unwrap_or_default();
            let value = serde_json::to_value(&stored).map_err(|e| ClusterError::Failed(e.to_string()))?;
            state.migrations.insert(key(ns, &name), value);
        }
        Ok(stored)
    }

    async fn handler_address(&self, node: &str) -> Result<Option<String>, ClusterError> {
        Ok(self.lock().handlers.get(node).cloned())
    }
}

impl InstancetypeLookup for FakeSubresourceCluster {
    async fn object(&self, kind: &KindNames, namespace: &str, name: &str) -> Result<Option<Value>, LookupError> {
        let scope = if kind.namespaced { namespace } else { "" };
        Ok(self
            .lock()
            .instancetypes
            .get(&format!("{}/{scope}/{name}", kind.plural))
            .cloned())
    }

    async fn revision(&self, namespace: &str, name: &str) -> Result<Option<ControllerRevision>, LookupError> {
        self.lock()
            .instancetypes
            .get(&format!("controllerrevisions/{namespace}/{name}"))
            .map(|r| serde_json::from_value(r.clone()).map_err(|e| LookupError(e.to_string())))
            .transpose()
    }
}

impl MigrationLookup for FakeSubresourceCluster {
    async fn migrating_vmi(&self, namespace: &str, name: &str) -> Result<Option<VirtualMachineInstance>, LookupError> {
        decode(self.lock().vmis.get(&key(namespace, name)).cloned()).map_err(|e| LookupError(e.to_string()))
    }

    async fn migrations_of(
        &self,
        namespace: &str,
        vmi_name: &str,
    ) -> Result<Vec<VirtualMachineInstanceMigration>, LookupError> {
        let label = kubevirt_api::well_known::labels::MIGRATION_VMI_NAME;
        self.lock()
            .migrations
            .values()
            .filter(|m| m["metadata"]["namespace"] == namespace && m["metadata"]["labels"][label] == vmi_name)
            .map(|m| serde_json::from_value(m.clone()).map_err(|e| LookupError(e.to_string())))
            .collect()
    }
}

impl EvictionLookup for FakeSubresourceCluster {
    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<k8s_openapi::api::core::v1::Pod>, LookupError> {
        decode(self.lock().pods.get(&key(namespace, name)).cloned()).map_err(|e| LookupError(e.to_string()))
    }

    async fn mark_for_evacuation(
        &self,
        namespace: &str,
        vmi_name: &str,
        node: &str,
        dry_run: bool,
    ) -> Result<(), LookupError> {
        super::mark_for_evacuation(self, namespace, vmi_name, node, dry_run).await
    }
}

impl VolumeLookup for FakeSubresourceCluster {
    async fn volume_object(
        &self,
        object: VolumeObject,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Value>, LookupError> {
        Ok(self
            .lock()
            .volume_objects
            .get(&format!("{}/{namespace}/{name}", object.kind()))
            .cloned())
    }
}
