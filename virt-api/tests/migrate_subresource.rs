//! `PUT .../virtualmachines/{name}/migrate` against the fake cluster: the migration it creates,
//! a dry run, and upstream's refusals.

use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use virt_api::backends::Recorded;
use virt_api::server::{fake_app, router};
use virt_api::subresources::authorize::Authentication;

async fn migrate(
    cluster_setup: impl FnOnce(&virt_api::backends::FakeSubresourceCluster),
    body: &str,
) -> (StatusCode, Value, Vec<Recorded>) {
    let (state, cluster) = fake_app(Authentication::Disabled);
    cluster_setup(&cluster);
    let request = Request::builder()
        .method(Method::PUT)
        .uri("/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm/migrate")
        .body(axum::body::Body::from(body.to_owned()))
        .expect("request");
    let response = router(state).oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    let value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, value, cluster.writes())
}

fn vm() -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": "default", "uid": "vm-uid"},
        "spec": {"runStrategy": "Always", "template": {"spec": {"domain": {"devices": {}}}}}})
}

fn vmi(phase: &str) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "default", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {}}},
        "status": {"phase": phase, "nodeName": "node1"}})
}

#[tokio::test]
async fn a_running_vm_gets_a_migration_of_its_vmi() {
    let (status, _, writes) = migrate(
        |c| {
            c.put_vm(vm());
            c.put_vmi(vmi("Running"));
        },
        r#"{"addedNodeSelector": {"disk": "ssd"}}"#,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let [
        Recorded::CreateMigration {
            namespace,
            migration,
            dry_run,
        },
    ] = writes.as_slice()
    else {
        panic!("one migration created: {writes:?}");
    };
    assert_eq!(namespace, "default");
    assert!(!dry_run);
    assert_eq!(migration["metadata"]["generateName"], "kubevirt-migrate-vm-");
    assert_eq!(migration["kind"], "VirtualMachineInstanceMigration");
    assert_eq!(
        migration["spec"],
        json!({"vmiName": "vm", "addedNodeSelector": {"disk": "ssd"}})
    );
}

#[tokio::test]
async fn a_dry_run_creates_nothing() {
    let (status, _, writes) = migrate(
        |c| {
            c.put_vm(vm());
            c.put_vmi(vmi("Running"));
        },
        r#"{"dryRun": ["All"]}"#,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert!(matches!(
        writes.as_slice(),
        [Recorded::CreateMigration { dry_run: true, .. }]
    ));
}

#[tokio::test]
async fn refusals_have_upstreams_codes_and_messages() {
    let (status, body, _) = migrate(|_| {}, "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, body, _) = migrate(|c| c.put_vm(vm()), "").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "no VMI: {body}");
    let (status, body, writes) = migrate(
        |c| {
            c.put_vm(vm());
            c.put_vmi(vmi("Scheduling"));
        },
        "",
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm\": VM is not running"
    );
    assert!(writes.is_empty());
    let (status, body, _) = migrate(
        |c| {
            c.put_vm(vm());
            c.put_vmi(vmi("Running"));
            c.refuse_migrations("admission webhook \"migration-create-validator.kubevirt.io\" denied the request: in-flight migration detected.");
        },
        "",
    )
    .await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("in-flight migration detected"),
        "{body}"
    );
    let (status, _, _) = migrate(|_| {}, "{not json").await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}
