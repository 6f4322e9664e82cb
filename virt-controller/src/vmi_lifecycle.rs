//! The VMI controller's decision for one VMI: its phase step ([`crate::vmi_phase`]) carried into
//! the status (the pod to create, the node label), the pods of VMIs that are finished or deleted
//! to delete, and the finalizer to release once its pods are gone. Pure: the reconciler applies
//! the plan.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::{
    PhaseTransitionTimestamp, VirtualMachineInstance, VirtualMachineInstanceCondition,
    VirtualMachineInstancePhase as Phase, VirtualMachineInstanceStatus,
};
use kubevirt_api::well_known::{conditions, finalizers, labels};

use crate::data_volumes::{DataVolumeWait, VmiGate};
use crate::vmi_phase::{PhaseStep, PodState, phase_step};

/// A launcher pod of the VMI, as the controller sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    /// Its name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// The node it was scheduled to.
    pub node: Option<String>,
    /// `status.phase`.
    pub phase: String,
    /// The `compute` container is running and ready.
    pub is_compute_ready: bool,
    /// It has a deletion timestamp.
    pub is_terminating: bool,
    /// `PodScheduled=False`: its reason and message.
    pub unschedulable: Option<(String, String)>,
    /// The uid it runs as (`spec.securityContext.runAsUser`, 0 when unset).
    pub runtime_user: u32,
    /// The migration it was created for (its `kubevirt.io/migrationJobUID`): a migration target.
    pub migration_job: Option<String>,
    /// Its creation timestamp.
    pub created: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    /// `metadata.resourceVersion`: which of two views is newer ([`crate::own_writes`]).
    pub resource_version: Option<String>,
    /// A temporary pod that only makes claims waiting for their first consumer bind (its
    /// `kubevirt.io/ephemeral-provisioning` annotation): never the VMI's own.
    pub is_temporary: bool,
}

impl PodView {
    /// Failed, succeeded or being deleted.
    pub(crate) fn is_down(&self) -> bool {
        self.is_terminating || self.phase == "Failed" || self.phase == "Succeeded"
    }
}

/// What the controller observed.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The VMI.
    pub vmi: &'a VirtualMachineInstance,
    /// Its launcher pods (owned by it).
    pub pods: Vec<PodView>,
    /// No pod creation or deletion of this controller is still unseen.
    pub expectations_satisfied: bool,
    /// The uid a new launcher runs as, recorded in `status.runtimeUser` when the VMI has none.
    pub runtime_user: u32,
    /// Why the pod cannot be made yet: a claim it needs is missing (its message).
    pub missing_claim: Option<String>,
    /// What the status says of the VMI's claims that are there, by claim name.
    pub claim_infos: BTreeMap<String, kubevirt_api::v1::PersistentVolumeClaimInfo>,
    /// What its DataVolumes say of the pod and the status.
    pub data_volumes: VmiGate,
    /// Its VM state claim (persistent TPM and EFI).
    pub state_claim: StateClaimView,
    /// Now.
    pub now: Time,
}

/// What the lifecycle decision needs of a VMI's VM state claim.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateClaimView {
    /// The pod must wait for the claim: upstream's reason and a message.
    pub wait: Option<(&'static str, String)>,
    /// What the status says of the claim, when it is there.
    pub info: Option<kubevirt_api::v1::PersistentVolumeClaimInfo>,
}

/// The plan for one VMI.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Add the `foregroundDeleteVirtualMachine` finalizer (virt-api's webhook normally has).
    pub add_finalizer: bool,
    /// Remove it: the VMI is final and its pods are gone.
    pub remove_finalizer: bool,
    /// Create the launcher pod.
    pub create_pod: bool,
    /// Whether to create a temporary pod, placed as the launcher pod would be, that consumes the
    /// claims waiting for their first consumer.
    pub temporary_pod: TemporaryPod,
    /// Delete these pods.
    pub delete_pods: Vec<String>,
    /// Set the label `kubevirt.io/nodeName` to this node.
    pub node_label: Option<String>,
    /// Write this status (only when it differs from the current one).
    pub status: Option<VirtualMachineInstanceStatus>,
    /// The pod waits for a claim to appear: why (upstream's `FailedPvcNotFound` event).
    pub waits_for_claim: Option<String>,
    /// The pod waits for a DataVolume.
    pub waits_for_data_volume: Option<DataVolumeWait>,
}

/// What a pass does about the temporary pod (one to delete is in [`Plan::delete_pods`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TemporaryPod {
    /// Nothing.
    #[default]
    Leave,
    /// Create it.
    Create,
}

/// Upstream's reason while a claim a VMI needs is missing.
pub const REASON_PVC_NOT_FOUND: &str = "FailedPvcNotFound";
/// Upstream's reason while a claim's DataVolume cannot be found.
pub const REASON_DATA_VOLUME_IMPORT: &str = "FailedDataVolumeImport";
/// The VMI condition that sums up its DataVolumes' `Ready`.
pub const DATA_VOLUMES_READY: &str = "DataVolumesReady";
pub(crate) const SYNCHRONIZED: &str = "Synchronized";
const POD_SCHEDULED: &str = "PodScheduled";

/// Sets the condition `kind` to False with `reason` and `message`, keeping its transition time
/// when it says that already.
fn set_false(status: &mut VirtualMachineInstanceStatus, kind: &str, reason: &str, message: &str, now: &Time) {
    let wanted = VirtualMachineInstanceCondition {
        condition_type: kind.to_owned(),
        status: conditions::FALSE.to_owned(),
        last_probe_time: None,
        last_transition_time: Some(now.clone()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    };
    match status.conditions.iter_mut().find(|c| c.condition_type == kind) {
        Some(existing)
            if existing.status == wanted.status
                && existing.reason == wanted.reason
                && existing.message == wanted.message => {}
        Some(existing) => *existing = wanted,
        None => status.conditions.push(wanted),
    }
}

/// What a VMI shows while its pod waits for a claim, as upstream's: not synchronized, and not
/// schedulable.
fn wait_for_claim(status: &mut VirtualMachineInstanceStatus, message: &str, now: &Time) {
    set_false(status, SYNCHRONIZED, REASON_PVC_NOT_FOUND, message, now);
    set_false(status, POD_SCHEDULED, "Unschedulable", message, now);
}

/// The claim is there and the pod is made: the wait's conditions go (no pod exists yet, so no
/// `PodScheduled` can be the pod's).
fn end_claim_wait(status: &mut VirtualMachineInstanceStatus) {
    status.conditions.retain(|c| {
        c.condition_type != POD_SCHEDULED
            && !(c.condition_type == SYNCHRONIZED
                && matches!(
                    c.reason.as_deref(),
                    Some(
                        REASON_PVC_NOT_FOUND
                            | REASON_DATA_VOLUME_IMPORT
                            | crate::state_claims::REASON_NOT_READY
                            | crate::state_claims::REASON_PROBE_FAILED
                            | crate::state_claims::REASON_CREATE_FAILED
                    )
                ))
    });
}

/// Sets `DataVolumesReady` when any of the VMI's DataVolumes is there, keeping its
/// transition time while its status stays.
fn data_volumes_ready(status: &mut VirtualMachineInstanceStatus, gate: &VmiGate, now: &Time) {
    // Without a DataVolume to sum up, a condition written before stays, as upstream's.
    let Some((value, reason, message)) = gate.condition else {
        return;
    };
    let wanted = VirtualMachineInstanceCondition {
        condition_type: DATA_VOLUMES_READY.to_owned(),
        status: value.to_owned(),
        last_probe_time: None,
        last_transition_time: Some(now.clone()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
    };
    match status
        .conditions
        .iter_mut()
        .find(|c| c.condition_type == DATA_VOLUMES_READY)
    {
        Some(existing) if existing.status == wanted.status => {
            existing.reason = wanted.reason;
            existing.message = wanted.message;
        }
        Some(existing) => *existing = wanted,
        None => status.conditions.push(wanted),
    }
}

fn has_finalizer(vmi: &VirtualMachineInstance) -> bool {
    vmi.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|x| x == finalizers::VMI_FOREGROUND_DELETE))
}

fn enter(status: &mut VirtualMachineInstanceStatus, phase: Phase, now: &Time) {
    if status.phase == Some(phase) {
        return;
    }
    status.phase = Some(phase);
    status.phase_transition_timestamps.push(PhaseTransitionTimestamp {
        phase: Some(phase),
        phase_transition_timestamp: Some(now.clone()),
    });
}

fn fail(status: &mut VirtualMachineInstanceStatus, reason: &str, now: &Time) {
    enter(status, Phase::Failed, now);
    status.reason = Some(reason.to_owned());
}

/// Copies a pod's `PodScheduled=False` into the VMI (it drives the VM's `ErrorUnschedulable`).
fn pod_scheduled_condition(status: &mut VirtualMachineInstanceStatus, pod: Option<&PodView>, now: &Time) {
    let wanted = pod.and_then(|p| p.unschedulable.clone());
    let existing = status.conditions.iter().position(|c| c.condition_type == POD_SCHEDULED);
    match (wanted, existing) {
        (Some((reason, message)), Some(index)) => {
            let condition = &mut status.conditions[index];
            condition.reason = Some(reason);
            condition.message = Some(message);
        }
        (Some((reason, message)), None) => status.conditions.push(VirtualMachineInstanceCondition {
            condition_type: POD_SCHEDULED.to_owned(),
            status: conditions::FALSE.to_owned(),
            last_probe_time: None,
            last_transition_time: Some(now.clone()),
            reason: Some(reason),
            message: Some(message),
        }),
        (None, Some(index)) => {
            status.conditions.remove(index);
        }
        (None, None) => {}
    }
}

/// What the phase decision sees of the pods: the first live one decides, terminating ones only
/// count as "not absent".
fn pod_state(pods: &[PodView], live: Option<&PodView>) -> PodState {
    match live {
        None if pods.is_empty() => PodState::Absent,
        None => PodState::Terminating,
        Some(pod) if pod.is_down() => PodState::Down,
        Some(pod) if pod.is_compute_ready && pod.phase == "Running" && pod.node.is_some() => PodState::Ready,
        Some(_) => PodState::Starting,
    }
}

/// The names of the pods not being deleted.
fn names_of_live(pods: &[&PodView]) -> Vec<String> {
    pods.iter()
        .filter(|p| !p.is_terminating)
        .map(|p| p.name.clone())
        .collect()
}

/// A VMI whose pod waits for its DataVolumes: Pending, saying why when a DataVolume cannot be
/// found, and with a temporary pod while a claim waits for its first consumer (one, not again
/// while its creation is unseen). Whether a temporary pod is to stay.
fn hold_for_data_volumes(
    status: &mut VirtualMachineInstanceStatus,
    plan: &mut Plan,
    wait: &DataVolumeWait,
    observed: &Observed<'_>,
    temporary: &[&PodView],
) -> bool {
    let now = &observed.now;
    enter(status, Phase::Pending, now);
    end_claim_wait(status);
    plan.waits_for_data_volume = Some(wait.clone());
    match wait {
        DataVolumeWait::Unknown(message) => {
            set_false(status, SYNCHRONIZED, REASON_DATA_VOLUME_IMPORT, message, now);
            false
        }
        DataVolumeWait::WaitForFirstConsumer => {
            // As upstream: a temporary pod that failed fails the VMI.
            if temporary.iter().any(|p| !p.is_terminating && p.phase == "Failed") {
                enter(status, Phase::Failed, now);
                return true;
            }
            if observed.expectations_satisfied && names_of_live(temporary).is_empty() {
                plan.temporary_pod = TemporaryPod::Create;
            }
            true
        }
        DataVolumeWait::Populating => false,
    }
}

/// Upstream describes the volumes once the pod is there: Scheduling with a pod, Scheduled and
/// Running.
fn describe_volumes(
    status: &mut VirtualMachineInstanceStatus,
    current: &VirtualMachineInstanceStatus,
    observed: &Observed<'_>,
    has_pod: bool,
) {
    let phase = status.phase.unwrap_or_default();
    if matches!(phase, Phase::Scheduled | Phase::Running) || (phase == Phase::Scheduling && has_pod) {
        status.volume_status = crate::volume_status::volume_statuses(
            observed.vmi,
            &current.volume_status,
            &observed.claim_infos,
            observed.state_claim.info.as_ref(),
        );
    }
}

/// Decides what to do for one VMI.
#[must_use]
pub fn plan(observed: &Observed<'_>) -> Plan {
    let vmi = observed.vmi;
    let now = &observed.now;
    let current = vmi.status.clone().unwrap_or_default();
    let phase = current.phase.unwrap_or_default();
    let mut status = current.clone();
    let mut plan = Plan::default();
    let (temporary, own): (Vec<&PodView>, Vec<&PodView>) = observed.pods.iter().partition(|p| p.is_temporary);
    let own: Vec<PodView> = own.into_iter().cloned().collect();
    // The VMI's own pod: the one on its node once it has one (after a migration, the target's),
    // before that the first that is no migration's target.
    let live = || own.iter().filter(|p| !p.is_terminating);
    let live_pod = current
        .node_name
        .as_deref()
        .and_then(|node| live().find(|p| p.node.as_deref() == Some(node)))
        .or_else(|| live().find(|p| p.migration_job.is_none()))
        .or_else(|| live().next());
    let is_deleting = vmi.metadata.deletion_timestamp.is_some();
    let pod = pod_state(&own, live_pod);
    let mut keeps_temporary = false;

    match phase_step(phase, pod, is_deleting, observed.expectations_satisfied) {
        PhaseStep::Stay => {}
        // Upstream fails a VMI without a pod whose DataVolume failed.
        PhaseStep::CreatePod if observed.data_volumes.failed => enter(&mut status, Phase::Failed, now),
        PhaseStep::CreatePod if let Some(message) = &observed.missing_claim => {
            enter(&mut status, Phase::Pending, now);
            wait_for_claim(&mut status, message, now);
            plan.waits_for_claim = Some(message.clone());
        }
        PhaseStep::CreatePod if let Some(wait) = &observed.data_volumes.wait => {
            keeps_temporary = hold_for_data_volumes(&mut status, &mut plan, wait, observed, &temporary);
        }
        PhaseStep::CreatePod if let Some((reason, message)) = &observed.state_claim.wait => {
            enter(&mut status, Phase::Pending, now);
            set_false(&mut status, SYNCHRONIZED, reason, message, now);
        }
        PhaseStep::CreatePod => {
            end_claim_wait(&mut status);
            plan.create_pod = true;
            // The user the pod is rendered for; it never changes for this VMI afterwards.
            status.runtime_user.get_or_insert(u64::from(observed.runtime_user));
            enter(&mut status, Phase::Pending, now);
            enter(&mut status, Phase::Scheduling, now);
        }
        PhaseStep::Schedule => {
            enter(&mut status, Phase::Pending, now);
            enter(&mut status, Phase::Scheduling, now);
        }
        PhaseStep::Scheduled => {
            if let Some(node) = live_pod.and_then(|p| p.node.as_ref()) {
                let labelled = vmi
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::NODE_NAME))
                    .is_some_and(|n| n == node);
                if !labelled {
                    plan.node_label = Some(node.clone());
                }
                status.node_name = Some(node.clone());
                enter(&mut status, Phase::Scheduled, now);
            }
        }
        PhaseStep::Fail(reason) => fail(&mut status, reason, now),
    }

    if is_deleting || phase.is_final() {
        // Finished or deleted: its pods go (the launcher stops the guest gracefully on SIGTERM),
        // once: not again while a deletion already sent is not seen yet.
        if observed.expectations_satisfied {
            plan.delete_pods = observed
                .pods
                .iter()
                .filter(|p| !p.is_terminating)
                .map(|p| p.name.clone())
                .collect();
        }
        let final_now = status.phase.is_some_and(Phase::is_final);
        plan.remove_finalizer =
            final_now && observed.pods.is_empty() && observed.expectations_satisfied && has_finalizer(vmi);
    } else {
        if status.runtime_user.is_none()
            && let Some(pod) = live_pod
        {
            // The status write that follows a pod's creation failed: the pod says who it runs as.
            status.runtime_user = Some(u64::from(pod.runtime_user));
        }
        plan.add_finalizer = !has_finalizer(vmi);
        // A temporary pod goes once its claims no longer wait for a consumer.
        if !keeps_temporary && observed.expectations_satisfied {
            plan.delete_pods = names_of_live(&temporary);
        }
        data_volumes_ready(&mut status, &observed.data_volumes, now);
        if phase == Phase::Scheduling && matches!(pod, PodState::Starting | PodState::Ready) {
            pod_scheduled_condition(&mut status, live_pod, now);
        }
        describe_volumes(&mut status, &current, observed, live_pod.is_some());
        status.active_pods = own
            .iter()
            .filter_map(|p| Some((p.uid.clone(), p.node.clone()?)))
            .collect::<BTreeMap<_, _>>();
    }
    if status != current && !only_pods_seen_while_scheduling(&current, &status) {
        plan.status = Some(status);
    }
    plan
}

/// Whether the only news is the pods a Scheduling VMI's launcher pod was placed with (and the
/// volumes described once it is there): that waits
/// for the write that schedules the VMI, a moment later, so a start costs one status write less.
/// Nothing reads `activePods` before then (virt-handler looks for the launcher once the VMI is
/// Scheduled on its node), and a pod that cannot be placed still shows at once, as the
/// PodScheduled condition.
fn only_pods_seen_while_scheduling(
    current: &VirtualMachineInstanceStatus,
    next: &VirtualMachineInstanceStatus,
) -> bool {
    let scheduling = Some(Phase::Scheduling);
    if current.phase != scheduling || next.phase != scheduling {
        return false;
    }
    let mut without_pods = next.clone();
    without_pods.active_pods.clone_from(&current.active_pods);
    without_pods.volume_status.clone_from(&current.volume_status);
    without_pods == *current
}

#[cfg(test)]
mod tests;
