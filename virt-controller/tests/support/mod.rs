//! The mock API server the tower-test scenarios share: it answers each request with the next
//! canned body (or echoes the request) and logs method, path and body.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use serde_json::Value;

#[path = "../../../kubevirt-tests/support/rbac.rs"]
mod rbac;

pub type Log = Arc<Mutex<Vec<(String, String, Value)>>>;

/// A client on a mock API server, and the log of what it received.
pub fn api_server(mut answers: VecDeque<Value>) -> (kube::Client, Log) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log: Log = Arc::default();
    let record = log.clone();
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let (method, path) = (request.method().to_string(), request.uri().path().to_owned());
            if let Some(refusal) = rbac::forbidden("kubevirt-controller", &method, request.uri()) {
                record.lock().expect("log").push((method, path, refusal.clone()));
                respond.send_response(
                    Response::builder()
                        .status(403)
                        .body(Body::from(refusal.to_string().into_bytes()))
                        .expect("response"),
                );
                continue;
            }
            let bytes = request.into_body().collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let answer = answers.pop_front().unwrap_or_else(|| body.clone());
            record.lock().expect("log").push((method, path, body));
            respond.send_response(
                Response::builder()
                    .body(Body::from(serde_json::to_vec(&answer).expect("answer")))
                    .expect("response"),
            );
        }
    });
    (kube::Client::new(service, "default"), log)
}

/// Takes what the server received so far.
pub fn taken(log: &Log) -> Vec<(String, String, Value)> {
    std::mem::take(&mut *log.lock().expect("log"))
}
