//! The workload updater: after an upgrade, a VMI on an old launcher is labelled at once, and once
//! the install is deployed it is counted in the KubeVirt CR and moved as its strategy says: a
//! migration for one that can live-migrate, an eviction of the launcher pod for one that cannot.

use super::*;

/// The launcher image of the install before the upgrade (the event loop runs
/// `registry.example/virt-launcher:v0.1.0`).
const OLD_LAUNCHER: &str = "registry.example/virt-launcher:v0.0.9";

/// `default/vm1` runs the old launcher, live migratable or not.
fn on_old_launcher(api: &FakeControllerApi, migratable: bool) {
    api.modify_vmi("default/vm1", |vmi| {
        let status = vmi.status.get_or_insert_default();
        status.launcher_container_image_version = Some(OLD_LAUNCHER.to_owned());
        status.conditions.push(
            serde_json::from_value(json!({
                "type": "LiveMigratable", "status": if migratable { "True" } else { "False" }
            }))
            .expect("condition"),
        );
    });
}

/// The KubeVirt CR with `methods`, deployed or still deploying.
fn kubevirt(methods: &[&str], deployed: bool) -> kubevirt_api::v1::KubeVirt {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"workloadUpdateStrategy": {"workloadUpdateMethods": methods}},
        "status": {
            "phase": if deployed { "Deployed" } else { "Deploying" },
            "observedDeploymentID": "v1", "targetDeploymentID": if deployed { "v1" } else { "v2" }
        }
    }))
    .expect("KubeVirt")
}

fn outdated_label(api: &FakeControllerApi) -> Option<String> {
    api.vmi("default/vm1")?
        .metadata
        .labels?
        .get("kubevirt.io/outdatedLauncherImage")
        .cloned()
}

fn counted(api: &FakeControllerApi) -> Vec<serde_json::Value> {
    api.writes()
        .into_iter()
        .filter_map(|w| match w {
            Write::KubeVirtStatus(status) => Some(status),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn an_outdated_vmi_is_labelled_at_once_and_migrated_once_the_install_is_deployed() {
    let (cluster, _source) = running_vmi().await;
    let api = &cluster.api;
    on_old_launcher(api, true);
    api.apply_kubevirt(kubevirt(&["LiveMigrate"], false));
    assert_eq!(wait_for("the outdated label", || outdated_label(api)).await, "");
    assert!(
        api.migration_keys().is_empty(),
        "nothing moves while the install is deploying"
    );
    assert!(
        counted(api).is_empty(),
        "nothing is counted while the install is deploying"
    );
    api.apply_kubevirt(kubevirt(&["LiveMigrate"], true));
    let key = wait_for("the update migration", || api.migration_keys().into_iter().next()).await;
    assert!(key.starts_with("default/kubevirt-workload-update-"), "{key}");
    let created = api.migration(&key).expect("migration");
    assert_eq!(created.spec.vmi_name.as_deref(), Some("vm1"));
    assert_eq!(
        created
            .metadata
            .annotations
            .and_then(|a| a.get("kubevirt.io/workloadUpdateMigration").cloned())
            .as_deref(),
        Some("")
    );
    assert_eq!(counted(api), [json!({"outdatedVirtualMachineInstanceWorkloads": 1})]);
    let metrics = virt_controller::runner::metrics(&cluster.controllers, true);
    assert!(metrics.contains("kubevirt_vmi_number_of_outdated 1"), "{metrics}");
    let follower = virt_controller::runner::metrics(&cluster.controllers, false);
    assert!(
        !follower.contains("kubevirt_vmi_number_of_outdated"),
        "a leader metric: {follower}"
    );
    // A CR change wakes the updater again. This CR has lost the count (as a stale write would
    // lose it), so the pass writes it again: once it has, no second migration was made, as the
    // first is unfinished.
    api.apply_kubevirt(kubevirt(&["LiveMigrate"], true));
    wait_for("the count written again", || (counted(api).len() == 2).then_some(())).await;
    assert_eq!(api.migration_keys().len(), 1);
    let writes = api.writes();
    assert!(
        writes.contains(&Write::Event("default/vm1".to_owned(), "SuccessfulCreate".to_owned())),
        "{writes:?}"
    );
    assert!(!writes.iter().any(|w| matches!(w, Write::EvictPod(_))), "{writes:?}");
    cluster.stop.cancel();
    cluster.task.await.expect("loop");
}

#[tokio::test]
async fn an_outdated_vmi_that_cannot_migrate_has_its_launcher_evicted_only_with_evict() {
    let (cluster, source) = running_vmi().await;
    let api = &cluster.api;
    on_old_launcher(api, false);
    api.apply_kubevirt(kubevirt(&["LiveMigrate"], true));
    wait_for("the count", || counted(api).into_iter().next()).await;
    assert!(api.migration_keys().is_empty(), "not live migratable");
    assert!(!api.writes().iter().any(|w| matches!(w, Write::EvictPod(_))));
    api.apply_kubevirt(kubevirt(&["LiveMigrate", "Evict"], true));
    wait_for("the eviction", || {
        api.writes().contains(&Write::EvictPod(source.clone())).then_some(())
    })
    .await;
    wait_for("the event", || {
        api.writes()
            .contains(&Write::Event("default/vm1".to_owned(), "SuccessfulEvict".to_owned()))
            .then_some(())
    })
    .await;
    let pod = api.pod(&source).expect("the pod, terminating");
    assert!(pod.metadata.deletion_timestamp.is_some(), "evicted");
    assert!(api.migration_keys().is_empty());
    cluster.stop.cancel();
    cluster.task.await.expect("loop");
}
