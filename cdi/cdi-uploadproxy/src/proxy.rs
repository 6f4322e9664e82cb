//! The proxy's server: HTTPS with its serving certificate; `/healthz`; and each upload, whose
//! target claim comes from its token ([`cdi_token::upload_request`]), streamed to the claim's
//! upload server `https://cdi-upload-<claim>.<namespace>.svc:8443` (or its prime claim's, when
//! CDI's upload populator fills it: [`crate::claims::server_claim`]) with the proxy's client
//! certificate, and the answer streamed back. A transport failure is answered 502, as Go's
//! reverse proxy does.

use std::future::Future;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cdi_api::upload;
use cdi_token::Validator;
use cdi_token::upload_request::{self, ClaimState, Refusal};
use control_loop::https_connection::{self, Peer};
use control_loop::tls::{Reloading, TlsError, client_tls};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::claims::{Claims, ServerClaim, server_claim};
use crate::routes::{self, Route};

/// How long a request waits for its claim's upload server to be ready (upstream's 10 s).
pub const READY_WAIT: Duration = Duration::from_secs(10);
/// How often it looks meanwhile (upstream's 1 s).
pub const READY_POLL: Duration = Duration::from_secs(1);
/// The leeway given to a token's times (upstream's 10 s).
pub const TOKEN_LEEWAY_SECONDS: i64 = 10;
/// How long reaching an upload server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The headers that belong to one connection, never passed on (RFC 9110's and Go's list).
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// An answer's body: text of the proxy's own, or the upload server's, streamed.
pub type ProxyBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// How the proxy reaches an upload server's host.
pub trait Dialer: Send + Sync + 'static {
    /// A connection to `host:port`.
    fn connect(&self, host: &str, port: u16) -> impl Future<Output = io::Result<TcpStream>> + Send;
}

/// Through the cluster's DNS.
#[derive(Clone, Copy, Debug, Default)]
pub struct DnsDialer;

impl Dialer for DnsDialer {
    async fn connect(&self, host: &str, port: u16) -> io::Result<TcpStream> {
        TcpStream::connect((host, port)).await
    }
}

/// What the proxy needs.
pub struct Proxy<C, D> {
    /// The claims.
    pub claims: C,
    /// How upload servers are reached.
    pub dialer: D,
    /// Checks upload tokens.
    pub validator: Validator,
    /// The proxy's client certificate and the upload servers' CA bundle, read again when
    /// cdi-operator renews them ([`upstream_tls`]).
    pub upstream_tls: Reloading<Arc<rustls::ClientConfig>>,
    /// How long a request waits for an upload server to be ready.
    pub ready_wait: Duration,
}

/// The client configuration for upload servers from the upload servers' CA bundle (`ca`) and the
/// proxy's client certificate and key, built again whenever one of the files changes (the
/// kubelet updates a mounted Secret or ConfigMap in place after a renewal).
///
/// # Errors
/// When the files cannot be read now.
pub fn upstream_tls(ca: &Path, cert: &Path, key: &Path) -> Result<Reloading<Arc<rustls::ClientConfig>>, TlsError> {
    let (ca, cert, key) = (ca.to_owned(), cert.to_owned(), key.to_owned());
    Reloading::new(vec![ca.clone(), cert.clone(), key.clone()], move |_| {
        client_tls(&ca, Some((&cert, &key)))
    })
}

impl<C, D> std::fmt::Debug for Proxy<C, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").finish_non_exhaustive()
    }
}

fn text(status: StatusCode, body: impl Into<Bytes>) -> Response<ProxyBody> {
    let mut response = Response::new(Full::new(body.into()).map_err(|never| match never {}).boxed());
    *response.status_mut() = status;
    response
}

fn refused(refusal: Refusal) -> Response<ProxyBody> {
    text(
        StatusCode::from_u16(refusal.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE),
        refusal.body,
    )
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Headers the Connection header names are the connection's too.
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
}

fn header<'a>(request: &'a Request<Incoming>, name: &str) -> Option<&'a str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

impl<C: Claims, D: Dialer> Proxy<C, D> {
    /// Answers `request`.
    pub async fn handle(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        if let Some(headers) = routes::preflight(
            request.method().as_str(),
            header(&request, "origin"),
            header(&request, "access-control-request-method"),
            header(&request, "access-control-request-headers"),
        ) {
            let mut response = text(StatusCode::NO_CONTENT, "");
            for (name, value) in headers {
                if let Ok(value) = HeaderValue::from_str(&value) {
                    response.headers_mut().insert(name, value);
                }
            }
            return response;
        }
        let cross_origin = request.headers().contains_key(header::ORIGIN);
        let mut response = match routes::route(request.uri().path()) {
            Route::Healthz => text(StatusCode::OK, "OK"),
            Route::NotFound => text(StatusCode::NOT_FOUND, "404 page not found\n"),
            Route::Upload => self.upload(request).await,
        };
        if cross_origin {
            response
                .headers_mut()
                .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
            response
                .headers_mut()
                .append(header::VARY, HeaderValue::from_static("Origin"));
        }
        response
    }

    async fn upload(&self, request: Request<Incoming>) -> Response<ProxyBody> {
        let now = time_now();
        let (namespace, claim) = match upload_request::target(header(&request, "authorization"), &self.validator, now) {
            Ok(target) => target,
            Err(refusal) => return refused(refusal),
        };
        debug!(%namespace, %claim, "a valid upload token");
        let (server_claim, content_type) = match self.wait_ready(&namespace, &claim).await {
            Ok(ready) => ready,
            Err(refusal) => {
                warn!(%namespace, %claim, reason = %refusal.body, "upload refused");
                return refused(refusal);
            }
        };
        let path = match routes::upstream_path(request.uri().path(), &claim, &content_type) {
            Ok(path) => path,
            Err(why) => return text(StatusCode::SERVICE_UNAVAILABLE, why),
        };
        let host = format!("{}.{namespace}.svc", upload::service_name(&server_claim));
        match self.forward(request, &host, &path).await {
            Ok(response) => response,
            Err(why) => {
                warn!(%host, error = %why, "the upload server could not be reached");
                text(StatusCode::BAD_GATEWAY, "")
            }
        }
    }

    /// Waits up to [`Proxy::ready_wait`] for the claim's upload server; gives the claim whose
    /// server takes the upload (the claim itself, or the prime claim of one the upload populator
    /// fills) and its content type.
    async fn wait_ready(&self, namespace: &str, claim: &str) -> Result<(String, String), Refusal> {
        let begin = Instant::now();
        loop {
            let read = |name: String| async move {
                let found = self.claims.claim(namespace, &name).await.map_err(|e| Refusal {
                    status: 503,
                    body: format!("reading PVC {name}: {e}"),
                })?;
                Ok::<_, Refusal>((name, found))
            };
            let (server_claim, record) = match read(claim.to_owned()).await? {
                (_, Some(target)) if target.upload_populated => match server_claim(claim, &target)? {
                    ServerClaim::Prime(prime) => match read(prime).await? {
                        (prime, Some(record)) => (prime, Some(record)),
                        // Upstream's words for a prime named but not there.
                        (_, None) => {
                            return Err(Refusal {
                                status: 503,
                                body: format!("rejecting Upload Request for PVC {claim}, PVC' wasn't created yet"),
                            });
                        }
                    },
                    ServerClaim::NotYet(refusal) if begin.elapsed() + READY_POLL <= self.ready_wait => {
                        debug!(%claim, reason = %refusal.body, "waiting for the prime claim");
                        tokio::time::sleep(READY_POLL).await;
                        continue;
                    }
                    ServerClaim::NotYet(refusal) => return Err(refusal),
                },
                found => found,
            };
            let state = record.map_or(ClaimState::Missing, |r| ClaimState::Present(r.annotations));
            match upload_request::ready(claim, &state) {
                Ok(()) => {
                    let ClaimState::Present(annotations) = state else {
                        return Ok((server_claim, String::new()));
                    };
                    let content_type = annotations
                        .get("cdi.kubevirt.io/storage.contentType")
                        .cloned()
                        .unwrap_or_default();
                    return Ok((server_claim, content_type));
                }
                Err(refusal)
                    if upload_request::waiting_for_server(&state)
                        && begin.elapsed() + READY_POLL <= self.ready_wait =>
                {
                    debug!(%claim, reason = %refusal.body, "waiting for the upload server");
                    tokio::time::sleep(READY_POLL).await;
                }
                Err(refusal) => return Err(refusal),
            }
        }
    }

    async fn forward(&self, request: Request<Incoming>, host: &str, path: &str) -> Result<Response<ProxyBody>, String> {
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, self.dialer.connect(host, upload::PORT))
            .await
            .map_err(|_| format!("connecting to {host} timed out"))?
            .map_err(|e| format!("connecting to {host}: {e}"))?;
        let name = rustls_pki_types::ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
        let tls = tokio_rustls::TlsConnector::from(self.upstream_tls.current())
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {host}: {e}"))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                debug!(error = %error, "the upload server's connection ended with an error");
            }
        });
        let (mut parts, body) = request.into_parts();
        parts.uri = path.parse().map_err(|e: hyper::http::uri::InvalidUri| e.to_string())?;
        strip_hop_by_hop(&mut parts.headers);
        if let Ok(value) = HeaderValue::from_str(&format!("{host}:{}", upload::PORT)) {
            parts.headers.insert(header::HOST, value);
        }
        let response = sender
            .send_request(Request::from_parts(parts, body))
            .await
            .map_err(|e| e.to_string())?;
        let (mut parts, body) = response.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        Ok(Response::from_parts(parts, body.map_err(Into::into).boxed()))
    }
}

fn time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Serves `proxy` on `listener` with `tls` until `stop`.
pub async fn serve<C: Claims, D: Dialer>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    proxy: Arc<Proxy<C, D>>,
    stop: CancellationToken,
) {
    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
    if let Ok(address) = listener.local_addr() {
        info!(%address, "cdi-uploadproxy serving HTTPS");
    }
    let handler = move |request, _: Peer| {
        let proxy = Arc::clone(&proxy);
        async move { proxy.handle(request).await }
    };
    https_connection::serve_all(listener, acceptor, handler, stop).await;
}
