//! A mock API server for tier-2 tests (tower-test's service pair): it answers each request with
//! the next of a list of answers and keeps every request it got (method, path with query,
//! content type and JSON body), so that a test asserts each one. Shared by the components' tests
//! through `#[path]`.

#![allow(dead_code, reason = "each test binary uses a part")]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use serde_json::{Value, json};

/// One request the mock API server received.
#[derive(Debug, PartialEq)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub content_type: String,
    pub body: Value,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

pub fn seen(method: &str, path: &str, content_type: &str, body: Value) -> Seen {
    Seen {
        method: method.to_owned(),
        path: path.to_owned(),
        content_type: content_type.to_owned(),
        body,
    }
}

/// A kube client on a mock server that answers with `answers` in order, and the log.
pub fn api_server(answers: Vec<(u16, Value)>) -> (kube::Client, Log) {
    let mut answers: VecDeque<(u16, Value)> = answers.into();
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let log: Log = Arc::default();
    let record = log.clone();
    tokio::spawn(async move {
        while let Some((request, respond)) = handle.next_request().await {
            let method = request.method().to_string();
            let path = request
                .uri()
                .path_and_query()
                .map(ToString::to_string)
                .unwrap_or_default();
            let content_type = request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            let bytes = request.into_body().collect_bytes().await.expect("body");
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            record.lock().expect("log").push(Seen {
                method,
                path,
                content_type,
                body,
            });
            let (code, answer) = answers
                .pop_front()
                .unwrap_or((500, json!({"message": "unexpected request"})));
            respond.send_response(
                Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&answer).expect("answer")))
                    .expect("response"),
            );
        }
    });
    (kube::Client::new(service, "default"), log)
}
