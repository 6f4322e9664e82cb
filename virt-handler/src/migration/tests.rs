//! Roles, each side's steps in order, and the status each side writes.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use kubevirt_api::domain_state::StateReason;

use super::*;

fn vmi(node: &str, state: &serde_json::Value) -> VirtualMachineInstance {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "prod"},
        "spec": {"domain": {"devices": {}}},
        "status": {"phase": "Running", "nodeName": node, "migrationState": state}
    }))
    .expect("vmi")
}

fn state(extra: &serde_json::Value) -> MigrationState {
    let mut base = serde_json::json!({"migrationUid": "m1", "sourceNode": "a", "targetNode": "b"});
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        base.extend(extra.clone());
    }
    serde_json::from_value(base).expect("state")
}

const NOW: Time = Time(Timestamp::UNIX_EPOCH);

#[test]
fn each_node_knows_its_side() {
    let handed_off = serde_json::json!({"migrationUid": "m1", "sourceNode": "a", "targetNode": "b"});
    assert!(matches!(role(&vmi("a", &handed_off), "a"), Some(Role::Source(_))));
    assert!(matches!(role(&vmi("a", &handed_off), "b"), Some(Role::Target(_))));
    assert_eq!(role(&vmi("a", &handed_off), "c"), None);
    let mut completed = handed_off.clone();
    completed["completed"] = serde_json::json!(true);
    assert_eq!(
        role(&vmi("b", &completed), "b"),
        None,
        "the VMI is the target's own now"
    );
    let mut failed = handed_off;
    failed["failed"] = serde_json::json!(true);
    assert_eq!(role(&vmi("a", &failed), "b"), None, "a failed migration has no target");
    assert!(matches!(role(&vmi("a", &failed), "a"), Some(Role::Source(_))));
    assert_eq!(role(&vmi("a", &serde_json::Value::Null), "a"), None);
}

#[test]
fn the_target_prepares_opens_and_takes_over_once_the_source_is_done() {
    let s = state(&serde_json::json!({}));
    let mut seen = TargetSeen::default();
    assert_eq!(target_step(&s, seen), TargetStep::Wait, "no launcher yet");
    seen.launcher_ready = true;
    seen.needs_pod_network = true;
    assert_eq!(target_step(&s, seen), TargetStep::WirePodNetwork);
    seen.needs_pod_network = false;
    assert_eq!(target_step(&s, seen), TargetStep::Prepare);
    seen.prepared = true;
    assert_eq!(target_step(&s, seen), TargetStep::OpenProxy);
    seen.proxy_open = true;
    assert_eq!(target_step(&s, seen), TargetStep::Wait);
    seen.domain_running = true;
    assert_eq!(target_step(&s, seen), TargetStep::Wait, "the source has not ended");
    let ended = state(&serde_json::json!({"endTimestamp": "2026-11-26T10:00:00Z"}));
    assert_eq!(target_step(&ended, seen), TargetStep::Finalize);
    let failed = state(&serde_json::json!({"endTimestamp": "2026-11-26T10:00:00Z", "failed": true}));
    assert_eq!(target_step(&failed, seen), TargetStep::Wait);
}

#[test]
fn the_target_publishes_its_ports_and_records_the_domain() {
    let status = vmi("a", &serde_json::json!({"migrationUid": "m1", "targetNode": "b"}))
        .status
        .expect("status");
    let ports = BTreeMap::from([("40001".to_owned(), 0), ("40002".to_owned(), 49152)]);
    let running = DomainSnapshot {
        status: cmd_protocol::domain::DomainStatusSnapshot::from_state(DomainState::Running, StateReason::Unknown),
        ..DomainSnapshot::default()
    };
    let written = target_status(&status, Some(("10.0.0.2", &ports)), Some(&running), &NOW);
    let state = written.migration_state.clone().expect("state");
    assert_eq!(state.target_node_address.as_deref(), Some("10.0.0.2"));
    assert_eq!(state.target_direct_migration_node_ports, ports);
    assert_eq!(state.target_node_domain_detected, Some(true));
    assert_eq!(state.target_node_domain_ready_timestamp, Some(NOW));
    assert_eq!(
        target_ports(&state),
        BTreeMap::from([(Channel::Libvirt, 40001), (Channel::Stream, 40002)])
    );
    let mut evacuated = written.clone();
    evacuated.evacuation_node_name = Some("a".to_owned());
    let taken = finalized(&evacuated, "b", &NOW);
    assert_eq!(taken.node_name.as_deref(), Some("b"));
    assert_eq!(taken.evacuation_node_name, None);
    let state = taken.migration_state.expect("state");
    assert_eq!((state.completed, state.end_timestamp), (Some(true), Some(NOW)));
}

#[test]
fn the_source_waits_for_the_ports_then_migrates_once_and_cancels_on_request() {
    let waiting = state(&serde_json::json!({}));
    let ready = SourceSeen {
        launcher_ready: true,
        ..SourceSeen::default()
    };
    assert_eq!(source_step(&waiting, ready), SourceStep::Wait);
    let published = state(&serde_json::json!({"targetNodeAddress": "10.0.0.2",
        "targetDirectMigrationNodePorts": {"40001": 0, "40002": 49152}}));
    assert_eq!(source_step(&published, ready), SourceStep::OpenProxy);
    let open = SourceSeen {
        proxy_open: true,
        ..ready
    };
    assert_eq!(source_step(&published, open), SourceStep::Migrate);
    let running = MigrationMetadata {
        uid: "m1".to_owned(),
        start_timestamp: Some("2026-11-26T10:00:00Z".to_owned()),
        mode: Some(MigrationMode::PreCopy),
        ..MigrationMetadata::default()
    };
    let reporting = SourceSeen {
        reported: Some(&running),
        ..open
    };
    assert_eq!(source_step(&published, reporting), SourceStep::Wait, "migrates once");
    let mut cancelled = published.clone();
    cancelled.abort_requested = Some(true);
    assert_eq!(source_step(&cancelled, reporting), SourceStep::Cancel);
    let aborting = MigrationMetadata {
        abort_status: Some(AbortStatus::Aborting),
        ..running.clone()
    };
    assert_eq!(
        source_step(
            &cancelled,
            SourceSeen {
                reported: Some(&aborting),
                ..open
            }
        ),
        SourceStep::Wait,
        "asked once"
    );
    let over = MigrationMetadata {
        failed: true,
        ..aborting
    };
    assert_eq!(
        source_step(
            &cancelled,
            SourceSeen {
                reported: Some(&over),
                ..open
            }
        ),
        SourceStep::CloseProxy
    );
    let unstarted_cancel = state(&serde_json::json!({"abortRequested": true, "targetNodeAddress": "x",
        "targetDirectMigrationNodePorts": {"1": 0}}));
    assert_eq!(
        source_step(&unstarted_cancel, open),
        SourceStep::AbortUnstarted,
        "never started after a cancel, and recorded aborted"
    );
    let sent = SourceSeen {
        migrate_sent: true,
        ..open
    };
    assert_eq!(
        source_step(&published, sent),
        SourceStep::Wait,
        "sent once, its report awaited"
    );
    assert_eq!(
        source_step(&unstarted_cancel, sent),
        SourceStep::Wait,
        "the report decides"
    );
    let aborted = aborted_unstarted(&unstarted_cancel, &NOW);
    assert_eq!(aborted.failed, Some(true));
    assert_eq!(aborted.abort_status.as_deref(), Some("Succeeded"));
    assert_eq!(aborted.end_timestamp, Some(NOW));
    let failed = MigrationState {
        failed: Some(true),
        ..published.clone()
    };
    assert_eq!(
        source_step(&failed, open),
        SourceStep::CloseProxy,
        "a failed migration's proxy closes"
    );
}

#[test]
fn the_launchers_report_is_copied_into_the_migration_state() {
    let report = MigrationMetadata {
        uid: "m1".to_owned(),
        start_timestamp: Some("2026-11-26T10:00:00Z".to_owned()),
        end_timestamp: Some("2026-11-26T10:00:05Z".to_owned()),
        failed: true,
        failure_reason: "Live migration aborted ".to_owned(),
        abort_status: Some(AbortStatus::Succeeded),
        mode: Some(MigrationMode::PreCopy),
        ..MigrationMetadata::default()
    };
    let copied = reported_state(&state(&serde_json::json!({})), &report);
    assert!(copied.start_timestamp.is_some() && copied.end_timestamp.is_some());
    assert_eq!(copied.failed, Some(true));
    assert_eq!(copied.failure_reason.as_deref(), Some("Live migration aborted "));
    assert_eq!(copied.abort_status.as_deref(), Some("Succeeded"));
    assert_eq!(copied.mode.as_deref(), Some("PreCopy"));
    assert_eq!(copied.completed, None, "the target writes completed");
    let other = MigrationMetadata {
        uid: "m0".to_owned(),
        ..report
    };
    assert_eq!(
        reported_state(&state(&serde_json::json!({})), &other),
        state(&serde_json::json!({}))
    );
}

#[test]
fn options_come_from_the_hand_off_or_the_cluster() {
    let settings = MigrationSettings::default();
    let recorded = state(&serde_json::json!({"migrationConfiguration": {
        "bandwidthPerMigration": "32Mi", "completionTimeoutPerGiB": 60, "progressTimeout": 10,
        "allowAutoConverge": true, "unsafeMigrationOverride": true}}));
    let options = options(&recorded, &settings);
    assert_eq!(options.migration_uid, "m1");
    assert_eq!(options.bandwidth_mib_per_second, 32);
    assert_eq!(options.completion_timeout_per_gib, 60);
    assert_eq!(options.progress_timeout_seconds, 10);
    assert!(options.allow_auto_converge && !options.allow_post_copy && options.unsafe_migration);
    assert_eq!(options.max_downtime_ms, None, "QEMU's own");
    let defaults = super::options(&state(&serde_json::json!({})), &settings);
    assert_eq!(defaults.completion_timeout_per_gib, 150);
    assert!(!defaults.unsafe_migration);
    let policy = state(&serde_json::json!({"migrationConfiguration": {
        "allowPostCopy": true, "allowWorkloadDisruption": false, "maxDowntimeMs": 250}}));
    let options = super::options(&policy, &settings);
    assert!(
        !options.allow_post_copy,
        "post-copy disrupts the guest, which is not allowed"
    );
    assert_eq!(options.max_downtime_ms, Some(250));
    let allowed = state(&serde_json::json!({"migrationConfiguration": {"allowPostCopy": true}}));
    assert!(
        super::options(&allowed, &settings).allow_post_copy,
        "disruption unset: as post-copy says"
    );
}
