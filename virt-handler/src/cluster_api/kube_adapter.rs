//! [`ClusterApi`] over a kube-rs client: any API server, or a `tower-test` mock in tests.

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{Event, Node};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kubevirt_api::v1::{KubeVirt, VirtualMachineInstance};
use kubevirt_api::well_known::labels;

use super::merged_watch::{Merger, Source};
use super::{ApiError, ClusterApi, KubeVirtWatchEvent, VmiEvent, VmiWatchEvent};

/// The component name on events and field managers.
pub const COMPONENT: &str = "virt-handler";

/// The real adapter.
#[derive(Clone)]
pub struct KubeClusterApi {
    client: kube::Client,
}

impl std::fmt::Debug for KubeClusterApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClusterApi").finish_non_exhaustive()
    }
}

impl KubeClusterApi {
    /// An adapter over `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn vmis(&self, namespace: &str) -> Api<VirtualMachineInstance> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn kube_error(operation: String) -> impl FnOnce(kube::Error) -> ApiError {
    move |source| match &source {
        kube::Error::Api(status) if status.code == 409 => ApiError::Conflict { operation },
        _ => ApiError::Kube { operation, source },
    }
}

impl ClusterApi for KubeClusterApi {
    fn watch_vmis(&self, node: &str) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>> {
        let watch = |label: &str, source: Source| {
            let api: Api<VirtualMachineInstance> = Api::all(self.client.clone());
            let config = watcher::Config::default().labels(&format!("{label}={node}"));
            watcher(api, config).default_backoff().map(move |event| (source, event))
        };
        let both = futures::stream::select(
            watch(labels::NODE_NAME, Source::Node),
            watch(labels::MIGRATION_TARGET_NODE_NAME, Source::MigrationTarget),
        );
        let mut merger = Merger::default();
        both.flat_map(move |(source, event)| {
            let events: Vec<Result<VmiWatchEvent, ApiError>> = match event {
                Ok(event) => merger.on(source, event).into_iter().map(Ok).collect(),
                Err(error) => vec![Err(ApiError::from(error))],
            };
            futures::stream::iter(events)
        })
        .boxed()
    }

    fn watch_kubevirts(&self) -> BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>> {
        // The install namespace: the service account's (in a pod), as upstream's handler.
        let api: Api<KubeVirt> = Api::default_namespaced(self.client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    async fn patch_vmi_labels(
        &self,
        vmi: &VirtualMachineInstance,
        labels: std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<VirtualMachineInstance, ApiError> {
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let name = vmi.metadata.name.as_deref().unwrap_or_default();
        let patch = serde_json::json!({"metadata": {
            "labels": labels,
            "resourceVersion": vmi.metadata.resource_version,
        }});
        self.vmis(namespace)
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_error(format!("patch the labels of {namespace}/{name}")))
    }

    async fn update_vmi_status(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let name = vmi.metadata.name.as_deref().unwrap_or_default();
        self.vmis(namespace)
            .replace_status(name, &PostParams::default(), vmi)
            .await
            .map_err(kube_error(format!("update status of {namespace}/{name}")))
    }

    async fn patch_node(&self, node: &str, patch: serde_json::Value) -> Result<(), ApiError> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch(node, &PatchParams::default(), &Patch::Strategic(patch))
            .await
            .map(|_| ())
            .map_err(kube_error(format!("patch node {node}")))
    }

    async fn record_event(&self, vmi: &VirtualMachineInstance, node: &str, event: VmiEvent) -> Result<(), ApiError> {
        let namespace = vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let body = kubevirt_api::events::vmi_event(
            vmi,
            COMPONENT,
            Some(node),
            event.event_type,
            &event.reason,
            &event.message,
            Time(k8s_openapi::jiff::Timestamp::now()),
        );
        let events: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        events
            .create(&PostParams::default(), &body)
            .await
            .map(|_| ())
            .map_err(kube_error(format!("record event about {}", vmi.key())))
    }
}
