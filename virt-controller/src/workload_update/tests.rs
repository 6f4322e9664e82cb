use std::time::Duration;

use kubevirt_api::v1::{VirtualMachineInstance, WorkloadUpdates};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{LauncherPod, MIN_BATCH_WAIT, Observed, Plan, Vmi, WAIT_FOR_SLOT, current_pod, is_outdated, plan};

const NEW: &str = "registry/virt-launcher:v2";
const OLD: &str = "registry/virt-launcher:v1";

/// A running VMI on `image`, live migratable or not, with `extra` merged into it.
fn vmi(name: &str, image: &str, migratable: bool, extra: &Value) -> VirtualMachineInstance {
    let mut value = json!({
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {"domain": {"devices": {}}},
        "status": {
            "phase": "Running", "nodeName": "node1", "launcherContainerImageVersion": image,
            "conditions": [{"type": "LiveMigratable", "status": if migratable { "True" } else { "False" }}]
        }
    });
    merge(&mut value, extra);
    serde_json::from_value(value).expect("vmi")
}

fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

fn entry(vmi: &VirtualMachineInstance) -> Vmi<'_> {
    Vmi {
        key: format!("prod/{}", vmi.metadata.name.as_deref().unwrap_or_default()),
        vmi,
        being_moved: false,
    }
}

fn methods(live_migrate: bool, evict: bool) -> WorkloadUpdates {
    WorkloadUpdates {
        live_migrate,
        evict,
        ..WorkloadUpdates::default()
    }
}

fn observed<'a>(vmis: &'a [VirtualMachineInstance], updates: &'a WorkloadUpdates) -> Observed<'a> {
    Observed {
        launcher_image: NEW,
        vmis: vmis.iter().map(entry).collect(),
        deployed: true,
        updates,
        running_migrations: 0,
        parallel_migrations_per_cluster: 5,
        since_last_batch: None,
        update_migrations: Vec::new(),
        reported_outdated: Some(0),
    }
}

fn keys(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("prod/{prefix}{i:03}")).collect()
}

#[test]
fn a_vmi_is_outdated_when_its_known_launcher_image_differs() {
    let table = [
        (json!({}), OLD, true),
        (json!({}), NEW, false),
        // Not known yet: not outdated.
        (json!({}), "", false),
        (json!({"status": {"launcherContainerImageVersion": null}}), OLD, false),
        // Final VMIs are not.
        (json!({"status": {"phase": "Succeeded"}}), OLD, false),
        (json!({"status": {"phase": "Failed"}}), OLD, false),
        // Not running yet, still outdated (labelled, not counted).
        (json!({"status": {"phase": "Scheduled"}}), OLD, true),
    ];
    for (extra, image, outdated) in table {
        assert_eq!(
            is_outdated(&vmi("a", image, true, &extra), NEW),
            outdated,
            "{extra} {image}"
        );
    }
}

#[test]
fn without_methods_outdated_vmis_are_labelled_and_counted_only() {
    let vmis = vec![
        vmi("a", OLD, true, &json!({})),
        vmi("b", NEW, true, &json!({})),
        vmi(
            "c",
            OLD,
            false,
            &json!({"metadata": {"labels": {"kubevirt.io/outdatedLauncherImage": ""}}}),
        ),
        vmi(
            "d",
            NEW,
            true,
            &json!({"metadata": {"labels": {"kubevirt.io/outdatedLauncherImage": ""}}}),
        ),
        vmi("e", OLD, true, &json!({"status": {"phase": "Scheduled"}})),
    ];
    let updates = methods(false, false);
    assert_eq!(
        plan(&observed(&vmis, &updates)),
        Plan {
            label: vec!["prod/a".to_owned(), "prod/e".to_owned()],
            unlabel: vec!["prod/d".to_owned()],
            counted: Some(2),
            outdated: Some(2),
            ..Plan::default()
        }
    );
}

#[test]
fn nothing_moves_and_nothing_is_counted_until_the_install_is_deployed() {
    let vmis = [vmi("a", OLD, true, &json!({}))];
    let updates = methods(true, true);
    let mut seen = observed(&vmis, &updates);
    seen.deployed = false;
    seen.update_migrations = vec![("prod/m".to_owned(), "prod/a".to_owned())];
    assert_eq!(
        plan(&seen),
        Plan {
            label: vec!["prod/a".to_owned()],
            ..Plan::default()
        }
    );
}

#[test]
fn migratable_vmis_migrate_within_the_limit_and_the_rest_are_evicted_in_batches() {
    // Upstream's table: 50 migratable and 50 not, 100 up to date: 5 migrations, 10 evictions.
    let mut vmis: Vec<_> = (0..50)
        .map(|i| vmi(&format!("m{i:03}"), OLD, true, &json!({})))
        .collect();
    vmis.extend((0..50).map(|i| vmi(&format!("n{i:03}"), OLD, false, &json!({}))));
    vmis.extend((0..100).map(|i| vmi(&format!("u{i:03}"), NEW, true, &json!({}))));
    for (live_migrate, evict, migrated, evicted, requeue) in [
        (true, true, keys("m", 0..5), keys("n", 0..10), Some(WAIT_FOR_SLOT)),
        (true, false, keys("m", 0..5), vec![], Some(WAIT_FOR_SLOT)),
        // Evict alone evicts migratable VMIs too, in key order.
        (false, true, vec![], keys("m", 0..10), Some(Duration::from_secs(60))),
        (false, false, vec![], vec![], None),
    ] {
        let updates = methods(live_migrate, evict);
        let mut seen = observed(&vmis, &updates);
        seen.reported_outdated = None;
        let decided = plan(&seen);
        assert_eq!(decided.outdated, Some(100), "{live_migrate} {evict}");
        assert_eq!(decided.migrate, migrated, "{live_migrate} {evict}");
        assert_eq!(decided.evict, evicted, "{live_migrate} {evict}");
        assert_eq!(decided.requeue, requeue, "{live_migrate} {evict}");
        assert_eq!(decided.label.len(), 100);
    }
}

#[test]
fn running_migrations_take_slots() {
    let vmis: Vec<_> = (0..3)
        .map(|i| vmi(&format!("m{i:03}"), OLD, true, &json!({})))
        .collect();
    let updates = methods(true, false);
    for (running, limit, migrated) in [(4, 5, 1), (5, 5, 0), (7, 5, 0), (0, 5, 3), (0, 2, 2)] {
        let mut seen = observed(&vmis, &updates);
        seen.running_migrations = running;
        seen.parallel_migrations_per_cluster = limit;
        let decided = plan(&seen);
        assert_eq!(decided.migrate, keys("m", 0..migrated), "{running}/{limit}");
        assert_eq!(
            decided.requeue,
            (migrated < 3).then_some(WAIT_FOR_SLOT),
            "{running}/{limit}"
        );
    }
}

#[test]
fn vmis_already_moving_gone_or_not_running_are_left_alone() {
    let vmis = vec![
        vmi(
            "migrating",
            OLD,
            true,
            &json!({"status": {"migrationState": {"completed": false}}}),
        ),
        vmi(
            "moved-before",
            OLD,
            true,
            &json!({"status": {"migrationState": {"completed": true}}}),
        ),
        vmi(
            "deleting",
            OLD,
            true,
            &json!({"metadata": {"deletionTimestamp": "2026-12-04T10:00:00Z"}}),
        ),
        vmi("pending", OLD, true, &json!({"status": {"phase": "Pending"}})),
        vmi("unfinished", OLD, true, &json!({})),
    ];
    let updates = methods(true, true);
    let mut seen = observed(&vmis, &updates);
    seen.vmis[4].being_moved = true;
    let decided = plan(&seen);
    assert_eq!(decided.migrate, ["prod/moved-before"]);
    assert_eq!(decided.evict, Vec::<String>::new());
    // Running and not deleted: the migrating, the moved and the unfinished one.
    assert_eq!(decided.outdated, Some(3));
    assert_eq!(
        decided.label,
        ["prod/migrating", "prod/moved-before", "prod/pending", "prod/unfinished"]
    );
}

#[test]
fn evictions_come_in_batches_one_interval_apart() {
    let vmis: Vec<_> = (0..12)
        .map(|i| vmi(&format!("n{i:03}"), OLD, false, &json!({})))
        .collect();
    let updates = WorkloadUpdates {
        evict: true,
        batch_eviction_size: 5,
        batch_eviction_interval: Duration::from_secs(2),
        ..WorkloadUpdates::default()
    };
    // (time since the last batch, evicted, requeue)
    let table = [
        (None, keys("n", 0..5), Some(Duration::from_secs(2))),
        (Some(Duration::ZERO), vec![], Some(Duration::from_secs(2))),
        // Half a second left: looked at again after the floor of one second.
        (Some(Duration::from_millis(1500)), vec![], Some(MIN_BATCH_WAIT)),
        (
            Some(Duration::from_secs(2)),
            keys("n", 0..5),
            Some(Duration::from_secs(2)),
        ),
        (
            Some(Duration::from_secs(3)),
            keys("n", 0..5),
            Some(Duration::from_secs(2)),
        ),
    ];
    for (since, evicted, requeue) in table {
        let mut seen = observed(&vmis, &updates);
        seen.since_last_batch = since;
        let decided = plan(&seen);
        assert_eq!(decided.evict, evicted, "{since:?}");
        assert_eq!(decided.requeue, requeue, "{since:?}");
    }
    // The last, smaller batch leaves nothing to wait for.
    let few = &vmis[..3];
    let decided = plan(&observed(few, &updates));
    assert_eq!((decided.evict.len(), decided.requeue), (3, None));
}

#[test]
fn update_migrations_of_vmis_no_longer_outdated_are_aborted_before_the_target_is_ready() {
    let vmis = vec![
        vmi(
            "back",
            NEW,
            true,
            &json!({"status": {"migrationState": {"completed": false}}}),
        ),
        vmi(
            "too-late",
            NEW,
            true,
            &json!({"status": {"migrationState": {"completed": false, "targetNodeDomainReadyTimestamp": "2026-12-04T10:00:00Z"}}}),
        ),
        vmi(
            "still-old",
            OLD,
            true,
            &json!({"status": {"migrationState": {"completed": false}}}),
        ),
    ];
    let updates = methods(true, false);
    let mut seen = observed(&vmis, &updates);
    seen.update_migrations = ["back", "too-late", "still-old"]
        .iter()
        .map(|n| (format!("prod/kubevirt-workload-update-{n}"), format!("prod/{n}")))
        .collect();
    let decided = plan(&seen);
    assert_eq!(decided.abort, ["prod/kubevirt-workload-update-back"]);
    assert_eq!(decided.migrate, Vec::<String>::new());
}

#[test]
fn the_count_is_written_only_when_it_changes() {
    let vmis = [vmi("a", OLD, true, &json!({})), vmi("b", NEW, true, &json!({}))];
    let updates = methods(false, false);
    for (reported, written) in [(None, Some(1)), (Some(0), Some(1)), (Some(1), None), (Some(2), Some(1))] {
        let mut seen = observed(&vmis, &updates);
        seen.reported_outdated = reported;
        let decided = plan(&seen);
        assert_eq!(decided.outdated, written, "{reported:?}");
        assert_eq!(decided.counted, Some(1), "{reported:?}");
    }
}

#[test]
fn an_interval_of_zero_does_not_spin() {
    let vmis: Vec<_> = (0..3)
        .map(|i| vmi(&format!("n{i:03}"), OLD, false, &json!({})))
        .collect();
    let updates = WorkloadUpdates {
        evict: true,
        batch_eviction_size: 1,
        batch_eviction_interval: Duration::ZERO,
        ..WorkloadUpdates::default()
    };
    let decided = plan(&observed(&vmis, &updates));
    assert_eq!((decided.evict.len(), decided.requeue), (1, Some(MIN_BATCH_WAIT)));
    let updates = WorkloadUpdates {
        batch_eviction_interval: Duration::from_millis(1_200),
        ..updates
    };
    let mut seen = observed(&vmis, &updates);
    seen.since_last_batch = Some(Duration::from_millis(1_100));
    let decided = plan(&seen);
    assert_eq!((decided.evict.len(), decided.requeue), (0, Some(MIN_BATCH_WAIT)));
}

#[test]
fn the_evicted_pod_is_the_newest_live_one_on_the_vmis_node_whatever_made_it() {
    let pod = |name: &'static str, node: &'static str, created: &str, is_down: bool, is_temporary: bool| LauncherPod {
        name,
        node: Some(node),
        is_down,
        is_temporary,
        created: Some(created.to_owned()),
    };
    let table: &[(&[LauncherPod<'_>], Option<&str>, Option<&str>)] = &[
        (
            &[pod("a", "node1", "2026-12-04T10:00:00Z", false, false)],
            Some("node1"),
            Some("a"),
        ),
        // After a migration: the source is done, the former target on the new node runs it.
        (
            &[
                pod("source", "node1", "2026-12-04T10:00:00Z", true, false),
                pod("target", "node2", "2026-12-04T11:00:00Z", false, false),
            ],
            Some("node2"),
            Some("target"),
        ),
        // A target still being made on another node is not the VMI's pod.
        (
            &[
                pod("source", "node1", "2026-12-04T10:00:00Z", false, false),
                pod("target", "node2", "2026-12-04T11:00:00Z", false, false),
            ],
            Some("node1"),
            Some("source"),
        ),
        (
            &[pod("claims", "node1", "2026-12-04T11:00:00Z", false, true)],
            Some("node1"),
            None,
        ),
        (&[pod("a", "node1", "2026-12-04T10:00:00Z", false, false)], None, None),
        (
            &[
                pod("older", "node1", "2026-12-04T10:00:00Z", false, false),
                pod("newer", "node1", "2026-12-04T10:30:00Z", false, false),
            ],
            Some("node1"),
            Some("newer"),
        ),
    ];
    for (pods, node, expected) in table {
        assert_eq!(current_pod(pods, *node), *expected, "{pods:?} on {node:?}");
    }
}
