//! [`Objects`] in memory, for tests: objects by `Kind namespace/name`, every write recorded, and
//! a chosen object's apply made to fail. Every write moves the object's `resourceVersion` on, as
//! the API server's do.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicObject};

use super::{Desired, Objects, ObjectsError, describe};

/// What the fake holds.
#[derive(Debug, Default)]
pub struct State {
    /// Objects by `Kind namespace/name` (or `Kind name`).
    pub objects: BTreeMap<String, DynamicObject>,
    /// Every write, in order: `apply Kind ns/name`, `replace Kind name`, `delete Kind name`,
    /// `status Kind name`, or
    /// `finalize F Kind name` and `unfinalize F Kind name`.
    pub writes: Vec<String>,
    /// Applying this object (`Kind namespace/name`) fails with the API server's message.
    pub refuse_apply: Option<(String, String)>,
}

/// The fake API server.
#[derive(Debug, Default)]
pub struct FakeObjects {
    state: Mutex<State>,
}

impl FakeObjects {
    /// What it holds now.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts an object in place, as if another writer (a kubelet's status, a test) made it.
    pub fn put(&self, desired: &Desired) {
        self.state().objects.insert(desired.describe(), desired.object.clone());
    }
}

/// The `resourceVersion` after a write to an object at `meta` (none yet: `1`), as the API server
/// moves it on every write.
fn next_version(meta: Option<&ObjectMeta>) -> String {
    let now = meta
        .and_then(|m| m.resource_version.as_deref())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    (now + 1).to_string()
}

impl Objects for FakeObjects {
    async fn apply(&self, desired: &Desired) -> Result<(), ObjectsError> {
        let key = desired.describe();
        let mut state = self.state();
        if let Some((refused, message)) = &state.refuse_apply
            && *refused == key
        {
            return Err(ObjectsError::Api {
                operation: format!("applying {key}"),
                message: message.clone(),
            });
        }
        state.writes.push(format!("apply {key}"));
        // Server-side apply keeps what other managers own: here, the status.
        let mut object = desired.object.clone();
        let old = state.objects.get(&key);
        if let Some(status) = old.and_then(|old| old.data.get("status")).cloned() {
            object.data["status"] = status;
        }
        object.metadata.resource_version = Some(next_version(old.map(|o| &o.metadata)));
        // As the API server: the generation moves on when the spec changes.
        let spec_changed = old.is_none_or(|old| old.data.get("spec") != object.data.get("spec"));
        let generation = old.and_then(|o| o.metadata.generation).unwrap_or(0);
        object.metadata.generation = Some(if spec_changed { generation + 1 } else { generation });
        state.objects.insert(key, object);
        Ok(())
    }

    async fn replace(&self, desired: &Desired, resource_version: &str) -> Result<(), ObjectsError> {
        let key = desired.describe();
        let mut state = self.state();
        if let Some((refused, message)) = &state.refuse_apply
            && *refused == key
        {
            return Err(ObjectsError::Api {
                operation: format!("replacing {key}"),
                message: message.clone(),
            });
        }
        let Some(old) = state.objects.get(&key) else {
            return Err(ObjectsError::Api {
                operation: format!("replacing {key}"),
                message: "not found".to_owned(),
            });
        };
        if old.metadata.resource_version.as_deref() != Some(resource_version) {
            return Err(ObjectsError::Conflict {
                operation: format!("replacing {key}"),
            });
        }
        let mut object = desired.object.clone();
        // The status subresource is not written by a replace.
        if let Some(status) = old.data.get("status").cloned() {
            object.data["status"] = status;
        }
        let spec_changed = old.data.get("spec") != object.data.get("spec");
        let generation = old.metadata.generation.unwrap_or(0);
        object.metadata.generation = Some(if spec_changed { generation + 1 } else { generation });
        object.metadata.resource_version = Some(next_version(Some(&old.metadata)));
        object.metadata.uid.clone_from(&old.metadata.uid);
        state.writes.push(format!("replace {key}"));
        state.objects.insert(key, object);
        Ok(())
    }

    async fn get(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<DynamicObject>, ObjectsError> {
        Ok(self
            .state()
            .objects
            .get(&describe(&resource.kind, namespace, name))
            .cloned())
    }

    async fn list(&self, resource: &ApiResource) -> Result<Vec<DynamicObject>, ObjectsError> {
        let prefix = format!("{} ", resource.kind);
        Ok(self
            .state()
            .objects
            .iter()
            .filter(|(key, _)| key.starts_with(&prefix))
            .map(|(_, object)| object.clone())
            .collect())
    }

    async fn set_finalizer(
        &self,
        resource: &ApiResource,
        meta: &ObjectMeta,
        finalizer: &str,
        present: bool,
    ) -> Result<(), ObjectsError> {
        let key = describe(
            &resource.kind,
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        );
        let mut state = self.state();
        state.writes.push(format!(
            "{} {finalizer} {key}",
            if present { "finalize" } else { "unfinalize" }
        ));
        let Some(object) = state.objects.get_mut(&key) else {
            return Err(ObjectsError::Api {
                operation: format!("setting the finalizer of {key}"),
                message: "not found".to_owned(),
            });
        };
        // The API server's precondition: the object is still the one `meta` read.
        if object.metadata.uid != meta.uid || object.metadata.resource_version != meta.resource_version {
            return Err(ObjectsError::Api {
                operation: format!("setting the finalizer of {key}"),
                message: "the object has been modified; please apply your changes to the latest version and try again"
                    .to_owned(),
            });
        }
        object.metadata.finalizers = Some(super::finalizers_with(meta, finalizer, present));
        object.metadata.resource_version = Some(next_version(Some(&object.metadata)));
        Ok(())
    }

    async fn delete(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Result<(), ObjectsError> {
        let key = describe(&resource.kind, namespace, name);
        let mut state = self.state();
        state.writes.push(format!("delete {key}"));
        state.objects.remove(&key);
        Ok(())
    }

    async fn write_status(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        status: serde_json::Value,
    ) -> Result<(), ObjectsError> {
        let key = describe(&resource.kind, namespace, name);
        let mut state = self.state();
        state.writes.push(format!("status {key}"));
        match state.objects.get_mut(&key) {
            Some(object) => {
                object.data["status"] = status;
                object.metadata.resource_version = Some(next_version(Some(&object.metadata)));
                Ok(())
            }
            None => Err(ObjectsError::Api {
                operation: format!("writing the status of {key}"),
                message: "not found".to_owned(),
            }),
        }
    }
}
