//! [`Objects`] over the API server.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
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

    async fn replace(&self, desired: &Desired, resource_version: &str) -> Result<(), ObjectsError> {
        let params = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        let mut object = desired.object.clone();
        object.metadata.resource_version = Some(resource_version.to_owned());
        self.api(&desired.resource, desired.namespace.as_deref())
            .replace(&desired.name, &params, &object)
            .await
            .map(|_| ())
            .map_err(|e| match &e {
                kube::Error::Api(status) if status.code == 409 => ObjectsError::Conflict {
                    operation: format!("replacing {}", desired.describe()),
                },
                _ => failed(format!("replacing {}", desired.describe()), &e),
            })
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

    /// By a merge patch of the whole list with the `uid` and `resourceVersion` it was read at:
    /// the API server refuses it (409) when the object changed since, and the list is the one
    /// read, so no other writer's finalizer is lost or restored.
    async fn set_finalizer(
        &self,
        resource: &ApiResource,
        meta: &ObjectMeta,
        finalizer: &str,
        present: bool,
    ) -> Result<(), ObjectsError> {
        let namespace = meta.namespace.as_deref();
        let name = meta.name.as_deref().unwrap_or_default();
        // Without both the patch would hold no precondition (a null clears the field).
        if meta.uid.is_none() || meta.resource_version.is_none() {
            return Err(ObjectsError::Api {
                operation: format!(
                    "setting the finalizer {finalizer} of {}",
                    describe(&resource.kind, namespace, name)
                ),
                message: "the object read has no uid or resourceVersion".to_owned(),
            });
        }
        let patch = serde_json::json!({
            "metadata": {
                "uid": meta.uid,
                "resourceVersion": meta.resource_version,
                "finalizers": super::finalizers_with(meta, finalizer, present),
            },
        });
        self.api(resource, namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
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
