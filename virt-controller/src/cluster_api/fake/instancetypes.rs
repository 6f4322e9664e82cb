//! The fake's instance types, preferences and ControllerRevisions.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::ControllerRevision;
use kubevirt_api::instancetype::{InstancetypeLookup, KindNames, LookupError};
use serde_json::Value;

use super::{ApiError, FakeControllerApi};

/// Objects by `<plural>/<namespace or empty>/<name>`, revisions by `<namespace>/<name>`.
#[derive(Debug, Default)]
pub(super) struct Objects {
    objects: BTreeMap<String, Value>,
    revisions: BTreeMap<String, ControllerRevision>,
    uid_counter: u64,
}

fn object_key(kind: &KindNames, namespace: &str, name: &str) -> String {
    let scope = if kind.namespaced { namespace } else { "" };
    format!("{}/{scope}/{name}", kind.plural)
}

impl Objects {
    pub(super) fn create_revision(&mut self, revision: &ControllerRevision) -> Result<ControllerRevision, ApiError> {
        let key = format!(
            "{}/{}",
            revision.metadata.namespace.as_deref().unwrap_or("default"),
            revision.metadata.name.as_deref().unwrap_or_default()
        );
        if self.revisions.contains_key(&key) {
            return Err(ApiError::AlreadyExists(format!("create ControllerRevision {key}")));
        }
        self.revisions.insert(key, revision.clone());
        Ok(revision.clone())
    }
}

impl FakeControllerApi {
    /// Creates or replaces an instance type or preference of `kind` (JSON with its spec), as a user
    /// would: it gets a UID and generation 1, or the next generation when it changes.
    pub fn apply_instancetype_object(&self, kind: &KindNames, namespace: &str, mut object: Value) {
        let mut state = self.lock();
        let store = &mut state.instancetypes;
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        let key = object_key(kind, namespace, &name);
        let previous = store.objects.get(&key).cloned();
        store.uid_counter += 1;
        let uid = previous
            .as_ref()
            .and_then(|p| p["metadata"]["uid"].as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{}-uid-{}", kind.singular, store.uid_counter));
        let generation = previous
            .as_ref()
            .map_or(1, |p| p["metadata"]["generation"].as_i64().unwrap_or(1) + 1);
        object["apiVersion"] = Value::from(format!(
            "{}/{}",
            kubevirt_api::instancetype::GROUP,
            kubevirt_api::instancetype::VERSION
        ));
        object["kind"] = Value::from(kind.kind);
        object["metadata"]["uid"] = Value::from(uid);
        object["metadata"]["generation"] = Value::from(generation);
        if kind.namespaced {
            object["metadata"]["namespace"] = Value::from(namespace);
        }
        store.objects.insert(key, object);
    }

    /// The stored ControllerRevisions, by `<namespace>/<name>`.
    #[must_use]
    pub fn revisions(&self) -> BTreeMap<String, ControllerRevision> {
        self.lock().instancetypes.revisions.clone()
    }
}

impl InstancetypeLookup for FakeControllerApi {
    async fn object(&self, kind: &KindNames, namespace: &str, name: &str) -> Result<Option<Value>, LookupError> {
        Ok(self
            .lock()
            .instancetypes
            .objects
            .get(&object_key(kind, namespace, name))
            .cloned())
    }

    async fn revision(&self, namespace: &str, name: &str) -> Result<Option<ControllerRevision>, LookupError> {
        Ok(self
            .lock()
            .instancetypes
            .revisions
            .get(&format!("{namespace}/{name}"))
            .cloned())
    }
}
