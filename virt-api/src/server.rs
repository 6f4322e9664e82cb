//! The HTTPS server: one axum router for the webhooks, discovery, the subresources and the health
//! endpoint, over rustls. The cluster connection may come later than the server: until it does,
//! routes that need it answer 503.

use std::net::SocketAddr;
use std::sync::{Arc, PoisonError};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio_util::sync::CancellationToken;

use crate::admission::{self, Webhook};
use crate::app_state::AppState;
#[cfg(any(test, feature = "testing"))]
use crate::backends::{FakeNodeConnector, FakeSubresourceCluster};
use crate::backends::{NodeConnector, SubresourceCluster};
#[cfg(any(test, feature = "testing"))]
use crate::subresources::authorize::Authentication;
use crate::subresources::authorize::PeerCertificate;
use crate::subresources::{ApiStatus, discovery, expand_spec, routes};

fn json(value: &serde_json::Value) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], value.to_string()).into_response()
}

/// Ready (the readiness probe's `/healthz`) only once connected to the API server, as upstream's
/// checks its connection: until then every webhook answers without the cluster's objects, and the
/// eviction interceptor would let a launcher pod whose VMI should migrate be evicted.
async fn healthz<C: SubresourceCluster, N: NodeConnector>(State(state): State<Arc<AppState<C, N>>>) -> Response {
    match state.cluster() {
        Ok(_) => "ok".into_response(),
        Err(status) => status.into_response(),
    }
}

async fn webhook<C: SubresourceCluster, N: NodeConnector>(
    State((state, hook)): State<(Arc<AppState<C, N>>, Webhook)>,
    body: Bytes,
) -> Response {
    let context = state.admission.read().unwrap_or_else(PoisonError::into_inner).clone();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(state.clock.now());
    let new_uuid = || uuid::Uuid::new_v4().to_string();
    let answer = match state.cluster() {
        Ok(cluster) => admission::admit(hook, &body, &context, now, &new_uuid, &*cluster).await,
        Err(why) => {
            let none = admission::lookup::NoCluster(why.message);
            admission::admit(hook, &body, &context, now, &new_uuid, &none).await
        }
    };
    match serde_json::to_vec(&answer) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn resource_list(Path(version): Path<String>) -> Response {
    if discovery::VERSIONS.contains(&version.as_str()) {
        json(&discovery::resource_list(&version))
    } else {
        ApiStatus {
            code: 404,
            reason: "NotFound",
            message: format!("version {version} is not served"),
            details: None,
        }
        .into_response()
    }
}

fn version_info() -> serde_json::Value {
    serde_json::json!({
        "gitVersion": concat!("v", env!("CARGO_PKG_VERSION")),
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
    })
}

/// The whole router.
pub fn router<C: SubresourceCluster, N: NodeConnector>(state: Arc<AppState<C, N>>) -> Router {
    let group = format!("/apis/{}", discovery::GROUP);
    let mut app = Router::new();
    for hook in Webhook::ALL {
        app = app.route(hook.path(), post(webhook::<C, N>).with_state((state.clone(), hook)));
    }
    let subresources = Router::new()
        .route(
            &format!("{group}/{{version}}/namespaces/{{ns}}/virtualmachines/{{name}}/expand-spec"),
            get(expand_spec::expand_stored::<C, N>),
        )
        .route(
            &format!("{group}/{{version}}/namespaces/{{ns}}/virtualmachines/{{name}}/{{action}}"),
            put(routes::vm_action::<C, N>),
        )
        .route(
            &format!("{group}/{{version}}/namespaces/{{ns}}/expand-vm-spec"),
            put(expand_spec::expand_body::<C, N>),
        )
        .route(
            &format!("{group}/{{version}}/namespaces/{{ns}}/virtualmachineinstances/{{name}}/console"),
            get(routes::console::<C, N>),
        )
        .route(
            &format!("{group}/{{version}}/namespaces/{{ns}}/virtualmachineinstances/{{name}}/{{action}}"),
            put(routes::vmi_action::<C, N>),
        )
        .route(&format!("{group}/{{version}}/healthz"), get(healthz::<C, N>))
        .route("/healthz", get(healthz::<C, N>))
        .with_state(state);
    app.merge(subresources)
        .route("/", get(|| async { json(&discovery::root_paths()) }))
        .route("/apis", get(|| async { json(&discovery::api_group_list()) }))
        .route(&group, get(|| async { json(&discovery::api_group()) }))
        .route(&format!("{group}/{{version}}"), get(resource_list))
        .route(
            &format!("{group}/{{version}}/version"),
            get(|| async { json(&version_info()) }),
        )
        .route("/version", get(|| async { json(&version_info()) }))
}

#[cfg(any(test, feature = "testing"))]
/// An app on the in-memory cluster and node fakes (see [`AppState::with_defaults`]): for tests,
/// benchmarks and demonstrations.
#[must_use]
pub fn fake_app(
    authentication: Authentication,
) -> (
    Arc<AppState<FakeSubresourceCluster, FakeNodeConnector>>,
    Arc<FakeSubresourceCluster>,
) {
    let state = Arc::new(AppState::with_defaults(
        authentication,
        Arc::new(FakeNodeConnector::default()),
    ));
    let cluster = Arc::new(FakeSubresourceCluster::default());
    state.set_cluster(cluster.clone());
    (state, cluster)
}

/// Serves `app` over TLS on a free loopback port until the returned token is cancelled.
pub fn serve_on_loopback(app: Router, tls: Arc<rustls::ServerConfig>) -> std::io::Result<(u16, CancellationToken)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let stop = CancellationToken::new();
    tokio::spawn(serve(listener, tls, app, stop.clone()));
    Ok((port, stop))
}

/// Serves `app` over TLS on `listener` until `stop` is cancelled.
pub async fn serve(
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    stop: CancellationToken,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let handle = axum_server::Handle::<SocketAddr>::new();
    let shutdown = handle.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        shutdown.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
    });
    let acceptor = PeerAcceptor(RustlsAcceptor::new(RustlsConfig::from_config(tls)));
    axum_server::from_tcp(listener)?
        .acceptor(acceptor)
        .handle(handle)
        .serve(app.into_make_service())
        .await
}

/// The TLS acceptor that tells each request whether its client presented a verified certificate.
#[derive(Clone, Debug)]
struct PeerAcceptor(RustlsAcceptor);

impl<I, S> axum_server::accept::Accept<I, S> for PeerAcceptor
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: Send + 'static,
{
    type Stream = tokio_rustls::server::TlsStream<I>;
    type Service = axum::middleware::AddExtension<S, PeerCertificate>;
    type Future = futures::future::BoxFuture<'static, std::io::Result<(Self::Stream, Self::Service)>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let acceptor = self.0.clone();
        Box::pin(async move {
            let (stream, service) = acceptor.accept(stream, service).await?;
            let presented = stream.get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty());
            Ok((
                stream,
                tower::Layer::layer(&axum::Extension(PeerCertificate(presented)), service),
            ))
        })
    }
}
