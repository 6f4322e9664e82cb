//! [`ControllerApi`] over a kube-rs client: any API server, or a `tower-test` mock in tests.

use control_loop::instancetype_lookup::KubeInstancetypeLookup;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::ControllerRevision;
use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Event, Namespace, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kubevirt_api::instancetype::{InstancetypeLookup, KindNames, LookupError};
use kubevirt_api::migrations::MigrationPolicy;
use kubevirt_api::v1::{KubeVirt, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};
use kubevirt_api::well_known::labels;

use cdi_api::{DataSource, DataVolume};

use super::{
    ApiError, ClaimWatchEvent, ControllerApi, DataVolumeWatchEvent, KubeVirtWatchEvent, MigrationWatchEvent,
    PodWatchEvent, ResourceAccess, VmWatchEvent, VmiWatchEvent,
};

/// The component name on events.
pub const COMPONENT: &str = "virt-controller";

/// The real adapter.
#[derive(Clone)]
pub struct KubeControllerApi {
    client: kube::Client,
    instancetypes: KubeInstancetypeLookup,
    /// Shared by the clones every controller holds.
    recent_events: std::sync::Arc<std::sync::Mutex<crate::recent_events::RecentEvents>>,
}

impl std::fmt::Debug for KubeControllerApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeControllerApi").finish_non_exhaustive()
    }
}

impl KubeControllerApi {
    /// An adapter over `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self {
            instancetypes: KubeInstancetypeLookup::new(client.clone()),
            client,
            recent_events: std::sync::Arc::default(),
        }
    }

    pub(super) fn client(&self) -> &kube::Client {
        &self.client
    }

    /// Sends an event about the object (`kind`, `meta`), unless the same was sent lately.
    async fn send_event(
        &self,
        kind: &str,
        meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
        (event_type, reason, message): (&'static str, &str, &str),
    ) -> Result<(), ApiError> {
        if !self.should_send(meta.uid.as_ref(), event_type, reason, message) {
            return Ok(());
        }
        let namespace = meta.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let body = kubevirt_api::events::object_event(
            kind,
            meta,
            COMPONENT,
            None,
            (event_type, reason, message),
            Time(k8s_openapi::jiff::Timestamp::now()),
        );
        let sent = Api::<Event>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), &body)
            .await;
        if sent.is_err() {
            self.not_sent(meta.uid.as_ref(), event_type, reason, message);
        }
        sent.map(|_| ()).map_err(kube_error(format!(
            "record event about {kind} {namespace}/{}",
            meta.name.as_deref().unwrap_or_default()
        )))
    }

    /// Whether an event about the object `uid` is new enough to send ([`crate::recent_events`]).
    fn should_send(&self, uid: Option<&String>, kind: &'static str, reason: &str, message: &str) -> bool {
        let uid = uid.map_or("", String::as_str);
        self.recent_events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .should_send(uid, kind, reason, message, std::time::Instant::now())
    }

    /// The event about `uid` could not be sent: it may be sent again.
    fn not_sent(&self, uid: Option<&String>, kind: &'static str, reason: &str, message: &str) {
        self.recent_events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .forget(uid.map_or("", String::as_str), kind, reason, message);
    }
}

pub(super) fn kube_error(operation: String) -> impl FnOnce(kube::Error) -> ApiError {
    move |source| match &source {
        kube::Error::Api(status) if status.code == 409 && status.reason == "AlreadyExists" => {
            ApiError::AlreadyExists(operation)
        }
        kube::Error::Api(status) if status.code == 409 => ApiError::Conflict { operation },
        kube::Error::Api(status) if status.code == 404 => ApiError::NotFound(operation),
        _ => ApiError::Kube { operation, source },
    }
}

fn names(vmi: &VirtualMachineInstance) -> (String, String) {
    (
        vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned()),
        vmi.metadata.name.clone().unwrap_or_default(),
    )
}

fn migration_names(migration: &VirtualMachineInstanceMigration) -> (String, String) {
    (
        migration
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned()),
        migration.metadata.name.clone().unwrap_or_default(),
    )
}

impl ControllerApi for KubeControllerApi {
    fn watch_vmis(&self) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>> {
        let api: Api<VirtualMachineInstance> = Api::all(self.client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    fn watch_launcher_pods(&self) -> BoxStream<'static, Result<PodWatchEvent, ApiError>> {
        let api: Api<Pod> = Api::all(self.client.clone());
        let selector = format!("{}={}", labels::APP, labels::APP_VIRT_LAUNCHER);
        watcher(api, watcher::Config::default().labels(&selector))
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    async fn create_pod(&self, namespace: &str, pod: &Pod) -> Result<Pod, ApiError> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), pod)
            .await
            .map_err(kube_error(format!("create launcher pod in {namespace}")))
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
            .map_err(kube_error(format!("delete pod {namespace}/{name}")))
    }

    async fn patch_vmi_metadata(
        &self,
        vmi: &VirtualMachineInstance,
        mut patch: serde_json::Value,
    ) -> Result<VirtualMachineInstance, ApiError> {
        let (namespace, name) = names(vmi);
        // The resourceVersion makes the merge patch fail with a conflict if the VMI changed.
        patch["metadata"]["resourceVersion"] = serde_json::json!(vmi.metadata.resource_version);
        Api::<VirtualMachineInstance>::namespaced(self.client.clone(), &namespace)
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_error(format!("patch {namespace}/{name}")))
    }

    async fn update_vmi_status(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let (namespace, name) = names(vmi);
        Api::<VirtualMachineInstance>::namespaced(self.client.clone(), &namespace)
            .replace_status(&name, &PostParams::default(), vmi)
            .await
            .map_err(kube_error(format!("update status of {namespace}/{name}")))
    }

    fn watch_kubevirts(&self) -> BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>> {
        let api: Api<KubeVirt> = Api::all(self.client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    fn watch_vms(&self) -> BoxStream<'static, Result<VmWatchEvent, ApiError>> {
        let api: Api<VirtualMachine> = Api::all(self.client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    async fn create_vmi(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let (namespace, name) = names(vmi);
        Api::<VirtualMachineInstance>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), vmi)
            .await
            .map_err(kube_error(format!("create {namespace}/{name}")))
    }

    async fn delete_vmi(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        Api::<VirtualMachineInstance>::namespaced(self.client.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
            .map_err(kube_error(format!("delete {namespace}/{name}")))
    }

    async fn patch_vm(&self, vm: &VirtualMachine, mut patch: serde_json::Value) -> Result<VirtualMachine, ApiError> {
        let namespace = vm.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let name = vm.metadata.name.clone().unwrap_or_default();
        patch["metadata"]["resourceVersion"] = serde_json::json!(vm.metadata.resource_version);
        Api::<VirtualMachine>::namespaced(self.client.clone(), &namespace)
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_error(format!("patch VM {namespace}/{name}")))
    }

    async fn update_vm_status(&self, vm: &VirtualMachine) -> Result<VirtualMachine, ApiError> {
        let namespace = vm.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let name = vm.metadata.name.clone().unwrap_or_default();
        Api::<VirtualMachine>::namespaced(self.client.clone(), &namespace)
            .replace_status(&name, &PostParams::default(), vm)
            .await
            .map_err(kube_error(format!("update status of VM {namespace}/{name}")))
    }

    async fn create_controller_revision(&self, revision: &ControllerRevision) -> Result<ControllerRevision, ApiError> {
        let namespace = revision
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let name = revision.metadata.name.clone().unwrap_or_default();
        Api::<ControllerRevision>::namespaced(self.client.clone(), &namespace)
            .create(&PostParams::default(), revision)
            .await
            .map_err(kube_error(format!("create ControllerRevision {namespace}/{name}")))
    }

    fn watch_claims(&self) -> BoxStream<'static, Result<ClaimWatchEvent, ApiError>> {
        let api: Api<PersistentVolumeClaim> = Api::all(self.client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    fn watch_migrations(&self) -> BoxStream<'static, Result<MigrationWatchEvent, ApiError>> {
        let api: Api<VirtualMachineInstanceMigration> = Api::all(self.client.clone());
        watcher(api, watcher::Config::default())
            .default_backoff()
            .map(|event| event.map_err(ApiError::from))
            .boxed()
    }

    async fn list_migration_policies(&self) -> Result<Vec<MigrationPolicy>, ApiError> {
        let api: Api<MigrationPolicy> = Api::all(self.client.clone());
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(|source| ApiError::Kube {
                operation: "list MigrationPolicies".to_owned(),
                source,
            })?;
        Ok(list.items)
    }

    async fn namespace_labels(&self, namespace: &str) -> Result<BTreeMap<String, String>, ApiError> {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let found = api.get(namespace).await.map_err(|source| ApiError::Kube {
            operation: format!("get Namespace {namespace}"),
            source,
        })?;
        Ok(found.metadata.labels.unwrap_or_default())
    }

    async fn patch_migration_metadata(
        &self,
        migration: &VirtualMachineInstanceMigration,
        mut patch: serde_json::Value,
    ) -> Result<VirtualMachineInstanceMigration, ApiError> {
        let (namespace, name) = migration_names(migration);
        patch["metadata"]["resourceVersion"] = serde_json::json!(migration.metadata.resource_version);
        Api::<VirtualMachineInstanceMigration>::namespaced(self.client.clone(), &namespace)
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .map_err(kube_error(format!("patch migration {namespace}/{name}")))
    }

    async fn create_migration(
        &self,
        namespace: &str,
        migration: &VirtualMachineInstanceMigration,
    ) -> Result<VirtualMachineInstanceMigration, ApiError> {
        Api::<VirtualMachineInstanceMigration>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), migration)
            .await
            .map_err(kube_error(format!("create a migration in {namespace}")))
    }

    async fn delete_migration(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        Api::<VirtualMachineInstanceMigration>::namespaced(self.client.clone(), namespace)
            .delete(name, &DeleteParams::default())
            .await
            .map(|_| ())
            .map_err(kube_error(format!("delete migration {namespace}/{name}")))
    }

    async fn update_migration_status(
        &self,
        migration: &VirtualMachineInstanceMigration,
    ) -> Result<VirtualMachineInstanceMigration, ApiError> {
        let (namespace, name) = migration_names(migration);
        Api::<VirtualMachineInstanceMigration>::namespaced(self.client.clone(), &namespace)
            .replace_status(&name, &PostParams::default(), migration)
            .await
            .map_err(kube_error(format!("update status of migration {namespace}/{name}")))
    }

    async fn record_migration_event(
        &self,
        migration: &VirtualMachineInstanceMigration,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        self.send_event(
            "VirtualMachineInstanceMigration",
            &migration.metadata,
            (event_type, reason, message),
        )
        .await
    }

    fn watch_data_volumes(&self) -> BoxStream<'static, Result<DataVolumeWatchEvent, ApiError>> {
        self.data_volume_watch()
    }

    async fn create_data_volume(&self, data_volume: &DataVolume) -> Result<DataVolume, ApiError> {
        self.create_dv(data_volume).await
    }

    async fn patch_data_volume_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<(), ApiError> {
        self.patch_dv_metadata(namespace, name, patch).await
    }

    async fn get_data_source(&self, namespace: &str, name: &str) -> Result<Option<DataSource>, ApiError> {
        self.data_source(namespace, name).await
    }

    async fn user_may(&self, user: &str, access: &ResourceAccess) -> Result<bool, ApiError> {
        self.review_access(user, access).await
    }

    async fn record_vm_event(
        &self,
        vm: &VirtualMachine,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        self.send_event("VirtualMachine", &vm.metadata, (event_type, reason, message))
            .await
    }

    async fn create_pvc(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        self.create_claim_object(claim).await
    }

    async fn delete_pvc(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        self.delete_claim_object(namespace, name).await
    }

    async fn patch_pvc_labels(&self, namespace: &str, name: &str, labels: serde_json::Value) -> Result<(), ApiError> {
        self.patch_claim_labels(namespace, name, labels).await
    }

    async fn list_storage_classes(&self) -> Result<Vec<StorageClass>, ApiError> {
        self.storage_classes().await
    }

    async fn get_storage_class(&self, name: &str) -> Result<Option<StorageClass>, ApiError> {
        self.storage_class(name).await
    }

    async fn storage_profile_sets(&self, name: &str) -> Result<super::ClaimPropertySets, ApiError> {
        self.profile_sets(name).await
    }

    async fn record_event(
        &self,
        vmi: &VirtualMachineInstance,
        event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        self.send_event("VirtualMachineInstance", &vmi.metadata, (event_type, reason, message))
            .await
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        match Api::<Pod>::namespaced(self.client.clone(), namespace)
            .evict(name, &kube::api::EvictParams::default())
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            result => result
                .map(|_| ())
                .map_err(kube_error(format!("evict pod {namespace}/{name}"))),
        }
    }

    async fn patch_kubevirt_status(&self, kubevirt: &KubeVirt, status: serde_json::Value) -> Result<(), ApiError> {
        let namespace = kubevirt.metadata.namespace.clone().unwrap_or_default();
        let name = kubevirt.metadata.name.clone().unwrap_or_default();
        Api::<KubeVirt>::namespaced(self.client.clone(), &namespace)
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": status })),
            )
            .await
            .map(|_| ())
            .map_err(kube_error(format!("patch the status of KubeVirt {namespace}/{name}")))
    }
}

impl InstancetypeLookup for KubeControllerApi {
    async fn object(
        &self,
        kind: &KindNames,
        namespace: &str,
        name: &str,
    ) -> Result<Option<serde_json::Value>, LookupError> {
        self.instancetypes.object(kind, namespace, name).await
    }

    async fn revision(&self, namespace: &str, name: &str) -> Result<Option<ControllerRevision>, LookupError> {
        self.instancetypes.revision(namespace, name).await
    }
}
