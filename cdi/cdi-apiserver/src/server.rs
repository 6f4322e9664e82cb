//! cdi-apiserver's server: HTTPS with its serving certificate, admitting the aggregation layer's
//! client certificates (its request-header CA); discovery for anyone; a token for a caller the
//! API server's SubjectAccessReview allows, as upstream's `uploadHandler` answers: 401 with the
//! reason otherwise, 500 when the review cannot be made, 400 for a bad body.

use std::future::Future;
use std::sync::Arc;

use bytes::Bytes;
use cdi_api::DataSource;
use cdi_api::data_source::{SourceRefError, resolved_source, source_ref_target};
use cdi_token::Issuer;
use control_loop::https_connection::{self, Peer};
use http_body_util::{BodyExt as _, Full, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::clone_admission::{self, Admission};
use crate::routes::{self, Route};
use crate::uninstall_admission::{self, UninstallCheck};
use crate::{review, token_request};

/// The largest request body read.
const MAX_BODY: usize = 1 << 20;

/// A webhook request's `AdmissionReview`, or the Bad Request that answers a body that is not one.
async fn read_review(request: Request<Incoming>) -> Result<Value, Response<Full<Bytes>>> {
    let body = Limited::new(request.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|error| reply(StatusCode::BAD_REQUEST, TEXT, format!("reading the body: {error}")))?
        .to_bytes();
    serde_json::from_slice(&body)
        .map_err(|error| reply(StatusCode::BAD_REQUEST, TEXT, format!("the AdmissionReview: {error}")))
}

/// A review's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    /// Whether the caller may.
    pub allowed: bool,
    /// Why not, when not.
    pub reason: String,
}

/// Where SubjectAccessReviews are made.
pub trait AccessReviews: Send + Sync + 'static {
    /// The answer to a review with `spec`.
    fn review(&self, spec: Value) -> impl Future<Output = Result<Review, String>> + Send;
    /// The DataSource a DataVolume's `sourceRef` names; `None` when it is not there.
    fn data_source(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<DataSource>, String>> + Send;
    /// How many DataVolumes that no DataImportCron keeps exist, counting at most `limit`.
    fn count_data_volumes(&self, limit: u32) -> impl Future<Output = Result<usize, String>> + Send;
}

/// Reviews on the API server.
#[derive(Clone)]
pub struct KubeAccessReviews(pub kube::Client);

impl std::fmt::Debug for KubeAccessReviews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeAccessReviews").finish_non_exhaustive()
    }
}

impl AccessReviews for KubeAccessReviews {
    async fn data_source(&self, namespace: &str, name: &str) -> Result<Option<DataSource>, String> {
        let api: kube::Api<DataSource> = kube::Api::namespaced(self.0.clone(), namespace);
        api.get_opt(name).await.map_err(|e| e.to_string())
    }

    async fn count_data_volumes(&self, limit: u32) -> Result<usize, String> {
        let api: kube::Api<cdi_api::DataVolume> = kube::Api::all(self.0.clone());
        let params = kube::api::ListParams::default()
            .labels(&format!("!{}", crate::uninstall_admission::DATA_IMPORT_CRON_LABEL))
            .limit(limit);
        api.list_metadata(&params)
            .await
            .map(|list| list.items.len())
            .map_err(|e| format!("list DataVolumes: {e}"))
    }

    async fn review(&self, spec: Value) -> Result<Review, String> {
        let review: SubjectAccessReview = serde_json::from_value(serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec
        }))
        .map_err(|e| e.to_string())?;
        let api: kube::Api<SubjectAccessReview> = kube::Api::all(self.0.clone());
        let answered = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| e.to_string())?;
        let status = answered.status.unwrap_or_default();
        Ok(Review {
            allowed: status.allowed,
            reason: status.reason.unwrap_or_default(),
        })
    }
}

/// The API: its reviews and its token issuer.
pub struct UploadApi<R> {
    /// Where reviews are made.
    pub reviews: R,
    /// Signs tokens.
    pub issuer: Issuer,
    /// The headers the aggregation layer names the user in.
    pub header_names: control_loop::aggregation::HeaderNames,
}

impl<R> std::fmt::Debug for UploadApi<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadApi").finish_non_exhaustive()
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

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

impl<R: AccessReviews> UploadApi<R> {
    /// Answers `request` from a client that did or did not present an admitted certificate.
    pub async fn handle(&self, request: Request<Incoming>, peer: Peer) -> Response<Full<Bytes>> {
        match routes::route(request.method().as_str(), request.uri().path()) {
            Route::Healthz => reply(StatusCode::OK, TEXT, "ok"),
            Route::Discovery(document) => reply(StatusCode::OK, JSON, document.to_string()),
            Route::NotFound => reply(StatusCode::NOT_FOUND, TEXT, "404 page not found"),
            Route::MethodNotAllowed => reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, ""),
            Route::CreateToken { namespace } => self.create_token(request, peer, &namespace).await,
            Route::MutateDataVolume => self.mutate_data_volume(request).await,
            Route::ValidateCdi => self.validate_cdi(request).await,
        }
    }

    /// Answers the CDI resource's validating webhook: the deletion of a CDI that blocks its
    /// uninstall is refused while DataVolumes exist.
    async fn validate_cdi(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let review = match read_review(request).await {
            Ok(review) => review,
            Err(refusal) => return refusal,
        };
        let (uid, check) = match uninstall_admission::read(&review) {
            Ok(read) => read,
            Err(error) => return reply(StatusCode::BAD_REQUEST, TEXT, error),
        };
        let outcome = match check {
            UninstallCheck::Admit => Ok(None),
            UninstallCheck::Refuse(why) => Err(why),
            UninstallCheck::CountDataVolumes => match self.reviews.count_data_volumes(2).await {
                Ok(count) => uninstall_admission::decide(count).map(|()| None),
                Err(error) => Err(error),
            },
        };
        reply(StatusCode::OK, JSON, clone_admission::answer(&uid, outcome).to_string())
    }

    /// Answers the DataVolume mutating webhook: a clone gets its token when one of the reviews
    /// allows its creator to read the source.
    async fn mutate_data_volume(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let review = match read_review(request).await {
            Ok(review) => review,
            Err(refusal) => return refusal,
        };
        let (uid, admission) = match clone_admission::read(&review) {
            Ok(read) => read,
            Err(error) => return reply(StatusCode::BAD_REQUEST, TEXT, error),
        };
        let outcome = match admission {
            Admission::Admit => Ok(None),
            Admission::Refuse(why) => Err(why),
            Admission::Clone(clone) => self.admit_clone(&clone).await,
            Admission::SourceRef(request) => self.admit_source_ref(request).await,
        };
        reply(StatusCode::OK, JSON, clone_admission::answer(&uid, outcome).to_string())
    }

    /// A DataVolume whose `sourceRef` names a DataSource: a clone of the claim it points to, as
    /// upstream's webhook resolves it. A DataSource that is not there is refused, and, unlike
    /// upstream's, one that points to nothing yet (the clone could not be checked, and would never
    /// get its token); one that points to a snapshot, or a `sourceRef` of another kind, is
    /// admitted without a token (the controller refuses it).
    async fn admit_source_ref(
        &self,
        request: clone_admission::SourceRefRequest,
    ) -> Result<Option<serde_json::Value>, String> {
        let Ok((namespace, name)) = source_ref_target(&request.reference, &request.target_namespace) else {
            return Ok(None);
        };
        let found = self
            .reviews
            .data_source(&namespace, &name)
            .await
            .map_err(|e| format!("reading DataSource {namespace}/{name}: {e}"))?;
        match resolved_source(&namespace, &name, found.as_ref()) {
            Ok(source) => match source.pvc {
                Some(claim) => self.admit_clone(&request.clone_of(claim.namespace, claim.name)).await,
                None => Ok(None),
            },
            Err(SourceRefError::NotFound { .. }) => Err(format!("datasources.cdi.kubevirt.io \"{name}\" not found")),
            // Admitted without a token, it could never clone once the DataSource is ready.
            Err(empty @ SourceRefError::Empty { .. }) => Err(empty.to_string()),
            Err(SourceRefError::Kind(_)) => Ok(None),
        }
    }

    async fn admit_clone(&self, clone: &clone_admission::CloneRequest) -> Result<Option<serde_json::Value>, String> {
        let user = clone.user["username"].as_str().unwrap_or_default().to_owned();
        for spec in clone_admission::reviews(clone) {
            match self.reviews.review(spec).await {
                Ok(review) if review.allowed => {
                    let payload = cdi_token::Payload::clone_of(
                        &clone.source_namespace,
                        &clone.source,
                        &clone.target_namespace,
                        &clone.target,
                    );
                    let token = self.issuer.issue(&payload, now());
                    info!(%user, source = %format!("{}/{}", clone.source_namespace, clone.source), target = %format!("{}/{}", clone.target_namespace, clone.target), "admitted a clone");
                    return Ok(Some(clone_admission::token_patch(clone, &token)));
                }
                Ok(_) => {}
                Err(error) => {
                    warn!(%user, error = %error, "the SubjectAccessReview failed");
                    return Err(format!("checking the clone's permissions: {error}"));
                }
            }
        }
        info!(%user, namespace = %clone.source_namespace, "refused a clone");
        Err(clone_admission::DENIED.to_owned())
    }

    async fn create_token(&self, request: Request<Incoming>, peer: Peer, namespace: &str) -> Response<Full<Bytes>> {
        if !peer.certificate {
            info!(peer = %peer.address, "Rejected Request: request is not authenticated");
            return reply(StatusCode::UNAUTHORIZED, TEXT, "request is not authenticated");
        }
        let spec = match review::spec(namespace, request.headers(), &self.header_names) {
            Ok(spec) => spec,
            Err(reason) => return reply(StatusCode::UNAUTHORIZED, TEXT, reason),
        };
        let user = spec["user"].as_str().unwrap_or_default().to_owned();
        match self.reviews.review(spec).await {
            Ok(review) if review.allowed => {}
            Ok(review) => {
                info!(%user, %namespace, reason = %review.reason, "Rejected Request");
                return reply(StatusCode::UNAUTHORIZED, TEXT, review.reason);
            }
            Err(error) => {
                warn!(%user, error = %error, "the SubjectAccessReview failed");
                return reply(StatusCode::INTERNAL_SERVER_ERROR, TEXT, "");
            }
        }
        let body = match Limited::new(request.into_body(), MAX_BODY).collect().await {
            Ok(body) => body.to_bytes(),
            Err(error) => return reply(StatusCode::BAD_REQUEST, TEXT, format!("reading the body: {error}")),
        };
        match token_request::answer(&body, namespace, &self.issuer, now()) {
            Ok(answer) => {
                info!(%user, %namespace, claim = %answer["spec"]["pvcName"], "issued an upload token");
                let mut response = reply(StatusCode::OK, JSON, answer.to_string());
                response.headers_mut().insert(
                    hyper::header::X_CONTENT_TYPE_OPTIONS,
                    hyper::header::HeaderValue::from_static("nosniff"),
                );
                response
            }
            Err(error) => reply(StatusCode::BAD_REQUEST, TEXT, error.to_string()),
        }
    }
}

/// Serves `api` on `listener` with `tls` until `stop`.
pub async fn serve<R: AccessReviews>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    api: Arc<UploadApi<R>>,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    if let Ok(address) = listener.local_addr() {
        info!(%address, "cdi-apiserver serving HTTPS");
    }
    let handler = move |request, peer: Peer| {
        let api = Arc::clone(&api);
        async move { api.handle(request, peer).await }
    };
    https_connection::serve_all(listener, acceptor, handler, stop).await;
}
