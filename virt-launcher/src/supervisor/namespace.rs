//! A private mount namespace for the launcher's own libvirt.
//!
//! Debian 12 has only the monolithic libvirtd, which keeps its state in fixed paths under
//! `/run/libvirt`, `/var/lib/libvirt` and `/var/log/libvirt`. A second daemon beside the system's
//! needs its own view of those (docs/dependencies.md, "A private libvirtd needs its own mount
//! namespace"): the launcher unshares its mount namespace, puts tmpfs over them, and bind-mounts
//! its own configuration over `/etc/libvirt` and a persistent capabilities cache over
//! `/var/cache/libvirt`. The daemons it starts inherit that view; nothing outside the launcher
//! sees it, and it disappears with the launcher.

use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};

/// Directories that get a fresh tmpfs.
pub const PRIVATE_STATE_DIRS: [&str; 3] = ["/run/libvirt", "/var/lib/libvirt", "/var/log/libvirt"];
/// Where libvirt keeps its QEMU capabilities cache.
pub const LIBVIRT_CACHE_DIR: &str = "/var/cache/libvirt";
/// Where libvirt reads its configuration.
pub const LIBVIRT_CONFIG_DIR: &str = "/etc/libvirt";

/// Why the namespace could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    /// `unshare(CLONE_NEWNS)` failed: not root, or called after threads were started.
    #[error("cannot create a private mount namespace (virt-launcher run needs root, CAP_SYS_ADMIN)")]
    Unshare(#[source] nix::Error),
    /// A mount failed.
    #[error("cannot mount {what} on {target}")]
    Mount {
        /// What was mounted.
        what: String,
        /// Where.
        target: PathBuf,
        /// Why.
        source: nix::Error,
    },
    /// A directory could not be created.
    #[error("cannot create {path}")]
    Create {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

fn create(path: &Path) -> Result<(), NamespaceError> {
    std::fs::create_dir_all(path).map_err(|source| NamespaceError::Create {
        path: path.to_owned(),
        source,
    })
}

fn bind(source: &Path, target: &Path) -> Result<(), NamespaceError> {
    create(target)?;
    mount(Some(source), target, None::<&str>, MsFlags::MS_BIND, None::<&str>).map_err(|e| NamespaceError::Mount {
        what: source.display().to_string(),
        target: target.to_owned(),
        source: e,
    })
}

/// Moves this process into a private mount namespace with libvirt's directories replaced.
///
/// Must run while the process is single-threaded: unsharing the mount namespace also unshares
/// file-system attributes, which the kernel refuses for a multi-threaded process.
pub fn enter_private_libvirt_namespace(config_dir: &Path, cache_dir: &Path) -> Result<(), NamespaceError> {
    unshare(CloneFlags::CLONE_NEWNS).map_err(NamespaceError::Unshare)?;
    let root = Path::new("/");
    mount(
        None::<&str>,
        root,
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| NamespaceError::Mount {
        what: "private propagation".to_owned(),
        target: root.to_owned(),
        source: e,
    })?;
    for dir in PRIVATE_STATE_DIRS {
        let target = Path::new(dir);
        create(target)?;
        mount(
            Some("tmpfs"),
            target,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=0755"),
        )
        .map_err(|e| NamespaceError::Mount {
            what: "tmpfs".to_owned(),
            target: target.to_owned(),
            source: e,
        })?;
    }
    create(cache_dir)?;
    bind(cache_dir, Path::new(LIBVIRT_CACHE_DIR))?;
    bind(config_dir, Path::new(LIBVIRT_CONFIG_DIR))?;
    for dir in ["/var/lib/libvirt/qemu", "/var/log/libvirt/qemu", "/run/libvirt/qemu"] {
        create(Path::new(dir))?;
    }
    Ok(())
}

/// In a container of its own (a launcher pod) the launcher's view of libvirt's directories is
/// already private, and creating a mount namespace would need `CAP_SYS_ADMIN` and a runtime profile
/// that allows mounts. There the configuration is copied into libvirt's own directory and the
/// persistent cache is reached through a link at libvirt's cache path.
pub fn adopt_container_libvirt(config_dir: &Path, cache_dir: &Path) -> Result<(), NamespaceError> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| NamespaceError::Create { path, source }
    };
    let target = Path::new(LIBVIRT_CONFIG_DIR);
    create(target)?;
    for entry in std::fs::read_dir(config_dir).map_err(io(config_dir))? {
        let entry = entry.map_err(io(config_dir))?;
        std::fs::copy(entry.path(), target.join(entry.file_name())).map_err(io(target))?;
    }
    create(cache_dir)?;
    let libvirt_cache = Path::new(LIBVIRT_CACHE_DIR);
    let same = std::fs::canonicalize(cache_dir).ok() == std::fs::canonicalize(libvirt_cache).ok();
    if !same {
        let empty = std::fs::read_dir(libvirt_cache).map_or(true, |mut d| d.next().is_none());
        if !empty {
            // Something else already lives there: leave it, libvirt probes into it.
            return finish_state_dirs();
        }
        let _ = std::fs::remove_dir(libvirt_cache);
        let _ = std::fs::remove_file(libvirt_cache);
        std::os::unix::fs::symlink(cache_dir, libvirt_cache).map_err(io(libvirt_cache))?;
    }
    finish_state_dirs()
}

fn finish_state_dirs() -> Result<(), NamespaceError> {
    for dir in PRIVATE_STATE_DIRS
        .iter()
        .chain(&["/var/lib/libvirt/qemu", "/var/log/libvirt/qemu", "/run/libvirt/qemu"])
    {
        create(Path::new(dir))?;
    }
    Ok(())
}
