//! A VMI's VM state claim before its launcher pod: observed from the claim store (and, for a
//! pending claim, its StorageClass), decided by [`crate::state_claims::decide`], then applied:
//! made, deleted, or waited for.

use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::Clock;
use kubevirt_api::persistent_state::{self, DEFAULT_CLASS_ANNOTATION, DEFAULT_VIRT_CLASS_ANNOTATION};
use kubevirt_api::v1::VirtualMachineInstance;

use super::VmiController;
use crate::cluster_api::{ApiError, ControllerApi};
use crate::pod::PodConfig;
use crate::reconcile_error::ReconcileError;
use crate::state_claims::{
    ClaimPurpose, ClassBinding, ClassFacts, REASON_CREATE_FAILED, StateClaim, StateStep, access_mode, choose_class,
    claim_for, decide,
};
use crate::vmi_lifecycle::StateClaimView;

/// What the reconcile goes on with: the claim the pod mounts, and what the plan sees of it.
#[derive(Debug, Default)]
pub(super) struct StateClaimOutcome {
    /// The claim the launcher pod mounts, once it is usable.
    pub(super) ready: Option<String>,
    /// What the lifecycle decision sees.
    pub(super) view: StateClaimView,
}

fn class_facts(class: &StorageClass) -> ClassFacts {
    let annotated = |key: &str| {
        class
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .is_some_and(|v| v == "true")
    };
    ClassFacts {
        name: class.metadata.name.clone().unwrap_or_default(),
        default_for_virt: annotated(DEFAULT_VIRT_CLASS_ANNOTATION),
        default: annotated(DEFAULT_CLASS_ANNOTATION),
    }
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
                    };
                    let binding = self.binding(true, Some(&claim)).await;
                    self.apply_readiness(decide(true, Some(&claim), &binding), &mut outcome);
                }
                Err(error) => {
                    let message = error.to_string();
                    self.event(vmi, "Warning", REASON_CREATE_FAILED, &message).await;
                    outcome.view.wait = Some((REASON_CREATE_FAILED, message));
                }
            },
            step @ (StateStep::Wait { .. } | StateStep::Ready(_)) => self.apply_readiness(step, &mut outcome),
        }
        Ok(outcome)
    }

    fn apply_readiness(&self, step: StateStep, outcome: &mut StateClaimOutcome) {
        match step {
            StateStep::Ready(claim) => outcome.ready = Some(claim),
            StateStep::Wait { reason, message } => outcome.view.wait = Some((reason, message)),
            StateStep::Nothing | StateStep::Delete(_) | StateStep::Create => {}
        }
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

/// Makes a state claim for `vmi` (its own, or a migration target's), its class and access mode
/// chosen as upstream chooses them; the class is `configured` when the cluster names one.
///
/// # Errors
/// The API server's, or [`ApiError::Precondition`] when no class can be chosen.
pub(crate) async fn make_state_claim<A: ControllerApi>(
    api: &A,
    vmi: &VirtualMachineInstance,
    configured: Option<&str>,
    purpose: &ClaimPurpose,
) -> Result<k8s_openapi::api::core::v1::PersistentVolumeClaim, ApiError> {
    let classes = if configured.is_some() {
        Vec::new()
    } else {
        api.list_storage_classes().await?.iter().map(class_facts).collect()
    };
    let class = choose_class(configured, &classes).map_err(ApiError::Precondition)?;
    let sets = api.storage_profile_sets(&class).await?;
    let claim = claim_for(vmi, &class, access_mode(configured.is_some(), &sets), purpose);
    api.create_pvc(&claim).await
}
