//! The launcher's runtime directory: everything one local run creates lives under it, so cleanup
//! is one `remove_dir_all`.
//!
//! ```text
//! <root>/<uid>/p/      private: <uid>/virt-serial0, virt-vnc, config ISOs   (PathLayout::private_dir)
//! <root>/<uid>/e/      ephemeral: disk-data/<volume>/disk.qcow2, cloud-init-data/...
//! <root>/<uid>/c/      container disks: disk_<i>.img and kernel-boot/ (links into the image store)
//! <root>/<uid>/x/      empty disks
//! <root>/<uid>/l/      libvirt: etc/, sock/, libvirtd.log
//! ```
//! Names are one letter because unix socket paths are limited to 107 bytes.

use std::path::{Path, PathBuf};

use crate::domain::PathLayout;
use crate::supervisor::daemons::DaemonPaths;

/// Where runtime directories go when `--runtime-dir` is not given.
pub const DEFAULT_RUNTIME_ROOT: &str = "/run/kubevirt-rs";
/// The longest path a unix socket can have.
const MAX_SOCKET_PATH: usize = 107;

/// Why the runtime directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeDirError {
    /// It could not be created.
    #[error("cannot create the runtime directory {path}")]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Socket paths under it would be too long.
    #[error(
        "runtime directory {path} is too deep: socket paths under it would exceed {MAX_SOCKET_PATH} bytes; use a shorter --runtime-dir"
    )]
    TooDeep {
        /// The directory.
        path: PathBuf,
    },
}

/// One run's runtime directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeDir {
    path: PathBuf,
    uid: String,
}

impl RuntimeDir {
    /// `<root>/<uid>`; nothing is created yet.
    pub fn new(root: &Path, uid: &str) -> Result<Self, RuntimeDirError> {
        let dir = Self {
            path: root.join(uid),
            uid: uid.to_owned(),
        };
        let serial = format!("{}/{uid}/virt-serial0", dir.layout().private_dir);
        if serial.len() > MAX_SOCKET_PATH {
            return Err(RuntimeDirError::TooDeep { path: dir.path });
        }
        Ok(dir)
    }

    /// Creates the directory tree.
    pub fn create(&self) -> Result<(), RuntimeDirError> {
        let layout = self.layout();
        for dir in [
            PathBuf::from(layout.vmi_private_dir(&self.uid)),
            PathBuf::from(&layout.ephemeral_disk_dir),
            PathBuf::from(&layout.container_disk_dir).join("kernel-boot"),
            PathBuf::from(&layout.empty_disk_dir),
            self.path.join("l"),
        ] {
            std::fs::create_dir_all(&dir).map_err(|source| RuntimeDirError::Create { path: dir, source })?;
        }
        Ok(())
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Paths the domain refers to.
    #[must_use]
    pub fn layout(&self) -> PathLayout {
        let under = |name: &str| self.path.join(name).to_string_lossy().into_owned();
        PathLayout {
            private_dir: under("p"),
            ephemeral_disk_dir: under("e"),
            container_disk_dir: under("c"),
            empty_disk_dir: under("x"),
            host_disks_in_place: true,
            ..PathLayout::default()
        }
    }

    /// Paths of the libvirt daemons.
    #[must_use]
    pub fn daemon_paths(&self) -> DaemonPaths {
        DaemonPaths::new(self.path.join("l"))
    }

    /// The serial console socket.
    #[must_use]
    pub fn serial_socket(&self) -> PathBuf {
        PathBuf::from(self.layout().vmi_private_dir(&self.uid)).join("virt-serial0")
    }

    /// The serial console's log.
    #[must_use]
    pub fn serial_console_log(&self) -> PathBuf {
        PathBuf::from(self.layout().serial_console_log(&self.uid))
    }

    /// Removes everything; a directory that is already gone is fine.
    pub fn remove(&self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "3d5a1b7e-1f0e-4c57-9a55-0d1f3e9c2b11";

    #[test]
    fn the_default_root_leaves_room_for_socket_paths() {
        let dir = RuntimeDir::new(Path::new(DEFAULT_RUNTIME_ROOT), UID).expect("short enough");
        assert!(dir.serial_socket().to_string_lossy().len() <= MAX_SOCKET_PATH);
        assert_eq!(
            dir.layout().overlay("root"),
            format!("/run/kubevirt-rs/{UID}/e/disk-data/root/disk.qcow2")
        );
    }

    #[test]
    fn a_deep_root_is_refused_with_a_clear_error() {
        let deep = Path::new("/tmp").join("a".repeat(60));
        let err = RuntimeDir::new(&deep, UID).expect_err("too deep");
        assert!(err.to_string().contains("use a shorter --runtime-dir"), "{err}");
    }
}
