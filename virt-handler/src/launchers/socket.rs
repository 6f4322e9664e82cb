//! [`Launchers`] over the command protocol: each launcher's socket is found through the VMI's
//! active pods and the kubelet's pods directory, clients are kept per socket, and a notify pipe is
//! placed in each launcher pod the first time its socket is found.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use cmd_protocol::cmd::{MigrationRequest, Vmi, VmiRequest};
use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::migration::MigrationOptions;
use cmd_protocol::sockets::{self, FindSocketError};
use cmd_protocol::stats::DomainStats;
use cmd_protocol::transport::CmdClient;
use kubevirt_api::v1::VirtualMachineInstance;
use pod_network::commands::NetworkCommands;
use tracing::warn;

use super::{LauncherError, Launchers, MigrationPaths, NotifyPipe, Presence};
use crate::cluster_settings::Settings;
use crate::container_disks;
use crate::node_mounts::NodeMounts;
use crate::pod_process::PodProcess;

#[derive(Debug, Default)]
struct Held {
    clients: HashMap<PathBuf, CmdClient>,
    pipes: HashMap<PathBuf, NotifyPipe>,
    /// Sockets whose pod network is wired, so that a sync checks no file once it is.
    wired: HashSet<PathBuf>,
    /// Sockets whose pod has its containerDisk and kernel-boot images mounted.
    disks_provided: HashSet<PathBuf>,
    /// Sockets whose launcher has its disk images (and, unprivileged, its devices).
    prepared: HashSet<PathBuf>,
    /// What the preparation has to say in events (a claim's image made smaller than asked).
    notices: HashMap<PathBuf, Vec<String>>,
    /// Pod addresses read once the pod network is wired; they do not change for the pod's life.
    pod_addresses: HashMap<PathBuf, BTreeMap<String, Vec<String>>>,
}

/// The real adapter.
pub struct SocketLaunchers {
    node: String,
    pods_dir: PathBuf,
    notify_server: PathBuf,
    mounts: Arc<dyn NodeMounts>,
    network: Arc<dyn NetworkCommands>,
    settings: Settings,
    held: Mutex<Held>,
}

impl std::fmt::Debug for dyn NodeMounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeMounts")
    }
}

impl std::fmt::Debug for SocketLaunchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketLaunchers")
            .field("node", &self.node)
            .field("pods_dir", &self.pods_dir)
            .finish_non_exhaustive()
    }
}

impl SocketLaunchers {
    /// Launchers of `node`, whose pods are under `pods_dir`; their events go to `notify_server`,
    /// their containerDisk images are mounted through `mounts` and their pod network is wired
    /// with `network`.
    #[must_use]
    pub fn new(
        node: &str,
        pods_dir: &Path,
        notify_server: &Path,
        mounts: Arc<dyn NodeMounts>,
        network: Arc<dyn NetworkCommands>,
        settings: Settings,
    ) -> Self {
        Self {
            node: node.to_owned(),
            pods_dir: pods_dir.to_owned(),
            notify_server: notify_server.to_owned(),
            mounts,
            network,
            settings,
            held: Mutex::default(),
        }
    }

    /// A sync request for `vmi`: the VMI and what the launcher is told of the cluster's
    /// configuration as it is now.
    fn sync_request(&self, vmi: &VirtualMachineInstance) -> Result<VmiRequest, LauncherError> {
        let config = self.settings.borrow().clone().unwrap_or_default();
        Ok(VmiRequest {
            options: Some(crate::cluster_settings::launcher_options(&config)),
            ..vmi_request(vmi)?
        })
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Places the notify pipe of the pod that owns `socket`, once; an unprivileged launcher
    /// (`runtime_user` not 0) owns it.
    fn ensure_pipe(&self, socket: &Path, runtime_user: u32) {
        let Some(dir) = socket.parent() else { return };
        let Some(pipe) = sockets::notify_pipe_on_host(dir) else {
            return;
        };
        let mut held = self.held();
        if held.pipes.contains_key(socket) {
            return;
        }
        let owner = (runtime_user != 0).then_some(runtime_user);
        match NotifyPipe::start(&pipe, &self.notify_server, owner) {
            Ok(started) => {
                held.pipes.insert(socket.to_owned(), started);
            }
            Err(error) => warn!(pipe = %pipe.display(), error = %error, "cannot place the notify pipe"),
        }
    }

    async fn client(&self, socket: &Path) -> Result<CmdClient, LauncherError> {
        if let Some(client) = self.held().clients.get(socket) {
            return Ok(client.clone());
        }
        let client = CmdClient::connect(socket).await?;
        self.held().clients.insert(socket.to_owned(), client.clone());
        Ok(client)
    }

    /// The VMI's pods on this node, by UID.
    fn pods_here<'a>(&'a self, vmi: &'a VirtualMachineInstance) -> impl Iterator<Item = &'a str> {
        vmi.status
            .iter()
            .flat_map(|s| s.active_pods.iter())
            .filter(|(_, node)| **node == self.node)
            .map(|(pod, _)| pod.as_str())
    }

    /// The UID of the VMI's pod that owns `socket`.
    fn pod_of<'a>(&'a self, socket: &Path, vmi: &'a VirtualMachineInstance) -> Result<&'a str, LauncherError> {
        self.pods_here(vmi)
            .find(|pod| socket.starts_with(sockets::socket_dir_on_host(&self.pods_dir, pod)))
            .ok_or_else(|| LauncherError::Invalid {
                socket: socket.to_owned(),
                what: "pod",
                message: "the socket belongs to none of the VMI's active pods on this node".to_owned(),
            })
    }

    /// The launcher process serving `socket`, checked to run in the VMI's pod that owns the
    /// socket and held for as long as the value lives ([`PodProcess`]).
    async fn launcher_process(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<PodProcess, LauncherError> {
        let pod = self.pod_of(socket, vmi)?;
        let pid = crate::network_wiring::launcher_pid(socket).await?;
        PodProcess::open(Path::new("/proc"), pid, pod).map_err(|source| LauncherError::NotThePods {
            socket: socket.to_owned(),
            source,
        })
    }

    /// The VMI's private directory in the pod that owns `socket`.
    fn private_dir(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Option<PathBuf> {
        let uid = vmi.metadata.uid.as_deref()?;
        let pod = self.pod_of(socket, vmi).ok()?;
        Some(sockets::vmi_private_dir_on_host(&self.pods_dir, pod, uid))
    }

    /// Mounts the VMI's containerDisk and kernel-boot images into the pod that owns `socket`,
    /// before the launcher's first Sync ([`crate::container_disks`]).
    async fn provide_container_disks(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        if container_disks::images(vmi)?.is_empty() || self.held().disks_provided.contains(socket) {
            return Ok(());
        }
        let pod = self.pod_of(socket, vmi)?.to_owned();
        let dir = sockets::container_disk_dir_on_host(&self.pods_dir, &pod);
        let (mounts, vmi) = (self.mounts.clone(), vmi.clone());
        tokio::task::spawn_blocking(move || {
            container_disks::provide(mounts.as_ref(), Path::new("/proc"), &dir, &pod, &vmi)
        })
        .await
        .map_err(|_| LauncherError::Interrupted("mounting the containerDisk images"))??;
        self.held().disks_provided.insert(socket.to_owned());
        Ok(())
    }

    /// Prepares the launcher's pod once, before its first Sync: makes the missing `DiskOrCreate`
    /// and filesystem-claim images ([`crate::host_disks`]) for any launcher, and gives an
    /// unprivileged launcher (the VMI's runtime user is not root) its devices, its block claims
    /// ([`crate::device_ownership`]) and those images.
    async fn prepare_launcher(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        if self.held().prepared.contains(socket) {
            return Ok(());
        }
        let unprivileged = vmi.is_non_root();
        if !unprivileged && !crate::host_disks::may_make_images(vmi) {
            // A root launcher with no image to make needs nothing of the handler.
            self.held().prepared.insert(socket.to_owned());
            return Ok(());
        }
        let launcher = self.launcher_process(socket, vmi).await?;
        let owner = vmi.runtime_user();
        let for_launcher = vmi.clone();
        let (devices, block_volumes, images) = tokio::task::spawn_blocking(move || {
            let root = launcher.root();
            let (devices, block_volumes) = if unprivileged {
                (
                    crate::device_ownership::claim_launcher_devices(&root, owner)?,
                    crate::device_ownership::claim_block_volumes(&root, &for_launcher, owner)?,
                )
            } else {
                (Vec::new(), Vec::new())
            };
            let images = crate::host_disks::prepare(&root, &for_launcher, owner)?;
            Ok::<_, LauncherError>((devices, block_volumes, images))
        })
        .await
        .map_err(|_| LauncherError::Interrupted("preparing the launcher's pod"))??;
        tracing::info!(vmi = %vmi.key(), owner, ?devices, ?block_volumes, images = ?images.images, "the launcher's pod is prepared");
        let mut held = self.held();
        held.prepared.insert(socket.to_owned());
        if !images.tolerated.is_empty() {
            held.notices
                .entry(socket.to_owned())
                .or_default()
                .extend(images.tolerated);
        }
        Ok(())
    }

    /// Runs `call` on the socket's client; a failure drops the client so the next call reconnects.
    async fn with_client<T, F>(&self, socket: &Path, call: impl FnOnce(CmdClient) -> F) -> Result<T, LauncherError>
    where
        F: Future<Output = Result<T, cmd_protocol::transport::TransportError>>,
    {
        let client = self.client(socket).await?;
        let outcome = call(client).await;
        if outcome.is_err() {
            self.held().clients.remove(socket);
        }
        Ok(outcome?)
    }
}

/// The command request for `vmi`, without options (all but the syncs).
pub fn vmi_request(vmi: &VirtualMachineInstance) -> Result<VmiRequest, LauncherError> {
    Ok(VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(vmi)?,
        }),
        options: None,
    })
}

fn parse<T: serde::de::DeserializeOwned>(
    socket: &Path,
    what: &'static str,
    json: Option<String>,
) -> Result<Option<T>, LauncherError> {
    json.map(|text| {
        serde_json::from_str(&text).map_err(|e| LauncherError::Invalid {
            socket: socket.to_owned(),
            what,
            message: e.to_string(),
        })
    })
    .transpose()
}

impl Launchers for SocketLaunchers {
    fn locate(&self, vmi: &VirtualMachineInstance) -> Presence {
        let active_pods = vmi.status.as_ref().map(|s| &s.active_pods);
        let pods = active_pods
            .into_iter()
            .flatten()
            .map(|(pod, node)| (pod.as_str(), node.as_str()));
        match sockets::find_socket_on_host(&self.pods_dir, pods, &self.node) {
            Ok(socket) => {
                self.ensure_pipe(&socket, vmi.runtime_user());
                Presence::Ready(socket)
            }
            Err(FindSocketError::NotReady(_) | FindSocketError::Multiple { .. }) => Presence::Starting,
            Err(FindSocketError::NotFound { .. }) => {
                let has_pod_here = active_pods
                    .into_iter()
                    .flatten()
                    .any(|(pod, node)| *node == self.node && sockets::socket_dir_on_host(&self.pods_dir, pod).exists());
                if has_pod_here {
                    Presence::Starting
                } else {
                    Presence::Absent
                }
            }
        }
    }

    async fn ping(&self, socket: &Path) -> Result<(), LauncherError> {
        self.with_client(socket, async |mut c| c.ping().await).await
    }

    fn is_pod_network_wired(&self, socket: &Path, vmi: &VirtualMachineInstance) -> bool {
        if self.held().wired.contains(socket) {
            return true;
        }
        // A restarted handler finds the marker the first wiring left in the pod.
        let marked = vmi.metadata.uid.as_deref().is_some_and(|uid| {
            self.pod_of(socket, vmi).is_ok_and(|pod| {
                sockets::vmi_private_dir_on_host(&self.pods_dir, pod, uid)
                    .join(sockets::POD_NETWORK_READY)
                    .exists()
            })
        });
        if marked {
            self.held().wired.insert(socket.to_owned());
        }
        marked
    }

    async fn wire_pod_network(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let uid = vmi.metadata.uid.as_deref().ok_or_else(|| LauncherError::Invalid {
            socket: socket.to_owned(),
            what: "VMI",
            message: "the VMI has no UID".to_owned(),
        })?;
        let private = sockets::vmi_private_dir_on_host(&self.pods_dir, self.pod_of(socket, vmi)?, uid);
        let launcher = self.launcher_process(socket, vmi).await?;
        let (network, vmi) = (self.network.clone(), vmi.clone());
        tokio::task::spawn_blocking(move || {
            crate::network_wiring::wire(network.as_ref(), &launcher.net_namespace(), &private, &vmi)
        })
        .await
        .map_err(|_| LauncherError::Network(crate::network_wiring::WireError::Interrupted))??;
        self.held().wired.insert(socket.to_owned());
        Ok(())
    }

    async fn sync(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.prepare_launcher(socket, vmi).await?;
        self.provide_container_disks(socket, vmi).await?;
        let request = self.sync_request(vmi)?;
        self.with_client(socket, async |mut c| c.sync(request).await).await
    }

    async fn shutdown(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let request = vmi_request(vmi)?;
        self.with_client(socket, async |mut c| c.shutdown(request).await).await
    }

    async fn kill(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let request = vmi_request(vmi)?;
        self.with_client(socket, async |mut c| c.kill(request).await).await
    }

    async fn pause(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let request = vmi_request(vmi)?;
        self.with_client(socket, async |mut c| c.pause(request).await).await
    }

    async fn unpause(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let request = vmi_request(vmi)?;
        self.with_client(socket, async |mut c| c.unpause(request).await).await
    }

    async fn delete(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let request = vmi_request(vmi)?;
        self.with_client(socket, async |mut c| c.delete(request).await).await
    }

    async fn domain(&self, socket: &Path) -> Result<Option<DomainSnapshot>, LauncherError> {
        let json = self.with_client(socket, async |mut c| c.domain().await).await?;
        parse(socket, "domain", json)
    }

    async fn stats(&self, socket: &Path) -> Result<Option<DomainStats>, LauncherError> {
        let json = self.with_client(socket, async |mut c| c.domain_stats().await).await?;
        parse(socket, "domain stats", json)
    }

    fn mark_unresponsive(&self, socket: &Path) {
        if let Err(error) = sockets::mark_unresponsive(socket) {
            warn!(socket = %socket.display(), error = %error, "cannot mark the launcher unresponsive");
        }
        self.forget(socket);
    }

    fn is_unresponsive(&self, socket: &Path) -> bool {
        sockets::is_unresponsive(socket)
    }

    fn forget(&self, socket: &Path) {
        let mut held = self.held();
        held.clients.remove(socket);
        held.pipes.remove(socket);
        held.wired.remove(socket);
        held.disks_provided.remove(socket);
        held.prepared.remove(socket);
        held.notices.remove(socket);
        held.pod_addresses.remove(socket);
    }

    fn take_notices(&self, socket: &Path) -> Vec<String> {
        self.held().notices.remove(socket).unwrap_or_default()
    }

    async fn release_volumes(&self, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let dirs: Vec<PathBuf> = self
            .pods_here(vmi)
            .map(|pod| sockets::container_disk_dir_on_host(&self.pods_dir, pod))
            .collect();
        let mounts = self.mounts.clone();
        tokio::task::spawn_blocking(move || {
            dirs.iter()
                .try_for_each(|dir| container_disks::release(mounts.as_ref(), dir))
        })
        .await
        .map_err(|_| LauncherError::Interrupted("unmounting the containerDisk images"))??;
        Ok(())
    }

    fn pod_addresses(&self, socket: &Path, vmi: &VirtualMachineInstance) -> BTreeMap<String, Vec<String>> {
        if let Some(known) = self.held().pod_addresses.get(socket) {
            return known.clone();
        }
        let Some(private) = self.private_dir(socket, vmi) else {
            return BTreeMap::new();
        };
        let addresses = crate::network_wiring::cached_pod_addresses(&private, vmi);
        if !addresses.is_empty() {
            self.held().pod_addresses.insert(socket.to_owned(), addresses.clone());
        }
        addresses
    }

    async fn sync_migration_target(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.prepare_launcher(socket, vmi).await?;
        self.provide_container_disks(socket, vmi).await?;
        let request = self.sync_request(vmi)?;
        self.with_client(socket, async |mut c| c.sync_migration_target(request).await)
            .await
    }

    async fn migrate(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
    ) -> Result<(), LauncherError> {
        let request = MigrationRequest {
            vmi: vmi_request(vmi)?.vmi,
            options: serde_json::to_vec(options)?,
        };
        self.with_client(socket, async |mut c| c.migrate(request).await).await
    }

    async fn cancel_migration(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let request = vmi_request(vmi)?;
        self.with_client(socket, async |mut c| c.cancel_migration(request).await)
            .await
    }

    fn migration_paths(&self, socket: &Path) -> MigrationPaths {
        MigrationPaths::of_socket(socket)
    }
}
