//! The launcher's private libvirtd: its configuration, start, readiness, restart when it dies,
//! and stop. There is no virtlogd: QEMU's stdio and the serial log are written without it.
//!
//! It runs in the foreground as a child of the launcher. As root it is a system daemon inside the
//! launcher's mount namespace (see [`super::namespace`]); as any other user (an unprivileged launcher
//! pod) it is a session daemon whose directories all lie under the launcher's own (see
//! [`DaemonMode::Session`]). Its stderr is read line by line into the launcher's log; libvirt's own
//! log goes to a file in the runtime directory.

use std::io::BufRead as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::reaper::{Reaper, ReaperError};

/// How long a stopped daemon gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Pause before restarting a daemon that died, so a crash loop does not spin.
const RESTART_DELAY: Duration = Duration::from_millis(200);

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
    fn xdg_dirs(&self) -> [(&'static str, PathBuf); 3] {
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

    /// The capabilities cache as the daemon sees it.
    #[must_use]
    pub fn capabilities_cache(&self) -> PathBuf {
        match &self.mode {
            DaemonMode::System => PathBuf::from(super::namespace::LIBVIRT_CACHE_DIR),
            DaemonMode::Session { capabilities_cache, .. } => capabilities_cache.clone(),
        }
    }

    /// The libvirtd.conf the daemon is started with.
    fn libvirtd_conf(&self) -> PathBuf {
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

    fn log(&self, daemon: &str) -> PathBuf {
        self.root.join(format!("{daemon}.log"))
    }

    /// The daemon's pid file. Not the default `/run/<daemon>.pid`: `/run` is shared with the host
    /// and with other launchers, and a second daemon finding that file locked exits at once.
    #[must_use]
    pub fn pid_file(&self, daemon: &str) -> PathBuf {
        self.root.join(format!("{daemon}.pid"))
    }
}

/// Why the daemons could not be started.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// A configuration file could not be written.
    #[error("cannot write libvirt configuration in {path}")]
    Config {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A daemon could not be started.
    #[error(transparent)]
    Spawn(#[from] ReaperError),
    /// libvirtd did not open its socket in time.
    #[error("libvirtd did not open {socket} within {timeout:?}; see {log}")]
    NotReady {
        /// The socket.
        socket: PathBuf,
        /// How long we waited.
        timeout: Duration,
        /// libvirtd's log.
        log: PathBuf,
    },
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

/// Asks the kernel to send SIGTERM to the child when the launcher dies.
#[allow(unsafe_code)]
fn parent_death_signal(command: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only makes one prctl
    // syscall, which is async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        command.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM).map_err(std::io::Error::from)
        });
    }
}

/// Spawns `command` with its stderr logged line by line under `daemon`.
fn spawn_logged(daemon: &'static str, command: &mut Command) -> Result<u32, DaemonError> {
    // Their own process group: a Ctrl-C meant for the launcher must not reach the daemons, which
    // must outlive it long enough to shut the guest down. But they must not outlive the launcher:
    // if it dies without stopping them (a crash, kill -9), the kernel sends them SIGTERM.
    parent_death_signal(command);
    let mut child = command
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ReaperError::Spawn {
            program: daemon.to_owned(),
            source,
        })?;
    let pid = child.id();
    if let Some(stderr) = child.stderr.take() {
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
                warn!(daemon, pid, "{line}");
            }
        });
    }
    Ok(pid)
}

/// The running daemons.
#[derive(Debug)]
pub struct LibvirtDaemons {
    libvirtd: Arc<AtomicU32>,
    stopping: CancellationToken,
    paths: DaemonPaths,
}

impl LibvirtDaemons {
    /// Starts libvirtd (its configuration was written by [`write_configs`] before
    /// the mount namespace was set up) and waits until libvirtd accepts connections.
    pub async fn start(reaper: &Reaper, paths: &DaemonPaths, timeout: Duration) -> Result<Self, DaemonError> {
        let cache = paths.capabilities_cache();
        match super::caps_cache::refresh(&cache, &loaded_drivers()) {
            Ok(super::caps_cache::Refresh::Refreshed(files)) if files > 0 => {
                tracing::info!(
                    files,
                    "capabilities cache carried over: its ctimes refreshed for these binaries"
                );
            }
            Ok(outcome) => tracing::debug!(?outcome, "capabilities cache"),
            Err(e) => tracing::warn!(error = %e, "cannot refresh the capabilities cache; libvirt may probe QEMU again"),
        }
        crate::libvirt::vcpu_threads::set_qemu_state_dir(paths.qemu_state_dir());
        let stopping = CancellationToken::new();
        let drivers = paths.driver_dir();
        let libvirtd_pid = paths.pid_file("libvirtd");
        let libvirtd_conf = paths.libvirtd_conf();
        let session_env = match paths.mode {
            DaemonMode::System => Vec::new(),
            DaemonMode::Session { .. } => paths.xdg_dirs().to_vec(),
        };
        let libvirtd = supervise(reaper.clone(), "libvirtd", stopping.clone(), move || {
            let mut command = Command::new("libvirtd");
            command
                .arg("--config")
                .arg(&libvirtd_conf)
                .arg("--pid-file")
                .arg(&libvirtd_pid)
                .env("LIBVIRT_DRIVER_DIR", &drivers)
                .envs(session_env.iter().map(|(name, dir)| (name, dir)));
            command
        })?;
        let daemons = Self {
            libvirtd,
            stopping,
            paths: paths.clone(),
        };
        daemons.wait_for_socket(timeout).await?;
        Ok(daemons)
    }

    /// Records, once a domain runs, the binaries the capabilities cache was made with, so that a
    /// copy of the cache (in an image) stays valid: see [`super::caps_cache`].
    pub fn record_capabilities(&self) {
        if let Err(e) = super::caps_cache::record(&self.paths.capabilities_cache(), &loaded_drivers()) {
            tracing::warn!(error = %e, "cannot record the capabilities cache's binaries");
        }
    }

    async fn wait_for_socket(&self, timeout: Duration) -> Result<(), DaemonError> {
        let socket = self.paths.socket();
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Err(DaemonError::NotReady {
            socket,
            timeout,
            log: self.paths.log("libvirtd"),
        })
    }

    /// Stops the daemon: SIGTERM, then SIGKILL after a grace period. Its supervisor observes the
    /// exit (it is the only waiter) and clears the pid.
    pub async fn stop(&self) {
        self.stopping.cancel();
        let running = self.libvirtd.load(Ordering::SeqCst);
        let target = Pid::from_raw(i32::try_from(running).unwrap_or(0));
        if running == 0 || kill(target, Signal::SIGTERM).is_err() {
            return;
        }
        if !wait_cleared(&self.libvirtd, STOP_GRACE).await {
            warn!(
                daemon = "libvirtd",
                pid = running,
                "did not stop on SIGTERM; killing it"
            );
            let _ = kill(target, Signal::SIGKILL);
            wait_cleared(&self.libvirtd, STOP_GRACE).await;
        }
    }
}

/// Waits until a supervisor has seen its daemon exit.
async fn wait_cleared(pid: &AtomicU32, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    while pid.load(Ordering::SeqCst) != 0 {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// Starts a daemon and restarts it whenever it dies, until `stopping` is cancelled. Returns the
/// current pid, which the supervisor sets to 0 once the daemon has exited for good.
fn supervise(
    reaper: Reaper,
    daemon: &'static str,
    stopping: CancellationToken,
    command: impl Fn() -> Command + Send + 'static,
) -> Result<Arc<AtomicU32>, DaemonError> {
    let first = spawn_logged(daemon, &mut command())?;
    info!(daemon, pid = first, "started");
    let pid = Arc::new(AtomicU32::new(first));
    let (current, token) = (pid.clone(), stopping);
    tokio::spawn(async move {
        loop {
            let running = current.load(Ordering::SeqCst);
            let exit = reaper.wait(running).await;
            if token.is_cancelled() {
                current.store(0, Ordering::SeqCst);
                break;
            }
            warn!(daemon, pid = running, exit = ?exit, "died; restarting");
            tokio::time::sleep(RESTART_DELAY).await;
            if token.is_cancelled() {
                current.store(0, Ordering::SeqCst);
                break;
            }
            match spawn_logged(daemon, &mut command()) {
                Ok(next) => {
                    info!(daemon, pid = next, "restarted");
                    current.store(next, Ordering::SeqCst);
                }
                Err(e) => {
                    warn!(daemon, error = %e, "cannot restart");
                    current.store(0, Ordering::SeqCst);
                    break;
                }
            }
        }
    });
    Ok(pid)
}
