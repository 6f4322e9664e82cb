//! The VMI controller: keeps the VMIs and launcher pods it watched, and for one VMI at a time
//! observes them, plans ([`crate::vmi_lifecycle`]) and applies the plan: pod creation (with
//! expectations), pod deletion, the node label and finalizer, then the status.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::Clock;
use kubevirt_api::v1::VirtualMachineInstance;
use kubevirt_api::well_known::{finalizers, labels};
use serde_json::json;

use crate::claims::{ClaimModes, ClaimStore, ClaimUsers};
use crate::cluster_api::{ApiError, ControllerApi};
use crate::compact::Compact;
use crate::data_volumes::{DataVolumeStore, DataVolumeWait, vmi_gate};
use crate::expectations::Expectations;
use crate::own_writes::{replaces_cached, replaces_cached_pod};
use crate::pod::PodConfig;
use crate::reconcile_error::{ReconcileError, cannot, log_and_retry};
use crate::vmi_lifecycle::{Observed, PodView, REASON_PVC_NOT_FOUND, plan};

mod pods;
mod state_claim;

#[derive(Debug, Default)]
struct Known {
    vmis: HashMap<String, KnownVmi>,
    /// Launcher pods by owning VMI key, then by pod name.
    pods: HashMap<String, BTreeMap<String, PodView>>,
    expectations: Expectations,
    /// The relists of the VMI and pod watches under way.
    vmi_list: crate::relist::Relist,
    pod_list: crate::relist::Relist,
    /// Which VMIs use which claims.
    claim_users: ClaimUsers,
}

/// A cached VMI: its JSON, and its phase for metrics.
#[derive(Clone, Debug)]
struct KnownVmi {
    vmi: Compact<VirtualMachineInstance>,
    phase: kubevirt_api::v1::VirtualMachineInstancePhase,
}

impl KnownVmi {
    fn new(vmi: &VirtualMachineInstance) -> Self {
        Self {
            vmi: Compact::new(vmi),
            phase: vmi.status.as_ref().and_then(|s| s.phase).unwrap_or_default(),
        }
    }
}

/// The controller.
#[derive(Debug)]
pub struct VmiController<A, K> {
    api: A,
    clock: K,
    /// The configuration given at start.
    base_config: PodConfig,
    /// With the `KubeVirt` resource's settings applied.
    config: Mutex<PodConfig>,
    known: Mutex<Known>,
    /// The claims launcher pods use, from the PVC watch (shared with the migration controller).
    claims: Arc<ClaimStore>,
    /// The DataVolumes that fill those claims, from the DataVolume watch.
    data_volumes: Arc<DataVolumeStore>,
}

/// The owning VMI's key of a launcher pod, from its controller owner reference.
pub(crate) fn owner_key(pod: &Pod) -> Option<String> {
    let owner = pod
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "VirtualMachineInstance")?;
    Some(format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or("default"),
        owner.name
    ))
}

/// What the lifecycle decision needs of a pod.
#[must_use]
pub fn pod_view(pod: &Pod) -> PodView {
    let status = pod.status.as_ref();
    let compute_ready = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == "compute"))
        .is_some_and(|c| c.ready);
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled" && c.status == "False"))
        .map(|c| {
            (
                c.reason.clone().unwrap_or_default(),
                c.message.clone().unwrap_or_default(),
            )
        });
    PodView {
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        phase: status
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".to_owned()),
        is_compute_ready: compute_ready,
        is_terminating: pod.metadata.deletion_timestamp.is_some(),
        unschedulable,
        runtime_user: pod
            .spec
            .as_ref()
            .and_then(|s| s.security_context.as_ref())
            .and_then(|c| c.run_as_user)
            .and_then(|uid| u32::try_from(uid).ok())
            .unwrap_or(0),
        migration_job: pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(kubevirt_api::well_known::labels::MIGRATION_JOB_UID))
            .cloned(),
        created: pod.metadata.creation_timestamp.clone(),
        resource_version: pod.metadata.resource_version.clone(),
        is_temporary: pod
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(kubevirt_api::well_known::annotations::EPHEMERAL_PROVISIONING)),
    }
}

impl<A: ControllerApi, K: Clock> VmiController<A, K> {
    /// A controller rendering pods with `config`.
    pub fn new(api: A, clock: K, config: PodConfig) -> Self {
        Self {
            api,
            clock,
            config: Mutex::new(config.clone()),
            base_config: config,
            known: Mutex::default(),
            claims: Arc::default(),
            data_volumes: Arc::default(),
        }
    }

    /// The DataVolume store this controller keeps from the DataVolume watch, for the VM
    /// controller.
    #[must_use]
    pub fn data_volume_store(&self) -> Arc<DataVolumeStore> {
        self.data_volumes.clone()
    }

    /// The VMIs that use any of `claims` (`namespace/name` of claims, or of DataVolumes, whose
    /// claims have their names).
    #[must_use]
    pub fn claim_users(&self, claims: &[String]) -> Vec<String> {
        if claims.is_empty() {
            return Vec::new();
        }
        self.known().claim_users.users_of(claims)
    }

    /// The claim store this controller keeps from the PVC watch, for the migration controller,
    /// whose target pods render the same claims.
    #[must_use]
    pub fn claim_store(&self) -> Arc<ClaimStore> {
        self.claims.clone()
    }

    /// Takes in a PVC watch event; returns the claims that appeared, changed or went, and the VMIs
    /// that use one (a pod waiting for it, a status describing it) or whose VM state claim it is.
    pub fn on_claim_event(
        &self,
        event: &Event<k8s_openapi::api::core::v1::PersistentVolumeClaim>,
    ) -> (Vec<String>, Vec<String>) {
        // The store first: a reconcile that reads the store after this sees the claim, and one
        // that read it before is queued again here (its VMI is a user since its watch event).
        let changed = self.claims.on_event(event);
        let mut users = self.claim_users(&changed);
        // A VM state claim wakes the VMI it is labelled for.
        if let Event::Apply(claim) | Event::InitApply(claim) | Event::Delete(claim) = event
            && let Some(vmi) = claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(kubevirt_api::persistent_state::CLAIM_LABEL))
            && !changed.is_empty()
        {
            let namespace = claim.metadata.namespace.as_deref().unwrap_or("default");
            users.push(format!("{namespace}/{vmi}"));
            users.sort();
            users.dedup();
        }
        (changed, users)
    }

    /// Applies the `KubeVirt` resource's configuration (or, with `None`, the defaults) to the
    /// pods rendered from now on.
    /// Returns the VMIs to look at again when the pod configuration changed: those without a
    /// launcher pod, whose pod may render now (or differently).
    pub fn set_cluster_configuration(&self, kubevirt: Option<&kubevirt_api::v1::KubeVirt>) -> Vec<String> {
        let config = self.base_config.with_cluster(kubevirt);
        let changed = {
            let mut current = self.config.lock().unwrap_or_else(PoisonError::into_inner);
            let changed = *current != config;
            *current = config;
            changed
        };
        if !changed {
            return Vec::new();
        }
        let known = self.known();
        known
            .vmis
            .keys()
            .filter(|key| !known.pods.contains_key(*key))
            .cloned()
            .collect()
    }

    /// The pod configuration in effect.
    pub fn pod_config(&self) -> PodConfig {
        self.config.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many VMIs are in each phase (for `kubevirt_vmi_phase_count`).
    pub fn phase_counts(&self) -> BTreeMap<String, u64> {
        let mut counts = BTreeMap::new();
        for known in self.known().vmis.values() {
            *counts.entry(known.phase.as_str().to_lowercase()).or_insert(0) += 1;
        }
        counts
    }

    /// The API side.
    pub fn api(&self) -> &A {
        &self.api
    }

    /// Takes in a VMI watch event; returns the keys to reconcile.
    pub fn on_vmi_event(&self, event: Event<VirtualMachineInstance>) -> Vec<String> {
        let mut guard = self.known();
        let known = &mut *guard;
        match event {
            Event::Apply(vmi) | Event::InitApply(vmi) => {
                let key = vmi.key();
                known.vmi_list.saw(&key);
                known.claim_users.set(&key, &vmi);
                known.vmis.insert(key.clone(), KnownVmi::new(&vmi));
                vec![key]
            }
            Event::Delete(vmi) => {
                let key = vmi.key();
                known.vmis.remove(&key);
                known.claim_users.remove(&key);
                known.expectations.forget(&key);
                vec![key]
            }
            Event::Init => {
                known.vmi_list.start();
                Vec::new()
            }
            // What the list left out was deleted during the gap.
            Event::InitDone => {
                let gone = known.vmi_list.finish_sweep(&mut known.vmis);
                for key in &gone {
                    known.expectations.forget(key);
                    known.claim_users.remove(key);
                }
                gone
            }
        }
    }

    /// Takes in a launcher pod watch event; returns the owning VMI's key to reconcile.
    pub fn on_pod_event(&self, event: Event<Pod>) -> Vec<String> {
        let (pod, gone) = match event {
            Event::Apply(pod) | Event::InitApply(pod) => (pod, false),
            Event::Delete(pod) => (pod, true),
            Event::Init => {
                self.known().pod_list.start();
                return Vec::new();
            }
            Event::InitDone => {
                let mut guard = self.known();
                let known = &mut *guard;
                return known.pod_list.finish_sweep_nested(&mut known.pods);
            }
        };
        let Some(key) = owner_key(&pod) else { return Vec::new() };
        let mut known = self.known();
        Self::store_pod(&mut known, key, pod_view(&pod), gone)
    }

    /// Keeps a launcher pod this controller created, unless the watch already showed it as new
    /// or newer ([`crate::own_writes`]): the scheduler's unschedulable mark must not be lost to
    /// the creation's answer.
    fn on_pod_created(&self, pod: &Pod) {
        let Some(key) = owner_key(pod) else { return };
        let view = pod_view(pod);
        let mut known = self.known();
        if replaces_cached_pod(known.pods.get(&key), &view) {
            Self::store_pod(&mut known, key, view, false);
        }
    }

    /// Keeps (or, `gone`, forgets) the pod `view` of the VMI `key`, counting it against the
    /// expectations; returns the key to reconcile.
    fn store_pod(known: &mut Known, key: String, view: PodView, gone: bool) -> Vec<String> {
        known.pod_list.saw(&format!("{key}/{}", view.name));
        let pods = known.pods.entry(key.clone()).or_default();
        let was_known = pods.contains_key(&view.name);
        let was_terminating = pods.get(&view.name).is_some_and(|p| p.is_terminating);
        let is_terminating = view.is_terminating;
        if gone {
            pods.remove(&view.name);
        } else {
            pods.insert(view.name.clone(), view);
        }
        if pods.is_empty() {
            known.pods.remove(&key);
        }
        if !was_known && !gone {
            known.expectations.creation_observed(&key);
        }
        if (gone || is_terminating) && !was_terminating {
            known.expectations.deletion_observed(&key);
        }
        vec![key]
    }

    /// Reconciles one VMI; returns when to look again. A write that fails is logged with its
    /// cause and retried.
    #[tracing::instrument(skip_all, fields(vmi = %key))]
    pub async fn reconcile(&self, key: &str) -> Option<Duration> {
        self.try_reconcile(key)
            .await
            .unwrap_or_else(|error| Some(log_and_retry(&error)))
    }

    async fn try_reconcile(&self, key: &str) -> Result<Option<Duration>, ReconcileError> {
        let (vmi, pods, satisfied) = {
            let known = self.known();
            let Some(vmi) = known.vmis.get(key).and_then(|k| k.vmi.get()).map(Box::new) else {
                return Ok(None);
            };
            let pods: Vec<PodView> = known
                .pods
                .get(key)
                .map(|p| p.values().cloned().collect())
                .unwrap_or_default();
            (vmi, pods, known.expectations.satisfied(key, self.clock.monotonic()))
        };
        let config = self.pod_config();
        let claims = self.claims.modes_for(&vmi);
        let namespace = vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let data_volumes = vmi_gate(
            &vmi,
            |name| self.claims.filled_by_data_volume(&namespace, name),
            |name| self.data_volumes.get(&namespace, name),
        );
        let state_claim = Box::pin(self.state_claim(&vmi, may_create_pod(&vmi, &pods), &config)).await?;
        let plan = plan(&Observed {
            vmi: &vmi,
            pods,
            expectations_satisfied: satisfied,
            runtime_user: config.runtime_user,
            missing_claim: claims.as_ref().err().map(ToString::to_string),
            claim_infos: self.claims.infos_for(&vmi),
            data_volumes,
            state_claim: state_claim.view.clone(),
            now: Time(self.clock.now()),
        });
        let mut current = vmi.clone();
        let claims = claims
            .as_ref()
            .unwrap_or(&ClaimModes::default())
            .clone()
            .with_state_claim(state_claim.ready.clone());
        // Boxed: rendering and creating pods makes a large future, which every pass would carry.
        if !Box::pin(self.create_pods(key, &namespace, &plan, &config, &claims, &current)).await? {
            return Ok(None);
        }
        // Looked at again when the claim appears (the PVC watch); said once, when the wait is new.
        if let Some(message) = &plan.waits_for_claim
            && plan.status.is_some()
        {
            self.event(&current, "Normal", REASON_PVC_NOT_FOUND, message).await;
        }
        if let Some(DataVolumeWait::Unknown(message)) = &plan.waits_for_data_volume
            && plan.status.is_some()
        {
            self.event(&current, "Warning", REASON_PVC_NOT_FOUND, message).await;
        }
        if !plan.delete_pods.is_empty() {
            let count = u32::try_from(plan.delete_pods.len()).unwrap_or(u32::MAX);
            self.known()
                .expectations
                .expect_deletions(key, count, self.clock.monotonic());
            for name in &plan.delete_pods {
                if let Err(error) = self.api.delete_pod(&namespace, name).await {
                    self.known().expectations.deletion_observed(key);
                    if !matches!(error, ApiError::NotFound(_)) {
                        return Err(ReconcileError::new(format!("delete pod {name}"), error));
                    }
                }
            }
        }
        if let Some(patch) = metadata_patch(&current, &plan) {
            *current = self
                .api
                .patch_vmi_metadata(&current, patch)
                .await
                .map_err(cannot("patch the labels and finalizers"))?;
        }
        if let Some(status) = plan.status {
            current.status = Some(status);
            *current = self
                .api
                .update_vmi_status(&current)
                .await
                .map_err(cannot("write the status"))?;
        }
        if current.metadata.resource_version != vmi.metadata.resource_version {
            let mut known = self.known();
            let cached = known
                .vmis
                .get(key)
                .map(|cached| cached.vmi.get().and_then(|cached| cached.metadata.resource_version));
            // A VMI no longer cached was deleted meanwhile: it must not come back.
            if cached
                .is_some_and(|cached| replaces_cached(current.metadata.resource_version.as_deref(), cached.as_deref()))
            {
                known.vmis.insert(key.to_owned(), KnownVmi::new(&current));
            }
        }
        // While a pod's creation or deletion is unseen (one of this pass too), looked at again
        // when that expectation expires, should its event never come.
        let expires_in = self.known().expectations.expires_in(key, self.clock.monotonic());
        Ok(state_claim.requeue(expires_in))
    }

    pub(super) async fn event(&self, vmi: &VirtualMachineInstance, kind: &'static str, reason: &str, message: &str) {
        if let Err(error) = self.api.record_event(vmi, kind, reason, message).await {
            tracing::warn!(vmi = %vmi.key(), error = %error, "cannot record an event");
        }
    }
}

/// Whether `vmi`, with its `pods`, may get a launcher pod: not being deleted, not yet past
/// Pending, and without a pod of its own (a temporary pod does not count).
fn may_create_pod(vmi: &VirtualMachineInstance, pods: &[PodView]) -> bool {
    use kubevirt_api::v1::VirtualMachineInstancePhase as Phase;
    let phase = vmi.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
    vmi.metadata.deletion_timestamp.is_none()
        && matches!(phase, Phase::Unset | Phase::Pending)
        && pods.iter().all(|p| p.is_temporary)
}

/// The one metadata patch a plan needs: the node label and the finalizer list, or nothing.
fn metadata_patch(vmi: &VirtualMachineInstance, plan: &crate::vmi_lifecycle::Plan) -> Option<serde_json::Value> {
    let mut patch = json!({"metadata": {}});
    let mut changed = false;
    if let Some(node) = &plan.node_label {
        patch["metadata"]["labels"] = json!({ labels::NODE_NAME: node });
        changed = true;
    }
    if plan.add_finalizer || plan.remove_finalizer {
        let mut list = vmi.metadata.finalizers.clone().unwrap_or_default();
        list.retain(|f| f != finalizers::VMI_FOREGROUND_DELETE);
        if plan.add_finalizer {
            list.push(finalizers::VMI_FOREGROUND_DELETE.to_owned());
        }
        patch["metadata"]["finalizers"] = json!(list);
        changed = true;
    }
    changed.then_some(patch)
}
