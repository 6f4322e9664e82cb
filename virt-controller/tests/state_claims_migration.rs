//! A migration of a VMI with VM state storage through the event loop and the in-memory API server:
//! the target pod mounts a claim of its own, labelled with the migration's name and named in its
//! status; a migration that succeeds hands the state over (the target's claim becomes the VMI's,
//! the source's goes) before its status says so, one that fails drops the target's claim.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kubevirt_api::v1::{MigrationPhase, VirtualMachineInstanceMigration};
use serde_json::json;
use virt_controller::cluster_api::{FakeControllerApi, Write};

#[path = "support/event_loop.rs"]
mod event_loop;

use event_loop::{start, wait_for};

fn claims_created(api: &FakeControllerApi) -> Vec<String> {
    api.writes()
        .into_iter()
        .filter_map(|w| match w {
            Write::CreateClaim(key) => Some(key),
            _ => None,
        })
        .collect()
}

fn labels(api: &FakeControllerApi, key: &str) -> Vec<(String, String)> {
    api.claim(key)
        .and_then(|c: PersistentVolumeClaim| c.metadata.labels)
        .unwrap_or_default()
        .into_iter()
        .filter(|(k, _)| k != "cdi.kubevirt.io/applyStorageProfile")
        .collect()
}

fn phase(api: &FakeControllerApi) -> Option<MigrationPhase> {
    api.migration("default/mig")?.status?.phase
}

/// The VMI `default/vm1` with a persistent TPM running on node-a, its state claim made; the
/// migration `mig` asked for and its target pod made. Returns the source claim's and the target
/// claim's keys and the target pod's.
async fn migrating(api: &FakeControllerApi) -> (String, String, String) {
    let class: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "local", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "example.com/csi", "volumeBindingMode": "WaitForFirstConsumer"
    }))
    .expect("class");
    api.add_storage_class(class);
    api.apply_vmi(
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm1", "namespace": "default", "uid": "vmi-uid"},
            "spec": {"domain": {"resources": {"requests": {"memory": "128Mi"}},
                                "devices": {"tpm": {"persistent": true}}}}
        }))
        .expect("VMI"),
    );
    let source_pod = wait_for("the launcher pod", || api.pod_keys().into_iter().next()).await;
    let source_claim = claims_created(api).remove(0);
    api.run_pod(&source_pod, "node-a");
    wait_for("Scheduled", || {
        (api.vmi("default/vm1")?.status?.node_name.as_deref() == Some("node-a")).then_some(())
    })
    .await;
    api.modify_vmi("default/vm1", |vmi| {
        vmi.status.get_or_insert_default().phase = Some(kubevirt_api::v1::VirtualMachineInstancePhase::Running);
    });
    let migration: VirtualMachineInstanceMigration = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "mig", "namespace": "default"}, "spec": {"vmiName": "vm1"}
    }))
    .expect("migration");
    api.apply_migration(migration);
    let target_pod = wait_for("the target pod", || {
        api.pod_keys().into_iter().find(|k| *k != source_pod)
    })
    .await;
    let target_claim = claims_created(api).get(1).cloned().expect("the target's claim");
    (source_claim, target_claim, target_pod)
}

#[tokio::test]
async fn a_migration_that_succeeds_hands_the_state_claim_over_to_the_target() {
    let api = FakeControllerApi::new();
    let (stop, task) = start(&api);
    let (source_claim, target_claim, target_pod) = migrating(&api).await;
    assert_eq!(
        labels(&api, &target_claim),
        [("kubevirt.io/migrationName".to_owned(), "mig".to_owned())]
    );
    let mounted = api
        .pod(&target_pod)
        .and_then(|p| p.spec?.volumes?.into_iter().find(|v| v.name == "vm-state"))
        .and_then(|v| v.persistent_volume_claim)
        .map(|c| format!("default/{}", c.claim_name));
    assert_eq!(
        mounted.as_deref(),
        Some(target_claim.as_str()),
        "the target mounts its own claim"
    );
    let named = wait_for("the claims named in the migration", || {
        let state = api.migration("default/mig")?.status?.migration_state?;
        Some((
            state.source_persistent_state_pvc_name?,
            state.target_persistent_state_pvc_name?,
        ))
    })
    .await;
    assert_eq!(
        (format!("default/{}", named.0), format!("default/{}", named.1)),
        (source_claim.clone(), target_claim.clone())
    );

    api.run_pod(&target_pod, "node-b");
    wait_for("the hand-off", || api.vmi("default/vm1")?.status?.migration_state).await;
    let report = |change: fn(&mut kubevirt_api::v1::MigrationState)| api.report_migration_state("default/vm1", change);
    report(|s| s.target_node_address = Some("10.0.0.2".to_owned()));
    wait_for("TargetReady", || {
        (phase(&api)? == MigrationPhase::TargetReady).then_some(())
    })
    .await;
    report(|s| {
        s.start_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    });
    wait_for("Running", || (phase(&api)? == MigrationPhase::Running).then_some(())).await;
    report(|s| s.completed = Some(true));
    wait_for("the source's claim to go", || {
        api.claim(&source_claim).is_none().then_some(())
    })
    .await;
    assert_eq!(
        labels(&api, &target_claim),
        [("persistent-state-for".to_owned(), "vm1".to_owned())],
        "the target's claim is the VMI's now"
    );
    assert_eq!(phase(&api), Some(MigrationPhase::Succeeded));
    // Handed over before the migration says it is over (a next migration, or the migration's
    // deletion, cannot come between): the relabel, then the source's deletion, then the status.
    let writes = api.writes();
    let at = |wanted: &dyn Fn(&Write) -> bool| writes.iter().rposition(wanted).expect("the write");
    let labelled = at(&|w| matches!(w, Write::LabelClaim(key, _) if *key == target_claim));
    let deleted = at(&|w| matches!(w, Write::DeleteClaim(key) if *key == source_claim));
    let succeeded = at(&|w| matches!(w, Write::MigrationStatus(key) if key == "default/mig"));
    assert!(labelled < deleted && deleted < succeeded, "{writes:?}");
    stop.cancel();
    task.await.expect("runner");
}

#[tokio::test]
async fn a_migration_that_fails_drops_the_targets_claim_and_keeps_the_sources() {
    let api = FakeControllerApi::new();
    let (stop, task) = start(&api);
    let (source_claim, target_claim, target_pod) = migrating(&api).await;
    api.run_pod(&target_pod, "node-b");
    wait_for("the hand-off", || api.vmi("default/vm1")?.status?.migration_state).await;
    api.report_migration_state("default/vm1", |state| {
        state.failed = Some(true);
        state.completed = Some(true);
    });
    wait_for("the target's claim to go", || {
        api.claim(&target_claim).is_none().then_some(())
    })
    .await;
    assert_eq!(phase(&api), Some(MigrationPhase::Failed));
    assert_eq!(
        labels(&api, &source_claim),
        [("persistent-state-for".to_owned(), "vm1".to_owned())]
    );
    stop.cancel();
    task.await.expect("runner");
}
