//! virt-handler's console server (upstream's port 8186): what virt-api asks of the node that runs
//! a VMI. `PUT .../pause` and `.../unpause` go to the VMI's launcher; `GET .../console` is a
//! websocket (subprotocol `plain.kubevirt.io`) piped to the guest's serial socket in the launcher
//! pod's private directory. HTTPS only, and with a client CA every caller must present a
//! certificate it signed: this API reaches every guest on the node.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use kubevirt_api::clock::Clock;
use kubevirt_api::v1::VirtualMachineInstance;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::cluster_api::ClusterApi;
use crate::launchers::Launchers;
use crate::reconciler::Reconciler;

/// The subprotocol KubeVirt's console clients ask for.
pub const CONSOLE_SUBPROTOCOL: &str = "plain.kubevirt.io";

/// What the handlers need.
#[derive(Debug)]
pub struct ConsoleState<C, L, K> {
    reconciler: Arc<Reconciler<C, L, K>>,
    pods_dir: PathBuf,
}

type Shared<C, L, K> = Arc<ConsoleState<C, L, K>>;

fn refuse(code: StatusCode, message: impl Into<String>) -> Response {
    (code, message.into()).into_response()
}

impl<C: ClusterApi, L: Launchers, K: Clock> ConsoleState<C, L, K> {
    /// Serves the VMIs `reconciler` knows; serial sockets are found under `pods_dir`.
    pub fn new(reconciler: Arc<Reconciler<C, L, K>>, pods_dir: PathBuf) -> Self {
        Self { reconciler, pods_dir }
    }

    fn vmi(
        &self,
        ns: &str,
        name: &str,
    ) -> Result<(Arc<VirtualMachineInstance>, Option<PathBuf>), (StatusCode, String)> {
        self.reconciler.lookup(&format!("{ns}/{name}")).ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                format!("VMI {ns}/{name} is not on node {}", self.reconciler.node()),
            )
        })
    }

    /// The serial sockets of the VMI's pods on this node, as the handler sees them.
    fn serial_sockets(&self, vmi: &VirtualMachineInstance) -> Vec<PathBuf> {
        let uid = vmi.metadata.uid.as_deref().unwrap_or_default();
        let node = self.reconciler.node();
        vmi.status
            .iter()
            .flat_map(|s| s.active_pods.iter())
            .filter(|(_, on)| on.as_str() == node)
            .map(|(pod, _)| cmd_protocol::sockets::serial_socket_on_host(&self.pods_dir, pod, uid))
            .collect()
    }
}

async fn pause<C: ClusterApi, L: Launchers, K: Clock>(
    State(state): State<Shared<C, L, K>>,
    UrlPath((ns, name, action)): UrlPath<(String, String, String)>,
) -> Response {
    let (vmi, socket) = match state.vmi(&ns, &name) {
        Ok(found) => found,
        Err(refused) => return refused.into_response(),
    };
    let Some(socket) = socket else {
        return refuse(
            StatusCode::CONFLICT,
            format!("the launcher of VMI {ns}/{name} is not ready"),
        );
    };
    let launchers = state.reconciler.launchers();
    let result = match action.as_str() {
        "pause" => launchers.pause(&socket, &vmi).await,
        "unpause" => launchers.unpause(&socket, &vmi).await,
        other => return refuse(StatusCode::NOT_FOUND, format!("unknown action {other:?}")),
    };
    match result {
        Ok(()) => {
            info!(vmi = %format!("{ns}/{name}"), action, "done for virt-api");
            StatusCode::ACCEPTED.into_response()
        }
        Err(error) => refuse(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    }
}

async fn console<C: ClusterApi, L: Launchers, K: Clock>(
    State(state): State<Shared<C, L, K>>,
    UrlPath((ns, name)): UrlPath<(String, String)>,
    upgrade: WebSocketUpgrade,
) -> Response {
    let vmi = match state.vmi(&ns, &name) {
        Ok((vmi, _)) => vmi,
        Err(refused) => return refused.into_response(),
    };
    let mut last_error = String::from("no pod of it runs on this node");
    for path in state.serial_sockets(&vmi) {
        match cmd_protocol::sockets::connect_unix(&path).await {
            Ok(serial) => {
                return upgrade
                    .protocols([CONSOLE_SUBPROTOCOL])
                    .on_upgrade(move |socket| pipe(socket, serial));
            }
            Err(e) => last_error = format!("{}: {e}", path.display()),
        }
    }
    refuse(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("the serial console of VMI {ns}/{name} is not reachable: {last_error}"),
    )
}

/// Copies bytes between the websocket and the serial socket until either closes.
async fn pipe(mut socket: WebSocket, serial: tokio::net::UnixStream) {
    let (mut from_guest, mut to_guest) = serial.into_split();
    let mut buffer = vec![0_u8; 4096];
    loop {
        tokio::select! {
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Binary(bytes))) => {
                    if to_guest.write_all(&bytes).await.is_err() { break; }
                }
                Some(Ok(Message::Text(text))) => {
                    if to_guest.write_all(text.as_bytes()).await.is_err() { break; }
                }
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
            read = from_guest.read(&mut buffer) => {
                let Ok(n) = read else { break };
                if n == 0 {
                    let _ = socket.send(Message::Close(None)).await;
                    break;
                }
                if socket.send(Message::Binary(buffer[..n].to_vec().into())).await.is_err() { break; }
            }
        }
    }
}

/// The routes, upstream's paths.
pub fn router<C: ClusterApi, L: Launchers, K: Clock>(state: Shared<C, L, K>) -> Router {
    Router::new()
        .route(
            "/v1/namespaces/{ns}/virtualmachineinstances/{name}/console",
            get(console::<C, L, K>),
        )
        .route(
            "/v1/namespaces/{ns}/virtualmachineinstances/{name}/{action}",
            put(pause::<C, L, K>),
        )
        .with_state(state)
}

/// Who the console server admits: virt-api's client certificate
/// (`kubevirt.io:system:client:virt-handler`), signed by the CA bundle in `ca`.
#[must_use]
pub fn console_clients(ca: PathBuf) -> control_loop::tls::ClientPolicy {
    control_loop::tls::ClientPolicy {
        ca: control_loop::tls::ClientCa::File(ca),
        identities: control_loop::tls::Identities::Only(vec![control_loop::tls::VIRT_API_CLIENT.to_owned()]),
        required: true,
    }
}

/// Serves the console API over TLS on `listener` until `stop` is cancelled.
pub async fn serve<C: ClusterApi, L: Launchers, K: Clock>(
    listener: std::net::TcpListener,
    tls: Arc<rustls::ServerConfig>,
    state: Shared<C, L, K>,
    stop: CancellationToken,
) {
    if let Err(e) = listener.set_nonblocking(true) {
        warn!(error = %e, "console server cannot use its listener");
        return;
    }
    let handle = axum_server::Handle::<SocketAddr>::new();
    let shutdown = handle.clone();
    tokio::spawn(async move {
        stop.cancelled().await;
        shutdown.graceful_shutdown(Some(std::time::Duration::from_secs(2)));
    });
    let config = axum_server::tls_rustls::RustlsConfig::from_config(tls);
    let server = match axum_server::from_tcp_rustls(listener, config) {
        Ok(server) => server,
        Err(e) => {
            warn!(error = %e, "console server cannot start");
            return;
        }
    };
    if let Err(e) = server.handle(handle).serve(router(state).into_make_service()).await {
        warn!(error = %e, "console server failed");
    }
}
