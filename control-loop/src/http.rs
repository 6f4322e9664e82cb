//! A component's HTTP endpoint: `/healthz` (liveness), `/leader` (readiness: only the leader of a
//! leader-elected component is ready) and `/metrics`.

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

/// Serves on `listener` until `stop`.
pub async fn serve<E: Endpoints>(listener: TcpListener, endpoints: Arc<E>, stop: CancellationToken) {
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
        let endpoints = endpoints.clone();
        tokio::spawn(async move {
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
        });
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
}
