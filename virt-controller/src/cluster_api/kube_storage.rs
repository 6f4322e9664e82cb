//! The storage half of [`KubeControllerApi`]: the DataVolume watch (which lists nothing while
//! CDI's CRD is not installed), DataVolume creation and adoption, DataSource reads, and the
//! SubjectAccessReviews behind clone authorization.

use futures::StreamExt as _;
use futures::stream::{self, BoxStream};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt as _, watcher};

use cdi_api::{DataSource, DataVolume};

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
}
