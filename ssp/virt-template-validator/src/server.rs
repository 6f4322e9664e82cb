//! The servers, as upstream's two ([`Port`]): on the webhook port, `POST /virtualmachine-validate`
//! answers the API server's AdmissionReviews ([`crate::review`]), with the rules of the VM or of
//! the template it names ([`Templates`]), and `GET /readyz` (and `/healthz`) the kubelet's
//! probes; on the metrics port, `GET /metrics` gives upstream's
//! `kubevirt_ssp_template_validator_rejected_total`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use control_loop::https_connection::{self, Peer};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{error, info, warn};

use crate::review::{self, Verdict};
use crate::sources::{RuleSource, TEMPLATE_RULES, rule_source};

/// What a port serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Port {
    /// The webhook and the probes.
    Webhook,
    /// The metrics.
    Metrics,
}

/// The webhook's path (upstream's).
pub const VALIDATE_PATH: &str = "/virtualmachine-validate";
/// The largest review read: an update's carries the VM twice, each up to etcd's 3 MiB or so.
const MAX_BODY: usize = 7 << 20;

/// Where templates' rules are read.
pub trait Templates: Send + Sync + 'static {
    /// The `validations` annotation of the template `namespace/name`: `None` when there is no
    /// such template (or no Template API at all, as on plain Kubernetes) or it has none.
    fn validations(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl std::future::Future<Output = Result<Option<String>, String>> + Send;
}

/// OpenShift's `template.openshift.io/v1` Templates through the API server.
#[derive(Clone)]
pub struct KubeTemplates(pub kube::Client);

impl std::fmt::Debug for KubeTemplates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTemplates").finish_non_exhaustive()
    }
}

impl Templates for KubeTemplates {
    async fn validations(&self, namespace: &str, name: &str) -> Result<Option<String>, String> {
        let resource = kube::discovery::ApiResource {
            group: "template.openshift.io".to_owned(),
            version: "v1".to_owned(),
            api_version: "template.openshift.io/v1".to_owned(),
            kind: "Template".to_owned(),
            plural: "templates".to_owned(),
        };
        let api = kube::Api::<kube::api::DynamicObject>::namespaced_with(self.0.clone(), namespace, &resource);
        match api.get_opt(name).await {
            Ok(template) => Ok(template.and_then(|t| t.metadata.annotations?.remove(TEMPLATE_RULES))),
            // No Template API at all: no template.
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
            Err(e) => Err(format!("reading template {namespace}/{name}: {e}")),
        }
    }
}

/// The webhook.
#[derive(Debug)]
pub struct Validator<T> {
    /// Where templates are read.
    pub templates: T,
    /// VMs refused so far.
    pub rejected: AtomicU64,
}

impl<T: Templates> Validator<T> {
    /// A webhook reading templates from `templates`.
    pub fn new(templates: T) -> Self {
        Self {
            templates,
            rejected: AtomicU64::new(0),
        }
    }

    /// Answers one request to `port`.
    pub async fn handle(&self, port: Port, request: Request<Incoming>) -> Response<Full<Bytes>> {
        match (port, request.method().as_str(), request.uri().path()) {
            (Port::Webhook, "GET", "/readyz" | "/healthz") => reply(StatusCode::OK, TEXT, "ok"),
            (Port::Metrics, "GET", "/metrics") => reply(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                format!(
                    "# HELP kubevirt_ssp_template_validator_rejected_total The total number of rejected template validators\n\
                     # TYPE kubevirt_ssp_template_validator_rejected_total counter\n\
                     kubevirt_ssp_template_validator_rejected_total {}\n",
                    self.rejected.load(Ordering::Relaxed)
                ),
            ),
            (Port::Webhook, "POST", VALIDATE_PATH) => self.validate(request).await,
            (Port::Webhook, _, VALIDATE_PATH | "/readyz" | "/healthz") | (Port::Metrics, _, "/metrics") => {
                reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "")
            }
            _ => reply(StatusCode::NOT_FOUND, TEXT, "404 page not found"),
        }
    }

    async fn validate(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let json = request
            .headers()
            .get(hyper::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes() == b"application/json");
        if !json {
            return reply(
                StatusCode::BAD_REQUEST,
                TEXT,
                "the Content-Type must be application/json",
            );
        }
        let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) => return reply(StatusCode::BAD_REQUEST, TEXT, format!("reading the body: {e}")),
        };
        let Ok(review) = serde_json::from_slice::<Value>(&body) else {
            return reply(StatusCode::BAD_REQUEST, TEXT, "the body is not an AdmissionReview");
        };
        let (uid, verdict) = match review::request(&review) {
            Ok(request) => {
                let verdict = self.judge(&request.vm).await;
                (request.uid, verdict)
            }
            Err((uid, text)) => (uid, Verdict::Error(text)),
        };
        reply(StatusCode::OK, JSON, review::response(&uid, &verdict).to_string())
    }

    async fn judge(&self, vm: &Value) -> Verdict {
        let name = format!(
            "{}/{}",
            vm["metadata"]["namespace"].as_str().unwrap_or_default(),
            vm["metadata"]["name"].as_str().unwrap_or_default()
        );
        // A VM on its way out is not judged: no template is read for it.
        if vm["metadata"].get("deletionTimestamp").is_some_and(|t| !t.is_null()) {
            return Verdict::Allowed(Vec::new());
        }
        let rules = match rule_source(vm) {
            RuleSource::Nothing => return Verdict::Allowed(Vec::new()),
            RuleSource::Own(rules) => rules,
            RuleSource::Template { namespace, name } => match self.templates.validations(&namespace, &name).await {
                Ok(Some(rules)) => rules,
                Ok(None) => return Verdict::Allowed(Vec::new()),
                Err(e) => return Verdict::Error(e),
            },
        };
        let verdict = review::judge(vm, &rules);
        match &verdict {
            Verdict::Allowed(warnings) => {
                for warning in warnings {
                    // Upstream's: a broken warning rule is logged, not refused.
                    error!(vm = %name, field = %warning.field, message = %warning.message, "rule is not satisfied");
                }
            }
            Verdict::Refused(causes) => {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                info!(vm = %name, causes = causes.len(), "refused a VirtualMachine");
            }
            Verdict::Error(e) => warn!(vm = %name, error = %e, "the VirtualMachine's rules cannot be read"),
        }
        verdict
    }
}

fn reply(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

const TEXT: &str = "text/plain; charset=utf-8";
const JSON: &str = "application/json";

/// Serves what `port` serves of `validator` on `listener` with `tls` until `stop`.
pub async fn serve<T: Templates>(
    listener: TcpListener,
    port: Port,
    tls: Arc<rustls::ServerConfig>,
    validator: Arc<Validator<T>>,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    if let Ok(address) = listener.local_addr() {
        info!(%address, ?port, "virt-template-validator serving HTTPS");
    }
    let handler = move |request, _: Peer| {
        let validator = Arc::clone(&validator);
        async move { validator.handle(port, request).await }
    };
    https_connection::serve_all(listener, acceptor, handler, stop).await;
}
