//! The VM controller against the in-memory API server: run strategies create and delete the VMI,
//! requests are consumed, a VMI that fails before running starts the crash-loop backoff, and the
//! status follows upstream's printable status.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::ManualClock;
use kubevirt_api::v1::{
    PhaseTransitionTimestamp, VirtualMachine, VirtualMachineInstanceCondition, VirtualMachineInstancePhase as Phase,
    VirtualMachineStateChangeRequest,
};
use pretty_assertions::assert_eq;
use serde_json::json;
use virt_controller::cluster_api::{FakeControllerApi, Write};
use virt_controller::vm_controller::VmController;

const KEY: &str = "default/testvm";

fn vm(strategy: &str) -> VirtualMachine {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "testvm", "namespace": "default", "uid": "vm-uid", "generation": 3},
        "spec": {
            "runStrategy": strategy,
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {}}}
            }
        }
    }))
    .expect("VM")
}

type Controller = VmController<FakeControllerApi, Arc<ManualClock>>;

fn controller() -> (Controller, FakeControllerApi, Arc<ManualClock>) {
    let api = FakeControllerApi::new();
    let clock = Arc::new(ManualClock::new(
        "2026-11-21T10:00:00Z".parse::<Timestamp>().expect("time"),
    ));
    (VmController::new(api.clone(), clock.clone()), api, clock)
}

async fn settle(controller: &Controller, api: &FakeControllerApi) -> Option<std::time::Duration> {
    if let Some(vmi) = api.vmi(KEY) {
        controller.on_vmi_event(Event::Apply(vmi));
    }
    if let Some(vm) = api.vm(KEY) {
        controller.on_vm_event(Event::Apply(vm));
    }
    controller.reconcile(KEY).await
}

fn printable(api: &FakeControllerApi) -> Option<String> {
    api.vm(KEY)?.status?.printable_status
}

fn set_phase(api: &FakeControllerApi, phase: Phase, ready: bool) {
    api.modify_vmi(KEY, |vmi| {
        let status = vmi.status.get_or_insert_default();
        status.phase = Some(phase);
        status.phase_transition_timestamps.push(PhaseTransitionTimestamp {
            phase: Some(phase),
            phase_transition_timestamp: None,
        });
        status.conditions = vec![VirtualMachineInstanceCondition {
            condition_type: "Ready".to_owned(),
            status: if ready { "True" } else { "False" }.to_owned(),
            last_probe_time: None,
            last_transition_time: None,
            reason: None,
            message: None,
        }];
    });
}

#[tokio::test]
async fn an_always_vm_gets_its_vmi_and_reports_it_running() {
    let (controller, api, _) = controller();
    api.apply_vm(vm("Always"));
    settle(&controller, &api).await;
    let vmi = api.vmi(KEY).expect("the VMI was created");
    assert_eq!(
        vmi.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app"))
            .map(String::as_str),
        Some("web")
    );
    assert_eq!(
        vmi.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("kubevirt.io/vm-generation"))
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        vmi.metadata.finalizers,
        Some(vec!["kubevirt.io/virtualMachineControllerFinalize".to_owned()])
    );
    let owner = &vmi.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("VirtualMachine", "vm-uid", Some(true))
    );
    assert_eq!(printable(&api).as_deref(), Some("Starting"));
    assert!(
        api.vm(KEY)
            .and_then(|v| v.metadata.finalizers)
            .is_some_and(|f| f.contains(&"kubevirt.io/virtualMachineControllerFinalize".to_owned()))
    );

    set_phase(&api, Phase::Running, true);
    settle(&controller, &api).await;
    let status = api.vm(KEY).and_then(|v| v.status).expect("status");
    assert_eq!(status.printable_status.as_deref(), Some("Running"));
    assert_eq!((status.created, status.ready), (Some(true), Some(true)));
    assert_eq!(status.run_strategy.as_deref(), Some("Always"));
    let creates = api.writes().iter().filter(|w| matches!(w, Write::CreateVmi(_))).count();
    assert_eq!(creates, 1, "the VMI is created once");
}

#[tokio::test]
async fn a_vmi_that_fails_before_running_starts_the_crash_loop_backoff() {
    let (controller, api, clock) = controller();
    api.apply_vm(vm("Always"));
    settle(&controller, &api).await;
    set_phase(&api, Phase::Failed, false);
    settle(&controller, &api).await;
    assert!(
        api.writes().contains(&Write::DeleteVmi(KEY.to_owned())),
        "Always deletes a final VMI"
    );
    let failure = api
        .vm(KEY)
        .and_then(|v| v.status?.start_failure)
        .expect("start failure");
    assert_eq!(failure.consecutive_fail_count, Some(1));
    api.finish_vmi_deletion(KEY);
    controller.on_vmi_event(Event::Delete(deleted_vmi()));
    let wait = settle(&controller, &api).await.expect("backing off");
    assert!(
        wait >= std::time::Duration::from_secs(10) && wait <= std::time::Duration::from_secs(15),
        "{wait:?}"
    );
    assert_eq!(printable(&api).as_deref(), Some("CrashLoopBackOff"));
    assert!(api.vmi(KEY).is_none(), "no VMI during the backoff");
    clock.advance(std::time::Duration::from_secs(16));
    settle(&controller, &api).await;
    assert!(api.vmi(KEY).is_some(), "recreated after the backoff");
}

/// The last watch event of the deleted VMI: only its identity matters.
fn deleted_vmi() -> kubevirt_api::v1::VirtualMachineInstance {
    let mut vmi = kubevirt_api::v1::VirtualMachineInstance::new(
        "testvm",
        kubevirt_api::v1::VirtualMachineInstanceSpec::default(),
    );
    vmi.metadata.namespace = Some("default".to_owned());
    vmi
}

#[tokio::test]
async fn manual_vms_start_and_stop_on_request_and_halted_vms_stop() {
    let (controller, api, _) = controller();
    api.apply_vm(vm("Manual"));
    settle(&controller, &api).await;
    assert!(api.vmi(KEY).is_none(), "Manual waits for a request");
    assert_eq!(printable(&api).as_deref(), Some("Stopped"));
    api.modify_vm(KEY, |vm| {
        vm.status.get_or_insert_default().state_change_requests = vec![VirtualMachineStateChangeRequest {
            action: "Start".to_owned(),
            ..VirtualMachineStateChangeRequest::default()
        }];
    });
    settle(&controller, &api).await;
    let vmi = api.vmi(KEY).expect("started");
    set_phase(&api, Phase::Running, true);
    settle(&controller, &api).await;
    assert!(
        api.vm(KEY)
            .and_then(|v| v.status)
            .is_some_and(|s| s.state_change_requests.is_empty()),
        "Start consumed"
    );
    api.modify_vm(KEY, |vm| {
        vm.status.get_or_insert_default().state_change_requests = vec![VirtualMachineStateChangeRequest {
            action: "Stop".to_owned(),
            uid: vmi.metadata.uid.clone(),
            ..VirtualMachineStateChangeRequest::default()
        }];
    });
    settle(&controller, &api).await;
    assert!(api.writes().contains(&Write::DeleteVmi(KEY.to_owned())));
    assert_eq!(printable(&api).as_deref(), Some("Stopping"));

    let (controller, api, _) = self::controller();
    api.apply_vm(vm("Halted"));
    settle(&controller, &api).await;
    assert!(api.vmi(KEY).is_none());
    assert_eq!(printable(&api).as_deref(), Some("Stopped"));
}

#[tokio::test]
async fn a_failed_create_is_reported_in_the_failure_condition() {
    let (controller, api, _) = controller();
    // A VMI of the same name that this VM does not own blocks the create.
    api.apply_vmi(deleted_vmi());
    api.apply_vm(vm("Always"));
    assert!(settle(&controller, &api).await.is_some(), "retried");
    let conditions = api
        .vm(KEY)
        .and_then(|v| v.status)
        .map(|s| s.conditions)
        .unwrap_or_default();
    let failure = conditions
        .iter()
        .find(|c| c.condition_type == "Failure")
        .expect("Failure");
    assert_eq!(
        (failure.status.as_str(), failure.reason.as_deref()),
        ("True", Some("FailedCreate"))
    );
}

/// A restart deletes the VMI, which the API server keeps while the VM controller's finalizer is
/// on it: the marked deletion is the deletion the controller expected, so it releases the
/// finalizer once the VMI is final and starts a new one. On a real cluster the expectation waited
/// for the VMI to vanish, which the finalizer prevented, and the VM stayed Stopping.
#[tokio::test]
async fn a_restart_releases_the_deleted_vmi_and_starts_a_new_one() {
    let (controller, api, _) = controller();
    api.apply_vm(vm("Always"));
    settle(&controller, &api).await;
    let first = api.vmi(KEY).expect("started");
    set_phase(&api, Phase::Running, true);
    settle(&controller, &api).await;
    api.modify_vm(KEY, |vm| {
        vm.status.get_or_insert_default().state_change_requests = vec![
            VirtualMachineStateChangeRequest {
                action: "Stop".to_owned(),
                uid: first.metadata.uid.clone(),
                ..VirtualMachineStateChangeRequest::default()
            },
            VirtualMachineStateChangeRequest {
                action: "Start".to_owned(),
                ..VirtualMachineStateChangeRequest::default()
            },
        ];
    });
    settle(&controller, &api).await;
    let deleting = api.vmi(KEY).expect("kept by the VM controller's finalizer");
    assert!(deleting.metadata.deletion_timestamp.is_some(), "deleted");
    // virt-handler writes the final phase once the guest is down.
    set_phase(&api, Phase::Succeeded, false);
    for _ in 0..4 {
        settle(&controller, &api).await;
        if api.vmi(KEY).is_none() {
            controller.on_vmi_event(Event::Delete(deleted_vmi()));
        }
    }
    let second = api.vmi(KEY).expect("a new VMI");
    assert_ne!(second.metadata.uid, first.metadata.uid, "a new VMI uid");
    assert!(second.metadata.deletion_timestamp.is_none());
}
