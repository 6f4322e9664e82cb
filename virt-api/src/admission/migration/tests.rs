//! The migration webhooks through `admit`, with the fake cluster's VMIs and migrations.

use kubevirt_api::v1::ClusterConfig;
use serde_json::{Value, json};

use crate::admission::{Webhook, answer_with_fake};
use crate::backends::FakeSubresourceCluster;

fn review(operation: &str, object: &Value, old: Option<&Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "r1",
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstancemigrations"},
            "operation": operation,
            "namespace": "prod",
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old
        }
    }))
    .expect("review")
}

fn migration(spec: &Value) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "mig", "namespace": "prod", "uid": "new-uid"},
        "spec": spec
    })
}

fn vmi(phase: &str, interface: &Value) -> Value {
    json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm1", "namespace": "prod", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {"interfaces": [interface]}}, "networks": [{"name": "default", "pod": {}}]},
        "status": {"phase": phase}
    })
}

async fn run(webhook: Webhook, body: &[u8], config: ClusterConfig, cluster: &FakeSubresourceCluster) -> Value {
    answer_with_fake(webhook, body, config, cluster).await
}

fn masquerade() -> Value {
    json!({"name": "default", "masquerade": {}})
}

async fn create(spec: &Value, cluster: &FakeSubresourceCluster) -> Value {
    run(
        Webhook::MigrationValidateCreate,
        &review("CREATE", &migration(spec), None),
        ClusterConfig::default(),
        cluster,
    )
    .await
}

fn message(response: &Value) -> &str {
    response["status"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_running_migratable_vmi_may_migrate() {
    let cluster = FakeSubresourceCluster::default();
    cluster.put_vmi(vmi("Running", &masquerade()));
    let response = create(&json!({"vmiName": "vm1"}), &cluster).await;
    assert_eq!(response["allowed"], true, "{response}");
}

#[tokio::test]
async fn the_vmi_must_exist_run_and_be_migratable() {
    let cluster = FakeSubresourceCluster::default();
    let missing = create(&json!({"vmiName": "vm1"}), &cluster).await;
    assert_eq!(message(&missing), "the VMI \"prod/vm1\" does not exist");
    cluster.put_vmi(vmi("Succeeded", &masquerade()));
    assert_eq!(
        message(&create(&json!({"vmiName": "vm1"}), &cluster).await),
        "Cannot migrate VMI in finalized state."
    );
    cluster.put_vmi(vmi("Scheduling", &masquerade()));
    assert!(message(&create(&json!({"vmiName": "vm1"}), &cluster).await).contains("not Running"));
    cluster.put_vmi(vmi("Running", &json!({"name": "default", "bridge": {}})));
    let bridged = create(&json!({"vmiName": "vm1"}), &cluster).await;
    assert!(
        message(&bridged).starts_with("Cannot migrate VMI, Reason: InterfaceNotLiveMigratable, Message: cannot migrate VMI which does not use masquerade"),
        "{bridged}"
    );
}

#[tokio::test]
async fn one_migration_at_a_time() {
    let cluster = FakeSubresourceCluster::default();
    cluster.put_vmi(vmi("Running", &masquerade()));
    cluster.put_migration(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "earlier", "namespace": "prod", "uid": "earlier-uid",
                     "labels": {"kubevirt.io/vmi-name": "vm1"}},
        "spec": {"vmiName": "vm1"},
        "status": {"phase": "Running"}
    }));
    let busy = create(&json!({"vmiName": "vm1"}), &cluster).await;
    assert_eq!(
        message(&busy),
        "in-flight migration detected. Active migration job (earlier-uid) is currently already in progress for VMI vm1."
    );
    cluster.put_migration(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstanceMigration",
        "metadata": {"name": "earlier", "namespace": "prod", "uid": "earlier-uid",
                     "labels": {"kubevirt.io/vmi-name": "vm1"}},
        "spec": {"vmiName": "vm1"},
        "status": {"phase": "Succeeded"}
    }));
    assert_eq!(create(&json!({"vmiName": "vm1"}), &cluster).await["allowed"], true);
}

#[tokio::test]
async fn what_kubevirt_rs_does_not_do_is_refused_by_field() {
    let cluster = FakeSubresourceCluster::default();
    cluster.put_vmi(vmi("Running", &masquerade()));
    let missing = create(&json!({}), &cluster).await;
    assert_eq!(missing["status"]["code"], 422);
    assert_eq!(missing["status"]["details"]["causes"][0]["field"], "spec.vmiName");
    assert_eq!(
        missing["status"]["details"]["causes"][0]["message"],
        "vmiName is missing"
    );
    let priority = create(&json!({"vmiName": "vm1", "priority": "user-triggered"}), &cluster).await;
    assert_eq!(priority["status"]["details"]["causes"][0]["field"], "spec.priority");
    let decentralized = create(&json!({"vmiName": "vm1", "receive": {"migrationID": "x"}}), &cluster).await;
    assert_eq!(decentralized["allowed"], false);
    let mut config = ClusterConfig::default();
    config.migrations.unsupported = vec!["spec.configuration.migrations.network".to_owned()];
    let held = run(
        Webhook::MigrationValidateCreate,
        &review("CREATE", &migration(&json!({"vmiName": "vm1"})), None),
        config,
        &cluster,
    )
    .await;
    assert!(
        message(&held).contains("spec.configuration.migrations.network"),
        "{held}"
    );
}

#[tokio::test]
async fn a_new_migration_is_labelled_with_its_vmi_and_gets_the_finalizer() {
    use base64::Engine as _;
    let cluster = FakeSubresourceCluster::default();
    let response = run(
        Webhook::MigrationMutateCreate,
        &review("CREATE", &migration(&json!({"vmiName": "vm1"})), None),
        ClusterConfig::default(),
        &cluster,
    )
    .await;
    let patch = base64::engine::general_purpose::STANDARD
        .decode(response["patch"].as_str().expect("patch"))
        .expect("base64");
    let patch: Value = serde_json::from_slice(&patch).expect("json");
    let metadata = &patch[0]["value"];
    assert_eq!(patch[0]["path"], "/metadata");
    assert_eq!(metadata["labels"]["kubevirt.io/vmi-name"], "vm1");
    assert_eq!(metadata["finalizers"], json!(["kubevirt.io/migrationJobFinalize"]));
}

#[tokio::test]
async fn the_spec_is_fixed_and_an_unfinished_migration_keeps_its_label() {
    let cluster = FakeSubresourceCluster::default();
    let mut old = migration(&json!({"vmiName": "vm1"}));
    old["metadata"]["labels"] = json!({"kubevirt.io/vmi-name": "vm1"});
    let mut changed = old.clone();
    changed["spec"]["vmiName"] = json!("vm2");
    let update = |new: &Value| review("UPDATE", new, Some(&old));
    let refused = run(
        Webhook::MigrationValidateUpdate,
        &update(&changed),
        ClusterConfig::default(),
        &cluster,
    )
    .await;
    assert_eq!(
        refused["status"]["message"],
        "update of Migration object's spec is restricted"
    );
    let mut unlabelled = old.clone();
    unlabelled["metadata"]["labels"] = json!({});
    let removed = run(
        Webhook::MigrationValidateUpdate,
        &update(&unlabelled),
        ClusterConfig::default(),
        &cluster,
    )
    .await;
    assert_eq!(
        message(&removed),
        "selector label can't be removed from an in-flight migration"
    );
    unlabelled["status"] = json!({"phase": "Succeeded"});
    let finished = run(
        Webhook::MigrationValidateUpdate,
        &update(&unlabelled),
        ClusterConfig::default(),
        &cluster,
    )
    .await;
    assert_eq!(finished["allowed"], true);
}
