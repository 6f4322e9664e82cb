//! The driver's gRPC server on a unix socket (upstream's `--endpoint`, `unix:///csi/csi.sock`):
//! a stale socket is replaced (cmd-protocol's `listen`), and the socket is removed when the server
//! stops.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::controller::ControllerService;
use crate::csi::controller_server::ControllerServer;
use crate::csi::identity_server::IdentityServer;
use crate::csi::node_server::NodeServer;
use crate::host::Host;
use crate::identity::IdentityService;
use crate::node::NodeService;
use crate::pools::Pools;

/// What the driver is.
#[derive(Clone, Debug)]
pub struct Driver {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// This node's name.
    pub node_id: String,
    /// The node's pools.
    pub pools: Pools,
}

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The endpoint is not a unix socket's.
    #[error("--endpoint {0:?}: only unix:// endpoints (or a path) are served")]
    Endpoint(String),
    /// The socket could not be made.
    #[error(transparent)]
    Listen(#[from] cmd_protocol::transport::TransportError),
    /// The server failed.
    #[error("serving CSI: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The socket path of `endpoint` (`unix:///csi/csi.sock`, `unix://csi.sock` as upstream reads
/// it, from `/`, or a path).
///
/// # Errors
/// [`ServeError::Endpoint`] for another scheme.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, ServeError> {
    if let Some(rest) = endpoint.strip_prefix("unix://") {
        return Ok(Path::new("/").join(rest.trim_start_matches('/')));
    }
    if endpoint.contains("://") || endpoint.is_empty() {
        return Err(ServeError::Endpoint(endpoint.to_owned()));
    }
    Ok(PathBuf::from(endpoint))
}

/// Serves the three services for `driver` on the socket at `path` with `host`, until `stop`.
///
/// # Errors
/// [`ServeError`].
pub async fn serve<H: Host>(
    driver: Driver,
    host: Arc<H>,
    path: PathBuf,
    stop: CancellationToken,
) -> Result<(), ServeError> {
    let path = path.as_path();
    let incoming = cmd_protocol::transport::listen(path)?;
    tracing::info!(socket = %path.display(), driver = %driver.name, node = %driver.node_id, "serving CSI");
    let served = tonic::transport::Server::builder()
        .add_service(IdentityServer::new(IdentityService {
            name: driver.name.clone(),
            version: driver.version.clone(),
        }))
        .add_service(ControllerServer::new(ControllerService {
            node_id: driver.node_id.clone(),
            pools: driver.pools.clone(),
            host: Arc::clone(&host),
        }))
        .add_service(NodeServer::new(NodeService {
            node_id: driver.node_id,
            pools: driver.pools,
            host,
        }))
        .serve_with_incoming_shutdown(incoming, async move {
            stop.cancelled().await;
        })
        .await;
    let _ = std::fs::remove_file(path);
    Ok(served?)
}
