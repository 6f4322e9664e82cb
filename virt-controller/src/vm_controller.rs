//! The VM controller: keeps the VMs and VMIs it watched, and for one VM at a time observes it and
//! its VMI, decides by run strategy ([`crate::run_strategy`]) and applies: VMI creation and
//! deletion (with expectations), the strategy switch of a started Halted VM, the finalizers, and
//! the status ([`crate::vm_status`]); its DataVolume templates are handled in [`volumes`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::runtime::watcher::Event;
use kubevirt_api::clock::Clock;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};
use kubevirt_api::well_known::finalizers;
use serde_json::json;

use crate::claims::ClaimStore;
use crate::cluster_api::{ApiError, ControllerApi};
use crate::compact::Compact;
use crate::data_volumes::DataVolumeStore;
use crate::expectations::Expectations;
use crate::own_writes::replaces_cached;
use crate::reconcile_error::{RETRY, ReconcileError, cannot, log_and_retry};
use crate::run_strategy::{Action, Observed, VmiView, decide};
use crate::vm_instancetypes::{Failure, Resolved, vmi_to_create};
use crate::vm_status::{backing_off, first_request, next_vm_status};

mod volumes;
use volumes::held_back;

#[derive(Debug, Default)]
struct Known {
    vms: HashMap<String, Arc<VirtualMachine>>,
    vmis: HashMap<String, Compact<VirtualMachineInstance>>,
    expectations: Expectations,
    /// The claims and DataVolumes each VM's templates name (`namespace/name` → VM keys).
    volume_users: crate::claims::ClaimUsers,
    /// The relists of the VM and VMI watches under way.
    vm_list: crate::relist::Relist,
    vmi_list: crate::relist::Relist,
}

/// The VM an action is for, and what its instance type and preference resolved to.
struct Target<'a> {
    key: &'a str,
    vm: &'a VirtualMachine,
    instancetypes: &'a Result<Resolved, Failure>,
}

/// Whether the VM names an instance type or preference, or its status still records one.
fn uses_instancetypes(vm: &VirtualMachine) -> bool {
    let status = vm.status.as_ref();
    vm.spec.instancetype.is_some()
        || vm.spec.preference.is_some()
        || status.is_some_and(|s| s.instancetype_ref.is_some() || s.preference_ref.is_some())
}

/// What carrying out an action left to do.
#[derive(Debug)]
struct Applied {
    /// Look again after this long.
    requeue: Option<Duration>,
    /// A failed step: reason and message for the `Failure` condition.
    failure: Option<Failure>,
}

/// What the run-strategy decision sees of a VM and its VMI.
fn observe(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    strategy: kubevirt_api::v1::RunStrategy,
    backing_off: bool,
) -> Observed {
    Observed {
        strategy,
        recorded_strategy: vm
            .status
            .as_ref()
            .and_then(|s| s.run_strategy.as_deref())
            .and_then(|s| s.parse().ok()),
        vmi: vmi.map(|v| VmiView {
            uid: v.metadata.uid.clone().unwrap_or_default(),
            phase: v.status.as_ref().and_then(|s| s.phase).unwrap_or_default(),
            is_deleting: v.metadata.deletion_timestamp.is_some(),
        }),
        request: first_request(vm),
        backing_off,
    }
}

/// The controller.
#[derive(Debug)]
pub struct VmController<A, K> {
    api: A,
    clock: K,
    known: Mutex<Known>,
    /// The cluster's defaults (the default pod interface's binding) for VMIs built with an
    /// instance type or preference.
    cluster: Mutex<kubevirt_api::v1::ClusterConfig>,
    /// The claims (bound or not) and DataVolumes the VMs name, shared with the VMI controller.
    claims: Arc<ClaimStore>,
    data_volumes: Arc<DataVolumeStore>,
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn has_finalizer(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// A finalizer list without (or with) the VM controller's finalizer.
fn finalizers_patch(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    keep: bool,
) -> serde_json::Value {
    let mut list = meta.finalizers.clone().unwrap_or_default();
    list.retain(|f| f != finalizers::VM_CONTROLLER);
    if keep {
        list.push(finalizers::VM_CONTROLLER.to_owned());
    }
    json!({"metadata": {"finalizers": list}})
}

impl<A: ControllerApi, K: Clock> VmController<A, K> {
    /// A controller with empty knowledge.
    pub fn new(api: A, clock: K) -> Self {
        Self {
            api,
            clock,
            known: Mutex::default(),
            cluster: Mutex::default(),
            claims: Arc::default(),
            data_volumes: Arc::default(),
        }
    }

    /// Reads claims and DataVolumes from these stores (the VMI controller's, which the watches
    /// fill).
    #[must_use]
    pub fn with_storage(mut self, claims: Arc<ClaimStore>, data_volumes: Arc<DataVolumeStore>) -> Self {
        self.claims = claims;
        self.data_volumes = data_volumes;
        self
    }

    /// Takes the `KubeVirt` resource's configuration (or, with `None`, the defaults) for VMIs
    /// created from now on.
    pub fn set_cluster_configuration(&self, kubevirt: Option<&kubevirt_api::v1::KubeVirt>) {
        *self.cluster.lock().unwrap_or_else(PoisonError::into_inner) = kubevirt
            .map(kubevirt_api::v1::ClusterConfig::from_kubevirt)
            .unwrap_or_default();
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in a VM watch event; returns the keys to reconcile.
    pub fn on_vm_event(&self, event: Event<VirtualMachine>) -> Vec<String> {
        let mut guard = self.known();
        let known = &mut *guard;
        match event {
            Event::Apply(vm) | Event::InitApply(vm) => {
                let key = key_of(&vm.metadata);
                known.vm_list.saw(&key);
                let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
                known.volume_users.set_names(&key, namespace, volumes::names_used(&vm));
                known.vms.insert(key.clone(), Arc::new(vm));
                vec![key]
            }
            Event::Delete(vm) => {
                let key = key_of(&vm.metadata);
                known.vms.remove(&key);
                known.volume_users.remove(&key);
                known.expectations.forget(&key);
                Vec::new()
            }
            Event::Init => {
                known.vm_list.start();
                Vec::new()
            }
            // What the list left out was deleted during the gap.
            Event::InitDone => {
                for key in known.vm_list.finish_sweep(&mut known.vms) {
                    known.volume_users.remove(&key);
                    known.expectations.forget(&key);
                }
                Vec::new()
            }
        }
    }

    /// Takes in a VMI watch event; returns the owning VM's key (VMI and VM share the name).
    pub fn on_vmi_event(&self, event: Event<VirtualMachineInstance>) -> Vec<String> {
        let mut guard = self.known();
        let known = &mut *guard;
        match event {
            Event::Apply(vmi) | Event::InitApply(vmi) => {
                let key = vmi.key();
                known.vmi_list.saw(&key);
                let previous = known.vmis.get(&key).and_then(Compact::get);
                if previous.is_none() {
                    known.expectations.creation_observed(&key);
                }
                let was_deleting = previous.is_some_and(|p| p.metadata.deletion_timestamp.is_some());
                // A deletion shows as the deletion mark (finalizers keep the VMI), as for pods.
                if vmi.metadata.deletion_timestamp.is_some() && !was_deleting {
                    known.expectations.deletion_observed(&key);
                }
                known.vmis.insert(key.clone(), Compact::new(&vmi));
                vec![key]
            }
            Event::Delete(vmi) => {
                let key = vmi.key();
                known.vmis.remove(&key);
                known.expectations.deletion_observed(&key);
                vec![key]
            }
            Event::Init => {
                known.vmi_list.start();
                Vec::new()
            }
            // A VMI deleted during the gap: its VM looks again (and starts a new one if it runs).
            Event::InitDone => {
                let gone = known.vmi_list.finish_sweep(&mut known.vmis);
                for key in &gone {
                    known.expectations.deletion_observed(key);
                }
                gone
            }
        }
    }

    /// Reconciles one VM; returns when to look again. A write that fails is logged with its
    /// cause and retried.
    #[tracing::instrument(skip_all, fields(vm = %key))]
    pub async fn reconcile(&self, key: &str) -> Option<Duration> {
        // Boxed: a reconcile holds several VMs across its awaits.
        Box::pin(self.try_reconcile(key))
            .await
            .unwrap_or_else(|error| Some(log_and_retry(&error)))
    }

    async fn try_reconcile(&self, key: &str) -> Result<Option<Duration>, ReconcileError> {
        let (vm, vmi, satisfied, expires_in) = {
            let known = self.known();
            let Some(vm) = known.vms.get(key).cloned() else {
                return Ok(None);
            };
            let vmi = known.vmis.get(key).and_then(Compact::get);
            let now = self.clock.monotonic();
            (
                vm,
                vmi,
                known.expectations.satisfied(key, now),
                known.expectations.expires_in(key, now),
            )
        };
        // Looked at again when the expectation expires, should its event never come.
        if !satisfied {
            return Ok(expires_in);
        }
        let vmi = self.owned_vmi(&vm, vmi).await?;
        let mut current = vm.as_ref().clone();
        if vm.metadata.deletion_timestamp.is_some() {
            return self.finish_deletion(key, &current, vmi.as_ref()).await.map(|()| None);
        }
        if !has_finalizer(&vm.metadata, finalizers::VM_CONTROLLER) {
            current = self
                .api
                .patch_vm(&current, finalizers_patch(&vm.metadata, true))
                .await
                .map_err(cannot("add the finalizer"))?;
        }
        let strategy = match vm.spec.effective_run_strategy() {
            Ok(strategy) => strategy,
            Err(error) => {
                tracing::warn!(error = %error, "invalid run strategy");
                return Ok(None);
            }
        };
        let instancetypes = if uses_instancetypes(&vm) {
            crate::vm_instancetypes::resolve(&self.api, &vm).await
        } else {
            Ok(Resolved::default())
        };
        let now = self.clock.now();
        let backoff = backing_off(&vm, now);
        let mut decision = decide(&observe(&vm, vmi.as_ref(), strategy, backoff.is_some()));
        // As upstream, nothing of the templates is done while the instance type cannot be read.
        let volumes = if instancetypes.is_ok() {
            self.handle_data_volumes(&vm, strategy, &decision).await
        } else {
            volumes::VolumesOutcome::default()
        };
        if volumes.holds_back {
            decision = held_back(decision);
        }
        let target = Target {
            key,
            vm: &vm,
            instancetypes: &instancetypes,
        };
        let action = if volumes.holds_back {
            Action::Nothing
        } else {
            decision.action
        };
        let Applied { requeue, failure } = self.apply(&target, action, &mut current, backoff).await?;
        let jitter = f64::from(now.subsec_nanosecond().unsigned_abs() % 1000) / 1000.0;
        let mut status = next_vm_status(
            &current,
            strategy,
            vmi.as_ref(),
            &decision,
            (now, jitter),
            self.volume_states(&vm),
        );
        let failure = failure.or_else(|| volumes.error.map(|message| ("FailedCreate", message)));
        // On an error the references stay as they were until the objects can be read again.
        if let Ok(resolved) = &instancetypes {
            status.instancetype_ref.clone_from(&resolved.instancetype_ref);
            status.preference_ref.clone_from(&resolved.preference_ref);
        }
        let failure = failure.or_else(|| instancetypes.as_ref().err().cloned());
        let requeue = if volumes.retry {
            [requeue, Some(RETRY)].into_iter().flatten().min()
        } else {
            requeue
        };
        crate::vm_status::set_failure(&mut status, failure, now);
        if current.status.as_ref() != Some(&status) {
            current.status = Some(status);
            current = self
                .api
                .update_vm_status(&current)
                .await
                .map_err(cannot("write the status"))?;
        }
        let expires_in = self.keep_written(key, current);
        Ok([requeue, expires_in].into_iter().flatten().min())
    }

    /// Keeps the VM as this pass wrote it, unless the watch already showed it as new or newer,
    /// or showed it deleted; returns when a VMI creation or deletion of this pass that is still
    /// unseen expires, so the VM is looked at again should its event never come.
    fn keep_written(&self, key: &str, current: VirtualMachine) -> Option<Duration> {
        let mut known = self.known();
        let cached = known
            .vms
            .get(key)
            .map(|cached| cached.metadata.resource_version.clone());
        // A VM no longer cached was deleted meanwhile: it must not come back.
        if cached.is_some_and(|cached| replaces_cached(current.metadata.resource_version.as_deref(), cached.as_deref()))
        {
            known.vms.insert(key.to_owned(), Arc::new(current));
        }
        known.expectations.expires_in(key, self.clock.monotonic())
    }

    /// Carries out the decided action. A VMI that cannot be created or deleted is reported in the
    /// VM's status (`failure`) and retried; `Err` when the VM itself could not be written.
    async fn apply(
        &self,
        target: &Target<'_>,
        action: Action,
        current: &mut VirtualMachine,
        backoff: Option<Duration>,
    ) -> Result<Applied, ReconcileError> {
        let (key, vm) = (target.key, target.vm);
        let namespace = vm.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let name = vm.metadata.name.clone().unwrap_or_default();
        let mut requeue = None;
        let mut failure = None;
        match action {
            Action::Create { paused } => {
                let to_create = target
                    .instancetypes
                    .as_ref()
                    .map_err(Clone::clone)
                    .and_then(|resolved| {
                        let cluster = self.cluster.lock().unwrap_or_else(PoisonError::into_inner).clone();
                        vmi_to_create(vm, paused, resolved, &cluster)
                    });
                let vmi = match to_create {
                    Ok(vmi) => vmi,
                    Err(instancetype_failure) => {
                        return Ok(Applied {
                            requeue: Some(RETRY),
                            failure: Some(instancetype_failure),
                        });
                    }
                };
                self.known().expectations.expect_creation(key, self.clock.monotonic());
                if let Err(error) = self.api.create_vmi(&vmi).await {
                    tracing::warn!(error = %error, "cannot create the VMI; retrying");
                    self.known().expectations.creation_observed(key);
                    failure = Some(("FailedCreate", error.to_string()));
                    requeue = Some(RETRY);
                }
            }
            Action::Delete => {
                self.known()
                    .expectations
                    .expect_deletions(key, 1, self.clock.monotonic());
                match self.api.delete_vmi(&namespace, &name).await {
                    Ok(()) => {}
                    // Gone already: no deletion event of this call's will come.
                    Err(ApiError::NotFound(_)) => self.known().expectations.deletion_observed(key),
                    Err(error) => {
                        tracing::warn!(error = %error, "cannot delete the VMI; retrying");
                        self.known().expectations.deletion_observed(key);
                        failure = Some(("FailedDelete", error.to_string()));
                        requeue = Some(RETRY);
                    }
                }
            }
            Action::SwitchToAlways => {
                let patch = json!({"spec": {"runStrategy": "Always", "running": null}});
                *current = self
                    .api
                    .patch_vm(current, patch)
                    .await
                    .map_err(cannot("switch the run strategy to Always"))?;
            }
            Action::WaitForBackoff => requeue = backoff,
            Action::Nothing => {}
        }
        Ok(Applied { requeue, failure })
    }

    /// A deleted VM: its VMI goes first, then the VM's finalizer.
    async fn finish_deletion(
        &self,
        key: &str,
        vm: &VirtualMachine,
        vmi: Option<&VirtualMachineInstance>,
    ) -> Result<(), ReconcileError> {
        match vmi {
            Some(vmi) if vmi.metadata.deletion_timestamp.is_none() => {
                self.known()
                    .expectations
                    .expect_deletions(key, 1, self.clock.monotonic());
                let namespace = vm.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
                match self
                    .api
                    .delete_vmi(&namespace, vm.metadata.name.as_deref().unwrap_or_default())
                    .await
                {
                    Ok(()) => Ok(()),
                    Err(error) => {
                        self.known().expectations.deletion_observed(key);
                        Err(ReconcileError::new("delete the VMI of the deleted VM", error))
                    }
                }
            }
            None if has_finalizer(&vm.metadata, finalizers::VM_CONTROLLER) => self
                .api
                .patch_vm(vm, finalizers_patch(&vm.metadata, false))
                .await
                .map(drop)
                .map_err(cannot("remove the VM's finalizer")),
            // The VMI is on its way out, or nothing is left to do.
            Some(_) | None => Ok(()),
        }
    }

    /// The VMI if the VM owns it, its finalizer released when it is done.
    async fn owned_vmi(
        &self,
        vm: &VirtualMachine,
        vmi: Option<VirtualMachineInstance>,
    ) -> Result<Option<VirtualMachineInstance>, ReconcileError> {
        let vmi = vmi.filter(|v| {
            v.metadata
                .owner_references
                .as_ref()
                .is_some_and(|o| o.iter().any(|r| Some(&r.uid) == vm.metadata.uid.as_ref()))
        });
        if let Some(vmi) = &vmi {
            self.release_vmi(vmi)
                .await
                .map_err(cannot("release the VM controller's finalizer on the VMI"))?;
        }
        Ok(vmi)
    }

    /// Releases the VM controller's finalizer on a VMI that is final or being deleted (upstream
    /// does so once the final status is recorded on the VM), so the VMI can go.
    async fn release_vmi(&self, vmi: &VirtualMachineInstance) -> Result<(), ApiError> {
        let done = vmi.metadata.deletion_timestamp.is_some()
            || vmi
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(kubevirt_api::v1::VirtualMachineInstancePhase::is_final);
        if done && has_finalizer(&vmi.metadata, finalizers::VM_CONTROLLER) {
            self.api
                .patch_vmi_metadata(vmi, finalizers_patch(&vmi.metadata, false))
                .await?;
        }
        Ok(())
    }
}
