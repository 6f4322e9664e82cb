//! Every subresource route against the fake cluster and fake node handlers: the exact JSON patches
//! sent (with their `test` operations), the objects as stored afterwards, and upstream's codes and
//! messages for each refusal.

use std::sync::Arc;

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use virt_api::app_state::AppState;
use virt_api::backends::{FakeNodeConnector, FakeSubresourceCluster, PatchTarget, Recorded, VmiAction};
use virt_api::server::{fake_app, router};
use virt_api::subresources::authorize::Authentication;

type State = AppState<FakeSubresourceCluster, FakeNodeConnector>;

struct Harness {
    cluster: Arc<FakeSubresourceCluster>,
    state: Arc<State>,
}

fn harness() -> Harness {
    let (state, cluster) = fake_app(Authentication::Disabled);
    Harness { cluster, state }
}

impl Harness {
    async fn send(&self, method: Method, path: &str, body: &str) -> (StatusCode, Value) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(Body::from(body.to_owned()))
            .expect("request");
        let response = router(self.state.clone()).oneshot(request).await.expect("infallible");
        let status = response.status();
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        (status, value)
    }

    async fn vm(&self, action: &str, body: &str) -> (StatusCode, Value) {
        let path = format!("/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm/{action}");
        self.send(Method::PUT, &path, body).await
    }

    async fn vmi(&self, action: &str, body: &str) -> (StatusCode, Value) {
        let path = format!("/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm/{action}");
        self.send(Method::PUT, &path, body).await
    }

    fn patches(&self) -> Vec<(PatchTarget, Value, bool)> {
        self.cluster
            .writes()
            .into_iter()
            .filter_map(|w| match w {
                Recorded::Patch {
                    target, patch, dry_run, ..
                } => Some((target, patch, dry_run)),
                Recorded::DeleteLauncherPod { .. } | Recorded::CreateMigration { .. } => None,
            })
            .collect()
    }
}

fn vm_object(spec: Value, status: Option<Value>) -> Value {
    let mut vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": "default", "uid": "vm-uid"}});
    vm["spec"] = spec;
    if let Some(status) = status {
        vm["status"] = status;
    }
    vm
}

fn strategy(name: &str) -> Value {
    json!({"runStrategy": name, "template": {"spec": {"domain": {"devices": {}}}}})
}

fn vmi_object(phase: &str) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "default", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {}}},
        "status": {"phase": phase, "nodeName": "node1"}})
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn start_a_halted_vm_switches_its_run_strategy() {
    let h = harness();
    h.cluster.put_vm(vm_object(strategy("Halted"), None));
    let (code, _) = h.vm("start", "").await;
    assert_eq!(code, StatusCode::ACCEPTED);
    assert_eq!(
        h.patches(),
        [(
            PatchTarget::Vm,
            json!([
                {"op": "test", "path": "/spec/runStrategy", "value": "Halted"},
                {"op": "replace", "path": "/spec/runStrategy", "value": "Always"}
            ]),
            false
        )]
    );
    assert_eq!(
        h.cluster.vm("default", "vm").expect("vm")["spec"]["runStrategy"],
        "Always"
    );

    let legacy = harness();
    legacy.cluster.put_vm(vm_object(
        json!({"running": false, "template": {"spec": {"domain": {"devices": {}}}}}),
        None,
    ));
    assert_eq!(legacy.vm("start", "{}").await.0, StatusCode::ACCEPTED);
    assert_eq!(legacy.cluster.vm("default", "vm").expect("vm")["spec"]["running"], true);
}

#[tokio::test]
async fn start_paused_and_manual_starts_queue_state_change_requests() {
    let h = harness();
    h.cluster.put_vm(vm_object(strategy("Halted"), None));
    assert_eq!(h.vm("start", r#"{"paused":true}"#).await.0, StatusCode::ACCEPTED);
    assert_eq!(
        h.patches()[0].1,
        json!([{"op": "add", "path": "/status", "value": {"stateChangeRequests": [{"action": "Start", "data": {"paused": "true"}}]}}])
    );

    let manual = harness();
    manual.cluster.put_vm(vm_object(
        strategy("Manual"),
        Some(json!({"printableStatus": "Stopped", "startFailure": {"consecutiveFailCount": 1}})),
    ));
    manual.cluster.put_vmi(vmi_object("Succeeded"));
    assert_eq!(manual.vm("start", "").await.0, StatusCode::ACCEPTED);
    assert_eq!(
        manual.patches()[0],
        (
            PatchTarget::VmStatus,
            json!([
                {"op": "test", "path": "/status/stateChangeRequests", "value": null},
                {"op": "add", "path": "/status/stateChangeRequests", "value": [{"action": "Stop", "uid": "vmi-uid"}, {"action": "Start"}]},
                {"op": "remove", "path": "/status/startFailure"}
            ]),
            false
        )
    );
    let stored = manual.cluster.vm("default", "vm").expect("vm");
    assert_eq!(stored["status"]["stateChangeRequests"][1]["action"], "Start");
    assert_eq!(stored["status"].get("startFailure"), None);

    // A second start while the first is queued is refused, as upstream does.
    let (code, body) = manual.vm("start", "").await;
    assert_eq!(code, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        message(&body),
        "Internal error occurred: unable to complete request: stop/start already underway"
    );
}

#[tokio::test]
async fn start_is_refused_where_upstream_refuses_it() {
    let running = harness();
    running.cluster.put_vm(vm_object(strategy("Manual"), None));
    running.cluster.put_vmi(vmi_object("Running"));
    let (code, body) = running.vm("start", "").await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert_eq!(
        message(&body),
        "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm\": VM is already running"
    );
    assert_eq!(body["reason"], "Conflict");
    assert_eq!(
        body["details"],
        json!({"name": "vm", "group": "kubevirt.io", "kind": "virtualmachine"})
    );

    let always = harness();
    always.cluster.put_vm(vm_object(strategy("Always"), None));
    let (code, body) = always.vm("start", "").await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::CONFLICT,
            "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm\": Always does not support manual start requests"
        )
    );

    let failed = harness();
    failed.cluster.put_vm(vm_object(strategy("RerunOnFailure"), None));
    failed.cluster.put_vmi(vmi_object("Failed"));
    let (code, body) = failed.vm("start", "").await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).ends_with("RerunOnFailure does not support starting VM from failed state"));

    let missing = harness();
    let (code, body) = missing.vm("start", "").await;
    assert_eq!(
        (code, message(&body)),
        (StatusCode::NOT_FOUND, "virtualmachine.kubevirt.io \"vm\" not found")
    );

    let bad = harness();
    bad.cluster.put_vm(vm_object(strategy("Halted"), None));
    let (code, body) = bad.vm("start", "{not json").await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(message(&body).starts_with("Can not unmarshal Request body to struct"));
    assert!(bad.patches().is_empty(), "nothing is written for a refused request");
}

#[tokio::test]
async fn stop_by_run_strategy() {
    let always = harness();
    always.cluster.put_vm(vm_object(strategy("Always"), None));
    always.cluster.put_vmi(vmi_object("Running"));
    assert_eq!(always.vm("stop", "").await.0, StatusCode::ACCEPTED);
    assert_eq!(
        always.cluster.vm("default", "vm").expect("vm")["spec"]["runStrategy"],
        "Halted"
    );

    let manual = harness();
    manual.cluster.put_vm(vm_object(
        strategy("Manual"),
        Some(json!({"stateChangeRequests": [{"action": "Start"}]})),
    ));
    manual.cluster.put_vmi(vmi_object("Running"));
    let (code, body) = manual.vm("stop", r#"{"gracePeriod": 0}"#).await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    assert_eq!(
        manual.patches(),
        [
            (
                PatchTarget::Vmi,
                json!([
                    {"op": "test", "path": "/spec/terminationGracePeriodSeconds", "value": null},
                    {"op": "replace", "path": "/spec/terminationGracePeriodSeconds", "value": 0}
                ]),
                false
            ),
            (
                PatchTarget::VmStatus,
                json!([
                    {"op": "test", "path": "/status/stateChangeRequests", "value": [{"action": "Start"}]},
                    {"op": "replace", "path": "/status/stateChangeRequests", "value": [{"action": "Stop", "uid": "vmi-uid"}]}
                ]),
                false
            )
        ]
    );

    let not_running = harness();
    not_running.cluster.put_vm(vm_object(strategy("Manual"), None));
    let (code, body) = not_running.vm("stop", "").await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::CONFLICT,
            "Operation cannot be fulfilled on virtualmachine.kubevirt.io \"vm\": VM is not running"
        )
    );

    let halted = harness();
    let mut vmi = vmi_object("Running");
    vmi["spec"]["terminationGracePeriodSeconds"] = json!(30);
    halted.cluster.put_vm(vm_object(strategy("Halted"), None));
    halted.cluster.put_vmi(vmi);
    let (code, body) = halted.vm("stop", r#"{"gracePeriod": 60}"#).await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).ends_with("Halted only supports manual stop requests with a shorter graceperiod"));
    assert_eq!(halted.vm("stop", r#"{"gracePeriod": 5}"#).await.0, StatusCode::ACCEPTED);
    assert_eq!(
        halted.cluster.vmi("default", "vm").expect("vmi")["spec"]["terminationGracePeriodSeconds"],
        5
    );
}

#[tokio::test]
async fn restart_and_forced_restart() {
    let h = harness();
    h.cluster.put_vm(vm_object(strategy("Always"), None));
    h.cluster.put_vmi(vmi_object("Running"));
    assert_eq!(h.vm("restart", "").await.0, StatusCode::ACCEPTED);
    assert_eq!(
        h.patches()[0].1,
        json!([{"op": "add", "path": "/status", "value": {"stateChangeRequests": [{"action": "Stop", "uid": "vmi-uid"}, {"action": "Start"}]}}])
    );

    let forced = harness();
    forced.cluster.put_vm(vm_object(strategy("Always"), None));
    forced.cluster.put_vmi(vmi_object("Running"));
    assert_eq!(
        forced.vm("restart", r#"{"gracePeriodSeconds": 0}"#).await.0,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        forced.cluster.writes().last(),
        Some(&Recorded::DeleteLauncherPod {
            vmi_uid: "vmi-uid".to_owned(),
            dry_run: false
        })
    );

    let (code, body) = forced.vm("restart", r#"{"gracePeriodSeconds": 5}"#).await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::BAD_REQUEST,
            "For force restart, only gracePeriod=0 is supported for now"
        )
    );
    let (code, body) = forced.vm("restart", r#"{"gracePeriodSeconds": -1}"#).await;
    assert_eq!(
        (code, message(&body)),
        (StatusCode::BAD_REQUEST, "gracePeriod has to be greater or equal to 0")
    );

    let halted = harness();
    halted.cluster.put_vm(vm_object(strategy("Halted"), None));
    let (code, body) = halted.vm("restart", "").await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).ends_with("RunStategy Halted does not support manual restart requests"));

    let gone = harness();
    gone.cluster.put_vm(vm_object(strategy("Manual"), None));
    let (code, body) = gone.vm("restart", "").await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).ends_with("VM is not running: Halted"));
}

#[tokio::test]
async fn dry_runs_check_without_storing() {
    let h = harness();
    h.cluster.put_vm(vm_object(strategy("Halted"), None));
    assert_eq!(h.vm("start", r#"{"dryRun": ["All"]}"#).await.0, StatusCode::ACCEPTED);
    assert_eq!(h.patches()[0].2, true);
    assert_eq!(
        h.cluster.vm("default", "vm").expect("vm")["spec"]["runStrategy"],
        "Halted"
    );
}

#[tokio::test]
async fn pause_and_unpause_go_to_the_nodes_handler() {
    let h = harness();
    h.cluster.put_handler("node1", "10.0.0.7");
    h.cluster.put_vmi(vmi_object("Scheduled"));
    let (code, body) = h.vmi("pause", "").await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::CONFLICT,
            "Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io \"vm\": VM is not running"
        )
    );

    h.cluster.put_vmi(vmi_object("Running"));
    assert_eq!(h.vmi("pause", r#"{"dryRun": ["All"]}"#).await.0, StatusCode::ACCEPTED);
    assert!(h.state.node.calls().is_empty(), "a dry run does not reach the node");
    assert_eq!(h.vmi("pause", "{}").await.0, StatusCode::ACCEPTED);
    assert_eq!(
        h.state.node.calls(),
        [("10.0.0.7".to_owned(), "default/vm".to_owned(), VmiAction::Pause)]
    );

    let (code, body) = h.vmi("unpause", "").await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::CONFLICT,
            "Operation cannot be fulfilled on virtualmachineinstance.kubevirt.io \"vm\": VMI is not paused"
        )
    );
    let mut paused = vmi_object("Running");
    paused["status"]["conditions"] = json!([{"type": "Paused", "status": "True"}]);
    h.cluster.put_vmi(paused);
    let (code, body) = h.vmi("pause", "").await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(message(&body).ends_with("VMI is already paused"));
    assert_eq!(h.vmi("unpause", "").await.0, StatusCode::ACCEPTED);
    assert_eq!(h.state.node.calls()[1].2, VmiAction::Unpause);

    let mut probed = vmi_object("Running");
    probed["spec"]["livenessProbe"] = json!({"guestAgentPing": {}});
    h.cluster.put_vmi(probed);
    let (code, body) = h.vmi("pause", "").await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::FORBIDDEN,
            "virtualmachineinstance.kubevirt.io \"vm\" is forbidden: Pausing VMIs with LivenessProbe is currently not supported"
        )
    );

    let missing = harness();
    let (code, body) = missing.vmi("pause", "").await;
    assert_eq!(
        (code, message(&body)),
        (
            StatusCode::NOT_FOUND,
            "virtualmachineinstance.kubevirt.io \"vm\" not found"
        )
    );
}

#[tokio::test]
async fn without_a_cluster_the_subresources_and_readiness_answer_503_and_discovery_still_works() {
    let state: Arc<State> = Arc::new(AppState::with_defaults(
        Authentication::Disabled,
        Arc::new(FakeNodeConnector::default()),
    ));
    let h = Harness {
        cluster: Arc::new(FakeSubresourceCluster::default()),
        state,
    };
    let (code, body) = h.vm("start", "").await;
    assert_eq!(code, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        message(&body),
        "virt-api is not connected to a Kubernetes API server: none"
    );

    let (code, body) = h.send(Method::GET, "/apis/subresources.kubevirt.io/v1", "").await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(body["groupVersion"], "subresources.kubevirt.io/v1");
    let names: Vec<&str> = body["resources"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert!(names.contains(&"virtualmachines/start") && names.contains(&"virtualmachineinstances/console"));
    let (code, body) = h.send(Method::GET, "/apis", "").await;
    assert_eq!(
        (code, body["groups"][0]["name"].as_str()),
        (StatusCode::OK, Some("subresources.kubevirt.io"))
    );
    let (code, _) = h.send(Method::GET, "/apis/subresources.kubevirt.io/v2", "").await;
    assert_eq!(code, StatusCode::NOT_FOUND);
    // Not ready until connected: webhooks answered without the cluster's objects would let a
    // launcher pod whose VMI should migrate be evicted.
    for path in ["/healthz", "/apis/subresources.kubevirt.io/v1/healthz"] {
        let (code, body) = h.send(Method::GET, path, "").await;
        assert_eq!(
            (code, message(&body)),
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "virt-api is not connected to a Kubernetes API server: none"
            ),
            "{path}"
        );
    }
    h.state.set_cluster(h.cluster.clone());
    for path in ["/healthz", "/apis/subresources.kubevirt.io/v1/healthz"] {
        let (code, _) = h.send(Method::GET, path, "").await;
        assert_eq!(code, StatusCode::OK, "{path}");
    }
}
