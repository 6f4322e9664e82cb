//! The launcher's libvirtd before it starts: how it runs (a system daemon as root, a session
//! daemon as any other user), where its files go, and the configuration it reads.

use std::path::{Path, PathBuf};

use super::daemon_error::DaemonError;

/// How the launcher's libvirtd runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DaemonMode {
    /// As root, at libvirt's system paths, which the launcher makes private to itself (its own
    /// mount namespace, or the container it has to itself).
    System,
    /// As the launcher's own unprivileged user: libvirt's session mode, with its configuration,
    /// cache and runtime directories under the launcher's (the `XDG_*` variables) and the QEMU
    /// capabilities cache read from `capabilities_cache`.
    Session {
        /// The persistent capabilities cache (it holds `qemu/capabilities/`).
        capabilities_cache: PathBuf,
        /// `XDG_CONFIG_HOME`: libvirt puts the domain's sockets (the monitor, the guest agent
        /// channel) under it, and a socket path must fit in 108 bytes, so it is a short directory
        /// (the pod's private one, as upstream's).
        config_home: PathBuf,
    },
}

impl DaemonMode {
    /// System mode as root, session mode (with `config_home`) as anyone else.
    #[must_use]
    pub fn for_this_process(capabilities_cache: &Path, config_home: &Path) -> Self {
        if nix::unistd::geteuid().is_root() {
            Self::System
        } else {
            Self::Session {
                capabilities_cache: capabilities_cache.to_owned(),
                config_home: config_home.to_owned(),
            }
        }
    }
}

/// Where the daemons' files are, under the launcher's runtime directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonPaths {
    root: PathBuf,
    mode: DaemonMode,
}

impl DaemonPaths {
    /// A system daemon's paths under `root`.
    #[must_use]
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self::with_mode(root, DaemonMode::System)
    }

    /// Paths under `root` for a daemon running in `mode`.
    #[must_use]
    pub fn with_mode(root: impl Into<PathBuf>, mode: DaemonMode) -> Self {
        Self {
            root: root.into(),
            mode,
        }
    }

    /// How the daemon runs.
    #[must_use]
    pub fn mode(&self) -> &DaemonMode {
        &self.mode
    }

    /// Configuration directory: bind-mounted over (or copied into) `/etc/libvirt` in system mode,
    /// read in place in session mode.
    #[must_use]
    pub fn config_dir(&self) -> PathBuf {
        self.root.join("etc")
    }

    /// A session daemon's `XDG_CONFIG_HOME`, `XDG_CACHE_HOME` and `XDG_RUNTIME_DIR`.
    pub(super) fn xdg_dirs(&self) -> [(&'static str, PathBuf); 3] {
        let config_home = match &self.mode {
            DaemonMode::Session { config_home, .. } => config_home.clone(),
            DaemonMode::System => self.root.join("config"),
        };
        [
            ("XDG_CONFIG_HOME", config_home),
            ("XDG_CACHE_HOME", self.root.join("cache")),
            ("XDG_RUNTIME_DIR", self.root.join("run")),
        ]
    }

    /// Where libvirt's QEMU driver reads qemu.conf.
    fn qemu_conf(&self) -> PathBuf {
        match &self.mode {
            DaemonMode::System => self.config_dir().join("qemu.conf"),
            DaemonMode::Session { config_home, .. } => config_home.join("libvirt/qemu.conf"),
        }
    }

    /// Where libvirt writes each domain's QEMU pid file (`<domain>.pid`).
    #[must_use]
    pub fn qemu_state_dir(&self) -> PathBuf {
        match self.mode {
            DaemonMode::System => PathBuf::from("/run/libvirt/qemu"),
            DaemonMode::Session { .. } => self.root.join("run/libvirt/qemu/run"),
        }
    }

    /// The domain log, where libvirt writes `domain`'s QEMU's stdio (as the launcher sees it: in
    /// system mode inside its mount namespace).
    #[must_use]
    pub fn qemu_log_file(&self, domain: &str) -> PathBuf {
        match self.mode {
            DaemonMode::System => PathBuf::from(format!("/var/log/libvirt/qemu/{domain}.log")),
            DaemonMode::Session { .. } => self.root.join(format!("cache/libvirt/qemu/log/{domain}.log")),
        }
    }

    /// The pid file libvirt writes for `domain`'s QEMU.
    #[must_use]
    pub fn qemu_pid_file(&self, domain: &str) -> PathBuf {
        self.qemu_state_dir().join(format!("{domain}.pid"))
    }

    /// The capabilities cache as the daemon sees it.
    #[must_use]
    pub fn capabilities_cache(&self) -> PathBuf {
        match &self.mode {
            DaemonMode::System => PathBuf::from(super::namespace::LIBVIRT_CACHE_DIR),
            DaemonMode::Session { capabilities_cache, .. } => capabilities_cache.clone(),
        }
    }

    /// The libvirtd.conf the daemon is started with.
    pub(super) fn libvirtd_conf(&self) -> PathBuf {
        match self.mode {
            DaemonMode::System => Path::new(super::namespace::LIBVIRT_CONFIG_DIR).join("libvirtd.conf"),
            DaemonMode::Session { .. } => self.config_dir().join("libvirtd.conf"),
        }
    }

    /// Directory of libvirtd's sockets (outside the tmpfs mounts, so visible to `virsh`).
    #[must_use]
    pub fn socket_dir(&self) -> PathBuf {
        self.root.join("sock")
    }

    /// libvirtd's read-write socket.
    #[must_use]
    pub fn socket(&self) -> PathBuf {
        self.socket_dir().join("libvirt-sock")
    }

    /// The connection URI of the private daemon.
    #[must_use]
    pub fn uri(&self) -> String {
        let driver = match self.mode {
            DaemonMode::System => "system",
            DaemonMode::Session { .. } => "session",
        };
        format!("qemu+unix:///{driver}?socket={}", self.socket().display())
    }

    /// The driver modules libvirtd loads: only the QEMU driver (see [`link_qemu_driver`]).
    #[must_use]
    pub fn driver_dir(&self) -> PathBuf {
        self.root.join("drivers")
    }

    pub(super) fn log(&self, daemon: &str) -> PathBuf {
        self.root.join(format!("{daemon}.log"))
    }

    /// The daemon's pid file. Not the default `/run/<daemon>.pid`: `/run` is shared with the host
    /// and with other launchers, and a second daemon finding that file locked exits at once.
    #[must_use]
    pub fn pid_file(&self, daemon: &str) -> PathBuf {
        self.root.join(format!("{daemon}.pid"))
    }
}

/// Where Debian installs libvirt's connection drivers.
pub const SYSTEM_DRIVER_DIR: &str = "/usr/lib/x86_64-linux-gnu/libvirt/connection-driver";
/// The only driver a launcher's daemon needs.
const QEMU_DRIVER: &str = "libvirt_driver_qemu.so";

/// The driver modules a launcher's libvirtd loads, at their real paths.
#[must_use]
pub fn loaded_drivers() -> Vec<PathBuf> {
    vec![Path::new(SYSTEM_DRIVER_DIR).join(QEMU_DRIVER)]
}

/// Makes libvirtd load only its QEMU driver: a directory with a link to that one module, named by
/// `LIBVIRT_DRIVER_DIR`. The network, storage, node-device, interface, nwfilter and secret drivers
/// (and their libraries) are never loaded, which keeps the daemon small and its start short.
pub fn link_qemu_driver(paths: &DaemonPaths) -> Result<(), DaemonError> {
    let dir = paths.driver_dir();
    let config = |source| DaemonError::Config {
        path: dir.clone(),
        source,
    };
    std::fs::create_dir_all(&dir).map_err(config)?;
    let link = dir.join(QEMU_DRIVER);
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(Path::new(SYSTEM_DRIVER_DIR).join(QEMU_DRIVER), &link).map_err(config)
}

/// Writes libvirtd.conf and qemu.conf.
pub fn write_configs(paths: &DaemonPaths) -> Result<(), DaemonError> {
    link_qemu_driver(paths)?;
    let dir = paths.config_dir();
    let write = |file: &str, text: String| {
        std::fs::write(dir.join(file), text).map_err(|source| DaemonError::Config {
            path: dir.clone(),
            source,
        })
    };
    std::fs::create_dir_all(&dir).map_err(|source| DaemonError::Config {
        path: dir.clone(),
        source,
    })?;
    std::fs::create_dir_all(paths.socket_dir()).map_err(|source| DaemonError::Config {
        path: paths.socket_dir(),
        source,
    })?;
    // One client (this launcher) and one VM: the RPC pools start one thread each instead of five,
    // which saves eleven threads, their stacks and their malloc arenas.
    write(
        "libvirtd.conf",
        format!(
            "# Written by virt-launcher: a private daemon for one VM.\n\
             unix_sock_dir = \"{}\"\nauth_unix_rw = \"none\"\nauth_unix_ro = \"none\"\n\
             unix_sock_rw_perms = \"0700\"\nlog_outputs = \"3:file:{}\"\n\
             min_workers = 1\nmax_workers = 4\nprio_workers = 1\n\
             admin_min_workers = 1\nadmin_max_workers = 1\n",
            paths.socket_dir().display(),
            paths.log("libvirtd").display()
        ),
    )?;
    // No security labels, cgroups or per-domain mount namespaces: the launcher is the sandbox, as
    // upstream's qemu.conf does inside the launcher pod. No virtlogd: libvirt writes QEMU's stdio
    // to the domain log itself, and QEMU writes the serial log (`logfile=` on its chardev).
    let qemu_conf = paths.qemu_conf();
    let qemu_dir = qemu_conf.parent().unwrap_or(&dir).to_owned();
    let config_error = |source| DaemonError::Config {
        path: qemu_dir.clone(),
        source,
    };
    std::fs::create_dir_all(&qemu_dir).map_err(config_error)?;
    std::fs::write(&qemu_conf, qemu_conf_text(&paths.mode)).map_err(config_error)?;
    if let DaemonMode::Session { capabilities_cache, .. } = &paths.mode {
        prepare_session_dirs(paths, capabilities_cache)?;
    }
    Ok(())
}

/// qemu.conf. In session mode QEMU runs as the daemon's user and there is nothing to name.
fn qemu_conf_text(mode: &DaemonMode) -> String {
    let mut text = "# Written by virt-launcher.\nsecurity_driver = \"none\"\nremember_owner = 0\n\
                    namespaces = [ ]\ncgroup_controllers = [ ]\nstdio_handler = \"file\"\n"
        .to_owned();
    if *mode == DaemonMode::System {
        text.push_str("user = \"root\"\ngroup = \"root\"\nswtpm_user = \"root\"\nswtpm_group = \"root\"\n");
    }
    text
}

/// A session daemon's directories, and its QEMU cache directory linked to the persistent
/// capabilities cache (libvirt keeps `capabilities/` in `$XDG_CACHE_HOME/libvirt/qemu/cache`).
fn prepare_session_dirs(paths: &DaemonPaths, capabilities_cache: &Path) -> Result<(), DaemonError> {
    let config = |path: &Path| {
        let path = path.to_owned();
        move |source| DaemonError::Config { path, source }
    };
    for (_, dir) in paths.xdg_dirs() {
        std::fs::create_dir_all(&dir).map_err(config(&dir))?;
    }
    let qemu_cache = capabilities_cache.join("qemu");
    std::fs::create_dir_all(&qemu_cache).map_err(config(&qemu_cache))?;
    let driver_cache = paths.root.join("cache/libvirt/qemu");
    std::fs::create_dir_all(&driver_cache).map_err(config(&driver_cache))?;
    let link = driver_cache.join("cache");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&qemu_cache, &link).map_err(config(&link))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_daemon_keeps_everything_under_the_launchers_directories() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (root, cache, home) = (dir.path().join("l"), dir.path().join("cache"), dir.path().join("p"));
        let paths = DaemonPaths::with_mode(
            &root,
            DaemonMode::Session {
                capabilities_cache: cache.clone(),
                config_home: home.clone(),
            },
        );
        assert!(
            paths.uri().starts_with("qemu+unix:///session?socket="),
            "{}",
            paths.uri()
        );
        assert_eq!(paths.capabilities_cache(), cache);
        assert_eq!(paths.qemu_state_dir(), root.join("run/libvirt/qemu/run"));
        // The migration proxy on the target node finds the daemon where cmd-protocol says.
        let private = dir.path().join("private");
        let in_pod = DaemonPaths::with_mode(
            private.join(cmd_protocol::migration::LAUNCHER_LIBVIRT_DIR),
            DaemonMode::System,
        );
        assert_eq!(in_pod.socket(), cmd_protocol::migration::libvirt_socket(&private));
        write_configs(&paths).expect("configs");
        let qemu_conf = std::fs::read_to_string(home.join("libvirt/qemu.conf")).expect("qemu.conf");
        assert!(qemu_conf.contains("stdio_handler = \"file\""), "{qemu_conf}");
        assert!(
            !qemu_conf.contains("user ="),
            "a session daemon's QEMU is its own user: {qemu_conf}"
        );
        assert!(root.join("etc/libvirtd.conf").exists());
        let link = std::fs::read_link(root.join("cache/libvirt/qemu/cache")).expect("cache link");
        assert_eq!(
            link,
            cache.join("qemu"),
            "libvirt's capabilities land in the persistent cache"
        );
        let env: Vec<&str> = paths.xdg_dirs().iter().map(|(name, _)| *name).collect();
        assert_eq!(env, ["XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR"]);
        assert_eq!(paths.xdg_dirs()[0].1, home);
    }

    #[test]
    fn a_system_daemon_uses_libvirts_own_paths_and_runs_qemu_as_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let paths = DaemonPaths::new(dir.path());
        assert!(paths.uri().starts_with("qemu+unix:///system?socket="));
        assert_eq!(paths.qemu_state_dir(), Path::new("/run/libvirt/qemu"));
        assert_eq!(paths.capabilities_cache(), Path::new("/var/cache/libvirt"));
        write_configs(&paths).expect("configs");
        let qemu_conf = std::fs::read_to_string(dir.path().join("etc/qemu.conf")).expect("qemu.conf");
        assert!(qemu_conf.contains("user = \"root\""), "{qemu_conf}");
    }
}
