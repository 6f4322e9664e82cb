//! The driver's registration with its node's kubelet, which upstream leaves to the
//! node-driver-registrar sidecar: the kubelet finds the socket `<driver>-reg.sock` in its
//! `plugins_registry` directory, asks it what it is (a CSI plugin of the driver's name, its CSI
//! endpoint as the kubelet sees it, CSI 1.0.0), and says whether it took it.

use std::path::{Path, PathBuf};

use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};

use crate::authority::AuthorityFix;
use crate::registration_api::registration_server::{Registration, RegistrationServer};
use crate::registration_api::{InfoRequest, PluginInfo, RegistrationStatus, RegistrationStatusResponse};
use crate::server::ServeError;

/// The kubelet's plugin type of a CSI driver.
pub const CSI_PLUGIN: &str = "CSIPlugin";

/// The Registration service.
#[derive(Clone, Debug)]
pub struct Registrar {
    /// The driver's name.
    pub driver: String,
    /// Its CSI socket, as the kubelet sees it.
    pub endpoint: String,
}

#[tonic::async_trait]
impl Registration for Registrar {
    async fn get_info(&self, _: Request<InfoRequest>) -> Result<Response<PluginInfo>, Status> {
        Ok(Response::new(PluginInfo {
            r#type: CSI_PLUGIN.to_owned(),
            name: self.driver.clone(),
            endpoint: self.endpoint.clone(),
            supported_versions: vec!["1.0.0".to_owned()],
        }))
    }

    async fn notify_registration_status(
        &self,
        request: Request<RegistrationStatus>,
    ) -> Result<Response<RegistrationStatusResponse>, Status> {
        let status = request.into_inner();
        if status.plugin_registered {
            tracing::info!(driver = %self.driver, "the kubelet registered the driver");
        } else {
            tracing::error!(driver = %self.driver, error = %status.error, "the kubelet refused the driver");
        }
        Ok(Response::new(RegistrationStatusResponse {}))
    }
}

/// The registration socket of `driver` in the kubelet's `plugins_registry` directory `dir`.
#[must_use]
pub fn socket_in(dir: &Path, driver: &str) -> PathBuf {
    dir.join(format!("{driver}-reg.sock"))
}

/// The connections on `listener`, each behind an [`AuthorityFix`] (the kubelet's requests name
/// the socket's path as their authority).
fn incoming(
    listener: tokio_stream::wrappers::UnixListenerStream,
) -> impl tokio_stream::Stream<Item = std::io::Result<AuthorityFix<tokio::net::UnixStream>>> {
    use tokio_stream::StreamExt as _;
    listener.map(|accepted| accepted.map(AuthorityFix::new))
}

/// Serves `registrar` on `path` until `stop`; the socket is removed when it stops (so the kubelet
/// forgets the driver).
///
/// # Errors
/// [`ServeError`].
pub async fn serve(registrar: Registrar, path: PathBuf, stop: CancellationToken) -> Result<(), ServeError> {
    let listener = cmd_protocol::transport::listen(&path)?;
    tracing::info!(socket = %path.display(), endpoint = %registrar.endpoint, "serving the kubelet's plugin registration");
    let served = tonic::transport::Server::builder()
        .add_service(RegistrationServer::new(registrar))
        .serve_with_incoming_shutdown(incoming(listener), async move {
            stop.cancelled().await;
        })
        .await;
    let _ = std::fs::remove_file(&path);
    Ok(served?)
}
