use k8s_openapi::jiff::Timestamp;

use super::*;

fn migration(name: &str, phase: Phase, created: i64, deleting: bool) -> VirtualMachineInstanceMigration {
    let mut m: VirtualMachineInstanceMigration = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "prod", "uid": format!("{name}-uid")},
        "spec": {"vmiName": "vm1"},
        "status": {"phase": phase.as_str()}
    }))
    .expect("migration");
    m.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).expect("time")));
    if deleting {
        m.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
    }
    m
}

#[test]
fn the_five_newest_finished_migrations_are_kept() {
    let made = migration;
    let mut all: Vec<VirtualMachineInstanceMigration> = (0..7)
        .map(|i| {
            let phase = if i % 2 == 0 { Phase::Succeeded } else { Phase::Failed };
            made(&format!("done-{i}"), phase, 100 - i, false)
        })
        .collect();
    // Unfinished and already deleted migrations neither count nor go.
    all.push(made("running", Phase::Running, 1, false));
    all.push(made("going", Phase::Failed, 0, true));
    // Oldest first: done-6 (created 94), done-5 (95).
    assert_eq!(finished_to_delete(&all), ["done-6", "done-5"]);
    assert!(finished_to_delete(&all[..5]).is_empty());
}

fn evacuation(name: &str, phase: Phase, created: i64, failed_at: Option<i64>) -> VirtualMachineInstanceMigration {
    let mut m = migration(name, phase, created, false);
    m.metadata.annotations = Some(
        [(
            kubevirt_api::well_known::annotations::EVACUATION_MIGRATION.to_owned(),
            "node1".to_owned(),
        )]
        .into(),
    );
    if let Some(at) = failed_at {
        m.status
            .get_or_insert_default()
            .phase_transition_timestamps
            .push(kubevirt_api::v1::MigrationPhaseTransition {
                phase: Some(Phase::Failed),
                phase_transition_timestamp: Some(Time(Timestamp::from_second(at).expect("time"))),
            });
    }
    m
}

#[test]
fn a_workload_update_waits_after_earlier_failures_as_an_evacuation_does() {
    let now = |s: i64| Time(Timestamp::from_second(s).expect("time"));
    let update = |name: &str, phase: Phase, created: i64, failed_at: Option<i64>| {
        let mut m = evacuation(name, phase, created, failed_at);
        m.metadata.annotations = Some(
            [(
                kubevirt_api::well_known::annotations::WORKLOAD_UPDATE_MIGRATION.to_owned(),
                String::new(),
            )]
            .into(),
        );
        m
    };
    let next = update("next", Phase::Unset, 1_000, None);
    // A failed workload update, then a failed evacuation: both count.
    let failed = [
        update("first", Phase::Failed, 900, Some(950)),
        evacuation("second", Phase::Failed, 960, Some(990)),
    ];
    assert_eq!(
        evacuation_backoff(&next, &failed, &now(1_000)),
        Some(Duration::from_secs(30))
    );
    assert_eq!(evacuation_backoff(&next, &failed, &now(1_030)), None);
}

#[test]
fn an_evacuation_waits_longer_after_each_failure_in_a_row() {
    let now = |s: i64| Time(Timestamp::from_second(s).expect("time"));
    let next = evacuation("next", Phase::Unset, 1_000, None);
    let one_failed = vec![evacuation("e1", Phase::Failed, 100, Some(990))];
    // Failed at 990: 20 s from then.
    assert_eq!(
        evacuation_backoff(&next, &one_failed, &now(1_000)),
        Some(Duration::from_secs(10))
    );
    assert_eq!(evacuation_backoff(&next, &one_failed, &now(1_010)), None);
    // Three failures in a row: 80 s from the latest (e3, at 990).
    let three = vec![
        evacuation("e1", Phase::Failed, 100, Some(500)),
        evacuation("e2", Phase::Failed, 200, Some(700)),
        evacuation("e3", Phase::Failed, 300, Some(990)),
    ];
    assert_eq!(
        evacuation_backoff(&next, &three, &now(1_000)),
        Some(Duration::from_secs(70))
    );
    // A success ends the row: only the failure after it counts.
    let mut after_success = three.clone();
    after_success[1] = evacuation("e2", Phase::Succeeded, 200, None);
    assert_eq!(
        evacuation_backoff(&next, &after_success, &now(1_000)),
        Some(Duration::from_secs(10))
    );
    // Failures being deleted do not count; migrations users make never wait, nor do older ones.
    let mut deleted = one_failed.clone();
    deleted[0].metadata.deletion_timestamp = Some(now(995));
    assert_eq!(evacuation_backoff(&next, &deleted, &now(1_000)), None);
    let by_user = migration("user", Phase::Unset, 1_000, false);
    assert_eq!(evacuation_backoff(&by_user, &one_failed, &now(1_000)), None);
    let older = evacuation("older", Phase::Unset, 50, None);
    assert_eq!(evacuation_backoff(&older, &one_failed, &now(1_000)), None);
    // Nothing failed: no wait.
    assert_eq!(evacuation_backoff(&next, &[], &now(1_000)), None);
}
