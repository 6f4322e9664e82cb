//! The evacuation controller: a VMI marked for evacuation gets one migration, one that cannot
//! migrate gets none, and a refused evacuation waits for its retry.

use super::*;

/// Marks `default/vm1` for evacuation from node-a, with `strategy` and migratability.
fn mark_for_evacuation(api: &FakeControllerApi, strategy: &str, migratable: bool) {
    api.modify_vmi("default/vm1", |vmi| {
        vmi.spec.eviction_strategy = Some(strategy.to_owned());
        let status = vmi.status.get_or_insert_default();
        status.conditions.push(
            serde_json::from_value(json!({
                "type": "LiveMigratable", "status": if migratable { "True" } else { "False" }
            }))
            .expect("condition"),
        );
        status.evacuation_node_name = Some("node-a".to_owned());
    });
}

#[tokio::test]
async fn a_vmi_marked_for_evacuation_gets_one_migration_which_creates_its_target_pod() {
    let (cluster, source) = running_vmi().await;
    let api = &cluster.api;
    mark_for_evacuation(api, "LiveMigrate", true);
    let key = wait_for("the evacuation's migration", || api.migration_keys().into_iter().next()).await;
    assert!(key.starts_with("default/kubevirt-evacuation-"), "{key}");
    let created = api.migration(&key).expect("migration");
    assert_eq!(created.spec.vmi_name.as_deref(), Some("vm1"));
    assert_eq!(
        created
            .metadata
            .annotations
            .and_then(|a| a.get("kubevirt.io/evacuationMigration").cloned())
            .as_deref(),
        Some("node-a")
    );
    // The migration controller takes it from there.
    wait_for("the target pod", || target_pod(api, &source)).await;
    // Further changes do not create a second one while the first is unfinished.
    api.modify_vmi("default/vm1", |vmi| {
        vmi.metadata
            .labels
            .get_or_insert_default()
            .insert("touched".to_owned(), "yes".to_owned());
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(api.migration_keys().len(), 1);
    let writes = api.writes();
    let created = writes
        .iter()
        .position(|w| matches!(w, Write::CreateMigration(_)))
        .expect("created");
    assert_eq!(
        writes.get(created + 1),
        Some(&Write::Event("default/vm1".to_owned(), "SuccessfulCreate".to_owned()))
    );
    let creations = writes.iter().filter(|w| matches!(w, Write::CreateMigration(_))).count();
    assert_eq!(creations, 1, "{writes:?}");
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

#[tokio::test]
async fn a_vmi_that_cannot_migrate_is_not_evacuated() {
    let (cluster, _source) = running_vmi().await;
    let api = &cluster.api;
    mark_for_evacuation(api, "LiveMigrate", false);
    wait_for("the not-migratable event", || {
        api.writes()
            .iter()
            .any(|w| matches!(w, Write::Event(vmi, reason) if vmi == "default/vm1" && reason == "FailedCreate"))
            .then_some(())
    })
    .await;
    assert!(api.migration_keys().is_empty());
    // Told once, however often the VMI changes.
    for n in 0..3 {
        api.modify_vmi("default/vm1", |vmi| {
            vmi.metadata
                .labels
                .get_or_insert_default()
                .insert("touched".to_owned(), n.to_string());
        });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let told = api
        .writes()
        .iter()
        .filter(|w| matches!(w, Write::Event(vmi, reason) if vmi == "default/vm1" && reason == "FailedCreate"))
        .count();
    assert_eq!(told, 1);
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}

#[tokio::test]
async fn a_refused_evacuation_is_tried_again_later_not_at_every_change() {
    let (cluster, _source) = running_vmi().await;
    let api = &cluster.api;
    api.refuse_migrations("the cluster's migration settings are not supported");
    mark_for_evacuation(api, "LiveMigrate", true);
    let attempts = || {
        api.writes()
            .iter()
            .filter(|w| matches!(w, Write::CreateMigration(_)))
            .count()
    };
    wait_for("the first attempt", || (attempts() == 1).then_some(())).await;
    for n in 0..5 {
        api.modify_vmi("default/vm1", |vmi| {
            vmi.metadata
                .labels
                .get_or_insert_default()
                .insert("touched".to_owned(), n.to_string());
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(attempts(), 1, "no retry before the backoff is over");
    cluster.stop.cancel();
    cluster.task.await.expect("runner");
}
