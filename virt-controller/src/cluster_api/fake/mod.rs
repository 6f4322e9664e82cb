//! An in-memory API server for virt-controller: VMIs and pods, watches that see every change,
//! the kubelet's part played by the test (scheduling and running pods), and every write counted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{KubeVirt, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceMigration};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::compact::Compact;

use super::{
    ApiError, ClaimWatchEvent, ControllerApi, DataVolumeWatchEvent, KubeVirtWatchEvent, MigrationWatchEvent,
    PodWatchEvent, ResourceAccess, VmWatchEvent, VmiWatchEvent,
};

mod claims;
mod data_volumes;
mod instancetypes;
mod kubevirts;
mod migrations;

/// One write virt-controller made.
#[derive(Clone, Debug, PartialEq)]
pub enum Write {
    /// Pod created.
    CreatePod(String),
    /// Pod deleted.
    DeletePod(String),
    /// VMI metadata patched.
    PatchVmi(String, serde_json::Value),
    /// VMI status written.
    VmiStatus(String),
    /// Event recorded about a VMI.
    Event(String, String),
    /// VMI created.
    CreateVmi(String),
    /// VMI deleted.
    DeleteVmi(String),
    /// VM patched.
    PatchVm(String, serde_json::Value),
    /// VM status written.
    VmStatus(String),
    /// ControllerRevision created.
    CreateRevision(String),
    /// Migration metadata patched.
    PatchMigration(String, serde_json::Value),
    /// Migration status written.
    MigrationStatus(String),
    /// Migration created.
    CreateMigration(String),
    /// Migration deleted.
    DeleteMigration(String),
    /// Event recorded about a migration: its key, the reason and the message.
    MigrationEvent(String, String, String),
    /// DataVolume created.
    CreateDataVolume(String),
    /// DataVolume metadata patched.
    PatchDataVolume(String, serde_json::Value),
    /// Event recorded about a VM: its key, the reason and the message.
    VmEvent(String, String, String),
    /// PersistentVolumeClaim created (its key).
    CreateClaim(String),
    /// PersistentVolumeClaim deleted (its key).
    DeleteClaim(String),
    /// PersistentVolumeClaim labels patched (its key and the labels).
    LabelClaim(String, serde_json::Value),
    /// Pod evicted (its key).
    EvictPod(String),
    /// The `KubeVirt` resource's status patched (the patch).
    KubeVirtStatus(serde_json::Value),
}

#[derive(Debug, Default)]
struct State {
    // Kept as JSON, as an API server keeps them: benchmarks measure the controller in this process.
    vmis: BTreeMap<String, Compact<VirtualMachineInstance>>,
    vms: BTreeMap<String, Compact<VirtualMachine>>,
    pods: BTreeMap<String, Compact<Pod>>,
    vm_watchers: Vec<UnboundedSender<VmWatchEvent>>,
    kubevirts: Vec<KubeVirt>,
    kubevirt_watchers: Vec<UnboundedSender<KubeVirtWatchEvent>>,
    vmi_watchers: Vec<UnboundedSender<VmiWatchEvent>>,
    pod_watchers: Vec<UnboundedSender<PodWatchEvent>>,
    migrations: BTreeMap<String, Compact<VirtualMachineInstanceMigration>>,
    migration_watchers: Vec<UnboundedSender<MigrationWatchEvent>>,
    claims: BTreeMap<String, PersistentVolumeClaim>,
    storage_classes: Vec<k8s_openapi::api::storage::v1::StorageClass>,
    /// Storage profiles' claim property sets by class.
    storage_profiles: BTreeMap<String, crate::cluster_api::ClaimPropertySets>,
    claim_counter: u64,
    claim_watchers: Vec<UnboundedSender<ClaimWatchEvent>>,
    data_volumes: BTreeMap<String, cdi_api::DataVolume>,
    data_volume_watchers: Vec<UnboundedSender<DataVolumeWatchEvent>>,
    data_sources: BTreeMap<String, cdi_api::DataSource>,
    /// `user namespace verb group/resource/subresource` entries a test allowed.
    allowed: std::collections::BTreeSet<String>,
    /// While set, new migration watches list without ending the list (`InitDone`) until released.
    migration_list_held: Option<Vec<UnboundedSender<MigrationWatchEvent>>>,
    /// Why every migration creation fails, when set.
    migration_refusal: Option<String>,
    writes: Vec<Write>,
    write_count: usize,
    event_count: usize,
    keeps_writes: bool,
    version: u64,
    pod_counter: u64,
    instancetypes: instancetypes::Objects,
    migration_policies: Vec<kubevirt_api::migrations::MigrationPolicy>,
    namespace_labels: BTreeMap<String, BTreeMap<String, String>>,
}

impl State {
    fn log(&mut self, write: Write) {
        self.write_count += 1;
        if matches!(write, Write::Event(..) | Write::MigrationEvent(..) | Write::VmEvent(..)) {
            self.event_count += 1;
        }
        if self.keeps_writes {
            self.writes.push(write);
        }
    }

    fn stamp(&mut self, meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
        self.version += 1;
        meta.resource_version = Some(self.version.to_string());
    }

    /// Names a new object in `namespace` as the API server does from its `generateName` (when it
    /// has no name), and stamps it; returns the number used, unique in this fake.
    fn admit_new(
        &mut self,
        namespace: &str,
        meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    ) -> u64 {
        self.pod_counter += 1;
        let number = self.pod_counter;
        let prefix = meta.generate_name.clone().unwrap_or_default();
        meta.name.get_or_insert_with(|| format!("{prefix}{number:05}"));
        meta.namespace = Some(namespace.to_owned());
        self.stamp(meta);
        number
    }

    fn vmi_changed(&mut self, event: &VmiWatchEvent) {
        self.vmi_watchers.retain(|w| w.send(event.clone()).is_ok());
    }

    fn vm_changed(&mut self, event: &VmWatchEvent) {
        self.vm_watchers.retain(|w| w.send(event.clone()).is_ok());
    }

    fn pod_changed(&mut self, event: &PodWatchEvent) {
        self.pod_watchers.retain(|w| w.send(event.clone()).is_ok());
    }

    fn migration_changed(&mut self, event: &MigrationWatchEvent) {
        self.migration_watchers.retain(|w| w.send(event.clone()).is_ok());
    }
}

fn compact<T: serde::Serialize + serde::de::DeserializeOwned>(object: &T) -> Compact<T> {
    Compact::new(object)
}

/// Changes the stored object `key` in place (a new resourceVersion) and returns it.
fn modify_stored<T>(
    store: &mut BTreeMap<String, Compact<T>>,
    version: &mut u64,
    key: &str,
    change: impl FnOnce(&mut T),
) -> Option<T>
where
    T: kube::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    let mut object = store.get(key).and_then(Compact::get)?;
    change(&mut object);
    *version += 1;
    object.meta_mut().resource_version = Some(version.to_string());
    store.insert(key.to_owned(), Compact::new(&object));
    Some(object)
}

/// Marks the stored object `key` as being deleted (a graceful deletion: a finalizer or the
/// kubelet finishes it) and returns it.
fn mark_deleting<T>(store: &mut BTreeMap<String, Compact<T>>, version: &mut u64, key: &str) -> Result<T, ApiError>
where
    T: kube::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    modify_stored(store, version, key, |object| {
        object.meta_mut().deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    })
    .ok_or_else(|| ApiError::NotFound(key.to_owned()))
}

/// The stored object `key` for a write made against `expected` (its resourceVersion): a
/// conflict when it changed since, as the API server answers.
fn fetch_guarded<T>(
    store: &BTreeMap<String, Compact<T>>,
    key: &str,
    expected: Option<&String>,
    operation: &str,
) -> Result<T, ApiError>
where
    T: kube::Resource + serde::Serialize + serde::de::DeserializeOwned,
{
    let stored = store
        .get(key)
        .and_then(Compact::get)
        .ok_or_else(|| ApiError::NotFound(key.to_owned()))?;
    if stored.meta().resource_version.as_ref() != expected {
        return Err(ApiError::Conflict {
            operation: format!("{operation} {key}"),
        });
    }
    Ok(stored)
}

/// Applies a merge patch's `metadata.labels` (a `null` removes one), `metadata.finalizers` and
/// `metadata.ownerReferences` (each replaced whole), as the API server does.
fn merge_metadata(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, patch: &serde_json::Value) {
    let patch = &patch["metadata"];
    if let Some(labels) = patch["labels"].as_object() {
        let target = meta.labels.get_or_insert_default();
        for (k, v) in labels {
            match v.as_str() {
                Some(value) => target.insert(k.clone(), value.to_owned()),
                None => target.remove(k),
            };
        }
    }
    if let Some(finalizers) = patch.get("finalizers") {
        meta.finalizers = serde_json::from_value(finalizers.clone()).unwrap_or_default();
    }
    if let Some(owners) = patch.get("ownerReferences") {
        meta.owner_references = serde_json::from_value(owners.clone()).unwrap_or_default();
    }
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The fake. Clones share one state.
#[derive(Clone, Debug)]
pub struct FakeControllerApi {
    state: Arc<Mutex<State>>,
}

impl Default for FakeControllerApi {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeControllerApi {
    /// An empty API server that keeps every write.
    #[must_use]
    pub fn new() -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                keeps_writes: true,
                ..State::default()
            })),
        }
    }

    /// An empty API server that only counts writes (benchmarks).
    #[must_use]
    pub fn counting_writes() -> Self {
        let api = Self::new();
        api.lock().keeps_writes = false;
        api
    }

    /// How many writes so far, events included.
    #[must_use]
    pub fn write_count(&self) -> usize {
        self.lock().write_count
    }

    /// The bytes of every object the API server keeps.
    #[must_use]
    pub fn stored_bytes(&self) -> usize {
        let state = self.lock();
        state.vmis.values().map(Compact::len).sum::<usize>()
            + state.vms.values().map(Compact::len).sum::<usize>()
            + state.pods.values().map(Compact::len).sum::<usize>()
    }

    /// How many of them were events.
    #[must_use]
    pub fn event_count(&self) -> usize {
        self.lock().event_count
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Creates or replaces a VMI, as a user would.
    pub fn apply_vmi(&self, mut vmi: VirtualMachineInstance) {
        let mut state = self.lock();
        state.stamp(&mut vmi.metadata);
        state.vmis.insert(vmi.key(), compact(&vmi));
        state.vmi_changed(&Event::Apply(vmi));
    }

    /// Creates or replaces the `KubeVirt` resource, as the operator or an admin would.
    pub fn apply_kubevirt(&self, kubevirt: KubeVirt) {
        let mut state = self.lock();
        state
            .kubevirt_watchers
            .retain(|w| w.send(Event::Apply(kubevirt.clone())).is_ok());
        state.kubevirts = vec![kubevirt];
    }

    /// Creates or replaces a VM, as a user would.
    pub fn apply_vm(&self, mut vm: VirtualMachine) {
        let mut state = self.lock();
        state.stamp(&mut vm.metadata);
        state.vms.insert(key_of(&vm.metadata), compact(&vm));
        state.vm_changed(&Event::Apply(vm));
    }

    /// Changes a stored VM (as a user or virt-api would).
    pub fn modify_vm(&self, key: &str, change: impl FnOnce(&mut VirtualMachine)) {
        let mut state = self.lock();
        let Some(mut vm) = state.vms.get(key).and_then(Compact::get) else {
            return;
        };
        change(&mut vm);
        state.stamp(&mut vm.metadata);
        if vm.metadata.deletion_timestamp.is_some() && vm.metadata.finalizers.as_ref().is_none_or(Vec::is_empty) {
            state.vms.remove(key);
            state.vm_changed(&Event::Delete(vm));
        } else {
            state.vms.insert(key.to_owned(), compact(&vm));
            state.vm_changed(&Event::Apply(vm));
        }
    }

    /// The stored VM.
    #[must_use]
    pub fn vm(&self, key: &str) -> Option<VirtualMachine> {
        self.lock().vms.get(key).and_then(Compact::get)
    }

    /// Removes a VMI whose finalizers are gone (as the API server does after a deletion).
    pub fn finish_vmi_deletion(&self, key: &str) {
        let mut state = self.lock();
        if let Some(vmi) = state.vmis.remove(key).and_then(|kept| kept.get()) {
            state.vmi_changed(&Event::Delete(vmi));
        }
    }

    /// Changes a stored VMI (as the handler or a user would).
    pub fn modify_vmi(&self, key: &str, change: impl FnOnce(&mut VirtualMachineInstance)) {
        let mut guard = self.lock();
        let state = &mut *guard;
        if let Some(vmi) = modify_stored(&mut state.vmis, &mut state.version, key, change) {
            state.vmi_changed(&Event::Apply(vmi));
        }
    }

    /// Changes a stored pod (as the scheduler and kubelet would).
    pub fn modify_pod(&self, key: &str, change: impl FnOnce(&mut Pod)) {
        let mut guard = self.lock();
        let state = &mut *guard;
        if let Some(pod) = modify_stored(&mut state.pods, &mut state.version, key, change) {
            state.pod_changed(&Event::Apply(pod));
        }
    }

    /// Plays the scheduler and the kubelet: the pod is bound to `node` and its `compute`
    /// container runs and is ready.
    pub fn run_pod(&self, key: &str, node: &str) {
        self.modify_pod(key, |pod| {
            pod.spec.get_or_insert_default().node_name = Some(node.to_owned());
            pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
                phase: Some("Running".to_owned()),
                container_statuses: Some(vec![k8s_openapi::api::core::v1::ContainerStatus {
                    name: "compute".to_owned(),
                    ready: true,
                    ..k8s_openapi::api::core::v1::ContainerStatus::default()
                }]),
                ..k8s_openapi::api::core::v1::PodStatus::default()
            });
        });
    }

    /// Removes a pod (the kubelet finished deleting it).
    pub fn remove_pod(&self, key: &str) {
        let mut state = self.lock();
        if let Some(pod) = state.pods.remove(key).and_then(|kept| kept.get()) {
            state.pod_changed(&Event::Delete(pod));
        }
    }

    /// Drops a pod from the store without telling any watcher: a benchmark that plays the kubelet
    /// uses it so the API server's copy of every pod does not count as the controller's memory.
    pub fn drop_stored_pod(&self, key: &str) {
        self.lock().pods.remove(key);
    }

    /// The stored VMI.
    #[must_use]
    pub fn vmi(&self, key: &str) -> Option<VirtualMachineInstance> {
        self.lock().vmis.get(key).and_then(Compact::get)
    }

    /// Keys (`namespace/name`) of the stored pods.
    #[must_use]
    pub fn pod_keys(&self) -> Vec<String> {
        self.lock().pods.keys().cloned().collect()
    }

    /// The stored pod.
    #[must_use]
    pub fn pod(&self, key: &str) -> Option<Pod> {
        self.lock().pods.get(key).and_then(Compact::get)
    }

    /// Every write so far.
    #[must_use]
    pub fn writes(&self) -> Vec<Write> {
        self.lock().writes.clone()
    }

    fn watch<T: Clone + Send + 'static>(
        initial: Vec<T>,
        register: impl FnOnce(UnboundedSender<Event<T>>),
    ) -> BoxStream<'static, Result<Event<T>, ApiError>> {
        let (tx, rx) = unbounded_channel();
        let _ = tx.send(Event::Init);
        for object in initial {
            let _ = tx.send(Event::InitApply(object));
        }
        let _ = tx.send(Event::InitDone);
        register(tx);
        tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(Ok).boxed()
    }
}

impl ControllerApi for FakeControllerApi {
    fn watch_vmis(&self) -> BoxStream<'static, Result<VmiWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.vmis.values().filter_map(Compact::get).collect();
        Self::watch(initial, |tx| state.vmi_watchers.push(tx))
    }

    fn watch_launcher_pods(&self) -> BoxStream<'static, Result<PodWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.pods.values().filter_map(Compact::get).collect();
        Self::watch(initial, |tx| state.pod_watchers.push(tx))
    }

    async fn create_pod(&self, namespace: &str, pod: &Pod) -> Result<Pod, ApiError> {
        let mut state = self.lock();
        state.pod_counter += 1;
        let mut created = pod.clone();
        let prefix = pod.metadata.generate_name.clone().unwrap_or_default();
        created.metadata.name = Some(format!("{prefix}{:05}", state.pod_counter));
        created.metadata.namespace = Some(namespace.to_owned());
        created.metadata.uid = Some(format!("pod-uid-{}", state.pod_counter));
        state.stamp(&mut created.metadata);
        let key = key_of(&created.metadata);
        state.log(Write::CreatePod(key.clone()));
        state.pods.insert(key, compact(&created));
        state.pod_changed(&Event::Apply(created.clone()));
        Ok(created)
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let key = format!("{namespace}/{name}");
        state.log(Write::DeletePod(key.clone()));
        // Deletion is graceful: the pod terminates until the test removes it.
        let pod = mark_deleting(&mut state.pods, &mut state.version, &key)?;
        state.pod_changed(&Event::Apply(pod));
        Ok(())
    }

    async fn patch_vmi_metadata(
        &self,
        vmi: &VirtualMachineInstance,
        patch: serde_json::Value,
    ) -> Result<VirtualMachineInstance, ApiError> {
        let mut state = self.lock();
        let key = vmi.key();
        state.log(Write::PatchVmi(key.clone(), patch.clone()));
        let mut stored = fetch_guarded(&state.vmis, &key, vmi.metadata.resource_version.as_ref(), "patch")?;
        merge_metadata(&mut stored.metadata, &patch);
        state.stamp(&mut stored.metadata);
        if stored.metadata.deletion_timestamp.is_some() && stored.metadata.finalizers.as_ref().is_none_or(Vec::is_empty)
        {
            state.vmis.remove(&key);
            state.vmi_changed(&Event::Delete(stored.clone()));
        } else {
            state.vmis.insert(key, compact(&stored));
            state.vmi_changed(&Event::Apply(stored.clone()));
        }
        Ok(stored)
    }

    async fn update_vmi_status(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let mut state = self.lock();
        let key = vmi.key();
        state.log(Write::VmiStatus(key.clone()));
        fetch_guarded(
            &state.vmis,
            &key,
            vmi.metadata.resource_version.as_ref(),
            "update status of",
        )?;
        drop(state);
        self.modify_vmi(&key, |stored| stored.status.clone_from(&vmi.status));
        self.vmi(&key).ok_or(ApiError::NotFound(key))
    }

    fn watch_kubevirts(&self) -> BoxStream<'static, Result<KubeVirtWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.kubevirts.clone();
        Self::watch(initial, |tx| state.kubevirt_watchers.push(tx))
    }

    fn watch_vms(&self) -> BoxStream<'static, Result<VmWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.vms.values().filter_map(Compact::get).collect();
        Self::watch(initial, |tx| state.vm_watchers.push(tx))
    }

    async fn create_vmi(&self, vmi: &VirtualMachineInstance) -> Result<VirtualMachineInstance, ApiError> {
        let mut state = self.lock();
        let key = vmi.key();
        state.log(Write::CreateVmi(key.clone()));
        if state.vmis.contains_key(&key) {
            return Err(ApiError::Conflict {
                operation: format!("create {key}: already exists"),
            });
        }
        let mut created = vmi.clone();
        state.pod_counter += 1;
        created.metadata.uid = Some(format!("vmi-uid-{}", state.pod_counter));
        state.stamp(&mut created.metadata);
        state.vmis.insert(key, compact(&created));
        state.vmi_changed(&Event::Apply(created.clone()));
        Ok(created)
    }

    async fn delete_vmi(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let key = format!("{namespace}/{name}");
        state.log(Write::DeleteVmi(key.clone()));
        let vmi = mark_deleting(&mut state.vmis, &mut state.version, &key)?;
        state.vmi_changed(&Event::Apply(vmi));
        Ok(())
    }

    async fn patch_vm(&self, vm: &VirtualMachine, patch: serde_json::Value) -> Result<VirtualMachine, ApiError> {
        let key = key_of(&vm.metadata);
        {
            let mut state = self.lock();
            state.log(Write::PatchVm(key.clone(), patch.clone()));
            fetch_guarded(&state.vms, &key, vm.metadata.resource_version.as_ref(), "patch VM")?;
        }
        self.modify_vm(&key, |stored| {
            if let Some(finalizers) = patch["metadata"].get("finalizers") {
                stored.metadata.finalizers = serde_json::from_value(finalizers.clone()).unwrap_or_default();
            }
            if let Some(strategy) = patch["spec"].get("runStrategy").and_then(|s| s.as_str()) {
                stored.spec.run_strategy = Some(strategy.to_owned());
                stored.spec.running = None;
            }
        });
        self.vm(&key).ok_or(ApiError::NotFound(key))
    }

    async fn update_vm_status(&self, vm: &VirtualMachine) -> Result<VirtualMachine, ApiError> {
        let key = key_of(&vm.metadata);
        {
            let mut state = self.lock();
            state.log(Write::VmStatus(key.clone()));
            fetch_guarded(
                &state.vms,
                &key,
                vm.metadata.resource_version.as_ref(),
                "update status of VM",
            )?;
        }
        self.modify_vm(&key, |stored| stored.status.clone_from(&vm.status));
        self.vm(&key).ok_or(ApiError::NotFound(key))
    }

    async fn create_controller_revision(
        &self,
        revision: &k8s_openapi::api::apps::v1::ControllerRevision,
    ) -> Result<k8s_openapi::api::apps::v1::ControllerRevision, ApiError> {
        let mut state = self.lock();
        let name = revision.metadata.name.clone().unwrap_or_default();
        state.log(Write::CreateRevision(name));
        state.instancetypes.create_revision(revision)
    }

    async fn list_migration_policies(&self) -> Result<Vec<kubevirt_api::migrations::MigrationPolicy>, ApiError> {
        Ok(self.lock().migration_policies.clone())
    }

    async fn namespace_labels(&self, namespace: &str) -> Result<BTreeMap<String, String>, ApiError> {
        Ok(self.lock().namespace_labels.get(namespace).cloned().unwrap_or_default())
    }

    fn watch_claims(&self) -> BoxStream<'static, Result<ClaimWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.claims.values().cloned().collect();
        Self::watch(initial, |tx| state.claim_watchers.push(tx))
    }

    fn watch_migrations(&self) -> BoxStream<'static, Result<MigrationWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.migrations.values().filter_map(Compact::get).collect();
        if state.migration_list_held.is_some() {
            return migrations::held_watch(&mut state, initial);
        }
        Self::watch(initial, |tx| state.migration_watchers.push(tx))
    }

    async fn patch_migration_metadata(
        &self,
        migration: &VirtualMachineInstanceMigration,
        patch: serde_json::Value,
    ) -> Result<VirtualMachineInstanceMigration, ApiError> {
        migrations::patch_metadata(&mut self.lock(), migration, &patch)
    }

    async fn update_migration_status(
        &self,
        migration: &VirtualMachineInstanceMigration,
    ) -> Result<VirtualMachineInstanceMigration, ApiError> {
        migrations::update_status(&mut self.lock(), migration)
    }

    async fn create_migration(
        &self,
        namespace: &str,
        migration: &VirtualMachineInstanceMigration,
    ) -> Result<VirtualMachineInstanceMigration, ApiError> {
        migrations::create(&mut self.lock(), namespace, migration)
    }

    async fn delete_migration(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        migrations::delete(&mut self.lock(), &format!("{namespace}/{name}"))
    }

    async fn record_migration_event(
        &self,
        migration: &VirtualMachineInstanceMigration,
        _event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let key = key_of(&migration.metadata);
        self.lock()
            .log(Write::MigrationEvent(key, reason.to_owned(), message.to_owned()));
        Ok(())
    }

    fn watch_data_volumes(&self) -> BoxStream<'static, Result<DataVolumeWatchEvent, ApiError>> {
        let mut state = self.lock();
        let initial = state.data_volumes.values().cloned().collect();
        Self::watch(initial, |tx| state.data_volume_watchers.push(tx))
    }

    async fn create_data_volume(&self, data_volume: &cdi_api::DataVolume) -> Result<cdi_api::DataVolume, ApiError> {
        self.create_stored_data_volume(data_volume)
    }

    async fn patch_data_volume_metadata(
        &self,
        namespace: &str,
        name: &str,
        patch: serde_json::Value,
    ) -> Result<(), ApiError> {
        self.patch_stored_data_volume(namespace, name, &patch)
    }

    async fn get_data_source(&self, namespace: &str, name: &str) -> Result<Option<cdi_api::DataSource>, ApiError> {
        Ok(self.lock().data_sources.get(&format!("{namespace}/{name}")).cloned())
    }

    async fn user_may(&self, user: &str, access: &ResourceAccess) -> Result<bool, ApiError> {
        Ok(self.lock().allowed.contains(&data_volumes::access_key(user, access)))
    }

    async fn create_pvc(&self, claim: &PersistentVolumeClaim) -> Result<PersistentVolumeClaim, ApiError> {
        let mut created = claim.clone();
        let key = {
            let mut state = self.lock();
            state.claim_counter += 1;
            let prefix = claim.metadata.generate_name.clone().unwrap_or_default();
            created.metadata.name = Some(format!("{prefix}{:05}", state.claim_counter));
            let key = key_of(&created.metadata);
            state.log(Write::CreateClaim(key.clone()));
            key
        };
        self.apply_claim(created);
        self.lock()
            .claims
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::NotFound(key))
    }

    async fn delete_pvc(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let key = format!("{namespace}/{name}");
        if !self.lock().claims.contains_key(&key) {
            return Err(ApiError::NotFound(key));
        }
        self.lock().log(Write::DeleteClaim(key.clone()));
        self.delete_claim(&key);
        Ok(())
    }

    async fn patch_pvc_labels(&self, namespace: &str, name: &str, labels: serde_json::Value) -> Result<(), ApiError> {
        let key = format!("{namespace}/{name}");
        let mut claim = self
            .lock()
            .claims
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::NotFound(key.clone()))?;
        let current = claim.metadata.labels.get_or_insert_default();
        for (label, value) in labels.as_object().into_iter().flatten() {
            match value.as_str() {
                Some(value) => {
                    current.insert(label.clone(), value.to_owned());
                }
                None => {
                    current.remove(label);
                }
            }
        }
        self.lock().log(Write::LabelClaim(key, labels));
        self.apply_claim(claim);
        Ok(())
    }

    async fn list_storage_classes(&self) -> Result<Vec<k8s_openapi::api::storage::v1::StorageClass>, ApiError> {
        Ok(self.lock().storage_classes.clone())
    }

    async fn get_storage_class(
        &self,
        name: &str,
    ) -> Result<Option<k8s_openapi::api::storage::v1::StorageClass>, ApiError> {
        Ok(self
            .lock()
            .storage_classes
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name))
            .cloned())
    }

    async fn storage_profile_sets(&self, name: &str) -> Result<crate::cluster_api::ClaimPropertySets, ApiError> {
        Ok(self.lock().storage_profiles.get(name).cloned().unwrap_or_default())
    }

    async fn record_vm_event(
        &self,
        vm: &VirtualMachine,
        _event_type: &'static str,
        reason: &str,
        message: &str,
    ) -> Result<(), ApiError> {
        let key = key_of(&vm.metadata);
        self.lock()
            .log(Write::VmEvent(key, reason.to_owned(), message.to_owned()));
        Ok(())
    }

    async fn record_event(
        &self,
        vmi: &VirtualMachineInstance,
        _event_type: &'static str,
        reason: &str,
        _message: &str,
    ) -> Result<(), ApiError> {
        self.lock().log(Write::Event(vmi.key(), reason.to_owned()));
        Ok(())
    }

    async fn evict_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        kubevirts::evict_pod(&mut self.lock(), namespace, name)
    }

    async fn patch_kubevirt_status(&self, kubevirt: &KubeVirt, status: serde_json::Value) -> Result<(), ApiError> {
        kubevirts::patch_status(&mut self.lock(), kubevirt, &status)
    }
}
