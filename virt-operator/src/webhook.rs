//! virt-operator's HTTPS server on its `webhooks` port (8444, behind the Service
//! `kubevirt-operator-webhook`): `POST /kubevirt-validate-delete` answers the API server's
//! AdmissionReviews for deleting a KubeVirt CR ([`crate::uninstall`]),
//! `/kubevirt-validate-create` and `/kubevirt-validate-update` those for creating and changing
//! one ([`crate::spec_admission`]), and `GET /readyz` and
//! `/healthz` the probes. It serves the certificate in the Secret `kubevirt-operator-certs`,
//! which the operator's own passes make and renew ([`crate::validator`]); until that Secret is
//! there, a self-signed one, as upstream's fallback.

use std::sync::Arc;

use bytes::Bytes;
use control_loop::https_connection::{self, Peer};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::spec_admission::{self, CREATE_PATH, Refusal, UPDATE_PATH};
use crate::uninstall::{self, Cluster};

/// The largest review read: an update carries the CR twice.
const MAX_BODY: usize = 3 << 20;
const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// Answers one request.
pub async fn handle<C: Cluster>(cluster: &C, request: Request<Incoming>) -> Response<Full<Bytes>> {
    match (request.method().as_str(), request.uri().path()) {
        ("GET", "/readyz" | "/healthz") => reply(StatusCode::OK, TEXT, "ok"),
        ("POST", path @ (uninstall::PATH | CREATE_PATH | UPDATE_PATH)) => {
            let path = path.to_owned();
            let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
                Ok(body) => body.to_bytes(),
                Err(e) => return reply(StatusCode::BAD_REQUEST, TEXT, format!("reading the body: {e}")),
            };
            match serde_json::from_slice::<Value>(&body) {
                Ok(review) => match answer(cluster, &path, &review).await {
                    Ok(answer) => reply(StatusCode::OK, JSON, answer.to_string()),
                    Err(why) => reply(StatusCode::BAD_REQUEST, TEXT, why),
                },
                Err(e) => reply(StatusCode::BAD_REQUEST, TEXT, format!("the AdmissionReview: {e}")),
            }
        }
        (_, uninstall::PATH | CREATE_PATH | UPDATE_PATH | "/readyz" | "/healthz") => {
            reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "")
        }
        _ => reply(StatusCode::NOT_FOUND, TEXT, "404 page not found"),
    }
}

/// The answer to one AdmissionReview sent to `path`: upstream's, with the refusal's message,
/// and code 422 with each reason as a cause when there are reasons (an update's), else 400.
///
/// # Errors
/// A review without a request or its uid.
pub async fn answer<C: Cluster>(cluster: &C, path: &str, review: &Value) -> Result<Value, String> {
    let request = review.get("request").ok_or("the AdmissionReview has no request")?;
    let uid = request["uid"]
        .as_str()
        .ok_or("the AdmissionReview's request has no uid")?;
    let namespace = request["namespace"].as_str().unwrap_or_default();
    let name = request["name"].as_str().unwrap_or_default();
    let (what, outcome) = match path {
        CREATE_PATH => ("creation", spec_admission::admit_create(cluster, request).await),
        UPDATE_PATH => ("update", spec_admission::admit_update(request)),
        _ => (
            "deletion",
            uninstall::admit_delete(cluster, namespace, name)
                .await
                .map_err(|message| Refusal {
                    message,
                    causes: Vec::new(),
                }),
        ),
    };
    let mut response = json!({"uid": uid, "allowed": outcome.is_ok()});
    if let Err(refusal) = outcome {
        tracing::info!(
            namespace,
            name,
            what,
            reason = refusal.message.as_str(),
            "refused a KubeVirt CR's change"
        );
        let mut status = json!({"code": 400, "message": refusal.message});
        if !refusal.causes.is_empty() {
            status["code"] = json!(422);
            status["reason"] = json!("Invalid");
            let causes: Vec<Value> = refusal
                .causes
                .iter()
                .map(|message| json!({"type": "FieldValueInvalid", "message": message}))
                .collect();
            status["details"] = json!({"causes": causes});
        }
        response["status"] = status;
    }
    Ok(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Serves [`handle`] on `listener` with `tls` until `stop`.
pub async fn serve<C: Cluster + 'static>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    cluster: Arc<C>,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "virt-operator's webhook serving HTTPS");
    }
    let handler = move |request, _: Peer| {
        let cluster = Arc::clone(&cluster);
        async move { handle(cluster.as_ref(), request).await }
    };
    https_connection::serve_all(listener, acceptor, handler, stop).await;
}

#[cfg(test)]
#[path = "webhook_tests.rs"]
mod tests;
