//! `expand-spec` through the router, against the in-memory cluster: a VM's instance type and
//! preference applied with the cluster's defaults, and upstream's codes and messages.

use std::sync::Arc;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use kubevirt_api::instancetype::{VirtualMachineClusterInstancetype, VirtualMachineClusterPreference};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use virt_api::app_state::AppState;
use virt_api::backends::{FakeNodeConnector, FakeSubresourceCluster};
use virt_api::server::{fake_app, router};
use virt_api::subresources::authorize::Authentication;

const BASE: &str = "/apis/subresources.kubevirt.io/v1/namespaces/default";

fn app() -> (
    Arc<AppState<FakeSubresourceCluster, FakeNodeConnector>>,
    Arc<FakeSubresourceCluster>,
) {
    let (state, cluster) = fake_app(Authentication::Disabled);
    cluster.put_instancetype_object(
        &VirtualMachineClusterInstancetype::NAMES,
        "",
        json!({"metadata": {"name": "u1.medium"}, "spec": {"cpu": {"guest": 2}, "memory": {"guest": "4Gi"}}}),
    );
    cluster.put_instancetype_object(
        &VirtualMachineClusterPreference::NAMES,
        "",
        json!({"metadata": {"name": "fedora"}, "spec": {"devices": {"preferredDiskBus": "virtio"},
               "cpu": {"preferredCPUTopology": "cores"}}}),
    );
    (state, cluster)
}

async fn send(
    state: &Arc<AppState<FakeSubresourceCluster, FakeNodeConnector>>,
    method: Method,
    path: &str,
    body: &str,
) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::from(body.to_owned()))
        .expect("request");
    let response = router(state.clone()).oneshot(request).await.expect("infallible");
    let status = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

fn vm(extra: &Value) -> Value {
    let mut vm = json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "my-vm"},
        "spec": {"runStrategy": "Always", "template": {"spec": {
            "domain": {"devices": {}},
            "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}]
        }}}
    });
    for (key, value) in extra.as_object().into_iter().flatten() {
        vm["spec"][key] = value.clone();
    }
    vm
}

#[tokio::test]
async fn a_vm_in_the_body_comes_back_expanded_without_its_matchers() {
    let (state, _) = app();
    let body = vm(&json!({"instancetype": {"name": "u1.medium"}, "preference": {"name": "fedora"}}));
    let (status, out) = send(
        &state,
        Method::PUT,
        &format!("{BASE}/expand-vm-spec"),
        &body.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["spec"].get("instancetype"), None);
    assert_eq!(out["spec"].get("preference"), None);
    assert_eq!(out["metadata"]["namespace"], "default");
    let template = &out["spec"]["template"]["spec"];
    assert_eq!(
        template["domain"]["cpu"],
        json!({"cores": 2, "sockets": 1, "threads": 1})
    );
    assert_eq!(template["domain"]["memory"], json!({"guest": "4Gi"}));
    assert_eq!(
        template["domain"]["devices"]["disks"],
        json!([{"name": "root", "disk": {"bus": "virtio"}}]),
        "a default disk with the preferred bus"
    );
    assert_eq!(
        template["domain"]["devices"]["interfaces"],
        json!([{"name": "default", "bridge": {}}])
    );
    assert_eq!(template["networks"], json!([{"name": "default", "pod": {}}]));
    assert_eq!(template["domain"]["machine"]["type"], "q35");
}

#[tokio::test]
async fn a_vm_without_matchers_comes_back_unchanged() {
    let (state, _) = app();
    let body = vm(&json!({}));
    let (status, out) = send(
        &state,
        Method::PUT,
        &format!("{BASE}/expand-vm-spec"),
        &body.to_string(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let mut expected = body;
    expected["metadata"]["namespace"] = json!("default");
    assert_eq!(out, expected);
}

#[tokio::test]
async fn bad_bodies_conflicts_and_missing_objects_are_400_with_upstreams_messages() {
    let (state, _) = app();
    let expand = |body: String| {
        let state = state.clone();
        async move { send(&state, Method::PUT, &format!("{BASE}/expand-vm-spec"), &body).await }
    };
    let (status, out) = expand(String::new()).await;
    assert_eq!(
        (status, out["message"].as_str()),
        (StatusCode::BAD_REQUEST, Some("empty request body"))
    );
    let mut other_namespace = vm(&json!({}));
    other_namespace["metadata"]["namespace"] = json!("other");
    let (status, out) = expand(other_namespace.to_string()).await;
    assert_eq!(
        (status, out["message"].as_str()),
        (StatusCode::BAD_REQUEST, Some("VM namespace must be empty or default"))
    );
    let mut conflicting = vm(&json!({"instancetype": {"name": "u1.medium"}}));
    conflicting["spec"]["template"]["spec"]["domain"]["cpu"] = json!({"sockets": 2});
    let (status, out) = expand(conflicting.to_string()).await;
    assert_eq!(
        (status, out["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("VM field(s) spec.template.spec.domain.cpu.sockets conflicts with selected instance type")
        )
    );
    let (status, out) = expand(vm(&json!({"instancetype": {"name": "nowhere"}})).to_string()).await;
    assert_eq!(
        (status, out["message"].as_str()),
        (
            StatusCode::BAD_REQUEST,
            Some("virtualmachineclusterinstancetypes.instancetype.kubevirt.io \"nowhere\" not found")
        )
    );
}

#[tokio::test]
async fn a_stored_vm_is_expanded_and_a_missing_one_is_404() {
    let (state, cluster) = app();
    let mut stored = vm(&json!({"instancetype": {"name": "u1.medium"}}));
    stored["metadata"]["namespace"] = json!("default");
    cluster.put_vm(stored);
    let (status, out) = send(
        &state,
        Method::GET,
        &format!("{BASE}/virtualmachines/my-vm/expand-spec"),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{out}");
    assert_eq!(out["spec"]["template"]["spec"]["domain"]["cpu"]["sockets"], 2);
    let (status, _) = send(
        &state,
        Method::GET,
        &format!("{BASE}/virtualmachines/nobody/expand-spec"),
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn discovery_lists_both_expand_subresources() {
    let (state, _) = app();
    let (_, list) = send(&state, Method::GET, "/apis/subresources.kubevirt.io/v1", "").await;
    let names: Vec<&str> = list["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(
        names.contains(&"expand-vm-spec") && names.contains(&"virtualmachines/expand-spec"),
        "{names:?}"
    );
}
