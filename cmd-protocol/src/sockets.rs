//! Where the launcher's command socket is and how the handler finds it, with upstream's names.
//!
//! Inside the pod the launcher listens on `/var/run/kubevirt/sockets/launcher-init-sock` and renames
//! it to `launcher-sock` once it serves commands, so the handler never talks to a half-started
//! launcher. The handler sees the pod's `sockets` emptyDir through the kubelet's pods directory.

use std::path::{Path, PathBuf};

/// The socket name while the launcher starts.
pub const INIT_SOCKET: &str = "launcher-init-sock";
/// The socket name once the launcher serves commands.
pub const READY_SOCKET: &str = "launcher-sock";
/// A file next to the socket that marks a launcher which stopped answering.
pub const UNRESPONSIVE_MARKER: &str = "launcher-unresponsive";
/// The socket directory inside the launcher pod.
pub const SOCKET_DIR_IN_POD: &str = "/var/run/kubevirt/sockets";
/// Where the launcher sends domain events, inside its pod.
pub const NOTIFY_SOCKET_IN_POD: &str = "/var/run/kubevirt/domain-notify-pipe.sock";
/// The notify socket's file name in the launcher pod's share directory.
pub const NOTIFY_PIPE: &str = "domain-notify-pipe.sock";
/// The handler's own notify server socket, in its share directory.
pub const HANDLER_NOTIFY_SOCKET: &str = "domain-notify.sock";
/// The guest's serial console socket, in the VMI's private directory (`<private>/<uid>/`).
pub const SERIAL_SOCKET: &str = "virt-serial0";
/// What virt-handler observed of the pod interface before wiring the pod network, in the VMI's
/// private directory; the launcher plans its DHCP lease from it.
pub const POD_INTERFACE_CACHE: &str = "pod-interface.json";
/// Written by virt-handler once the pod network is wired, beside [`POD_INTERFACE_CACHE`].
pub const POD_NETWORK_READY: &str = "pod-network-ready";
/// The longest path `connect(2)` takes in a `sockaddr_un`, less its NUL.
const SUN_PATH_MAX: usize = 107;

/// The guest's serial socket as the handler sees it:
/// `<pods>/<podUID>/volumes/kubernetes.io~empty-dir/private/<vmiUID>/virt-serial0`.
#[must_use]
pub fn serial_socket_on_host(pods_dir: &Path, pod_uid: &str, vmi_uid: &str) -> PathBuf {
    vmi_private_dir_on_host(pods_dir, pod_uid, vmi_uid).join(SERIAL_SOCKET)
}

/// The VMI's private directory as the handler sees it:
/// `<pods>/<podUID>/volumes/kubernetes.io~empty-dir/private/<vmiUID>`.
#[must_use]
pub fn vmi_private_dir_on_host(pods_dir: &Path, pod_uid: &str, vmi_uid: &str) -> PathBuf {
    pods_dir
        .join(pod_uid)
        .join("volumes/kubernetes.io~empty-dir/private")
        .join(vmi_uid)
}

/// The address to `connect(2)` or `bind(2)` for the unix socket at `path`, however long. The
/// kubelet's pod paths are longer than a `sockaddr_un` holds, so a long path is reached through
/// its directory, opened first, as `/proc/self/fd/<fd>/<name>`; keep the returned directory open
/// until connected or bound.
fn short_address(path: &Path) -> std::io::Result<(Option<std::fs::File>, PathBuf)> {
    if path.as_os_str().len() <= SUN_PATH_MAX {
        return Ok((None, path.to_owned()));
    }
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a socket path needs a directory and a name",
        ));
    };
    let dir = std::fs::File::open(dir)?;
    let short = PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&dir))).join(name);
    Ok((Some(dir), short))
}

/// Connects to the unix socket at `path`, however long ([`short_address`]).
pub async fn connect_unix(path: &Path) -> std::io::Result<tokio::net::UnixStream> {
    let (dir, short) = short_address(path)?;
    let stream = tokio::net::UnixStream::connect(&short).await;
    drop(dir);
    stream
}

/// The mode of every socket the launcher and virt-handler listen on: only their owner (and
/// root, which virt-handler is) may connect.
pub const SOCKET_MODE: u32 = 0o600;

/// Listens on a unix socket at `path`, however long, with [`SOCKET_MODE`]; the caller removes a
/// stale socket first. Needs a tokio runtime.
///
/// Both the bind and the mode go through the directory, opened first (as `/proc/self/fd/<fd>/<name>`
/// and `fchmodat`), and the mode never follows a symlink: in a directory others can write (a
/// pod's share directory), a socket swapped for a link between the two calls makes the bind fail,
/// and never changes the mode of what the link points at.
pub fn bind_unix(path: &Path) -> std::io::Result<tokio::net::UnixListener> {
    bind_unix_for(path, None)
}

/// [`bind_unix`] for a socket that also belongs to `owner` (its uid and gid, an unprivileged
/// launcher's), set through the directory the same way, never through a symlink.
pub fn bind_unix_for(path: &Path, owner: Option<u32>) -> std::io::Result<tokio::net::UnixListener> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "a socket path needs a directory and a name",
        ));
    };
    let dir = std::fs::File::open(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    })?;
    bind_unix_in(&dir, name, owner)
}

/// [`bind_unix_for`] for the socket `name` in the directory open as `dir` (however that was
/// reached): bound as `/proc/self/fd/<dir>/<name>`, then opened by name without following a link
/// and checked to be the socket just made (a socket of this process's user with one name), and
/// its mode and owner set through that descriptor. Whoever else can write the directory cannot
/// swap the name for a link, hard or symbolic, to have another file's mode or owner changed.
pub fn bind_unix_in<D: std::os::fd::AsFd + std::os::fd::AsRawFd>(
    dir: &D,
    name: &std::ffi::OsStr,
    owner: Option<u32>,
) -> std::io::Result<tokio::net::UnixListener> {
    let short = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name);
    let listener = tokio::net::UnixListener::bind(&short)?;
    if let Err(error) = give_socket(dir, name, owner) {
        drop(listener);
        // Whatever is at the name now (the socket, or a link put there) goes; a link's target stays.
        let _ = nix::unistd::unlinkat(dir, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
        return Err(error);
    }
    Ok(listener)
}

/// Sets [`SOCKET_MODE`] and `owner` on the socket just bound at `name` in `dir`, through a
/// descriptor of it.
fn give_socket<D: std::os::fd::AsFd>(dir: &D, name: &std::ffi::OsStr, owner: Option<u32>) -> std::io::Result<()> {
    use nix::fcntl::OFlag;
    use nix::sys::stat::{Mode, SFlag};
    let socket = nix::fcntl::openat(
        dir,
        name,
        OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    let stat = nix::sys::stat::fstat(&socket)?;
    let is_socket = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFSOCK;
    if !is_socket || stat.st_nlink != 1 || stat.st_uid != nix::unistd::geteuid().as_raw() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "the socket was replaced after it was bound",
        ));
    }
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&socket));
    // Through the descriptor's link: the very inode opened above.
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(SOCKET_MODE))?;
    if let Some(id) = owner {
        nix::unistd::fchownat(
            &socket,
            "",
            Some(nix::unistd::Uid::from_raw(id)),
            Some(nix::unistd::Gid::from_raw(id)),
            nix::fcntl::AtFlags::AT_EMPTY_PATH,
        )?;
    }
    Ok(())
}

/// [`connect_unix`] for blocking code.
pub fn connect_unix_blocking(path: &Path) -> std::io::Result<std::os::unix::net::UnixStream> {
    let (dir, short) = short_address(path)?;
    let stream = std::os::unix::net::UnixStream::connect(&short);
    drop(dir);
    stream
}

/// The pod's `container-disks` emptyDir as the handler sees it, where the containerDisk sidecars
/// serve their sockets and the images are mounted for the launcher:
/// `<pods>/<podUID>/volumes/kubernetes.io~empty-dir/container-disks`.
#[must_use]
pub fn container_disk_dir_on_host(pods_dir: &Path, pod_uid: &str) -> PathBuf {
    pods_dir
        .join(pod_uid)
        .join("volumes/kubernetes.io~empty-dir/container-disks")
}

/// The pod's socket directory as the handler sees it: `<pods>/<podUID>/volumes/kubernetes.io~empty-dir/sockets`.
#[must_use]
pub fn socket_dir_on_host(pods_dir: &Path, pod_uid: &str) -> PathBuf {
    pods_dir.join(pod_uid).join("volumes/kubernetes.io~empty-dir/sockets")
}

/// Why no launcher socket was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FindSocketError {
    /// No active pod of this VMI on this node has a socket.
    #[error("no launcher socket for this VMI on node {node}")]
    NotFound {
        /// This node.
        node: String,
    },
    /// The launcher is still starting (only its init socket exists).
    #[error("the launcher at {0} is not ready yet")]
    NotReady(PathBuf),
    /// More than one active pod on this node has a socket.
    #[error("found multiple launcher sockets for this VMI on node {node}")]
    Multiple {
        /// This node.
        node: String,
    },
}

/// Where the handler puts a launcher's notify pipe: the pod's `public` emptyDir (its
/// `/var/run/kubevirt`), next to the `sockets` emptyDir that holds `socket_dir`.
#[must_use]
pub fn notify_pipe_on_host(socket_dir: &Path) -> Option<PathBuf> {
    Some(socket_dir.parent()?.join("public").join(NOTIFY_PIPE))
}

/// Finds the one ready launcher socket among the VMI's active pods (`status.activePods`: pod UID
/// to node) that run on `node`.
pub fn find_socket_on_host<'a>(
    pods_dir: &Path,
    active_pods: impl IntoIterator<Item = (&'a str, &'a str)>,
    node: &str,
) -> Result<PathBuf, FindSocketError> {
    let mut ready = Vec::new();
    let mut starting = None;
    for (pod_uid, pod_node) in active_pods {
        if pod_node != node {
            continue;
        }
        let dir = socket_dir_on_host(pods_dir, pod_uid);
        if dir.join(READY_SOCKET).exists() {
            ready.push(dir.join(READY_SOCKET));
        } else if dir.join(INIT_SOCKET).exists() {
            starting = Some(dir.join(INIT_SOCKET));
        }
    }
    match (ready.len(), starting) {
        (1, _) => Ok(ready.swap_remove(0)),
        (0, Some(init)) => Err(FindSocketError::NotReady(init)),
        (0, None) => Err(FindSocketError::NotFound { node: node.to_owned() }),
        _ => Err(FindSocketError::Multiple { node: node.to_owned() }),
    }
}

/// A launcher is unresponsive when its socket is gone or it was marked so.
#[must_use]
pub fn is_unresponsive(socket: &Path) -> bool {
    !socket.exists() || socket.with_file_name(UNRESPONSIVE_MARKER).exists()
}

/// Marks the launcher behind `socket` unresponsive.
pub fn mark_unresponsive(socket: &Path) -> std::io::Result<()> {
    std::fs::write(socket.with_file_name(UNRESPONSIVE_MARKER), b"")
}

/// Publishes a started launcher: renames its init socket in `dir` to the ready name.
pub fn mark_ready(dir: &Path) -> std::io::Result<()> {
    std::fs::rename(dir.join(INIT_SOCKET), dir.join(READY_SOCKET))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_with(pods: &Path, uid: &str, socket: &str) {
        let dir = socket_dir_on_host(pods, uid);
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join(socket), b"").expect("socket file");
    }

    #[test]
    fn the_ready_socket_of_the_pod_on_this_node_is_found() {
        let pods = tempfile::tempdir().expect("tempdir");
        pod_with(pods.path(), "a", READY_SOCKET);
        pod_with(pods.path(), "b", READY_SOCKET);
        let found = find_socket_on_host(pods.path(), [("a", "node1"), ("b", "node2")], "node1").expect("found");
        assert_eq!(found, socket_dir_on_host(pods.path(), "a").join(READY_SOCKET));
    }

    #[test]
    fn a_starting_launcher_is_not_ready_and_two_ready_ones_are_ambiguous() {
        let pods = tempfile::tempdir().expect("tempdir");
        pod_with(pods.path(), "a", INIT_SOCKET);
        assert!(matches!(
            find_socket_on_host(pods.path(), [("a", "n")], "n"),
            Err(FindSocketError::NotReady(_))
        ));
        assert!(matches!(
            find_socket_on_host(pods.path(), [("x", "n")], "n"),
            Err(FindSocketError::NotFound { .. })
        ));
        pod_with(pods.path(), "b", READY_SOCKET);
        pod_with(pods.path(), "c", READY_SOCKET);
        assert!(matches!(
            find_socket_on_host(pods.path(), [("b", "n"), ("c", "n")], "n"),
            Err(FindSocketError::Multiple { .. })
        ));
    }

    #[test]
    fn mark_ready_renames_and_unresponsive_is_a_marker_or_a_missing_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(INIT_SOCKET), b"").expect("init socket");
        mark_ready(dir.path()).expect("rename");
        let socket = dir.path().join(READY_SOCKET);
        assert!(socket.exists() && !dir.path().join(INIT_SOCKET).exists());
        assert!(!is_unresponsive(&socket));
        mark_unresponsive(&socket).expect("marker");
        assert!(is_unresponsive(&socket));
        assert!(is_unresponsive(&dir.path().join("gone")));
    }
}

#[cfg(test)]
mod long_path_tests {
    use super::connect_unix;

    #[tokio::test]
    async fn sockets_behind_paths_longer_than_sockaddr_un_are_reached() {
        let root = tempfile::tempdir().expect("tempdir");
        let short = root.path().join("s");
        std::fs::create_dir(&short).expect("dir");
        let listener = tokio::net::UnixListener::bind(short.join("sock")).expect("bind");
        let long_dir = root.path().join("a".repeat(60)).join("b".repeat(60));
        std::fs::create_dir_all(&long_dir).expect("dirs");
        std::os::unix::fs::symlink(&short, long_dir.join("link")).expect("symlink");
        let long = long_dir.join("link").join("sock");
        assert!(long.as_os_str().len() > 108);
        let (client, server) = tokio::join!(connect_unix(&long), listener.accept());
        client.expect("connect through the directory");
        server.expect("accepted");
    }
}
