//! [`Objects`] over the API server.

use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::{Api, Client};

use super::{Desired, Objects, ObjectsError, describe};

/// The API server, with the field manager the operator applies as.
#[derive(Clone)]
pub struct KubeObjects {
    client: Client,
    field_manager: String,
}

impl std::fmt::Debug for KubeObjects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeObjects")
            .field("field_manager", &self.field_manager)
            .finish_non_exhaustive()
    }
}

impl KubeObjects {
    /// Applies as `field_manager` (the operator's name).
    #[must_use]
    pub fn new(client: Client, field_manager: &str) -> Self {
        Self {
            client,
            field_manager: field_manager.to_owned(),
        }
    }

    fn api(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(namespace) => Api::namespaced_with(self.client.clone(), namespace, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }
}

fn failed(operation: String, error: &kube::Error) -> ObjectsError {
    ObjectsError::Api {
        operation,
        message: error.to_string(),
    }
}

impl Objects for KubeObjects {
    async fn apply(&self, desired: &Desired) -> Result<(), ObjectsError> {
        let params = PatchParams::apply(&self.field_manager).force();
        self.api(&desired.resource, desired.namespace.as_deref())
            .patch(&desired.name, &params, &Patch::Apply(&desired.object))
            .await
            .map(|_| ())
            .map_err(|e| failed(format!("applying {}", desired.describe()), &e))
    }

    async fn get(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<DynamicObject>, ObjectsError> {
        self.api(resource, namespace)
            .get_opt(name)
            .await
            .map_err(|e| failed(format!("reading {}", describe(&resource.kind, namespace, name)), &e))
    }

    async fn list(&self, resource: &ApiResource) -> Result<Vec<DynamicObject>, ObjectsError> {
        self.api(resource, None)
            .list(&ListParams::default())
            .await
            .map(|list| list.items)
            .map_err(|e| failed(format!("listing {}", resource.plural), &e))
    }

    /// By server-side apply of the finalizer alone, under the operator's field manager: applying
    /// it owns that entry of the set, and applying none removes the entry it owned.
    async fn set_finalizer(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        finalizer: &str,
        present: bool,
    ) -> Result<(), ObjectsError> {
        let finalizers: Vec<&str> = if present { vec![finalizer] } else { Vec::new() };
        let mut body = serde_json::json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": name, "finalizers": finalizers },
        });
        if let Some(namespace) = namespace {
            body["metadata"]["namespace"] = serde_json::json!(namespace);
        }
        let params = PatchParams::apply(&format!("{}-finalizer", self.field_manager)).force();
        self.api(resource, namespace)
            .patch(name, &params, &Patch::Apply(&body))
            .await
            .map(|_| ())
            .map_err(|e| {
                failed(
                    format!(
                        "{} the finalizer {finalizer} of {}",
                        if present { "adding" } else { "removing" },
                        describe(&resource.kind, namespace, name)
                    ),
                    &e,
                )
            })
    }

    async fn delete(&self, resource: &ApiResource, namespace: Option<&str>, name: &str) -> Result<(), ObjectsError> {
        match self
            .api(resource, namespace)
            .delete(name, &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(failed(
                format!("deleting {}", describe(&resource.kind, namespace, name)),
                &e,
            )),
        }
    }

    async fn write_status(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        status: serde_json::Value,
    ) -> Result<(), ObjectsError> {
        let patch = serde_json::json!({ "status": status });
        self.api(resource, namespace)
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| {
                failed(
                    format!("writing the status of {}", describe(&resource.kind, namespace, name)),
                    &e,
                )
            })
    }
}
