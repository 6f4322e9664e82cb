//! What the VM controller writes, as upstream's `pkg/virt-controller/watch/vm/vm.go` does: the VMI
//! it creates from a VM's template (`setupVMIFromVM`) and the VM's status (`updateStatus`):
//! created, ready, printableStatus, runStrategy, the state-change requests, the start-failure
//! record behind the crash-loop backoff, and the conditions. Pure.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kubevirt_api::v1::{
    RunStrategy, VirtualMachine, VirtualMachineInstance, VirtualMachineInstanceCondition,
    VirtualMachineInstancePhase as Phase, VirtualMachineStartFailure, VirtualMachineStateChangeRequest,
    VirtualMachineStatus,
};
use kubevirt_api::well_known::{annotations, conditions, finalizers};

use crate::printable_status::{StatusInputs, VolumeStates, crash_loop_backoff, printable_status};
use crate::run_strategy::{ChangeRequest, Decision};

/// The reference that makes the VM the controlling owner of what it creates (its VMI, its
/// DataVolumes), blocking the owner's deletion until they are gone.
#[must_use]
pub fn owned_by(vm: &VirtualMachine) -> OwnerReference {
    OwnerReference {
        api_version: "kubevirt.io/v1".to_owned(),
        kind: "VirtualMachine".to_owned(),
        name: vm.metadata.name.clone().unwrap_or_default(),
        uid: vm.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The VMI a VM runs: name, namespace, labels and annotations of the template, the template's
/// spec, owned by the VM, with the VM controller's finalizer and the VM generation.
#[must_use]
pub fn vmi_from_vm(vm: &VirtualMachine, paused: bool) -> VirtualMachineInstance {
    let template = &vm.spec.template;
    let template_meta = template.metadata.clone().unwrap_or_default();
    let mut annotations_map = template_meta.annotations.unwrap_or_default();
    annotations_map.insert(
        annotations::VM_GENERATION.to_owned(),
        vm.metadata.generation.unwrap_or(0).to_string(),
    );
    let mut spec = template.spec.clone().unwrap_or_default();
    if paused {
        spec.start_strategy = Some("Paused".to_owned());
    }
    let mut vmi = VirtualMachineInstance::new(vm.metadata.name.as_deref().unwrap_or_default(), spec);
    vmi.metadata = ObjectMeta {
        name: vm.metadata.name.clone(),
        namespace: vm.metadata.namespace.clone(),
        labels: template_meta.labels,
        annotations: Some(annotations_map),
        finalizers: Some(vec![finalizers::VM_CONTROLLER.to_owned()]),
        owner_references: Some(vec![owned_by(vm)]),
        ..ObjectMeta::default()
    };
    vmi
}

/// The first state-change request, typed.
#[must_use]
pub fn first_request(vm: &VirtualMachine) -> Option<ChangeRequest> {
    let request = vm.status.as_ref()?.state_change_requests.first()?;
    match request.action.as_str() {
        "Start" => Some(ChangeRequest::Start {
            paused: request.data.get("paused").is_some_and(|p| p == "true"),
        }),
        "Stop" => Some(ChangeRequest::Stop {
            uid: request.uid.clone(),
        }),
        _ => None,
    }
}

/// Whether the VMI ever ran (its phase history has Running).
fn ever_ran(vmi: &VirtualMachineInstance) -> bool {
    vmi.status.as_ref().is_some_and(|s| {
        s.phase_transition_timestamps
            .iter()
            .any(|t| t.phase == Some(Phase::Running))
    })
}

/// The start-failure record: a VMI that ended without ever running counts once (by UID); a VMI
/// that runs, or a strategy that does not restart, clears it.
fn start_failure(
    current: Option<&VirtualMachineStartFailure>,
    strategy: RunStrategy,
    vmi: Option<&VirtualMachineInstance>,
    now: Timestamp,
    jitter: f64,
) -> Option<VirtualMachineStartFailure> {
    if !matches!(
        strategy,
        RunStrategy::Always | RunStrategy::RerunOnFailure | RunStrategy::Once
    ) {
        return None;
    }
    let Some(vmi) = vmi else { return current.cloned() };
    if ever_ran(vmi) || vmi.status.as_ref().and_then(|s| s.phase) == Some(Phase::Running) {
        return None;
    }
    let failed = vmi.status.as_ref().and_then(|s| s.phase).is_some_and(Phase::is_final);
    let counted = current.and_then(|c| c.last_failed_vmi_uid.as_deref()) == vmi.metadata.uid.as_deref();
    if !failed || counted {
        return current.cloned();
    }
    let count = current.and_then(|c| c.consecutive_fail_count).unwrap_or(0) + 1;
    let delay = crash_loop_backoff(u32::try_from(count).unwrap_or(u32::MAX), jitter);
    let retry = now
        .checked_add(SignedDuration::try_from(delay).unwrap_or(SignedDuration::ZERO))
        .unwrap_or(now);
    Some(VirtualMachineStartFailure {
        last_failed_vmi_uid: vmi.metadata.uid.clone(),
        retry_after_timestamp: Some(Time(retry)),
        consecutive_fail_count: Some(count),
    })
}

/// Whether a crash-loop backoff still holds the next start.
#[must_use]
pub fn backing_off(vm: &VirtualMachine, now: Timestamp) -> Option<Duration> {
    let retry = vm
        .status
        .as_ref()?
        .start_failure
        .as_ref()?
        .retry_after_timestamp
        .as_ref()?
        .0;
    let left = Duration::try_from(retry.duration_since(now)).ok()?;
    (!left.is_zero()).then_some(left)
}

fn vmi_condition<'a>(
    vmi: Option<&'a VirtualMachineInstance>,
    kind: &str,
) -> Option<&'a VirtualMachineInstanceCondition> {
    vmi?.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.condition_type == kind)
}

/// Conditions the VM controller sets on the VM itself rather than mirroring from the VMI.
pub const VM_OWNED_CONDITIONS: [&str; 2] = ["Failure", "RestartRequired"];

/// The VM's next status after `decision`, observed with `vmi` and what the VM's volumes say
/// (`clock`: now, and the backoff's jitter).
#[must_use]
pub fn next_vm_status(
    vm: &VirtualMachine,
    strategy: RunStrategy,
    vmi: Option<&VirtualMachineInstance>,
    decision: &Decision,
    (now, jitter): (Timestamp, f64),
    volumes: VolumeStates,
) -> VirtualMachineStatus {
    let mut status = vm.status.clone().unwrap_or_default();
    if decision.trim_first_request && !status.state_change_requests.is_empty() {
        status.state_change_requests.remove(0);
    }
    if decision.append_start_request {
        status.state_change_requests.push(VirtualMachineStateChangeRequest {
            action: "Start".to_owned(),
            ..VirtualMachineStateChangeRequest::default()
        });
    }
    status.start_failure = start_failure(status.start_failure.as_ref(), strategy, vmi, now, jitter);
    let creating = matches!(decision.action, crate::run_strategy::Action::Create { .. });
    let deleting = matches!(decision.action, crate::run_strategy::Action::Delete);
    status.created = Some(vmi.is_some());
    let ready = vmi_condition(vmi, conditions::READY).is_some_and(|c| c.status == conditions::TRUE);
    status.ready = Some(ready);
    if vmi.is_some() || creating {
        status.run_strategy = Some(strategy.as_str().to_owned());
    }
    let inputs = StatusInputs {
        vm_deleting: vm.metadata.deletion_timestamp.is_some(),
        vmi_phase: vmi.map(|v| v.status.as_ref().and_then(|s| s.phase).unwrap_or_default()),
        vmi_stopping: vmi.is_some_and(|v| v.metadata.deletion_timestamp.is_some()) || deleting,
        vmi_paused: vmi_condition(vmi, conditions::PAUSED).is_some_and(|c| c.status == conditions::TRUE),
        sync_failure_reason: vmi_condition(vmi, "Synchronized")
            .filter(|c| c.status == conditions::FALSE)
            .and_then(|c| c.reason.clone()),
        pod_scheduled_false_reason: vmi_condition(vmi, "PodScheduled").and_then(|c| c.reason.clone()),
        creation_expected: creating,
        consecutive_fail_count: status
            .start_failure
            .as_ref()
            .and_then(|f| f.consecutive_fail_count)
            .map_or(0, |c| u32::try_from(c).unwrap_or(0)),
        strategy: Some(strategy),
        volumes,
    };
    status.printable_status = Some(printable_status(&inputs).to_owned());
    let ready_condition = match vmi_condition(vmi, conditions::READY) {
        Some(condition) => condition.clone(),
        None => VirtualMachineInstanceCondition {
            condition_type: conditions::READY.to_owned(),
            status: conditions::FALSE.to_owned(),
            last_probe_time: None,
            last_transition_time: None,
            reason: Some(
                if vmi.is_some() {
                    "VMIConditionMissing"
                } else {
                    "VMINotExists"
                }
                .to_owned(),
            ),
            message: Some(
                if vmi.is_some() {
                    "VMI does not have a ready condition"
                } else {
                    "VMI does not exist"
                }
                .to_owned(),
            ),
        },
    };
    // The VM's own conditions stay, last, in their order (so an unchanged status is written
    // unchanged); every VMI condition is mirrored before them, as upstream copies them.
    let owned: Vec<VirtualMachineInstanceCondition> = status
        .conditions
        .drain(..)
        .filter(|c| VM_OWNED_CONDITIONS.contains(&c.condition_type.as_str()))
        .collect();
    status.conditions.push(ready_condition);
    if let Some(vmi_status) = vmi.and_then(|v| v.status.as_ref()) {
        status.conditions.extend(
            vmi_status
                .conditions
                .iter()
                .filter(|c| c.condition_type != conditions::READY)
                .cloned(),
        );
    }
    status.conditions.extend(owned);
    status
}

/// Sets the VM's `Failure` condition from a failed step (reason, message), or clears it.
pub fn set_failure(status: &mut VirtualMachineStatus, failure: Option<(&str, String)>, now: Timestamp) {
    const FAILURE: &str = "Failure";
    let unchanged = failure.as_ref().is_some_and(|(reason, message)| {
        status.conditions.iter().any(|c| {
            c.condition_type == FAILURE && c.reason.as_deref() == Some(*reason) && c.message.as_ref() == Some(message)
        })
    });
    // The same failure again keeps its transition time: nothing to write.
    if unchanged {
        return;
    }
    status.conditions.retain(|c| c.condition_type != FAILURE);
    if let Some((reason, message)) = failure {
        status.conditions.push(VirtualMachineInstanceCondition {
            condition_type: FAILURE.to_owned(),
            status: conditions::TRUE.to_owned(),
            last_probe_time: None,
            last_transition_time: Some(Time(now)),
            reason: Some(reason.to_owned()),
            message: Some(message),
        });
    }
}
