use kubevirt_api::migration_settings::MigrationSettings;
use kubevirt_api::v1::VirtualMachineInstance;
use serde_json::{Value, json};

use super::{Candidate, Observed, Plan, WAIT_FOR_MIGRATABLE, WAIT_FOR_SLOT, plan};

fn vmi(name: &str, strategy: Option<&str>, migratable: bool, status: &Value) -> VirtualMachineInstance {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {"domain": {"devices": {}}},
        "status": {
            "phase": "Running", "nodeName": "node1", "evacuationNodeName": "node1",
            "conditions": [{"type": "LiveMigratable", "status": if migratable { "True" } else { "False" }}]
        }
    });
    if let Some(strategy) = strategy {
        value["spec"]["evictionStrategy"] = json!(strategy);
    }
    for (field, v) in status.as_object().into_iter().flatten() {
        value["status"][field] = v.clone();
    }
    serde_json::from_value(value).expect("vmi")
}

fn candidate(vmi: &VirtualMachineInstance) -> Candidate<'_> {
    Candidate {
        key: format!("prod/{}", vmi.metadata.name.as_deref().unwrap_or_default()),
        vmi,
        has_unfinished_migration: false,
        active_pods: 1,
    }
}

fn decide(candidates: Vec<Candidate<'_>>, default: Option<&str>, running: (u32, u32)) -> Plan {
    let settings = MigrationSettings::default();
    plan(&Observed {
        node: "node1",
        candidates,
        default_strategy: default,
        unfinished_in_cluster: running.0,
        unfinished_from_node: running.1,
        settings: &settings,
    })
}

#[test]
fn each_strategy_and_migratability() {
    // (VMI strategy, cluster default, live migratable, migrated, reported not migratable)
    let cases = [
        (None, None, true, false, false),
        (Some("None"), None, true, false, false),
        (Some("LiveMigrate"), None, true, true, false),
        (Some("LiveMigrate"), None, false, false, true),
        (Some("LiveMigrateIfPossible"), None, true, true, false),
        (Some("LiveMigrateIfPossible"), None, false, false, false),
        // External: the webhook marks the VMI, someone else moves it.
        (Some("External"), None, true, false, false),
        (Some("External"), None, false, false, false),
        (None, Some("LiveMigrate"), true, true, false),
        (None, Some("LiveMigrate"), false, false, true),
        (Some("None"), Some("LiveMigrate"), true, false, false),
    ];
    for (strategy, default, migratable, migrated, reported) in cases {
        let one = vmi("a", strategy, migratable, &json!({}));
        let decided = decide(vec![candidate(&one)], default, (0, 0));
        let case = format!("{strategy:?} default={default:?} migratable={migratable}");
        assert_eq!(decided.migrate == ["prod/a"], migrated, "{case}: {decided:?}");
        assert_eq!(decided.not_migratable == ["prod/a"], reported, "{case}: {decided:?}");
        let requeue = reported.then_some(WAIT_FOR_MIGRATABLE);
        assert_eq!(decided.requeue, requeue, "{case}");
    }
}

#[test]
fn only_vmis_still_running_on_the_node_and_not_moving_are_migrated() {
    let skipped = [
        ("moved", json!({"nodeName": "node2"})),
        ("marked for another node", json!({"evacuationNodeName": "node2"})),
        ("migrating", json!({"migrationState": {"migrationUid": "m1"}})),
        ("succeeded", json!({"phase": "Succeeded"})),
        ("failed", json!({"phase": "Failed"})),
        ("not running yet", json!({"phase": "Scheduled"})),
    ];
    for (case, status) in skipped {
        let one = vmi("a", Some("LiveMigrate"), true, &status);
        assert_eq!(decide(vec![candidate(&one)], None, (0, 0)), Plan::default(), "{case}");
    }
    let mut deleting = vmi("a", Some("LiveMigrate"), true, &json!({}));
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    assert_eq!(decide(vec![candidate(&deleting)], None, (0, 0)), Plan::default());

    // A finished earlier migration does not hold the next one back.
    let done = vmi(
        "a",
        Some("LiveMigrate"),
        true,
        &json!({"migrationState": {"migrationUid": "m1", "failed": true}}),
    );
    assert_eq!(decide(vec![candidate(&done)], None, (0, 0)).migrate, ["prod/a"]);

    let one = vmi("a", Some("LiveMigrate"), true, &json!({}));
    let mut with_migration = candidate(&one);
    with_migration.has_unfinished_migration = true;
    assert_eq!(decide(vec![with_migration], None, (1, 1)), Plan::default());
    let mut two_pods = candidate(&one);
    two_pods.active_pods = 2;
    assert_eq!(decide(vec![two_pods], None, (0, 0)), Plan::default());
}

#[test]
fn the_parallel_limits_hold_and_the_rest_wait() {
    let vmis: Vec<VirtualMachineInstance> = ["d", "b", "a", "c"]
        .iter()
        .map(|n| vmi(n, Some("LiveMigrate"), true, &json!({})))
        .collect();
    let all = || vmis.iter().map(candidate).collect::<Vec<_>>();
    // Defaults: 5 per cluster, 2 outbound per node; in name order.
    let decided = decide(all(), None, (0, 0));
    assert_eq!(decided.migrate, ["prod/a", "prod/b"]);
    assert_eq!(decided.requeue, Some(WAIT_FOR_SLOT));
    // One already leaves the node.
    assert_eq!(decide(all(), None, (1, 1)).migrate, ["prod/a"]);
    // The cluster is full.
    let full = decide(all(), None, (5, 0));
    assert!(full.migrate.is_empty());
    assert_eq!(full.requeue, Some(WAIT_FOR_SLOT));
    // Over the limit (settings lowered): nothing, no underflow.
    assert!(decide(all(), None, (9, 9)).migrate.is_empty());
    // Enough room: all of them, nothing to wait for.
    let settings = MigrationSettings {
        parallel_outbound_migrations_per_node: 10,
        ..MigrationSettings::default()
    };
    let roomy = plan(&Observed {
        node: "node1",
        candidates: all(),
        default_strategy: None,
        unfinished_in_cluster: 1,
        unfinished_from_node: 0,
        settings: &settings,
    });
    assert_eq!(roomy.migrate, ["prod/a", "prod/b", "prod/c", "prod/d"]);
    assert_eq!(roomy.requeue, None);
}

#[test]
fn failed_creations_are_retried_later_and_later() {
    use super::{MAX_CREATE_RETRY, create_retry};
    let secs = |n| create_retry(n).as_secs();
    assert_eq!([secs(1), secs(2), secs(3), secs(4)], [5, 10, 20, 40]);
    assert_eq!(create_retry(7), MAX_CREATE_RETRY);
    assert_eq!(create_retry(u32::MAX), MAX_CREATE_RETRY);
}
