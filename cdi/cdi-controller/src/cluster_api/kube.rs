//! [`CdiApi`] on the API server.

use std::collections::BTreeMap;

use cdi_api::data_volume::DataVolumeStatus;
use cdi_api::{CDIConfig, DataSource, DataVolume, StorageProfile, VolumeImportSource, VolumeUploadSource};

use crate::import_plan::populator::{PopulationSource, SourceKind};
use k8s_openapi::api::core::v1::{Event, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::storage::v1::{CSIDriver, StorageClass};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use super::{ApiError, CdiApi, EventSubject};

/// The component named in events.
pub const COMPONENT: &str = "datavolume-import-controller";
/// The name of the one CDIConfig.
pub const CDI_CONFIG: &str = "config";

/// The API server, through `client`.
#[derive(Clone)]
pub struct KubeCdiApi {
    client: Client,
}

impl std::fmt::Debug for KubeCdiApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeCdiApi").finish_non_exhaustive()
    }
}

impl KubeCdiApi {
    /// The API server behind `client`.
    #[must_use]
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn failed(operation: String) -> impl FnOnce(kube::Error) -> ApiError {
    move |source| ApiError::Kube { operation, source }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// Whether `existing` has the controlling owner `wanted` names.
fn same_owner(existing: &ObjectMeta, wanted: &ObjectMeta) -> bool {
    let controller = |meta: &ObjectMeta| {
        meta.owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| o.uid.clone())
    };
    controller(wanted).is_some() && controller(existing) == controller(wanted)
}

/// `Ok(None)` for a 404.
fn optional<T>(result: Result<T, kube::Error>, operation: String) -> Result<Option<T>, ApiError> {
    match result {
        Ok(found) => Ok(Some(found)),
        Err(e) if is_status(&e, 404) => Ok(None),
        Err(e) => Err(failed(operation)(e)),
    }
}

/// Whether the namespaced object `name` of kind `K` exists.
async fn exists<K>(client: &Client, namespace: &str, name: &str, operation: String) -> Result<bool, ApiError>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let found = optional(
        Api::<K>::namespaced(client.clone(), namespace).get(name).await,
        operation,
    )?;
    Ok(found.is_some())
}

/// `Ok(())` for a 409 on create (the deterministic name is taken: by our own earlier create).
fn created<T>(result: Result<T, kube::Error>, operation: String) -> Result<(), ApiError> {
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_status(&e, 409) => Ok(()),
        Err(e) => Err(failed(operation)(e)),
    }
}

impl KubeCdiApi {
    /// Deletes the `what` `namespace/name`; one not there counts as deleted.
    async fn delete<K>(&self, namespace: &str, name: &str, what: &str) -> Result<(), ApiError>
    where
        K: kube::Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
        K::DynamicType: Default,
    {
        let api = Api::<K>::namespaced(self.client.clone(), namespace);
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(failed(format!("delete {what} {namespace}/{name}"))(e)),
        }
    }
}

impl CdiApi for KubeCdiApi {
    async fn data_volume(&self, namespace: &str, name: &str) -> Result<Option<DataVolume>, ApiError> {
        let api = Api::<DataVolume>::namespaced(self.client.clone(), namespace);
        optional(api.get(name).await, format!("get DataVolume {namespace}/{name}"))
    }

    async fn data_source(&self, namespace: &str, name: &str) -> Result<Option<DataSource>, ApiError> {
        let api = Api::<DataSource>::namespaced(self.client.clone(), namespace);
        optional(api.get(name).await, format!("get DataSource {namespace}/{name}"))
    }

    async fn claim(&self, namespace: &str, name: &str) -> Result<Option<PersistentVolumeClaim>, ApiError> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace);
        optional(api.get(name).await, format!("get claim {namespace}/{name}"))
    }

    async fn pod(&self, namespace: &str, name: &str) -> Result<Option<Pod>, ApiError> {
        let api = Api::<Pod>::namespaced(self.client.clone(), namespace);
        optional(api.get(name).await, format!("get pod {namespace}/{name}"))
    }

    async fn pods(&self, namespace: &str) -> Result<Vec<Pod>, ApiError> {
        let api = Api::<Pod>::namespaced(self.client.clone(), namespace);
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(failed(format!("list pods in {namespace}")))?;
        Ok(list.items)
    }

    async fn storage_classes(&self) -> Result<Vec<StorageClass>, ApiError> {
        let api = Api::<StorageClass>::all(self.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(failed("list storage classes".to_owned()))?;
        Ok(list.items)
    }

    async fn storage_profile(&self, name: &str) -> Result<Option<StorageProfile>, ApiError> {
        let api = Api::<StorageProfile>::all(self.client.clone());
        optional(api.get(name).await, format!("get storage profile {name}"))
    }

    async fn persistent_volumes(&self) -> Result<Vec<PersistentVolume>, ApiError> {
        let api = Api::<PersistentVolume>::all(self.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(failed("list persistent volumes".to_owned()))?;
        Ok(list.items)
    }

    async fn persistent_volume(&self, name: &str) -> Result<Option<PersistentVolume>, ApiError> {
        let api = Api::<PersistentVolume>::all(self.client.clone());
        optional(api.get(name).await, format!("get persistent volume {name}"))
    }

    async fn csi_driver_exists(&self, name: &str) -> Result<bool, ApiError> {
        let api = Api::<CSIDriver>::all(self.client.clone());
        optional(api.get(name).await, format!("get CSIDriver {name}")).map(|found| found.is_some())
    }

    async fn population_source_exists(&self, kind: SourceKind, namespace: &str, name: &str) -> Result<bool, ApiError> {
        let what = format!("get {} {namespace}/{name}", kind.kind());
        match kind {
            SourceKind::Import => exists::<VolumeImportSource>(&self.client, namespace, name, what).await,
            SourceKind::Upload => exists::<VolumeUploadSource>(&self.client, namespace, name, what).await,
        }
    }

    async fn population_source(
        &self,
        kind: SourceKind,
        namespace: &str,
        name: &str,
    ) -> Result<Option<PopulationSource>, ApiError> {
        let what = format!("get {} {namespace}/{name}", kind.kind());
        Ok(match kind {
            SourceKind::Import => optional(
                Api::<VolumeImportSource>::namespaced(self.client.clone(), namespace)
                    .get(name)
                    .await,
                what,
            )?
            .map(|source| PopulationSource::Import(Box::new(source))),
            SourceKind::Upload => optional(
                Api::<VolumeUploadSource>::namespaced(self.client.clone(), namespace)
                    .get(name)
                    .await,
                what,
            )?
            .map(|source| PopulationSource::Upload(Box::new(source))),
        })
    }

    async fn create_population_source(&self, source: &PopulationSource) -> Result<(), ApiError> {
        let namespace = source.metadata().namespace.clone().unwrap_or_default();
        let name = source.metadata().name.clone().unwrap_or_default();
        let what = format!("create {} {namespace}/{name}", source.kind().kind());
        let params = PostParams::default();
        match source {
            PopulationSource::Import(source) => created(
                Api::<VolumeImportSource>::namespaced(self.client.clone(), &namespace)
                    .create(&params, source)
                    .await,
                what,
            ),
            PopulationSource::Upload(source) => created(
                Api::<VolumeUploadSource>::namespaced(self.client.clone(), &namespace)
                    .create(&params, source)
                    .await,
                what,
            ),
        }
    }

    async fn delete_population_source(&self, kind: SourceKind, namespace: &str, name: &str) -> Result<(), ApiError> {
        match kind {
            SourceKind::Import => self.delete::<VolumeImportSource>(namespace, name, kind.kind()).await,
            SourceKind::Upload => self.delete::<VolumeUploadSource>(namespace, name, kind.kind()).await,
        }
    }

    async fn delete_claim(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.delete::<PersistentVolumeClaim>(namespace, name, "claim").await
    }

    async fn replace_persistent_volume(&self, volume: &PersistentVolume) -> Result<(), ApiError> {
        let api = Api::<PersistentVolume>::all(self.client.clone());
        let name = volume.metadata.name.clone().unwrap_or_default();
        api.replace(&name, &PostParams::default(), volume)
            .await
            .map(drop)
            .map_err(failed(format!("rebind persistent volume {name}")))
    }

    async fn cdi_config(&self) -> Result<Option<CDIConfig>, ApiError> {
        let api = Api::<CDIConfig>::all(self.client.clone());
        optional(api.get(CDI_CONFIG).await, "get CDIConfig config".to_owned())
    }

    async fn create_claim(&self, claim: &PersistentVolumeClaim) -> Result<(), ApiError> {
        let namespace = claim.metadata.namespace.clone().unwrap_or_default();
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), &namespace);
        let name = claim.metadata.name.clone().unwrap_or_default();
        created(
            api.create(&PostParams::default(), claim).await,
            format!("create claim {namespace}/{name}"),
        )
    }

    async fn annotate_claim(
        &self,
        namespace: &str,
        name: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({"metadata": {"annotations": annotations}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(failed(format!("annotate claim {namespace}/{name}")))
    }

    async fn label_claim(
        &self,
        namespace: &str,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<(), ApiError> {
        let api = Api::<PersistentVolumeClaim>::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({"metadata": {"labels": labels}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(failed(format!("label claim {namespace}/{name}")))
    }

    async fn create_pod(&self, pod: &Pod) -> Result<(), ApiError> {
        let namespace = pod.metadata.namespace.clone().unwrap_or_default();
        let api = Api::<Pod>::namespaced(self.client.clone(), &namespace);
        let name = pod.metadata.name.clone().unwrap_or_default();
        created(
            api.create(&PostParams::default(), pod).await,
            format!("create pod {namespace}/{name}"),
        )
    }

    async fn ungate_pod(&self, namespace: &str, name: &str, gate: &str) -> Result<(), ApiError> {
        let api = Api::<Pod>::namespaced(self.client.clone(), namespace);
        // A strategic merge's delete of the one entry (the list merges by name): the pod's other
        // gates stay, and a gate already lifted is nothing to do.
        let patch = serde_json::json!({"spec": {"schedulingGates": [{"name": gate, "$patch": "delete"}]}});
        match api
            .patch(name, &PatchParams::default(), &Patch::Strategic(&patch))
            .await
        {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 404) => Ok(()),
            Err(e) => Err(failed(format!("lift scheduling gate {gate} of pod {namespace}/{name}"))(e)),
        }
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.delete::<Pod>(namespace, name, "pod").await
    }

    async fn create_service(&self, service: &Service) -> Result<(), ApiError> {
        let namespace = service.metadata.namespace.clone().unwrap_or_default();
        let api = Api::<Service>::namespaced(self.client.clone(), &namespace);
        let name = service.metadata.name.clone().unwrap_or_default();
        let operation = format!("create service {namespace}/{name}");
        match api.create(&PostParams::default(), service).await {
            Ok(_) => Ok(()),
            // Ours from an earlier pass, or another's (an earlier claim's, on its way out): the
            // latter is not taken, and the next pass tries again.
            Err(e) if is_status(&e, 409) => {
                let existing = api.get(&name).await.map_err(failed(operation.clone()))?;
                if same_owner(&existing.metadata, &service.metadata) {
                    Ok(())
                } else {
                    Err(ApiError::Taken {
                        what: format!("service {namespace}/{name}"),
                    })
                }
            }
            Err(e) => Err(failed(operation)(e)),
        }
    }

    async fn delete_service(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.delete::<Service>(namespace, name, "service").await
    }

    async fn delete_secret(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.delete::<Secret>(namespace, name, "secret").await
    }

    async fn secret_exists(&self, namespace: &str, name: &str) -> Result<bool, ApiError> {
        let api = Api::<Secret>::namespaced(self.client.clone(), namespace);
        optional(api.get_metadata(name).await, format!("get secret {namespace}/{name}")).map(|found| found.is_some())
    }

    async fn put_secret(&self, secret: &Secret) -> Result<(), ApiError> {
        let namespace = secret.metadata.namespace.clone().unwrap_or_default();
        let api = Api::<Secret>::namespaced(self.client.clone(), &namespace);
        let name = secret.metadata.name.clone().unwrap_or_default();
        let operation = format!("write secret {namespace}/{name}");
        match api.create(&PostParams::default(), secret).await {
            Ok(_) => Ok(()),
            Err(e) if is_status(&e, 409) => {
                let existing = api.get(&name).await.map_err(failed(operation.clone()))?;
                if !same_owner(&existing.metadata, &secret.metadata) {
                    return Err(ApiError::Taken {
                        what: format!("secret {namespace}/{name}"),
                    });
                }
                let mut replacement = secret.clone();
                replacement.metadata.resource_version = existing.metadata.resource_version;
                api.replace(&name, &PostParams::default(), &replacement)
                    .await
                    .map(drop)
                    .map_err(failed(operation))
            }
            Err(e) => Err(failed(operation)(e)),
        }
    }

    async fn write_status(&self, namespace: &str, name: &str, status: &DataVolumeStatus) -> Result<(), ApiError> {
        let api = Api::<DataVolume>::namespaced(self.client.clone(), namespace);
        let patch = serde_json::json!({"status": status});
        api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(failed(format!("write the status of DataVolume {namespace}/{name}")))
    }

    async fn create_cdi_config(&self, config: &CDIConfig) -> Result<(), ApiError> {
        let api = Api::<CDIConfig>::all(self.client.clone());
        created(
            api.create(&PostParams::default(), config).await,
            "create CDIConfig config".to_owned(),
        )
    }

    async fn replace_cdi_config_status(&self, config: &CDIConfig) -> Result<(), ApiError> {
        let api = Api::<CDIConfig>::all(self.client.clone());
        let name = config.metadata.name.clone().unwrap_or_default();
        api.replace_status(&name, &PostParams::default(), config)
            .await
            .map(drop)
            .map_err(failed(format!("write the status of CDIConfig {name}")))
    }

    async fn replace_data_source_status(&self, data_source: &DataSource) -> Result<(), ApiError> {
        let namespace = data_source.metadata.namespace.clone().unwrap_or_default();
        let name = data_source.metadata.name.clone().unwrap_or_default();
        let api = Api::<DataSource>::namespaced(self.client.clone(), &namespace);
        api.replace_status(&name, &PostParams::default(), data_source)
            .await
            .map(drop)
            .map_err(failed(format!("write the status of DataSource {namespace}/{name}")))
    }

    async fn record_event(
        &self,
        subject: EventSubject<'_>,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let namespace = subject.meta.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let mut body = kubevirt_api::events::object_event(
            subject.kind,
            subject.meta,
            COMPONENT,
            None,
            (event_type, reason, message),
            Time(k8s_openapi::jiff::Timestamp::now()),
        );
        body.involved_object.api_version = Some(subject.api_version.to_owned());
        let api = Api::<Event>::namespaced(self.client.clone(), &namespace);
        created(
            api.create(&PostParams::default(), &body).await,
            format!(
                "record an event about {} {namespace}/{}",
                subject.kind,
                subject.meta.name.as_deref().unwrap_or_default()
            ),
        )
    }
}
