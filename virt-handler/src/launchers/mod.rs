//! The launchers of this node behind one trait: where a VMI's launcher is, and the commands
//! virt-handler sends it. [`SocketLaunchers`] speaks the command protocol over each pod's unix
//! socket; `FakeLaunchers` (feature `testing`) simulates launchers in memory for benchmarks and
//! tests.

#[cfg(any(test, feature = "testing"))]
mod fake;
mod notify_pipe;
mod socket;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};

use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::migration::MigrationOptions;
use cmd_protocol::stats::DomainStats;
#[cfg(any(test, feature = "testing"))]
pub use fake::FakeLaunchers;
use kubevirt_api::v1::VirtualMachineInstance;
pub use notify_pipe::NotifyPipe;
pub use socket::SocketLaunchers;

/// Where a VMI's launcher stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Presence {
    /// It serves commands on this socket.
    Ready(PathBuf),
    /// Its pod is there, but it does not serve commands yet.
    Starting,
    /// Nothing of it is on this node.
    Absent,
}

/// Why a command to a launcher failed.
#[derive(Debug, thiserror::Error)]
pub enum LauncherError {
    /// The transport or the launcher failed.
    #[error(transparent)]
    Transport(#[from] cmd_protocol::transport::TransportError),
    /// The launcher's answer is not what the protocol says.
    #[error("the launcher at {socket} sent an invalid {what}: {message}")]
    Invalid {
        /// The socket.
        socket: PathBuf,
        /// What was invalid.
        what: &'static str,
        /// Why.
        message: String,
    },
    /// The VMI could not be encoded.
    #[error("cannot encode the VMI: {0}")]
    Encode(#[from] serde_json::Error),
    /// The pod network could not be wired.
    #[error(transparent)]
    Network(#[from] crate::network_wiring::WireError),
    /// The containerDisk or kernel-boot images could not be mounted for the launcher.
    #[error(transparent)]
    ContainerDisk(#[from] crate::container_disks::ProvideError),
    /// An unprivileged launcher's devices could not be given to it.
    #[error(transparent)]
    Devices(#[from] crate::device_ownership::DeviceOwnershipError),
    /// The process behind the launcher's socket does not run in the launcher's pod.
    #[error("the process behind {socket} cannot be trusted: {source}")]
    NotThePods {
        /// The command socket.
        socket: PathBuf,
        /// Why.
        source: crate::pod_process::PodProcessError,
    },
    /// An unprivileged launcher's hostDisk images could not be made ready.
    #[error(transparent)]
    HostDisk(#[from] crate::host_disks::HostDiskError),
    /// The images could not be unmounted from the launcher's pod.
    #[error(transparent)]
    Unmount(#[from] crate::node_mounts::MountError),
    /// Blocking work was cancelled or panicked.
    #[error("{0} was interrupted")]
    Interrupted(&'static str),
    /// A simulated launcher is gone.
    #[error("no launcher at {0}")]
    Gone(PathBuf),
}

impl LauncherError {
    /// Whether the launcher's socket cannot be reached at all. Only that counts towards an
    /// unresponsive launcher, as upstream's test is a failed dial: a call that reached the
    /// launcher and failed or timed out says it is there, if slow (a node busy starting many VMs).
    #[must_use]
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            Self::Transport(cmd_protocol::transport::TransportError::Connect { .. })
                | Self::Network(crate::network_wiring::WireError::LauncherPid { .. })
                | Self::Gone(_)
        )
    }

    /// Whether the launcher's pod is still starting (a sidecar has not started yet): not a
    /// failure, try again shortly.
    #[must_use]
    pub fn is_still_starting(&self) -> bool {
        matches!(
            self,
            Self::ContainerDisk(crate::container_disks::ProvideError::NotStarted { .. })
        )
    }
}

/// The commands virt-handler sends to launchers.
pub trait Launchers: Send + Sync + 'static {
    /// Finds `vmi`'s launcher on this node.
    fn locate(&self, vmi: &VirtualMachineInstance) -> Presence;
    /// Health check.
    fn ping(&self, socket: &Path) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Whether phase 1 of `vmi`'s pod network is done in the pod that owns `socket`.
    fn is_pod_network_wired(&self, socket: &Path, vmi: &VirtualMachineInstance) -> bool;
    /// Wires `vmi`'s pod network in the pod that owns `socket` (phase 1, [`crate::network_wiring`]).
    fn wire_pod_network(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Defines and starts the domain if needed (idempotent).
    fn sync(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Presses the ACPI power button.
    fn shutdown(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Stops the guest at once.
    fn kill(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Pauses the guest.
    fn pause(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Resumes the paused guest.
    fn unpause(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Undefines the stopped domain.
    fn delete(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// The domain, or `None` when there is none.
    fn domain(&self, socket: &Path) -> impl Future<Output = Result<Option<DomainSnapshot>, LauncherError>> + Send;
    /// The domain's counters, or `None` when there is no domain.
    fn stats(&self, socket: &Path) -> impl Future<Output = Result<Option<DomainStats>, LauncherError>> + Send;
    /// Marks the launcher behind `socket` unresponsive, so it stays so across handler restarts.
    fn mark_unresponsive(&self, socket: &Path);
    /// Whether the launcher behind `socket` was marked unresponsive or its socket is gone.
    fn is_unresponsive(&self, socket: &Path) -> bool;
    /// Releases what the handler holds for the launcher (client connection, notify pipe).
    fn forget(&self, socket: &Path);
    /// What preparing the launcher's pod had to say since last asked, for Normal
    /// `ToleratedSmallPV` events: a claim's image made smaller than asked, within the toleration.
    fn take_notices(&self, socket: &Path) -> Vec<String>;
    /// Removes what the handler mounted into `vmi`'s launcher pods on this node (containerDisk
    /// and kernel-boot images), so that the kubelet can remove the pods' volumes.
    fn release_volumes(&self, vmi: &VirtualMachineInstance) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// The pod's addresses behind each of `vmi`'s interfaces on the pod network, by interface
    /// name, as observed when the pod network was wired; empty where nothing was wired.
    fn pod_addresses(&self, socket: &Path, vmi: &VirtualMachineInstance) -> BTreeMap<String, Vec<String>>;
    /// Target side: prepares the pod as for a sync (devices, images) and sends
    /// `SyncMigrationTarget`.
    fn sync_migration_target(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Source side: `MigrateVirtualMachine` with `options`.
    fn migrate(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Source side: `CancelVirtualMachineMigration`.
    fn cancel_migration(
        &self,
        socket: &Path,
        vmi: &VirtualMachineInstance,
    ) -> impl Future<Output = Result<(), LauncherError>> + Send;
    /// Where, on the node, the pod that owns `socket` keeps what a migration goes through.
    fn migration_paths(&self, socket: &Path) -> MigrationPaths;
}

/// A launcher pod's directories as a migration uses them, on the node: everything below the
/// pod's volumes directory is the pod's to change, so it is reached only through
/// [`crate::pod_socket::PodSocket`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationPaths {
    /// The pod's volumes directory, which the kubelet makes (`…/volumes/kubernetes.io~empty-dir`).
    pub root: PathBuf,
    /// The pod's share directory (its `/var/run/kubevirt`) below `root`: the migration sockets
    /// go under it.
    pub share_dir: PathBuf,
    /// The socket of the pod's libvirt daemon, below `root`.
    pub libvirt_socket: PathBuf,
}

impl MigrationPaths {
    /// The paths of the pod whose command socket is `socket`
    /// (`<pod volumes>/kubernetes.io~empty-dir/sockets/launcher-sock`).
    #[must_use]
    pub fn of_socket(socket: &Path) -> Self {
        let volumes = socket.parent().and_then(Path::parent).unwrap_or(Path::new("/"));
        Self {
            root: volumes.to_owned(),
            share_dir: PathBuf::from("public"),
            libvirt_socket: cmd_protocol::migration::libvirt_socket(Path::new("private")),
        }
    }

    /// The socket of the VMI `uid`'s `channel` in the share directory.
    #[must_use]
    pub fn channel_socket(&self, uid: &str, channel: cmd_protocol::migration::Channel) -> crate::pod_socket::PodSocket {
        crate::pod_socket::PodSocket::new(
            &self.root,
            cmd_protocol::migration::socket_path(&self.share_dir, uid, channel),
        )
    }

    /// The pod's libvirt socket.
    #[must_use]
    pub fn libvirt(&self) -> crate::pod_socket::PodSocket {
        crate::pod_socket::PodSocket::new(&self.root, &self.libvirt_socket)
    }
}
