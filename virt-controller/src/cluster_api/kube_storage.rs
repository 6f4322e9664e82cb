//! The storage half of [`KubeControllerApi`]: the DataVolume watch (which lists nothing while
//! CDI's CRD is not installed), DataVolume creation and adoption, DataSource reads, the
//! SubjectAccessReviews behind clone authorization, and VM state claims with the StorageClasses
//! and StorageProfiles they are made from.

use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt as _, watcher};

use cdi_api::{DataSource, DataVolume, StorageProfile};

use super::kube_adapter::{KubeControllerApi, kube_error};
use super::{ApiError, DataVolumeWatchEvent, ResourceAccess};

/// Whether a watch error says the resource's type is not served (its CRD is not installed).
fn type_not_served(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404)
}

/// A watch's events with "the type is not served" read as an empty list: a controller that waits
/// for every watch to list once goes on without CDI, and the watcher keeps retrying (with its
/// backoff) until the CRD appears.
pub(super) fn empty_while_not_served<T: Send + 'static>(
    events: BoxStream<'static, Result<Event<T>, watcher::Error>>,
) -> BoxStream<'static, Result<Event<T>, ApiError>> {
    events
        .flat_map(|event| match event {
            Err(error) if type_not_served(&error) => {
                tracing::debug!(error = %error, "the type is not served (its CRD is missing); listing nothing");
                stream::iter(vec![Ok(Event::Init), Ok(Event::InitDone)])
            }
            other => stream::iter(vec![other.map_err(ApiError::from)]),
        })
        .boxed()
}

impl KubeControllerApi {
    pub(super) fn data_volume_watch(&self) -> BoxStream<'static, Result<DataVolumeWatchEvent, ApiError>> {
        let api: Api<DataVolume> = Api::all(self.client().clone());
        empty_while_not_served(watcher(api, watcher::Config::default()).default_backoff().boxed())
    }

    pub(super) async fn create_dv(&self, data_volume: &DataVolume) -> Result<DataVolume, ApiError> {
        let namespace = data_volume
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = data_volume.metadata.name.clone().unwrap_or_default();
        Api::<DataVolume>::namespaced(self.client().clone(), &namespace)
            .create(&PostParams::default(), data_volume)
            .await
            .map_err(kube_error(format!("create DataVolume {namespace}/{name}")))
    }

    pub(super) async fn patch_dv_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<(), ApiError> {
        Api::<DataVolume>::namespaced(self.client().clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(kube_error(format!("patch DataVolume {namespace}/{name}")))
    }

    pub(super) async fn data_source(&self, namespace: &str, name: &str) -> Result<Option<DataSource>, ApiError> {
        Api::<DataSource>::namespaced(self.client().clone(), namespace)
            .get_opt(name)
            .await
            .map_err(kube_error(format!("get DataSource {namespace}/{name}")))
    }

    pub(super) async fn review_access(&self, user: &str, access: &ResourceAccess) -> Result<bool, ApiError> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.to_owned()),
                resource_attributes: Some(ResourceAttributes {
                    namespace: Some(access.namespace.clone()),
                    verb: Some(access.verb.clone()),
                    group: Some(access.group.clone()),
                    resource: Some(access.resource.clone()),
                    subresource: Some(access.subresource.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client().clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(kube_error(format!(
                "review whether {user} may {} {}",
                access.verb, access.resource
            )))?;
        Ok(answer.status.is_some_and(|s| s.allowed))
    }

    pub(super) async fn create_claim_object(
        &self,
        claim: &PersistentVolumeClaim,
    ) -> Result<PersistentVolumeClaim, ApiError> {
        let namespace = claim.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        Api::<PersistentVolumeClaim>::namespaced(self.client().clone(), &namespace)
            .create(&PostParams::default(), claim)
            .await
            .map_err(kube_error(format!("create a PersistentVolumeClaim in {namespace}")))
    }

    pub(super) async fn delete_claim_object(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        Api::<PersistentVolumeClaim>::namespaced(self.client().clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(drop)
            .map_err(kube_error(format!("delete PersistentVolumeClaim {namespace}/{name}")))
    }

    pub(super) async fn patch_claim_labels(
        &self,
        namespace: &str,
        name: &str,
        labels: serde_json::Value,
    ) -> Result<(), ApiError> {
        let patch = serde_json::json!({"metadata": {"labels": labels}});
        Api::<PersistentVolumeClaim>::namespaced(self.client().clone(), namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(drop)
            .map_err(kube_error(format!("label PersistentVolumeClaim {namespace}/{name}")))
    }

    pub(super) async fn storage_classes(&self) -> Result<Vec<StorageClass>, ApiError> {
        Api::<StorageClass>::all(self.client().clone())
            .list(&ListParams::default())
            .await
            .map(|list| list.items)
            .map_err(kube_error("list StorageClasses".to_owned()))
    }

    pub(super) async fn storage_class(&self, name: &str) -> Result<Option<StorageClass>, ApiError> {
        Api::<StorageClass>::all(self.client().clone())
            .get_opt(name)
            .await
            .map_err(kube_error(format!("get StorageClass {name}")))
    }

    pub(super) async fn profile_sets(&self, name: &str) -> Result<crate::cluster_api::ClaimPropertySets, ApiError> {
        match Api::<StorageProfile>::all(self.client().clone()).get_opt(name).await {
            Ok(profile) => Ok(profile
                .and_then(|p| p.status)
                .map(|status| {
                    status
                        .claim_property_sets
                        .into_iter()
                        .map(|set| (set.volume_mode, set.access_modes))
                        .collect()
                })
                .unwrap_or_default()),
            // Without CDI there is no such type, and so no profile.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
            Err(error) => Err(kube_error(format!("get StorageProfile {name}"))(error)),
        }
    }
}
