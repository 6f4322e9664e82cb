//! What a start, stop, restart, pause or unpause request changes, decided from the VM and its VMI
//! as read (upstream's `pkg/virt-api/rest/lifecycle.go`). Pure: each function returns the writes
//! to make, as JSON patches with `test` operations so that a concurrent change makes the write fail
//! with a conflict instead of being overwritten.

use std::collections::BTreeMap;

use kubevirt_api::v1::{
    RestartOptions, RunStrategy, StartOptions, StopOptions, VirtualMachine, VirtualMachineInstance,
    VirtualMachineInstancePhase, VirtualMachineStateChangeRequest, VirtualMachineStatus,
};
use kubevirt_api::well_known::conditions;
use serde_json::{Value, json};

use super::status::{ApiStatus, VM, VMI};

/// Upstream's message when a volume migration left the VM needing manual recovery.
pub const MANUAL_RECOVERY_REQUIRED: &str = "VM recovery required: Volume migration failed, leaving some volumes pointing to non-consistent targets; manual intervention is needed to reassign them to their original volumes.";
const VM_NOT_RUNNING: &str = "VM is not running";

/// The writes one request makes, in order: VMI patch, VM patch, VM status patch, pod deletion.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// JSON patch on the VMI.
    pub vmi_patch: Option<Value>,
    /// JSON patch on the VM.
    pub vm_patch: Option<Value>,
    /// JSON patch on the VM's status subresource.
    pub vm_status_patch: Option<Value>,
    /// Delete the running launcher pod of this VMI uid, with a grace period of 1 s.
    pub delete_launcher_pod_of: Option<String>,
}

fn is_final(vmi: &VirtualMachineInstance) -> bool {
    vmi.status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(VirtualMachineInstancePhase::is_final)
}

fn phase(vmi: &VirtualMachineInstance) -> Option<VirtualMachineInstancePhase> {
    vmi.status.as_ref().and_then(|s| s.phase)
}

fn name_of(vm: &VirtualMachine) -> String {
    vm.metadata.name.clone().unwrap_or_default()
}

fn vm_condition_true(vm: &VirtualMachine, kind: &str) -> bool {
    vm.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.condition_type == kind && c.status == conditions::TRUE)
    })
}

fn run_strategy(vm: &VirtualMachine) -> Result<RunStrategy, ApiStatus> {
    vm.spec.effective_run_strategy().map_err(ApiStatus::internal)
}

fn request(action: &str, uid: Option<String>, data: BTreeMap<String, String>) -> VirtualMachineStateChangeRequest {
    VirtualMachineStateChangeRequest {
        action: action.to_owned(),
        data,
        uid,
    }
}

/// The status patch that queues `changes` (upstream's `getChangeRequestJson`).
fn change_request_patch(
    vm: &VirtualMachine,
    changes: Vec<VirtualMachineStateChangeRequest>,
) -> Result<Value, ApiStatus> {
    let status = vm.status.clone().unwrap_or_default();
    let mut ops = Vec::new();
    if status == VirtualMachineStatus::default() {
        let new = VirtualMachineStatus {
            state_change_requests: changes,
            ..VirtualMachineStatus::default()
        };
        ops.push(json!({"op": "add", "path": "/status", "value": new}));
    } else {
        let current = if status.state_change_requests.is_empty() {
            Value::Null
        } else {
            json!(status.state_change_requests)
        };
        ops.push(json!({"op": "test", "path": "/status/stateChangeRequests", "value": current}));
        let single_stop = changes.len() == 1 && changes[0].action == "Stop";
        if status.state_change_requests.is_empty() {
            ops.push(json!({"op": "add", "path": "/status/stateChangeRequests", "value": changes}));
        } else if single_stop {
            ops.push(json!({"op": "replace", "path": "/status/stateChangeRequests", "value": changes}));
        } else {
            return Err(ApiStatus::internal(
                "unable to complete request: stop/start already underway",
            ));
        }
        if status.start_failure.is_some() {
            ops.push(json!({"op": "remove", "path": "/status/startFailure"}));
        }
    }
    Ok(Value::Array(ops))
}

/// Switches `runStrategy` (or the legacy `running`) on or off.
fn running_patch(vm: &VirtualMachine, running: bool) -> Value {
    match &vm.spec.run_strategy {
        Some(current) => {
            let target = if running {
                RunStrategy::Always
            } else {
                RunStrategy::Halted
            };
            json!([
                {"op": "test", "path": "/spec/runStrategy", "value": current},
                {"op": "replace", "path": "/spec/runStrategy", "value": target.as_str()},
            ])
        }
        None => json!([
            {"op": "test", "path": "/spec/running", "value": vm.spec.running},
            {"op": "replace", "path": "/spec/running", "value": running},
        ]),
    }
}

/// `PUT .../virtualmachines/{name}/start`.
pub fn plan_start(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    options: &StartOptions,
) -> Result<Plan, ApiStatus> {
    let name = name_of(vm);
    if let Some(vmi) = vmi
        && !is_final(vmi)
        && !matches!(phase(vmi), None | Some(VirtualMachineInstancePhase::Unknown))
    {
        return Err(ApiStatus::conflict(VM, &name, "VM is already running"));
    }
    if vm_condition_true(vm, "ManualRecoveryRequired") {
        return Err(ApiStatus::conflict(VM, &name, MANUAL_RECOVERY_REQUIRED));
    }
    let mut data = BTreeMap::new();
    if options.paused {
        data.insert("paused".to_owned(), "true".to_owned());
    }
    let strategy = run_strategy(vm)?;
    let mut plan = Plan::default();
    match strategy {
        RunStrategy::Halted => {
            let template_paused = vm
                .spec
                .template
                .spec
                .as_ref()
                .is_some_and(|s| s.start_strategy.as_deref() == Some("Paused"));
            if options.paused && !template_paused {
                plan.vm_status_patch = Some(change_request_patch(vm, vec![request("Start", None, data)])?);
            } else {
                plan.vm_patch = Some(running_patch(vm, true));
            }
        }
        RunStrategy::RerunOnFailure | RunStrategy::Manual => {
            let vmi_phase = vmi.and_then(phase);
            let needs_restart = match strategy {
                RunStrategy::RerunOnFailure => vmi_phase == Some(VirtualMachineInstancePhase::Succeeded),
                _ => vmi.is_some_and(is_final),
            };
            if strategy == RunStrategy::RerunOnFailure && vmi_phase == Some(VirtualMachineInstancePhase::Failed) {
                return Err(ApiStatus::conflict(
                    VM,
                    &name,
                    "RerunOnFailure does not support starting VM from failed state",
                ));
            }
            let start = request("Start", None, data);
            let changes = match vmi.filter(|_| needs_restart) {
                Some(old) => vec![request("Stop", old.metadata.uid.clone(), BTreeMap::new()), start],
                None => vec![start],
            };
            plan.vm_status_patch = Some(change_request_patch(vm, changes)?);
        }
        RunStrategy::Always | RunStrategy::Once => {
            return Err(ApiStatus::conflict(
                VM,
                &name,
                format!("{} does not support manual start requests", strategy.as_str()),
            ));
        }
        RunStrategy::WaitAsReceiver => {}
    }
    Ok(plan)
}

/// `PUT .../virtualmachines/{name}/stop`.
pub fn plan_stop(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    options: &StopOptions,
) -> Result<Plan, ApiStatus> {
    let name = name_of(vm);
    let strategy = run_strategy(vm)?;
    let mut plan = Plan::default();
    let live = vmi.filter(|v| !is_final(v));
    let old_grace = live.and_then(|v| v.spec.termination_grace_period_seconds);
    if let (Some(_), Some(grace)) = (live, options.grace_period) {
        plan.vmi_patch = Some(json!([
            {"op": "test", "path": "/spec/terminationGracePeriodSeconds", "value": old_grace},
            {"op": "replace", "path": "/spec/terminationGracePeriodSeconds", "value": grace},
        ]));
    }
    let stop_request = |vmi: &VirtualMachineInstance| {
        change_request_patch(vm, vec![request("Stop", vmi.metadata.uid.clone(), BTreeMap::new())])
    };
    match strategy {
        RunStrategy::Halted => {
            let Some(vmi) = live else {
                return Err(ApiStatus::conflict(VM, &name, VM_NOT_RUNNING));
            };
            let shorter = match (options.grace_period, old_grace) {
                (None, _) => false,
                (Some(new), Some(old)) => new < old,
                (Some(_), None) => true,
            };
            if !shorter {
                return Err(ApiStatus::conflict(
                    VM,
                    &name,
                    "Halted only supports manual stop requests with a shorter graceperiod",
                ));
            }
            plan.vm_status_patch = Some(stop_request(vmi)?);
        }
        RunStrategy::RerunOnFailure | RunStrategy::Manual => {
            let Some(vmi) = live else {
                return Err(ApiStatus::conflict(VM, &name, VM_NOT_RUNNING));
            };
            plan.vm_status_patch = Some(stop_request(vmi)?);
        }
        RunStrategy::Always | RunStrategy::Once => plan.vm_patch = Some(running_patch(vm, false)),
        RunStrategy::WaitAsReceiver => {}
    }
    Ok(plan)
}

/// The checks of a restart request's body, made before anything is read.
pub fn check_restart_options(options: &RestartOptions) -> Result<(), ApiStatus> {
    match options.grace_period_seconds {
        Some(g) if g > 0 => Err(ApiStatus::bad_request(
            "For force restart, only gracePeriod=0 is supported for now",
        )),
        Some(g) if g < 0 => Err(ApiStatus::bad_request("gracePeriod has to be greater or equal to 0")),
        _ => Ok(()),
    }
}

/// `PUT .../virtualmachines/{name}/restart`.
pub fn plan_restart(
    vm: &VirtualMachine,
    vmi: Option<&VirtualMachineInstance>,
    options: &RestartOptions,
) -> Result<Plan, ApiStatus> {
    check_restart_options(options)?;
    let name = name_of(vm);
    if vm_condition_true(vm, "VolumesChange") {
        return Err(ApiStatus::conflict(VM, &name, MANUAL_RECOVERY_REQUIRED));
    }
    let strategy = run_strategy(vm)?;
    if matches!(strategy, RunStrategy::Halted | RunStrategy::Once) {
        return Err(ApiStatus::conflict(
            VM,
            &name,
            format!(
                "RunStategy {} does not support manual restart requests",
                strategy.as_str()
            ),
        ));
    }
    let Some(vmi) = vmi else {
        return Err(ApiStatus::conflict(VM, &name, "VM is not running: Halted"));
    };
    let changes = vec![
        request("Stop", vmi.metadata.uid.clone(), BTreeMap::new()),
        request("Start", None, BTreeMap::new()),
    ];
    Ok(Plan {
        vm_status_patch: Some(change_request_patch(vm, changes)?),
        delete_launcher_pod_of: if options.grace_period_seconds == Some(0) {
            vmi.metadata.uid.clone()
        } else {
            None
        },
        ..Plan::default()
    })
}

fn has_condition(vmi: &VirtualMachineInstance, kind: &str) -> bool {
    vmi.status
        .as_ref()
        .is_some_and(|s| s.conditions.iter().any(|c| c.condition_type == kind))
}

/// Whether a VMI may be paused now.
pub fn check_pause(vmi: &VirtualMachineInstance) -> Result<(), ApiStatus> {
    let name = vmi.metadata.name.clone().unwrap_or_default();
    if phase(vmi) != Some(VirtualMachineInstancePhase::Running) {
        return Err(ApiStatus::conflict(VMI, &name, VM_NOT_RUNNING));
    }
    if vmi.spec.liveness_probe.is_some() {
        return Err(ApiStatus::forbidden(
            VMI,
            &name,
            "Pausing VMIs with LivenessProbe is currently not supported",
        ));
    }
    if has_condition(vmi, conditions::PAUSED) {
        return Err(ApiStatus::conflict(VMI, &name, "VMI is already paused"));
    }
    let migrating = vmi
        .status
        .as_ref()
        .and_then(|s| s.migration_state.as_ref())
        .is_some_and(|m| m.completed != Some(true));
    if migrating {
        return Err(ApiStatus::conflict(
            VMI,
            &name,
            format!("Cannot pause VM '{name}' because it is currently being migrated"),
        ));
    }
    Ok(())
}

/// Whether a VMI may be unpaused now.
pub fn check_unpause(vmi: &VirtualMachineInstance) -> Result<(), ApiStatus> {
    let name = vmi.metadata.name.clone().unwrap_or_default();
    if phase(vmi) != Some(VirtualMachineInstancePhase::Running) {
        return Err(ApiStatus::conflict(VMI, &name, "VMI is not running"));
    }
    if !has_condition(vmi, conditions::PAUSED) {
        return Err(ApiStatus::conflict(VMI, &name, "VMI is not paused"));
    }
    Ok(())
}

/// Whether a VMI's serial console can be reached now.
pub fn check_console(vmi: &VirtualMachineInstance) -> Result<(), ApiStatus> {
    let name = vmi.metadata.name.clone().unwrap_or_default();
    if phase(vmi) != Some(VirtualMachineInstancePhase::Running) {
        return Err(ApiStatus::bad_request(format!(
            "Unable to connect to VirtualMachineInstance because phase is {} instead of Running",
            phase(vmi).map_or("", VirtualMachineInstancePhase::as_str)
        )));
    }
    if vmi.spec.domain.devices.autoattach_serial_console == Some(false) {
        return Err(ApiStatus::bad_request(format!(
            "No serial consoles are present for VirtualMachineInstance {name}"
        )));
    }
    Ok(())
}
