//! The subresource routes over the real kube adapter and a mock API server (tower-test): every
//! request virt-api sends is asserted (method, path with query, content type and body), and the
//! API server's answers (404, a failed JSON-patch test) become upstream's codes.

use std::sync::Arc;

use axum::body::Body as AxumBody;
use base64::Engine as _;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt as _;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use virt_api::app_state::AppState;
use virt_api::backends::{FakeNodeConnector, KubeSubresourceCluster, VmiAction};
use virt_api::server::router;
use virt_api::subresources::authorize::{Authentication, PeerCertificate};

#[path = "../../kubevirt-tests/support/rbac.rs"]
mod rbac;

#[path = "../../kubevirt-tests/support/mock_api_server.rs"]
mod mock_api_server;

use mock_api_server::{api_server, seen};

fn not_found(kind: &str) -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                 "message": format!("{kind} \"vm\" not found")}),
    )
}

fn vm(strategy: &str) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
           "metadata": {"name": "vm", "namespace": "default", "uid": "vm-uid"},
           "spec": {"runStrategy": strategy, "template": {"spec": {"domain": {"devices": {}}}}}})
}

fn vmi(phase: &str) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vm", "namespace": "default", "uid": "vmi-uid"},
           "spec": {"domain": {"devices": {}}}, "status": {"phase": phase, "nodeName": "node1"}})
}

type State = AppState<KubeSubresourceCluster, FakeNodeConnector>;

fn app_with(client: kube::Client, authentication: Authentication) -> Arc<State> {
    let state = Arc::new(AppState::with_defaults(
        authentication,
        Arc::new(FakeNodeConnector::default()),
    ));
    state.set_cluster(Arc::new(KubeSubresourceCluster::new(client, "kubevirt".to_owned())));
    state
}

fn app(client: kube::Client) -> Arc<State> {
    app_with(client, Authentication::Disabled)
}

async fn put(state: &Arc<State>, path: &str, body: &str) -> (StatusCode, Value) {
    let request = Request::builder()
        .method(Method::PUT)
        .uri(path)
        .body(AxumBody::from(body.to_owned()))
        .expect("request");
    let response = router(state.clone()).oneshot(request).await.expect("infallible");
    let code = response.status();
    let bytes = response.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

const VMS: &str = "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/vm";
const VMIS: &str = "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm";
const SUB: &str = "/apis/subresources.kubevirt.io/v1/namespaces/default";
const JSON_PATCH: &str = "application/json-patch+json";

#[tokio::test]
async fn start_reads_the_vm_and_its_vmi_then_patches_the_run_strategy() {
    let (client, log) = api_server(vec![
        (200, vm("Halted")),
        not_found("virtualmachineinstances.kubevirt.io"),
        (200, vm("Always")),
    ]);
    let state = app(client);
    let (code, _) = put(&state, &format!("{SUB}/virtualmachines/vm/start"), "").await;
    assert_eq!(code, StatusCode::ACCEPTED);
    assert_eq!(
        *log.lock().expect("log"),
        [
            seen("GET", VMS, "", Value::Null),
            seen("GET", VMIS, "", Value::Null),
            seen(
                "PATCH",
                &format!("{VMS}?"),
                JSON_PATCH,
                json!([
                    {"op": "test", "path": "/spec/runStrategy", "value": "Halted"},
                    {"op": "replace", "path": "/spec/runStrategy", "value": "Always"}
                ])
            ),
        ]
    );
}

#[tokio::test]
async fn stop_of_a_manual_vm_patches_its_status_and_a_dry_run_says_so() {
    let (client, log) = api_server(vec![(200, vm("Manual")), (200, vmi("Running")), (200, vm("Manual"))]);
    let state = app(client);
    let (code, _) = put(
        &state,
        &format!("{SUB}/virtualmachines/vm/stop"),
        r#"{"dryRun": ["All"]}"#,
    )
    .await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let log = log.lock().expect("log");
    assert_eq!(
        log[2],
        seen(
            "PATCH",
            &format!("{VMS}/status?&dryRun=All"),
            JSON_PATCH,
            json!([{"op": "add", "path": "/status", "value": {"stateChangeRequests": [{"action": "Stop", "uid": "vmi-uid"}]}}])
        )
    );
}

#[tokio::test]
async fn a_forced_restart_deletes_the_running_launcher_pod() {
    let pods = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                      "items": [{"metadata": {"name": "virt-launcher-vm-abcde", "namespace": "default"}}]});
    let (client, log) = api_server(vec![
        (200, vm("Always")),
        (200, vmi("Running")),
        (200, vm("Always")),
        (200, pods),
        (
            200,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "virt-launcher-vm-abcde"}}),
        ),
    ]);
    let state = app(client);
    let (code, body) = put(
        &state,
        &format!("{SUB}/virtualmachines/vm/restart"),
        r#"{"gracePeriodSeconds": 0}"#,
    )
    .await;
    assert_eq!(code, StatusCode::ACCEPTED, "{body}");
    let log = log.lock().expect("log");
    assert_eq!(log.len(), 5);
    assert_eq!(
        log[3].path,
        "/api/v1/namespaces/default/pods?&fieldSelector=status.phase%3D%3DRunning&labelSelector=kubevirt.io%3Dvirt-launcher%2Ckubevirt.io%2Fcreated-by%3Dvmi-uid"
    );
    assert_eq!(log[4].method, "DELETE");
    assert_eq!(log[4].path, "/api/v1/namespaces/default/pods/virt-launcher-vm-abcde?");
    assert_eq!(log[4].body, json!({"gracePeriodSeconds": 1}));
}

#[tokio::test]
async fn a_failed_patch_test_is_a_conflict_and_a_missing_vm_is_404() {
    let rejected = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 422, "reason": "Invalid",
        "message": "the server rejected our request due to an error in our request: jsonpatch test operation does not apply"});
    let (client, _) = api_server(vec![
        (200, vm("Halted")),
        not_found("virtualmachineinstances.kubevirt.io"),
        (422, rejected),
    ]);
    let state = app(client);
    let (code, body) = put(&state, &format!("{SUB}/virtualmachines/vm/start"), "").await;
    assert_eq!(code, StatusCode::CONFLICT);
    assert!(
        body["message"]
            .as_str()
            .unwrap_or_default()
            .contains("test operation does not apply"),
        "{body}"
    );

    let (client, _) = api_server(vec![not_found("virtualmachines.kubevirt.io")]);
    let state = app(client);
    let (code, body) = put(&state, &format!("{SUB}/virtualmachines/vm/stop"), "").await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            StatusCode::NOT_FOUND,
            Some("virtualmachine.kubevirt.io \"vm\" not found")
        )
    );
}

#[tokio::test]
async fn pause_finds_the_nodes_handler_pod() {
    let handlers = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                          "items": [{"metadata": {"name": "virt-handler-x"}, "status": {"podIP": "10.1.2.3"}}]});
    let (client, log) = api_server(vec![(200, vmi("Running")), (200, handlers)]);
    let state = app(client);
    let (code, _) = put(&state, &format!("{SUB}/virtualmachineinstances/vm/pause"), "").await;
    assert_eq!(code, StatusCode::ACCEPTED);
    let log = log.lock().expect("log");
    assert_eq!(log[0], seen("GET", VMIS, "", Value::Null));
    assert_eq!(
        log[1].path,
        "/api/v1/namespaces/kubevirt/pods?&fieldSelector=spec.nodeName%3Dnode1&labelSelector=kubevirt.io%3Dvirt-handler"
    );
    assert_eq!(
        state.node.calls(),
        [("10.1.2.3".to_owned(), "default/vm".to_owned(), VmiAction::Pause)]
    );
}

#[tokio::test]
async fn authorization_asks_the_api_server_with_a_subject_access_review() {
    let allowed = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": {},
                         "status": {"allowed": false, "reason": "no RBAC policy matched"}});
    let (client, log) = api_server(vec![(201, allowed)]);
    let state = app_with(client, Authentication::FrontProxy);
    let mut request = Request::builder()
        .method(Method::PUT)
        .uri(format!("{SUB}/virtualmachines/vm/stop"))
        .header("X-Remote-User", "bob")
        .header("X-Remote-Group", "system:authenticated")
        .body(AxumBody::empty())
        .expect("request");
    request.extensions_mut().insert(PeerCertificate(true));
    let response = router(state).oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    let log = log.lock().expect("log");
    assert_eq!(log.len(), 1, "nothing is read before the caller is authorized");
    assert_eq!(log[0].method, "POST");
    assert_eq!(log[0].path, "/apis/authorization.k8s.io/v1/subjectaccessreviews?");
    assert_eq!(
        log[0].body["spec"],
        json!({"user": "bob", "groups": ["system:authenticated"], "extra": {},
               "resourceAttributes": {"namespace": "default", "verb": "update", "group": "subresources.kubevirt.io",
                   "version": "v1", "resource": "virtualmachines", "subresource": "stop", "name": "vm"}})
    );
}

#[tokio::test]
async fn unpause_reads_the_vmi_and_finds_the_nodes_handler_pod() {
    let handlers = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {},
                          "items": [{"metadata": {"name": "virt-handler-y"}, "status": {"podIP": "10.1.2.4"}}]});
    let mut paused = vmi("Running");
    paused["status"]["conditions"] = json!([{"type": "Paused", "status": "True"}]);
    let (client, log) = api_server(vec![(200, paused), (200, handlers)]);
    let state = app(client);
    let (code, _) = put(&state, &format!("{SUB}/virtualmachineinstances/vm/unpause"), "{}").await;
    assert_eq!(code, StatusCode::ACCEPTED);
    assert_eq!(log.lock().expect("log")[0], seen("GET", VMIS, "", Value::Null));
    assert_eq!(
        state.node.calls(),
        [("10.1.2.4".to_owned(), "default/vm".to_owned(), VmiAction::Unpause)]
    );
}

#[tokio::test]
async fn the_ca_bundle_goes_into_every_webhook_and_api_service() {
    let webhooks = |kind: &str, n: usize| {
        (
            200,
            json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": "x"},
                     "webhooks": vec![json!({"name": "w"}); n]}),
        )
    };
    let ok = (200, json!({"apiVersion": "v1", "kind": "Status", "metadata": {}}));
    let (client, log) = api_server(vec![
        webhooks("MutatingWebhookConfiguration", 2),
        ok.clone(),
        webhooks("ValidatingWebhookConfiguration", 3),
        ok.clone(),
        ok.clone(),
        ok,
    ]);
    let pem = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
    virt_api::certificates::publish_ca_bundle(&client, pem)
        .await
        .expect("publish");
    let log = log.lock().expect("log");
    let paths: Vec<(&str, &str)> = log.iter().map(|s| (s.method.as_str(), s.path.as_str())).collect();
    assert_eq!(
        paths,
        [
            (
                "GET",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/virt-api-mutator"
            ),
            (
                "PATCH",
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/virt-api-mutator?"
            ),
            (
                "GET",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/virt-api-validator"
            ),
            (
                "PATCH",
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/virt-api-validator?"
            ),
            (
                "PATCH",
                "/apis/apiregistration.k8s.io/v1/apiservices/v1.subresources.kubevirt.io?"
            ),
            (
                "PATCH",
                "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha3.subresources.kubevirt.io?"
            ),
        ]
    );
    let bundle = base64::engine::general_purpose::STANDARD.encode(pem);
    assert_eq!(log[1].content_type, JSON_PATCH);
    assert_eq!(log[1].body.as_array().map(Vec::len), Some(2));
    assert_eq!(
        log[3].body[2],
        json!({"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": bundle})
    );
    assert_eq!(log[4].body, json!({"spec": {"caBundle": bundle}}));
}

#[test]
fn the_rbac_check_refuses_what_the_roles_do_not_grant() {
    let uri = |s: &str| s.parse::<http::Uri>().expect("uri");
    let delete_pod = uri("/api/v1/namespaces/default/pods/virt-launcher-x");
    assert_eq!(rbac::forbidden("kubevirt-apiserver", "DELETE", &delete_pod), None);
    assert!(rbac::forbidden("kubevirt-handler", "DELETE", &delete_pod).is_some());
    let watch =
        rbac::attributes("GET", &uri("/apis/kubevirt.io/v1/virtualmachineinstances?&watch=true")).expect("attributes");
    assert_eq!(watch.verb, "watch");
    let status = rbac::attributes(
        "PUT",
        &uri("/apis/kubevirt.io/v1/namespaces/ns/virtualmachineinstances/v/status"),
    )
    .expect("attributes");
    assert_eq!(
        (status.verb.as_str(), status.resource.as_str()),
        ("update", "virtualmachineinstances/status")
    );
    // Names and namespaces count: only virt-api's own webhook configuration, and only its own Secrets.
    let other_webhook = uri("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/someone-else");
    assert!(rbac::forbidden("kubevirt-apiserver", "PATCH", &other_webhook).is_some());
    assert!(
        rbac::forbidden(
            "kubevirt-apiserver",
            "GET",
            &uri("/api/v1/namespaces/default/secrets/x")
        )
        .is_some()
    );
    assert!(
        rbac::forbidden(
            "kubevirt-apiserver",
            "GET",
            &uri("/api/v1/namespaces/kubevirt/secrets/x")
        )
        .is_some(),
        "only the certificate Secrets"
    );
    for secret in std::iter::once(virt_api::certificates::CA_SECRET)
        .chain(virt_api::certificates::wanted("kubevirt").iter().map(|w| w.secret))
    {
        let path = uri(&format!("/api/v1/namespaces/kubevirt/secrets/{secret}"));
        assert_eq!(rbac::forbidden("kubevirt-apiserver", "GET", &path), None, "{secret}");
        assert_eq!(rbac::forbidden("kubevirt-apiserver", "PUT", &path), None, "{secret}");
    }
    assert_eq!(
        rbac::forbidden(
            "kubevirt-apiserver",
            "POST",
            &uri("/api/v1/namespaces/kubevirt/secrets")
        ),
        None
    );
    let lease = uri("/apis/coordination.k8s.io/v1/namespaces/kubevirt/leases/virt-controller");
    assert_eq!(rbac::forbidden("kubevirt-controller", "PUT", &lease), None);
    assert!(
        rbac::forbidden(
            "kubevirt-controller",
            "PUT",
            &uri("/apis/coordination.k8s.io/v1/namespaces/other/leases/x")
        )
        .is_some()
    );
}
