//! The VMI lifecycle plan, case by case.

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::vmi_phase::{REASON_POD_FAILED, REASON_POD_NOT_EXISTS};

fn vmi(phase: Phase, deleting: bool, finalizer: bool) -> VirtualMachineInstance {
    let mut vmi = VirtualMachineInstance::default();
    vmi.metadata.name = Some("vm".to_owned());
    vmi.metadata.uid = Some("u".to_owned());
    if finalizer {
        vmi.metadata.finalizers = Some(vec![finalizers::VMI_FOREGROUND_DELETE.to_owned()]);
    }
    if deleting {
        vmi.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    }
    vmi.status = Some(VirtualMachineInstanceStatus {
        phase: Some(phase),
        ..VirtualMachineInstanceStatus::default()
    });
    vmi
}

fn pod(phase: &str, ready: bool, node: Option<&str>) -> PodView {
    PodView {
        name: "virt-launcher-vm-abcde".to_owned(),
        uid: "pod-uid".to_owned(),
        node: node.map(str::to_owned),
        phase: phase.to_owned(),
        is_compute_ready: ready,
        ..PodView::default()
    }
}

fn observe(vmi: &VirtualMachineInstance, pods: Vec<PodView>) -> Plan {
    plan(&Observed {
        vmi,
        pods,
        expectations_satisfied: true,
        runtime_user: 107,
        missing_claim: None,
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: VmiGate::default(),
        now: Time(Timestamp::from_second(1_800_000_000).expect("time")),
    })
}

fn phase_of(plan: &Plan) -> Option<Phase> {
    plan.status.as_ref().and_then(|s| s.phase)
}

#[test]
fn a_new_vmi_gets_its_pod_and_goes_pending_then_scheduling_in_one_write() {
    let new = vmi(Phase::Unset, false, true);
    let plan = observe(&new, vec![]);
    assert!(plan.create_pod && !plan.add_finalizer);
    assert_eq!(
        plan.status.as_ref().and_then(|s| s.runtime_user),
        Some(107),
        "the pod's user is recorded with it"
    );
    let status = plan.status.expect("status");
    assert_eq!(status.phase, Some(Phase::Scheduling));
    let phases: Vec<_> = status.phase_transition_timestamps.iter().map(|t| t.phase).collect();
    assert_eq!(phases, [Some(Phase::Pending), Some(Phase::Scheduling)]);
    assert!(observe(&vmi(Phase::Unset, false, false), vec![]).add_finalizer);
}

/// The status write after the pod's creation failed: the next round takes the user from the
/// pod, so virt-handler prepares the pod for the user it runs as.
#[test]
fn a_vmi_whose_pod_exists_gets_the_pods_user() {
    let new = vmi(Phase::Unset, false, true);
    let mut unprivileged = pod("Pending", false, None);
    unprivileged.runtime_user = 107;
    let plan = observe(&new, vec![unprivileged]);
    assert!(!plan.create_pod);
    assert_eq!(plan.status.as_ref().and_then(|s| s.runtime_user), Some(107));
    let root = observe(&new, vec![pod("Pending", false, None)]);
    assert_eq!(root.status.as_ref().and_then(|s| s.runtime_user), Some(0));
}

#[test]
fn a_missing_claim_holds_the_pod_back_until_it_appears() {
    let message = "PVC default/disk does not exist, waiting for it to appear";
    let new = vmi(Phase::Unset, false, true);
    let observed = |vmi| Observed {
        vmi,
        pods: vec![],
        expectations_satisfied: true,
        runtime_user: 107,
        missing_claim: Some(message.to_owned()),
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: VmiGate::default(),
        now: Time(Timestamp::UNIX_EPOCH),
    };
    let waiting = plan(&observed(&new));
    assert!(!waiting.create_pod);
    assert_eq!(waiting.waits_for_claim.as_deref(), Some(message));
    let status = waiting.status.clone().expect("status");
    assert_eq!(status.phase, Some(Phase::Pending));
    let condition = |kind: &str| status.conditions.iter().find(|c| c.condition_type == kind).cloned();
    let synchronized = condition("Synchronized").expect("Synchronized");
    assert_eq!(
        (
            synchronized.status.as_str(),
            synchronized.reason.as_deref(),
            synchronized.message.as_deref()
        ),
        ("False", Some("FailedPvcNotFound"), Some(message))
    );
    let scheduled = condition("PodScheduled").expect("PodScheduled");
    assert_eq!(
        (scheduled.status.as_str(), scheduled.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
    let mut pending = new.clone();
    pending.status = Some(status);
    assert_eq!(
        plan(&observed(&pending)).status,
        None,
        "the same wait writes nothing again"
    );
    let found = observe(&pending, vec![]);
    assert!(found.create_pod && found.waits_for_claim.is_none());
    let status = found.status.expect("status");
    assert_eq!(status.phase, Some(Phase::Scheduling));
    assert!(status.conditions.is_empty(), "{:?}", status.conditions);
}

#[test]
fn an_unsatisfied_expectation_creates_nothing() {
    let new = vmi(Phase::Pending, false, true);
    let waiting = plan(&Observed {
        vmi: &new,
        pods: vec![],
        expectations_satisfied: false,
        runtime_user: 107,
        missing_claim: None,
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: VmiGate::default(),
        now: Time(Timestamp::UNIX_EPOCH),
    });
    assert_eq!(waiting, Plan::default());
}

#[test]
fn a_ready_pod_schedules_the_vmi_on_its_node_with_the_label() {
    let scheduling = vmi(Phase::Scheduling, false, true);
    let plan = observe(&scheduling, vec![pod("Running", true, Some("node01"))]);
    assert_eq!(plan.node_label.as_deref(), Some("node01"));
    let status = plan.status.expect("status");
    assert_eq!(status.phase, Some(Phase::Scheduled));
    assert_eq!(status.node_name.as_deref(), Some("node01"));
    assert_eq!(status.active_pods.get("pod-uid").map(String::as_str), Some("node01"));
    let mut recorded = scheduling.clone();
    recorded.status.get_or_insert_default().runtime_user = Some(0);
    let waiting = observe(&recorded, vec![pod("Pending", false, Some("node01"))]);
    assert_eq!(waiting.status, None, "activePods alone waits for the Scheduled write");
    let unschedulable = PodView {
        node: None,
        unschedulable: Some(("Unschedulable".to_owned(), "0/1 nodes are available".to_owned())),
        ..pod("Pending", false, None)
    };
    let told = observe(&recorded, vec![unschedulable]);
    assert_eq!(
        told.status.map(|s| s.conditions.len()),
        Some(1),
        "a pod that cannot be placed shows at once"
    );
}

#[test]
fn a_pod_that_fails_or_vanishes_fails_the_vmi_with_a_reason() {
    let scheduling = vmi(Phase::Scheduling, false, true);
    let failed = observe(&scheduling, vec![pod("Failed", false, Some("n"))]);
    assert_eq!(phase_of(&failed), Some(Phase::Failed));
    assert_eq!(failed.status.and_then(|s| s.reason).as_deref(), Some(REASON_POD_FAILED));
    for phase in [Phase::Scheduling, Phase::Scheduled, Phase::Running] {
        let vanished = observe(&vmi(phase, false, true), vec![]);
        assert_eq!(phase_of(&vanished), Some(Phase::Failed), "{phase:?}");
        assert_eq!(
            vanished.status.and_then(|s| s.reason).as_deref(),
            Some(REASON_POD_NOT_EXISTS)
        );
    }
}

#[test]
fn an_unschedulable_pod_is_reported_on_the_vmi() {
    let scheduling = vmi(Phase::Scheduling, false, true);
    let mut stuck = pod("Pending", false, None);
    stuck.unschedulable = Some(("Unschedulable".to_owned(), "0/3 nodes are available".to_owned()));
    let status = observe(&scheduling, vec![stuck]).status.expect("status");
    let condition = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "PodScheduled")
        .expect("PodScheduled");
    assert_eq!(
        (condition.status.as_str(), condition.reason.as_deref()),
        ("False", Some("Unschedulable"))
    );
}

#[test]
fn finished_or_deleted_vmis_lose_their_pods_then_their_finalizer() {
    let done = vmi(Phase::Succeeded, false, true);
    let with_pod = observe(&done, vec![pod("Running", true, Some("n"))]);
    assert_eq!(with_pod.delete_pods, ["virt-launcher-vm-abcde"]);
    assert!(!with_pod.remove_finalizer);
    let without = observe(&done, vec![]);
    assert!(without.remove_finalizer && without.status.is_none());
    let deleted_early = observe(&vmi(Phase::Pending, true, true), vec![]);
    assert_eq!(phase_of(&deleted_early), Some(Phase::Failed));
    assert!(deleted_early.remove_finalizer);
    let mut terminating = pod("Running", true, Some("n"));
    terminating.is_terminating = true;
    let running_deleted = observe(&vmi(Phase::Running, true, true), vec![terminating]);
    assert!(running_deleted.delete_pods.is_empty(), "already terminating");
    let waiting = plan(&Observed {
        vmi: &done,
        pods: vec![pod("Running", true, Some("n"))],
        expectations_satisfied: false,
        runtime_user: 107,
        missing_claim: None,
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: VmiGate::default(),
        now: Time(Timestamp::from_second(1_800_000_000).expect("time")),
    });
    assert!(
        waiting.delete_pods.is_empty(),
        "a deletion sent but not seen yet is not sent again"
    );
    assert!(!running_deleted.remove_finalizer, "the handler finishes the VMI first");
}

fn gated(vmi: &VirtualMachineInstance, gate: VmiGate) -> Plan {
    plan(&Observed {
        vmi,
        pods: vec![],
        expectations_satisfied: true,
        runtime_user: 107,
        missing_claim: None,
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: gate,
        now: Time(Timestamp::UNIX_EPOCH),
    })
}

/// A DataVolume that still fills its claim holds the pod back quietly; one that cannot be found
/// says so (Synchronized=False, FailedDataVolumeImport); one that failed fails the VMI; and
/// `DataVolumesReady` follows what the gate says.
#[test]
fn data_volumes_hold_the_pod_back_or_fail_the_vmi() {
    let new = vmi(Phase::Unset, false, true);
    let not_ready = ("False", "NotAllDVsReady", "Not all of the VMI's DVs are ready");
    let populating = gated(
        &new,
        VmiGate {
            wait: Some(DataVolumeWait::Populating),
            failed: false,
            condition: Some(not_ready),
        },
    );
    assert!(!populating.create_pod);
    assert_eq!(populating.waits_for_data_volume, Some(DataVolumeWait::Populating));
    let status = populating.status.expect("status");
    assert_eq!(status.phase, Some(Phase::Pending));
    let kinds: Vec<(&str, &str, Option<&str>)> = status
        .conditions
        .iter()
        .map(|c| (c.condition_type.as_str(), c.status.as_str(), c.reason.as_deref()))
        .collect();
    assert_eq!(kinds, [("DataVolumesReady", "False", Some("NotAllDVsReady"))]);

    let message = "Error determining if volume is ready: DataVolume default/disk not found";
    let unknown = gated(
        &new,
        VmiGate {
            wait: Some(DataVolumeWait::Unknown(message.to_owned())),
            failed: false,
            condition: Some(not_ready),
        },
    );
    let status = unknown.status.expect("status");
    let synchronized = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "Synchronized")
        .expect("Synchronized");
    assert_eq!(
        (synchronized.reason.as_deref(), synchronized.message.as_deref()),
        (Some("FailedDataVolumeImport"), Some(message))
    );

    let failed = gated(
        &new,
        VmiGate {
            wait: Some(DataVolumeWait::Populating),
            failed: true,
            condition: Some(not_ready),
        },
    );
    assert!(!failed.create_pod);
    assert_eq!(failed.status.and_then(|s| s.phase), Some(Phase::Failed));
    let failed_without_claim = plan(&Observed {
        vmi: &new,
        pods: vec![],
        expectations_satisfied: true,
        runtime_user: 107,
        missing_claim: Some("PVC default/disk does not exist, waiting for it to appear".to_owned()),
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: VmiGate {
            wait: None,
            failed: true,
            condition: Some(not_ready),
        },
        now: Time(Timestamp::UNIX_EPOCH),
    });
    assert_eq!(
        failed_without_claim.status.and_then(|s| s.phase),
        Some(Phase::Failed),
        "a failed DataVolume wins over its missing claim"
    );

    let mut pending = new.clone();
    pending.status = Some(status);
    let ready = gated(
        &pending,
        VmiGate {
            wait: None,
            failed: false,
            condition: Some(("True", "AllDVsReady", "All of the VMI's DVs are bound and ready")),
        },
    );
    assert!(ready.create_pod, "the DataVolume is done: the pod is made");
    let status = ready.status.expect("status");
    let kinds: Vec<(&str, &str)> = status
        .conditions
        .iter()
        .map(|c| (c.condition_type.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [("DataVolumesReady", "True")],
        "the wait's Synchronized=False went"
    );
}

fn with_temporary(
    vmi: &VirtualMachineInstance,
    wait: Option<DataVolumeWait>,
    pods: Vec<PodView>,
    satisfied: bool,
) -> Plan {
    plan(&Observed {
        vmi,
        pods,
        expectations_satisfied: satisfied,
        runtime_user: 107,
        missing_claim: None,
        claim_infos: BTreeMap::new(),
        state_claim: StateClaimView::default(),
        data_volumes: VmiGate {
            wait,
            failed: false,
            condition: None,
        },
        now: Time(Timestamp::UNIX_EPOCH),
    })
}

/// A claim waiting for its first consumer gets one temporary pod while the VMI is Pending; the
/// pod is never the VMI's own, and goes once the claim no longer waits.
#[test]
fn a_claim_waiting_for_its_consumer_gets_a_temporary_pod_until_it_binds() {
    let new = vmi(Phase::Unset, false, true);
    let temporary = |terminating: bool| PodView {
        name: "virt-launcher-vm-temp".to_owned(),
        uid: "temp-uid".to_owned(),
        node: Some("node1".to_owned()),
        phase: "Succeeded".to_owned(),
        is_terminating: terminating,
        is_temporary: true,
        ..PodView::default()
    };
    let wffc = Some(DataVolumeWait::WaitForFirstConsumer);
    let first = with_temporary(&new, wffc.clone(), vec![], true);
    assert!(first.temporary_pod == TemporaryPod::Create && !first.create_pod);
    assert_eq!(phase_of(&first), Some(Phase::Pending));
    assert_eq!(first.waits_for_data_volume, wffc);
    let unseen = with_temporary(&new, wffc.clone(), vec![], false);
    assert!(
        unseen.temporary_pod == TemporaryPod::Leave,
        "not again while its creation is unseen"
    );
    let pending = vmi(Phase::Pending, false, true);
    let there = with_temporary(&pending, wffc.clone(), vec![temporary(false)], true);
    assert!(there.temporary_pod == TemporaryPod::Leave && !there.create_pod && there.delete_pods.is_empty());
    assert_eq!(there.status, None, "a Succeeded temporary pod is not the VMI's pod");
    let replaced = with_temporary(&pending, wffc, vec![temporary(true)], true);
    assert!(
        replaced.temporary_pod == TemporaryPod::Create,
        "one being deleted is replaced"
    );

    let populating = with_temporary(&pending, Some(DataVolumeWait::Populating), vec![temporary(false)], true);
    assert!(populating.temporary_pod == TemporaryPod::Leave && !populating.create_pod);
    assert_eq!(populating.delete_pods, ["virt-launcher-vm-temp"]);
    let filled = with_temporary(&pending, None, vec![temporary(false)], true);
    assert!(filled.create_pod, "the launcher pod once the claims are filled");
    assert_eq!(filled.delete_pods, ["virt-launcher-vm-temp"]);
    let status = filled.status.expect("status");
    assert_eq!(status.phase, Some(Phase::Scheduling));
    assert!(status.active_pods.is_empty(), "the temporary pod is no active pod");
    let gone = with_temporary(&pending, None, vec![temporary(true)], true);
    assert!(gone.create_pod && gone.delete_pods.is_empty());

    let failed_pod = PodView {
        phase: "Failed".to_owned(),
        ..temporary(false)
    };
    let failed = with_temporary(
        &pending,
        Some(DataVolumeWait::WaitForFirstConsumer),
        vec![failed_pod.clone()],
        true,
    );
    assert_eq!(
        phase_of(&failed),
        Some(Phase::Failed),
        "a temporary pod that failed fails the VMI"
    );
    let over = vmi(Phase::Failed, false, true);
    let cleaned = with_temporary(
        &over,
        Some(DataVolumeWait::WaitForFirstConsumer),
        vec![failed_pod],
        true,
    );
    assert_eq!(
        cleaned.delete_pods,
        ["virt-launcher-vm-temp"],
        "then it goes with the VMI's pods"
    );
}
