//! A migration's writes, phase by phase: finalizer and label, the target pod within the limits,
//! the hand-off, a cancel before and after it, the end.

use k8s_openapi::jiff::Timestamp;

use super::*;

fn migration(phase: Phase, deleting: bool) -> VirtualMachineInstanceMigration {
    let mut migration: VirtualMachineInstanceMigration = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "mig", "namespace": "prod", "uid": "mig-uid",
                     "labels": {"kubevirt.io/vmi-name": "vm1"},
                     "finalizers": ["kubevirt.io/migrationJobFinalize"]},
        "spec": {"vmiName": "vm1"},
        "status": {"phase": phase.as_str()}
    }))
    .expect("migration");
    if deleting {
        migration.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    }
    migration
}

fn vmi(state: Option<serde_json::Value>) -> VirtualMachineInstance {
    let mut status = serde_json::json!({"phase": "Running", "nodeName": "node-a"});
    if let Some(state) = state {
        status["migrationState"] = state;
    }
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "prod", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {}}},
        "status": status
    }))
    .expect("vmi")
}

fn pod(name: &str, node: Option<&str>, phase: &str, ready: bool) -> PodView {
    PodView {
        name: name.to_owned(),
        uid: format!("{name}-uid"),
        node: node.map(str::to_owned),
        phase: phase.to_owned(),
        is_compute_ready: ready,
        is_terminating: false,
        unschedulable: None,
        runtime_user: 107,
        migration_job: None,
        created: None,
        resource_version: None,
        is_temporary: false,
    }
}

fn observe<'a>(
    migration: &'a VirtualMachineInstanceMigration,
    vmi: Option<&'a VirtualMachineInstance>,
    target: Option<&'a PodView>,
    settings: &'a MigrationSettings,
) -> Observed<'a> {
    Observed {
        migration,
        vmi,
        target_pod: target,
        source_pod: None,
        other_in_flight: false,
        running_in_cluster: 0,
        running_from_node: 0,
        settings,
        policy: None,
        backoff: None,
        now: Time(Timestamp::UNIX_EPOCH),
    }
}

fn phase_of(plan: &Plan) -> Option<Phase> {
    plan.status.as_ref().and_then(|s| s.phase)
}

#[test]
fn a_new_migration_gets_its_finalizer_and_label_then_a_target_pod() {
    let settings = MigrationSettings::default();
    let mut new = migration(Phase::Unset, false);
    new.metadata.finalizers = None;
    let vmi = vmi(None);
    let first = plan(&observe(&new, Some(&vmi), None, &settings));
    assert!(first.add_finalizer_and_label);
    assert_eq!(phase_of(&first), Some(Phase::Pending));
    assert!(first.create_target_pod, "Pending with no pod: create it");
    let pending = migration(Phase::Pending, false);
    let second = plan(&observe(&pending, Some(&vmi), None, &settings));
    assert!(second.create_target_pod && !second.add_finalizer_and_label);
    assert_eq!(second.status, None);
}

#[test]
fn the_parallel_limits_hold_the_target_pod_back() {
    let settings = MigrationSettings::default();
    let pending = migration(Phase::Pending, false);
    let vmi = vmi(None);
    let mut seen = observe(&pending, Some(&vmi), None, &settings);
    seen.running_in_cluster = 5;
    let full = plan(&seen);
    assert!(!full.create_target_pod);
    assert_eq!(full.requeue, Some(LIMIT_RETRY));
    seen.running_in_cluster = 2;
    seen.running_from_node = 2;
    assert!(!plan(&seen).create_target_pod, "two leave this node already");
    seen.running_from_node = 1;
    assert!(plan(&seen).create_target_pod);
}

#[test]
fn unsupported_settings_hold_the_migration_with_a_warning() {
    let settings = MigrationSettings {
        unsupported: vec!["spec.configuration.migrations.network".to_owned()],
        ..MigrationSettings::default()
    };
    let pending = migration(Phase::Pending, false);
    let vmi = vmi(None);
    let held = plan(&observe(&pending, Some(&vmi), None, &settings));
    assert!(!held.create_target_pod);
    assert!(held.events[0].message.contains("spec.configuration.migrations.network"));
}

#[test]
fn a_ready_target_pod_is_handed_to_virt_handler() {
    let settings = MigrationSettings::default();
    let scheduled = migration(Phase::Scheduled, false);
    let vmi = vmi(None);
    let target = pod("virt-launcher-vm1-xyz", Some("node-b"), "Running", true);
    let source = pod("virt-launcher-vm1-abc", Some("node-a"), "Running", true);
    let mut seen = observe(&scheduled, Some(&vmi), Some(&target), &settings);
    seen.source_pod = Some(&source);
    let handed = plan(&seen);
    let state = handed.vmi_migration_state.expect("hand-off");
    assert_eq!(state.migration_uid.as_deref(), Some("mig-uid"));
    assert_eq!(state.target_node.as_deref(), Some("node-b"));
    assert_eq!(state.source_node.as_deref(), Some("node-a"));
    assert_eq!(state.target_pod.as_deref(), Some("virt-launcher-vm1-xyz"));
    assert_eq!(state.source_pod.as_deref(), Some("virt-launcher-vm1-abc"));
    assert_eq!(
        state
            .migration_configuration
            .and_then(|c| c.parallel_migrations_per_cluster),
        Some(5)
    );
    assert_eq!(state.migration_policy_name, None, "no policy selected the VMI");
    assert_eq!(handed.vmi_target_node_label.as_deref(), Some("node-b"));
    assert_eq!(handed.events[0].reason, "SuccessfulHandOver");
    // A policy's settings and name are recorded.
    let slow = MigrationSettings {
        bandwidth_mib_per_second: 8,
        ..MigrationSettings::default()
    };
    let mut by_policy = observe(&scheduled, Some(&vmi), Some(&target), &slow);
    by_policy.policy = Some("slow-lane");
    let state = plan(&by_policy).vmi_migration_state.expect("hand-off");
    assert_eq!(state.migration_policy_name.as_deref(), Some("slow-lane"));
    assert_eq!(
        state.migration_configuration.and_then(|c| c.bandwidth_per_migration),
        Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(
            "8Mi".to_owned()
        ))
    );
    // Once the VMI carries it, the phase moves on and nothing is written twice.
    let vmi = self::vmi(Some(
        serde_json::json!({"migrationUid": "mig-uid", "targetNode": "node-b"}),
    ));
    let next = plan(&observe(&scheduled, Some(&vmi), Some(&target), &settings));
    assert_eq!(phase_of(&next), Some(Phase::PreparingTarget));
    assert_eq!(next.vmi_migration_state, None);
}

#[test]
fn a_cancel_before_the_hand_off_deletes_the_target_pod_and_fails() {
    let settings = MigrationSettings::default();
    let cancelled = migration(Phase::Scheduling, true);
    let vmi = vmi(None);
    let target = pod("t", None, "Pending", false);
    let planned = plan(&observe(&cancelled, Some(&vmi), Some(&target), &settings));
    assert_eq!(phase_of(&planned), Some(Phase::Failed));
    assert_eq!(planned.delete_target_pod.as_deref(), Some("t"));
    let status = planned.status.expect("status");
    assert_eq!(status.conditions[0].condition_type, "migrationAbortRequested");
    assert_eq!(planned.events[0].message, "Migration failed due to being canceled");
    assert!(!planned.remove_finalizer, "not before the pod's deletion is asked for");
}

#[test]
fn a_cancel_while_running_asks_virt_handler_and_the_end_releases_the_finalizer() {
    let settings = MigrationSettings::default();
    let running = migration(Phase::Running, true);
    let state = serde_json::json!({"migrationUid": "mig-uid", "targetNode": "node-b",
        "targetNodeAddress": "10.0.0.2", "startTimestamp": "2026-11-26T10:00:00Z"});
    let vmi = vmi(Some(state.clone()));
    let target = pod("t", Some("node-b"), "Running", true);
    let asked = plan(&observe(&running, Some(&vmi), Some(&target), &settings));
    assert_eq!(
        asked.vmi_migration_state.as_ref().and_then(|s| s.abort_requested),
        Some(true)
    );
    assert_eq!(
        phase_of(&asked),
        Some(Phase::Running),
        "the phase stays until virt-handler reports"
    );
    assert_eq!(
        asked.status.as_ref().map(|s| s.conditions[0].condition_type.as_str()),
        Some("migrationAbortRequested")
    );
    assert!(
        asked.delete_target_pod.is_none(),
        "virt-handler cleans up after the abort"
    );
    let mut failed_state = state;
    failed_state["failed"] = serde_json::json!(true);
    failed_state["abortRequested"] = serde_json::json!(true);
    let vmi = self::vmi(Some(failed_state));
    let over = plan(&observe(&running, Some(&vmi), Some(&target), &settings));
    assert_eq!(phase_of(&over), Some(Phase::Failed));
    assert_eq!(over.delete_target_pod.as_deref(), Some("t"));
    assert_eq!(
        over.status.and_then(|s| s.migration_state).and_then(|s| s.failed),
        Some(true),
        "the VMI's migration state is kept"
    );
    let done = migration(Phase::Failed, true);
    let released = plan(&observe(&done, Some(&vmi), None, &settings));
    assert!(released.remove_finalizer);
}

#[test]
fn a_failure_the_controller_sees_reaches_the_vmi() {
    let settings = MigrationSettings::default();
    let preparing = migration(Phase::PreparingTarget, false);
    let vmi = vmi(Some(
        serde_json::json!({"migrationUid": "mig-uid", "targetNode": "node-b"}),
    ));
    let down = PodView {
        phase: "Failed".to_owned(),
        ..pod("t", Some("node-b"), "Failed", false)
    };
    let failed = plan(&observe(&preparing, Some(&vmi), Some(&down), &settings));
    assert_eq!(phase_of(&failed), Some(Phase::Failed));
    let state = failed.vmi_migration_state.expect("the VMI's state");
    assert_eq!(state.failed, Some(true));
    assert_eq!(
        state.failure_reason.as_deref(),
        Some("Migration failed because target pod shutdown during migration")
    );
    assert!(state.end_timestamp.is_some());
}

#[test]
fn a_completed_migration_succeeds_and_keeps_its_target_pod() {
    let settings = MigrationSettings::default();
    let running = migration(Phase::Running, false);
    let vmi = vmi(Some(
        serde_json::json!({"migrationUid": "mig-uid", "targetNode": "node-b",
        "targetNodeAddress": "10.0.0.2", "startTimestamp": "2026-11-26T10:00:00Z", "completed": true}),
    ));
    let target = pod("t", Some("node-b"), "Running", true);
    let over = plan(&observe(&running, Some(&vmi), Some(&target), &settings));
    assert_eq!(phase_of(&over), Some(Phase::Succeeded));
    assert_eq!(over.delete_target_pod, None, "the guest runs there now");
    assert!(over.remove_finalizer);
    assert_eq!(over.events[0].message, "Source node reported migration succeeded");
}

#[test]
fn a_target_pod_pending_too_long_is_deleted_and_looked_at_again_until_then() {
    let settings = MigrationSettings::default();
    let vmi = vmi(None);
    let at = |seconds: i64| Some(Time(Timestamp::from_second(seconds).expect("time")));
    let unschedulable = |created: i64| PodView {
        unschedulable: Some(("Unschedulable".to_owned(), "0/1 nodes are available".to_owned())),
        created: at(created),
        ..pod("t", None, "Pending", false)
    };
    let waiting = |created: i64| PodView {
        created: at(created),
        ..pod("t", None, "Pending", false)
    };
    let now = 10_000;
    let decide = |migration: &VirtualMachineInstanceMigration, target: &PodView| {
        plan(&Observed {
            now: Time(Timestamp::from_second(now).expect("time")),
            ..observe(migration, Some(&vmi), Some(target), &settings)
        })
    };
    for phase in [Phase::Pending, Phase::Scheduling] {
        let migration = migration(phase, false);
        // Unschedulable for 100 s: a warning, and a look again when 5 minutes are up.
        let early = decide(&migration, &unschedulable(now - 100));
        assert_eq!(early.delete_target_pod, None, "{phase:?}");
        assert_eq!(early.requeue, Some(Duration::from_secs(200)), "{phase:?}");
        assert_eq!(early.events[0].reason, "MigrationTargetPodUnschedulable");
        assert_eq!(
            early.events[0].message,
            "Migration target pod for VMI [prod/vm1] is currently unschedulable."
        );
        // Unschedulable for 5 minutes: deleted.
        let late = decide(&migration, &unschedulable(now - 300));
        assert_eq!(late.delete_target_pod.as_deref(), Some("t"), "{phase:?}");
        assert_eq!(
            late.events.last().map(|e| e.message.as_str()),
            Some("unschedulable pod timeout period exceeded")
        );
        // Not (yet) marked unschedulable: looked at again when the unschedulable period could
        // run out, so a scheduler's mark that reaches the cache late still fails it in time (#31).
        let young = decide(&migration, &waiting(now - 100));
        assert_eq!(young.delete_target_pod, None, "{phase:?}");
        assert_eq!(young.requeue, Some(Duration::from_secs(200)), "{phase:?}");
        assert!(young.events.is_empty());
        // Pending for another reason: 15 minutes.
        let slow = decide(&migration, &waiting(now - 600));
        assert_eq!(slow.delete_target_pod, None);
        assert_eq!(slow.requeue, Some(Duration::from_secs(300)));
        assert!(slow.events.is_empty());
        let stuck = decide(&migration, &waiting(now - 900));
        assert_eq!(stuck.delete_target_pod.as_deref(), Some("t"));
        assert_eq!(stuck.events[0].message, "pending pod timeout period exceeded");
    }
    // The annotations shorten (or lengthen) each timeout; nonsense is ignored.
    let mut quick = migration(Phase::Scheduling, false);
    quick.metadata.annotations = Some(
        [
            (UNSCHEDULABLE_TIMEOUT_ANNOTATION.to_owned(), "30".to_owned()),
            (PENDING_TIMEOUT_ANNOTATION.to_owned(), "soon".to_owned()),
        ]
        .into(),
    );
    assert_eq!(
        decide(&quick, &unschedulable(now - 30)).delete_target_pod.as_deref(),
        Some("t")
    );
    assert_eq!(
        decide(&quick, &waiting(now - 600)).requeue,
        Some(Duration::from_secs(300))
    );
    // A pod that runs, or is already going, is left alone.
    let migration = migration(Phase::Scheduling, false);
    let running = PodView {
        created: at(0),
        ..pod("t", Some("node-b"), "Running", false)
    };
    assert_eq!(decide(&migration, &running).delete_target_pod, None);
    let going = PodView {
        is_terminating: true,
        ..unschedulable(0)
    };
    assert_eq!(decide(&migration, &going).delete_target_pod, None);
}

#[test]
fn an_evacuation_in_backoff_waits_before_its_target_pod() {
    let settings = MigrationSettings::default();
    let pending = migration(Phase::Pending, false);
    let vmi = vmi(None);
    let waiting = plan(&Observed {
        backoff: Some(Duration::from_secs(15)),
        ..observe(&pending, Some(&vmi), None, &settings)
    });
    assert!(!waiting.create_target_pod);
    assert_eq!(waiting.requeue, Some(Duration::from_secs(15)));
    assert_eq!(waiting.vmi_events[0].reason, "MigrationBackoff");
    assert_eq!(waiting.vmi_events[0].message, "backoff migrating vmi prod/vm1");
    let free = plan(&observe(&pending, Some(&vmi), None, &settings));
    assert!(free.create_target_pod);
    assert!(free.vmi_events.is_empty());
}
