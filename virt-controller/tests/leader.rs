//! Leader election against a mock API server that keeps one Lease the way the API server does:
//! a replica alone creates the Lease, takes it and says so on its channel.

#[path = "../../kubevirt-tests/support/rbac.rs"]
mod rbac;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

/// Merges `patch` into `target` (JSON merge semantics: null removes).
fn merge(target: &mut Value, patch: &Value) {
    match (target.as_object_mut(), patch.as_object()) {
        (Some(target), Some(patch)) => {
            for (key, value) in patch {
                if value.is_null() {
                    target.remove(key);
                } else {
                    merge(target.entry(key.clone()).or_insert(Value::Null), value);
                }
            }
        }
        _ => *target = patch.clone(),
    }
}

fn respond(status: u16, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .body(Body::from(serde_json::to_vec(body).expect("json")))
        .expect("response")
}

#[tokio::test]
async fn a_lone_replica_creates_the_lease_and_leads() {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let lease: Arc<Mutex<Option<Value>>> = Arc::default();
    let paths: Arc<Mutex<Vec<String>>> = Arc::default();
    let (stored, seen) = (lease.clone(), paths.clone());
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
            if let Some(refusal) = rbac::forbidden("kubevirt-controller", &method, request.uri()) {
                seen.lock().expect("paths").push(format!("FORBIDDEN {method} {path}"));
                send.send_response(respond(403, &refusal));
                continue;
            }
            let bytes = request.into_body().collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            seen.lock().expect("paths").push(format!("{method} {path}"));
            let mut lease = stored.lock().expect("lease");
            let reply = match (method.as_str(), lease.as_mut()) {
                ("GET", Some(current)) => respond(200, current),
                ("GET", None) => respond(
                    404,
                    &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "not found"}),
                ),
                ("POST", _) => {
                    let mut created = body.clone();
                    created["metadata"]["resourceVersion"] = json!("1");
                    *lease = Some(created.clone());
                    respond(201, &created)
                }
                ("PATCH", Some(current)) => {
                    merge(current, &body);
                    respond(200, current)
                }
                _ => respond(500, &json!({"kind": "Status", "code": 500, "message": "unexpected"})),
            };
            send.send_response(reply);
        }
    });
    let client = kube::Client::new(service, "default");
    let mut leading = virt_controller::leader::elect(client, "kubevirt", "replica-a")
        .await
        .expect("elect");
    tokio::time::timeout(Duration::from_secs(10), leading.wait_for(|leads| *leads))
        .await
        .expect("took the lease in time")
        .expect("channel open");
    let lease = lease.lock().expect("lease").clone().expect("a lease");
    assert_eq!(lease["metadata"]["name"], json!("virt-controller"));
    assert_eq!(lease["spec"]["holderIdentity"], json!("replica-a"));
    let paths = paths.lock().expect("paths").clone();
    assert!(
        paths.iter().all(
            |p| p.ends_with("/apis/coordination.k8s.io/v1/namespaces/kubevirt/leases/virt-controller")
                || p == "POST /apis/coordination.k8s.io/v1/namespaces/kubevirt/leases"
        ),
        "{paths:?}"
    );
}
