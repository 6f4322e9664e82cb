//! A VMI's VM state claim before its launcher pod: observed from the claim store (and, for a
//! pending claim, its StorageClass), decided by [`crate::state_claims::decide`], then applied:
//! made, deleted, or waited for.

use kube::runtime::watcher::Event;
use kubevirt_api::clock::Clock;
use kubevirt_api::persistent_state::{self, CLAIM_LABEL};
use kubevirt_api::v1::VirtualMachineInstance;

use super::VmiController;
use crate::cluster_api::{ApiError, ControllerApi};
use crate::pod::PodConfig;
use crate::reconcile_error::ReconcileError;
use crate::state_claims::make::make_state_claim;
use crate::state_claims::{
    ClaimPurpose, ClassBinding, REASON_CREATE_FAILED, REASON_PROBE_FAILED, StateClaim, StateStep, decide,
};
use crate::vmi_lifecycle::StateClaimView;

/// How soon a VMI whose claim could not be made or read is looked at again: nothing watches
/// StorageClasses, and a default class may appear later.
const STATE_CLAIM_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

/// What the reconcile goes on with: the claim the pod mounts, and what the plan sees of it.
#[derive(Debug, Default)]
pub(super) struct StateClaimOutcome {
    /// The claim the launcher pod mounts, once it is usable.
    pub(super) ready: Option<String>,
    /// What the lifecycle decision sees.
    pub(super) view: StateClaimView,
    /// Look again after [`STATE_CLAIM_RETRY`]: the claim could not be made or its class read.
    pub(super) retry: bool,
}

impl StateClaimOutcome {
    /// When to look at the VMI again: as the expectations say (`expires_in`), and within
    /// [`STATE_CLAIM_RETRY`] when the claim could not be made or its class read.
    pub(super) fn requeue(&self, expires_in: Option<std::time::Duration>) -> Option<std::time::Duration> {
        if !self.retry {
            return expires_in;
        }
        Some(expires_in.map_or(STATE_CLAIM_RETRY, |e| e.min(STATE_CLAIM_RETRY)))
    }
}

/// Whether the VMI already says it waits for `reason` with `message` (its event was recorded).
fn already_waiting(vmi: &VirtualMachineInstance, reason: &str, message: &str) -> bool {
    vmi.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.condition_type == crate::vmi_lifecycle::SYNCHRONIZED
                && c.reason.as_deref() == Some(reason)
                && c.message.as_deref() == Some(message)
        })
    })
}

impl<A: ControllerApi, K: Clock> VmiController<A, K> {
    /// Looks after the state claim of `vmi`, which has no launcher pod yet (`may_create_pod`) or
    /// has one (then only its status entry is read).
    pub(super) async fn state_claim(
        &self,
        vmi: &VirtualMachineInstance,
        may_create_pod: bool,
        config: &PodConfig,
    ) -> Result<StateClaimOutcome, ReconcileError> {
        let needed = persistent_state::needed(&vmi.spec);
        // A VMI that neither needs a claim nor may get a pod has nothing to look for (the lookup
        // goes through every claim the watch keeps).
        if !needed && !may_create_pod {
            return Ok(StateClaimOutcome::default());
        }
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let name = vmi.metadata.name.as_deref().unwrap_or_default();
        let found = self.claims.state_claim(namespace, name);
        let mut outcome = StateClaimOutcome {
            view: StateClaimView {
                wait: None,
                info: found.as_ref().map(|(_, info)| info.clone()),
            },
            ..StateClaimOutcome::default()
        };
        if !may_create_pod {
            return Ok(outcome);
        }
        let claim = found.map(|(claim, _)| claim);
        // An older release's claim, found by its name, gets the label (as upstream labels it), so
        // that its changes wake the VMI.
        if let Some(legacy) = claim.as_ref().filter(|c| !c.labelled)
            && let Err(error) = self
                .api
                .patch_pvc_labels(namespace, &legacy.name, serde_json::json!({CLAIM_LABEL: name}))
                .await
        {
            tracing::warn!(claim = %legacy.name, error = %error, "cannot label an older release's VM state claim");
        }
        let binding = self.binding(needed, claim.as_ref()).await;
        match decide(needed, claim.as_ref(), &binding) {
            StateStep::Nothing => {}
            StateStep::Delete(claim) => match self.api.delete_pvc(namespace, &claim).await {
                Ok(()) | Err(ApiError::NotFound(_)) => outcome.view.info = None,
                Err(error) => return Err(ReconcileError::new(format!("delete the VM state claim {claim}"), error)),
            },
            StateStep::Create => match make_state_claim(
                &self.api,
                vmi,
                config.vm_state_storage_class.as_deref(),
                &ClaimPurpose::Vmi,
            )
            .await
            {
                Ok(created) => {
                    let phase = created.status.as_ref().and_then(|s| s.phase.clone());
                    let class = created.spec.as_ref().and_then(|s| s.storage_class_name.clone());
                    let claim_name = created.metadata.name.clone().unwrap_or_default();
                    self.event(
                        vmi,
                        "Normal",
                        "SuccessfulCreate",
                        &format!("Created VM state PersistentVolumeClaim {claim_name}"),
                    )
                    .await;
                    // The store has it before the watch does: the next pass must not make another.
                    self.claims.on_event(&Event::Apply(created));
                    let claim = StateClaim {
                        name: claim_name,
                        phase,
                        storage_class: class,
                        labelled: true,
                    };
                    let binding = self.binding(true, Some(&claim)).await;
                    apply_readiness(decide(true, Some(&claim), &binding), &mut outcome);
                }
                Err(error) => {
                    let message = error.to_string();
                    if !already_waiting(vmi, REASON_CREATE_FAILED, &message) {
                        self.event(vmi, "Warning", REASON_CREATE_FAILED, &message).await;
                    }
                    outcome.view.wait = Some((REASON_CREATE_FAILED, message));
                    outcome.retry = true;
                }
            },
            step @ (StateStep::Wait { .. } | StateStep::Ready(_)) => apply_readiness(step, &mut outcome),
        }
        Ok(outcome)
    }

    /// How the class of a pending claim binds (read only for a needed claim that is not bound).
    async fn binding(&self, needed: bool, claim: Option<&StateClaim>) -> ClassBinding {
        let Some(claim) = claim.filter(|c| needed && matches!(c.phase.as_deref(), None | Some("Pending"))) else {
            return ClassBinding::NotNeeded;
        };
        let Some(class) = claim.storage_class.as_deref() else {
            return ClassBinding::Unknown("no storage class name".to_owned());
        };
        match self.api.get_storage_class(class).await {
            Ok(Some(found)) if found.volume_binding_mode.as_deref() == Some("WaitForFirstConsumer") => {
                ClassBinding::WaitsForFirstConsumer
            }
            Ok(Some(_)) => ClassBinding::Immediate,
            Ok(None) => ClassBinding::Unknown(format!("storage class {class} not found")),
            Err(error) => ClassBinding::Unknown(error.to_string()),
        }
    }
}

/// What a claim that is there says: the pod mounts it, or waits (and is looked at again when its
/// class could not be read).
fn apply_readiness(step: StateStep, outcome: &mut StateClaimOutcome) {
    match step {
        StateStep::Ready(claim) => outcome.ready = Some(claim),
        StateStep::Wait { reason, message } => {
            outcome.retry = reason == REASON_PROBE_FAILED;
            outcome.view.wait = Some((reason, message));
        }
        StateStep::Nothing | StateStep::Delete(_) | StateStep::Create => {}
    }
}
