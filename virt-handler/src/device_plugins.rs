//! The node's device plugins, as upstream's virt-handler runs them: launcher pods request
//! `devices.kubevirt.io/kvm`, `devices.kubevirt.io/tun` and `devices.kubevirt.io/vhost-net`, and
//! the kubelet schedules and starts them only where a plugin offers those resources. Each device
//! is one plugin: it serves the kubelet's device plugin API (v1beta1) on its own socket in the
//! kubelet's device-plugins directory, registers with the kubelet, offers [`DEVICE_COUNT`] shares
//! of the device (healthy while the device node exists), and allocates a share by giving the
//! container the device node. When the kubelet restarts it removes every plugin socket; the
//! plugin then serves and registers again.

use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::Duration;

use tokio::sync::watch;
use tokio_stream::{Stream, StreamExt as _};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status};
use tracing::{info, warn};

/// The generated API.
#[allow(clippy::pedantic, missing_docs, clippy::unwrap_used)]
pub mod api {
    tonic::include_proto!("v1beta1");
}

use api::device_plugin_server::{DevicePlugin, DevicePluginServer};
use api::registration_client::RegistrationClient;

/// The device plugin API version.
pub const API_VERSION: &str = "v1beta1";
/// The kubelet's registration socket, in the device-plugins directory.
pub const KUBELET_SOCKET: &str = "kubelet.sock";
/// How many pods may hold a share of each device at once (upstream's count).
pub const DEVICE_COUNT: usize = 1000;
/// How often the device node and the plugin's socket are checked.
const CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// A device offered to launcher pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostDevice {
    /// The name in the resource and socket: `kvm`, `tun`, `vhost-net`.
    pub name: &'static str,
    /// The device node, on the host and in the container.
    pub path: &'static str,
}

/// The devices virt-handler offers, as upstream does.
pub const DEVICES: [HostDevice; 3] = [
    HostDevice {
        name: "kvm",
        path: "/dev/kvm",
    },
    HostDevice {
        name: "tun",
        path: "/dev/net/tun",
    },
    HostDevice {
        name: "vhost-net",
        path: "/dev/vhost-net",
    },
];

impl HostDevice {
    /// The extended resource pods request: `devices.kubevirt.io/<name>`.
    #[must_use]
    pub fn resource(&self) -> String {
        format!("devices.kubevirt.io/{}", self.name)
    }

    /// The plugin's socket, relative to the device-plugins directory (upstream's name).
    #[must_use]
    pub fn socket(&self) -> String {
        format!("kubevirt-{}.sock", self.name)
    }
}

/// The devices advertised: [`DEVICE_COUNT`] shares, all healthy or all not.
#[must_use]
pub fn device_list(device: &HostDevice, healthy: bool) -> api::ListAndWatchResponse {
    let health = if healthy { "Healthy" } else { "Unhealthy" };
    api::ListAndWatchResponse {
        devices: (0..DEVICE_COUNT)
            .map(|i| api::Device {
                id: format!("{}{i}", device.name),
                health: health.to_owned(),
                topology: None,
            })
            .collect(),
    }
}

/// The allocation: every container that asked gets the device node, read-write.
#[must_use]
pub fn allocation(device: &HostDevice, request: &api::AllocateRequest) -> api::AllocateResponse {
    api::AllocateResponse {
        container_responses: request
            .container_requests
            .iter()
            .map(|_| api::ContainerAllocateResponse {
                devices: vec![api::DeviceSpec {
                    container_path: device.path.to_owned(),
                    host_path: device.path.to_owned(),
                    permissions: "rw".to_owned(),
                }],
                ..api::ContainerAllocateResponse::default()
            })
            .collect(),
    }
}

/// One device's plugin service.
struct Plugin {
    device: HostDevice,
    health: watch::Receiver<bool>,
    /// Ends the kubelet's `ListAndWatch` streams when this plugin stops serving, so that the
    /// server's graceful shutdown does not wait for them.
    serving: CancellationToken,
}

type DeviceStream = Pin<Box<dyn Stream<Item = Result<api::ListAndWatchResponse, Status>> + Send>>;

#[tonic::async_trait]
impl DevicePlugin for Plugin {
    type ListAndWatchStream = DeviceStream;

    async fn get_device_plugin_options(
        &self,
        _request: Request<api::Empty>,
    ) -> Result<Response<api::DevicePluginOptions>, Status> {
        Ok(Response::new(api::DevicePluginOptions::default()))
    }

    async fn list_and_watch(
        &self,
        _request: Request<api::Empty>,
    ) -> Result<Response<Self::ListAndWatchStream>, Status> {
        let device = self.device;
        let stream = tokio_stream::wrappers::WatchStream::new(self.health.clone())
            .map(move |healthy| Ok(device_list(&device, healthy)));
        let stream = futures::StreamExt::take_until(stream, self.serving.clone().cancelled_owned());
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_preferred_allocation(
        &self,
        _request: Request<api::PreferredAllocationRequest>,
    ) -> Result<Response<api::PreferredAllocationResponse>, Status> {
        Err(Status::unimplemented(
            "no preferred allocation: every share is the same",
        ))
    }

    async fn allocate(
        &self,
        request: Request<api::AllocateRequest>,
    ) -> Result<Response<api::AllocateResponse>, Status> {
        Ok(Response::new(allocation(&self.device, request.get_ref())))
    }

    async fn pre_start_container(
        &self,
        _request: Request<api::PreStartContainerRequest>,
    ) -> Result<Response<api::PreStartContainerResponse>, Status> {
        Ok(Response::new(api::PreStartContainerResponse {}))
    }
}

/// Why a plugin could not serve or register.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The socket or the connection to the kubelet failed.
    #[error(transparent)]
    Transport(#[from] cmd_protocol::transport::TransportError),
    /// The kubelet refused the registration.
    #[error("the kubelet refused {resource}: {message}")]
    Refused {
        /// The resource.
        resource: String,
        /// Its message.
        message: String,
    },
}

/// Serves `device`'s plugin in `dir` and registers it, again whenever its socket disappears,
/// until `stop`. `dev_root` prefixes the device node for the health check (`/` on a node).
pub async fn run_plugin(device: HostDevice, dir: PathBuf, dev_root: PathBuf, stop: CancellationToken) {
    let node = dev_root.join(device.path.trim_start_matches('/'));
    let (health_tx, health) = watch::channel(node.exists());
    let socket = dir.join(device.socket());
    while !stop.is_cancelled() {
        let serving = CancellationToken::new();
        let served = serve(&device, &socket, health.clone(), serving.clone());
        let registered = match served {
            Ok(()) => register(&device, &dir).await,
            Err(error) => Err(error),
        };
        match &registered {
            Ok(()) => info!(resource = %device.resource(), healthy = *health.borrow(), "device plugin registered"),
            Err(error) => {
                warn!(resource = %device.resource(), error = %error, "device plugin not registered; retrying");
            }
        }
        // Until stop, a failed registration's retry, or the kubelet removing the socket (it
        // restarted and forgot every plugin).
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(CHECK_INTERVAL) => {}
            }
            let exists = node.exists();
            health_tx.send_if_modified(|healthy| std::mem::replace(healthy, exists) != exists);
            if registered.is_err() || !socket.exists() {
                break;
            }
        }
        serving.cancel();
    }
    let _ = std::fs::remove_file(&socket);
}

/// Starts serving the plugin on `socket` until `serving` is cancelled.
fn serve(
    device: &HostDevice,
    socket: &Path,
    health: watch::Receiver<bool>,
    serving: CancellationToken,
) -> Result<(), PluginError> {
    let incoming = cmd_protocol::transport::listen(socket)?;
    let plugin = Plugin {
        device: *device,
        health,
        serving: serving.clone(),
    };
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(DevicePluginServer::new(plugin))
            .serve_with_incoming_shutdown(incoming, async move { serving.cancelled().await }),
    );
    Ok(())
}

/// Registers `device`'s plugin with the kubelet of `dir`.
async fn register(device: &HostDevice, dir: &Path) -> Result<(), PluginError> {
    let channel = cmd_protocol::transport::connect(&dir.join(KUBELET_SOCKET)).await?;
    RegistrationClient::new(channel)
        .register(api::RegisterRequest {
            version: API_VERSION.to_owned(),
            endpoint: device.socket(),
            resource_name: device.resource(),
            options: Some(api::DevicePluginOptions::default()),
        })
        .await
        .map_err(|status| PluginError::Refused {
            resource: device.resource(),
            message: status.message().to_owned(),
        })?;
    Ok(())
}

/// Runs every device's plugin until `stop`.
pub async fn run(dir: PathBuf, dev_root: PathBuf, stop: CancellationToken) {
    let plugins: Vec<_> = DEVICES
        .into_iter()
        .map(|device| tokio::spawn(run_plugin(device, dir.clone(), dev_root.clone(), stop.clone())))
        .collect();
    for plugin in plugins {
        if let Err(error) = plugin.await {
            warn!(error = %error, "a device plugin task failed");
        }
    }
}

#[cfg(test)]
mod tests;
