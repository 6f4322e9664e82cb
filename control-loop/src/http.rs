//! A component's HTTP endpoint: `/healthz` (liveness), `/leader` (readiness: only the leader of a
//! leader-elected component is ready) and `/metrics`. Served over HTTPS with the component's
//! certificate, as upstream's are, or plain HTTP when none is given (a component run by hand).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tracing::debug;

/// The content type of `/metrics` (OpenMetrics text).
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// How long a client may take to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What the endpoint serves.
pub trait Endpoints: Send + Sync + 'static {
    /// Whether the component is healthy.
    fn healthy(&self) -> bool;
    /// Whether it leads (components without leader election always do).
    fn leading(&self) -> bool {
        self.healthy()
    }
    /// The metrics text.
    fn metrics(&self) -> impl Future<Output = String> + Send;
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response.headers_mut().insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Answers one request.
pub async fn route<E: Endpoints>(endpoints: &E, method: &Method, path: &str) -> Response<Full<Bytes>> {
    const TEXT: &str = "text/plain; charset=utf-8";
    match (method, path) {
        (&Method::GET, "/healthz") if endpoints.healthy() => reply(StatusCode::OK, TEXT, "ok".to_owned()),
        (&Method::GET, "/healthz") => reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, "not ready".to_owned()),
        (&Method::GET, "/leader") if endpoints.leading() => reply(StatusCode::OK, TEXT, "leading".to_owned()),
        (&Method::GET, "/leader") => reply(StatusCode::SERVICE_UNAVAILABLE, TEXT, "not leading".to_owned()),
        (&Method::GET, "/metrics") => reply(StatusCode::OK, METRICS_CONTENT_TYPE, endpoints.metrics().await),
        (_, "/healthz" | "/leader" | "/metrics") => reply(StatusCode::METHOD_NOT_ALLOWED, TEXT, "use GET".to_owned()),
        _ => reply(StatusCode::NOT_FOUND, TEXT, "not found".to_owned()),
    }
}

/// The endpoint's TLS configuration from the component's certificate and key files (PEM), or
/// `None` (plain HTTP, said in the log) when neither is given.
///
/// # Errors
/// [`crate::tls::TlsError`] naming the file that cannot be used.
pub fn endpoint_tls(
    component: &str,
    cert: Option<&std::path::Path>,
    key: Option<&std::path::Path>,
) -> Result<Option<Arc<rustls::ServerConfig>>, crate::tls::TlsError> {
    let (Some(cert), Some(key)) = (cert, key) else {
        tracing::warn!(
            component,
            "no certificate for /healthz and /metrics (--tls-cert-file, --tls-key-file): serving plain HTTP"
        );
        return Ok(None);
    };
    let source = crate::tls::CertSource::Files {
        cert: cert.to_owned(),
        key: key.to_owned(),
    };
    Ok(Some(crate::tls::server_tls(&source)?.config))
}

/// Serves on `listener` until `stop`: HTTPS with `tls`, plain HTTP without.
pub async fn serve<E: Endpoints>(
    listener: TcpListener,
    endpoints: Arc<E>,
    tls: Option<Arc<rustls::ServerConfig>>,
    stop: CancellationToken,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    loop {
        let (stream, peer): (_, SocketAddr) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    debug!(error = %error, "accept failed");
                    continue;
                }
            },
        };
        let (endpoints, acceptor) = (endpoints.clone(), acceptor.clone());
        tokio::spawn(async move {
            match acceptor {
                Some(acceptor) => match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                    Ok(Ok(stream)) => serve_connection(stream, endpoints, peer).await,
                    Ok(Err(error)) => debug!(%peer, error = %error, "TLS handshake failed"),
                    Err(_) => debug!(%peer, "TLS handshake timed out"),
                },
                None => serve_connection(stream, endpoints, peer).await,
            }
        });
    }
}

async fn serve_connection<S, E>(stream: S, endpoints: Arc<E>, peer: SocketAddr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    E: Endpoints,
{
    let service = service_fn(move |request: Request<hyper::body::Incoming>| {
        let endpoints = endpoints.clone();
        async move { Ok::<_, Infallible>(route(endpoints.as_ref(), request.method(), request.uri().path()).await) }
    });
    if let Err(error) = http1::Builder::new()
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        debug!(%peer, error = %error, "HTTP connection ended with an error");
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::BodyExt as _;

    use super::*;

    struct Fixed(bool);

    impl Endpoints for Fixed {
        fn healthy(&self) -> bool {
            self.0
        }

        async fn metrics(&self) -> String {
            "# EOF\n".to_owned()
        }
    }

    async fn body(response: Response<Full<Bytes>>) -> String {
        let bytes = response.into_body().collect().await.expect("body").to_bytes();
        String::from_utf8(bytes.to_vec()).expect("utf-8")
    }

    #[tokio::test]
    async fn healthz_metrics_and_everything_else() {
        let ok = route(&Fixed(true), &Method::GET, "/healthz").await;
        assert_eq!(ok.status(), StatusCode::OK);
        assert_eq!(body(ok).await, "ok");
        let stopping = route(&Fixed(false), &Method::GET, "/healthz").await;
        assert_eq!(stopping.status(), StatusCode::SERVICE_UNAVAILABLE);
        let metrics = route(&Fixed(true), &Method::GET, "/metrics").await;
        assert_eq!(
            metrics
                .headers()
                .get(hyper::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some(METRICS_CONTENT_TYPE)
        );
        assert_eq!(body(metrics).await, "# EOF\n");
        let leader = route(&Fixed(true), &Method::GET, "/leader").await;
        assert_eq!(leader.status(), StatusCode::OK);
        let follower = route(&Fixed(false), &Method::GET, "/leader").await;
        assert_eq!(follower.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            route(&Fixed(true), &Method::POST, "/metrics").await.status(),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            route(&Fixed(true), &Method::GET, "/nope").await.status(),
            StatusCode::NOT_FOUND
        );
    }

    async fn ask(stream: impl tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin) -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut stream = stream;
        let mut answer = String::new();
        if stream.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await.is_ok() {
            let _ = stream.read_to_string(&mut answer).await;
        }
        answer
    }

    /// With the component's certificate the endpoint speaks only HTTPS: a client that trusts the
    /// certificate gets `/healthz`, a plain HTTP request gets no answer.
    #[tokio::test]
    async fn with_a_certificate_the_endpoint_is_https_only() {
        crate::tls::install_crypto_provider();
        let dir = tempfile::tempdir().expect("tempdir");
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["virt-handler".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        let (cert_file, key_file) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        std::fs::write(&cert_file, cert.pem()).expect("cert file");
        std::fs::write(&key_file, key.serialize_pem()).expect("key file");
        let tls = endpoint_tls("test", Some(&cert_file), Some(&key_file)).expect("tls");
        assert!(tls.is_some());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, Arc::new(Fixed(true)), tls, stop.clone()));

        let client = crate::tls::client_tls(&cert_file, None).expect("client");
        let name = rustls_pki_types::ServerName::try_from("virt-handler").expect("name");
        let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let stream = tokio_rustls::TlsConnector::from(client)
            .connect(name, tcp)
            .await
            .expect("TLS handshake");
        let answer = ask(stream).await;
        assert!(
            answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
            "{answer}"
        );
        assert!(answer.ends_with("ok"), "{answer}");

        let plain = ask(tokio::net::TcpStream::connect(addr).await.expect("connect")).await;
        assert!(!plain.contains("200"), "plain HTTP is not served: {plain:?}");
        stop.cancel();
        assert_eq!(endpoint_tls("test", None, None).expect("none").map(|_| ()), None);
        let missing = endpoint_tls("test", Some(&dir.path().join("nope.crt")), Some(&key_file)).expect_err("missing");
        assert!(missing.to_string().contains("nope.crt"), "{missing}");
    }
}
