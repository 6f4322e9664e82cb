//! The migration controller in the event loop, against the in-memory API server: a migration of a
//! running VMI gets its finalizer and label, a target pod kept off the source node, the hand-off
//! into the VMI's migration state once the pod runs, and follows virt-handler's reports to
//! Succeeded; a cancel before the hand-off deletes the target pod and fails it. A VMI marked for
//! evacuation gets its migration from the evacuation controller, and an outdated one from the
//! workload updater.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kubevirt_api::migrations::MigrationPolicy;
use kubevirt_api::v1::{MigrationPhase, VirtualMachineInstanceMigration};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use virt_controller::cluster_api::{FakeControllerApi, Write};

#[path = "support/event_loop.rs"]
mod event_loop;

use event_loop::{start, start_controllers, wait_for};

struct Cluster {
    api: FakeControllerApi,
    controllers:
        std::sync::Arc<virt_controller::runner::Controllers<FakeControllerApi, kubevirt_api::clock::SystemClock>>,
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

/// The controllers leading, with the VMI `default/vm1` running in its pod on node-a.
async fn running_vmi() -> (Cluster, String) {
    let api = FakeControllerApi::new();
    api.apply_vmi(
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm1", "namespace": "default", "uid": "vmi-uid"},
            "spec": {"domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {}}}
        }))
        .expect("VMI"),
    );
    let (controllers, stop, task) = start_controllers(&api);
    let source = wait_for("the launcher pod", || api.pod_keys().into_iter().next()).await;
    api.run_pod(&source, "node-a");
    wait_for("Scheduled", || {
        (api.vmi("default/vm1")?.status?.node_name.as_deref() == Some("node-a")).then_some(())
    })
    .await;
    // virt-handler's part: the guest runs.
    api.modify_vmi("default/vm1", |vmi| {
        vmi.status.get_or_insert_default().phase = Some(kubevirt_api::v1::VirtualMachineInstancePhase::Running);
    });
    (
        Cluster {
            api,
            controllers,
            stop,
            task,
        },
        source,
    )
}

fn migration(name: &str) -> VirtualMachineInstanceMigration {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"vmiName": "vm1"}
    }))
    .expect("migration")
}

fn phase(api: &FakeControllerApi, key: &str) -> Option<MigrationPhase> {
    api.migration(key)?.status?.phase
}

fn target_pod(api: &FakeControllerApi, source: &str) -> Option<String> {
    api.pod_keys().into_iter().find(|k| k != source)
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one migration from start to end, step by step")]
async fn a_migration_goes_from_pending_to_succeeded_with_virt_handlers_reports() {
    let (cluster, source) = running_vmi().await;
    let api = &cluster.api;
    api.apply_migration(migration("mig"));
    let target = wait_for("the target pod", || target_pod(api, &source)).await;
    let stored = api.migration("default/mig").expect("migration");
    assert_eq!(
        stored.metadata.finalizers.as_deref(),
        Some(&["kubevirt.io/migrationJobFinalize".to_owned()][..])
    );
    assert_eq!(
        stored
            .metadata
            .labels
            .and_then(|l| l.get("kubevirt.io/vmi-name").cloned())
            .as_deref(),
        Some("vm1")
    );
    let pod = api.pod(&target).expect("target pod");
    let uid = stored.metadata.uid.clone().expect("uid");
    assert_eq!(
        pod.metadata
            .labels
            .and_then(|l| l.get("kubevirt.io/migrationJobUID").cloned()),
        Some(uid.clone())
    );
    let anti = pod
        .spec
        .and_then(|s| {
            s.affinity?
                .pod_anti_affinity?
                .required_during_scheduling_ignored_during_execution
        })
        .expect("anti-affinity");
    assert_eq!(anti[0].topology_key, "kubernetes.io/hostname");
    wait_for("Scheduling", || {
        (phase(api, "default/mig")? == MigrationPhase::Scheduling).then_some(())
    })
    .await;

    api.run_pod(&target, "node-b");
    let state = wait_for("the hand-off", || api.vmi("default/vm1")?.status?.migration_state).await;
    assert_eq!(state.migration_uid.as_deref(), Some(uid.as_str()));
    assert_eq!(state.source_node.as_deref(), Some("node-a"));
    assert_eq!(state.target_node.as_deref(), Some("node-b"));
    wait_for("PreparingTarget", || {
        (phase(api, "default/mig")? == MigrationPhase::PreparingTarget).then_some(())
    })
    .await;
    // virt-handler on the target listens; on the source it starts; then it completes.
    let report = |change: fn(&mut kubevirt_api::v1::MigrationState)| api.report_migration_state("default/vm1", change);
    report(|s| s.target_node_address = Some("10.0.0.2".to_owned()));
    wait_for("TargetReady", || {
        (phase(api, "default/mig")? == MigrationPhase::TargetReady).then_some(())
    })
    .await;
    report(|s| {
        s.start_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    });
    wait_for("Running", || {
        (phase(api, "default/mig")? == MigrationPhase::Running).then_some(())
    })
    .await;
    report(|s| s.completed = Some(true));
    wait_for("Succeeded", || {
        (phase(api, "default/mig")? == MigrationPhase::Succeeded).then_some(())
    })
    .await;
    let done = wait_for("the finalizer released", || {
        api.migration("default/mig")
            .filter(|m| m.metadata.finalizers.as_ref().is_none_or(Vec::is_empty))
    })
    .await;
    let status = done.status.expect("status");
    assert_eq!(status.migration_state.and_then(|s| s.completed), Some(true));
    let phases: Vec<_> = status
        .phase_transition_timestamps
        .iter()
        .filter_map(|t| t.phase)
        .collect();
    assert_eq!(
        phases,
        [
            MigrationPhase::Pending,
            MigrationPhase::Scheduling,
            MigrationPhase::Scheduled,
            MigrationPhase::PreparingTarget,
            MigrationPhase::TargetReady,
            MigrationPhase::Running,
            MigrationPhase::Succeeded
        ]
    );
    assert!(
        api.pod(&target)
            .is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "the guest runs there"
    );
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

#[tokio::test]
async fn a_cancel_before_the_hand_off_deletes_the_target_pod_and_releases_the_migration() {
    let (cluster, source) = running_vmi().await;
    let api = &cluster.api;
    api.apply_migration(migration("first"));
    let target = wait_for("the target pod", || target_pod(api, &source)).await;
    wait_for("Scheduling", || {
        (phase(api, "default/first")? == MigrationPhase::Scheduling).then_some(())
    })
    .await;
    api.delete_migration("default/first");
    wait_for("the target pod's deletion", || {
        api.pod(&target)?.metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    wait_for("the cancelled migration gone", || {
        api.migration("default/first").is_none().then_some(())
    })
    .await;
    let events: Vec<Write> = api.writes();
    let failed = events.iter().any(|w| {
        matches!(w, Write::MigrationEvent(key, reason, message)
            if key == "default/first" && reason == "FailedMigration" && message == "Migration failed due to being canceled")
    });
    assert!(failed, "{events:?}");
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

fn policy(name: &str, selectors: serde_json::Value, settings: serde_json::Value) -> MigrationPolicy {
    let mut spec = settings;
    spec["selectors"] = selectors;
    serde_json::from_value(json!({
        "apiVersion": "migrations.kubevirt.io/v1alpha1", "kind": "MigrationPolicy",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("policy")
}

#[tokio::test]
async fn the_policy_that_selects_the_vmi_gives_the_hand_off_its_settings_and_name() {
    let (cluster, source) = running_vmi().await;
    let api = &cluster.api;
    api.modify_vmi("default/vm1", |vmi| {
        vmi.metadata
            .labels
            .get_or_insert_default()
            .insert("workload".to_owned(), "db".to_owned());
    });
    api.label_namespace("default", BTreeMap::from([("team".to_owned(), "a".to_owned())]));
    api.apply_migration_policy(policy(
        "b-db-of-team-a",
        json!({"virtualMachineInstanceSelector": {"workload": "db"}, "namespaceSelector": {"team": "a"}}),
        json!({"bandwidthPerMigration": "16Mi", "allowAutoConverge": true, "maxDowntimeMs": 250}),
    ));
    api.apply_migration_policy(policy(
        "a-db",
        json!({"virtualMachineInstanceSelector": {"workload": "db"}}),
        json!({"bandwidthPerMigration": "1Mi"}),
    ));
    api.apply_migration_policy(policy(
        "a-web",
        json!({"virtualMachineInstanceSelector": {"workload": "web"}}),
        json!({"bandwidthPerMigration": "2Mi"}),
    ));
    api.apply_migration(migration("mig"));
    let target = wait_for("the target pod", || target_pod(api, &source)).await;
    api.run_pod(&target, "node-b");
    let state = wait_for("the hand-off", || api.vmi("default/vm1")?.status?.migration_state).await;
    assert_eq!(
        state.migration_policy_name.as_deref(),
        Some("b-db-of-team-a"),
        "the most labels matched"
    );
    let config = state.migration_configuration.expect("the settings");
    assert_eq!(config.bandwidth_per_migration, Some(Quantity("16Mi".to_owned())));
    assert_eq!(config.allow_auto_converge, Some(true));
    assert_eq!(config.max_downtime_ms, Some(250));
    assert_eq!(
        config.completion_timeout_per_gib,
        Some(150),
        "the cluster's, not set by the policy"
    );
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

#[tokio::test]
async fn a_policy_kubevirt_rs_cannot_honour_holds_the_migration_with_a_warning() {
    let (cluster, source) = running_vmi().await;
    let api = &cluster.api;
    api.apply_migration_policy(policy("paused", json!({}), json!({"allowWorkloadDisruption": true})));
    api.apply_migration(migration("held"));
    let warned = wait_for("the warning", || {
        api.writes().into_iter().find_map(|w| match w {
            Write::MigrationEvent(key, reason, message) if key == "default/held" && reason == "FailedCreate" => {
                Some(message)
            }
            _ => None,
        })
    })
    .await;
    assert!(
        warned.contains("MigrationPolicy paused: spec.allowWorkloadDisruption without allowPostCopy"),
        "{warned}"
    );
    assert_eq!(target_pod(api, &source), None, "no target pod while held");
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

#[tokio::test]
async fn only_the_five_newest_finished_migrations_of_a_vmi_are_kept() {
    let (cluster, _source) = running_vmi().await;
    let api = &cluster.api;
    for i in 0..7 {
        let mut done = migration(&format!("done-{i}"));
        done.metadata.creation_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::from_second(1_000 + i).expect("time"),
        ));
        done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
        api.apply_migration(done);
    }
    wait_for("the two oldest deleted", || {
        (api.migration_keys().len() == 5).then_some(())
    })
    .await;
    assert_eq!(
        api.migration_keys(),
        ["done-2", "done-3", "done-4", "done-5", "done-6"].map(|n| format!("default/{n}"))
    );
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

#[tokio::test]
async fn nothing_is_reconciled_before_every_watch_has_listed() {
    let api = FakeControllerApi::new();
    // A VMI marked for evacuation whose evacuation is already under way, and a slow list of
    // migrations: the evacuation must not start a second migration before it sees the first.
    let mut vmi: kubevirt_api::v1::VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "default", "uid": "vmi-uid"},
        "spec": {"evictionStrategy": "LiveMigrate", "domain": {"devices": {}}},
        "status": {"phase": "Running", "nodeName": "node-a", "evacuationNodeName": "node-a",
                   "conditions": [{"type": "LiveMigratable", "status": "True"}]}
    }))
    .expect("VMI");
    vmi.metadata.finalizers = Some(vec!["foregroundDeleteVirtualMachine".to_owned()]);
    api.apply_vmi(vmi);
    let mut under_way = migration("kubevirt-evacuation-first");
    under_way.metadata.annotations = Some([("kubevirt.io/evacuationMigration".to_owned(), "node-a".to_owned())].into());
    api.apply_migration(under_way);
    api.hold_migration_list();
    let (stop, task) = start(&api);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(api.writes().is_empty(), "nothing before the lists: {:?}", api.writes());
    api.release_migration_list();
    wait_for("the first migration's finalizer", || {
        api.writes()
            .iter()
            .any(|w| matches!(w, Write::PatchMigration(key, _) if key == "default/kubevirt-evacuation-first"))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        api.migration_keys(),
        ["default/kubevirt-evacuation-first"],
        "no second evacuation"
    );
    stop.cancel();
    task.await.expect("runner");
}

#[path = "migration/evacuation.rs"]
mod evacuation;
#[path = "migration/workload_update.rs"]
mod workload_update;
