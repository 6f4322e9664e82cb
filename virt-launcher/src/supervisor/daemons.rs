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
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use kubevirt_api::error_report::one_line;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use super::daemon_config::{
    DaemonMode, DaemonPaths, SYSTEM_DRIVER_DIR, link_qemu_driver, loaded_drivers, write_configs,
};
pub use super::daemon_error::{DaemonError, NotServing};
use super::reaper::{Reaper, ReaperError};
use super::startup_cpu;

/// How long a stopped daemon gets between SIGTERM and SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// Pause before restarting a daemon that died, so a crash loop does not spin.
const RESTART_DELAY: Duration = Duration::from_millis(200);
/// How long a restarted daemon gets to accept connections before it is left on its startup CPU.
const RESTART_READY: Duration = Duration::from_secs(60);

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
    /// the mount namespace was set up) and waits until libvirtd has answered a connection.
    pub async fn start(reaper: &Reaper, paths: &DaemonPaths, timeout: Duration) -> Result<Self, DaemonError> {
        let cache = paths.capabilities_cache();
        let kvm = super::caps_variants::KvmAccess::of_this_process();
        match super::caps_variants::select(&cache, kvm) {
            Ok(true) => tracing::debug!(?kvm, "capabilities cache: the copy made with this KVM access"),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, ?kvm, "cannot put the capabilities cache for this KVM access in place");
            }
        }
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
        let stopping = CancellationToken::new();
        let drivers = paths.driver_dir();
        let libvirtd_pid = paths.pid_file("libvirtd");
        let libvirtd_conf = paths.libvirtd_conf();
        let session_env = match paths.mode() {
            DaemonMode::System => Vec::new(),
            DaemonMode::Session { .. } => paths.xdg_dirs().to_vec(),
        };
        // Pinned while its QEMU driver reads the host's CPUID (see [`super::startup_cpu`]).
        let (socket, uri) = (paths.socket(), paths.uri());
        let restarted = move |pid| {
            let (socket, uri) = (socket.clone(), uri.clone());
            tokio::spawn(async move {
                match wait_until_serving(&socket, &uri, RESTART_READY).await {
                    Ok(()) => release_startup_cpu(pid),
                    Err(e) => warn!(pid, error = %one_line(&e), "restarted libvirtd stays on the CPU it started on"),
                }
            });
        };
        let libvirtd = supervise(
            reaper.clone(),
            "libvirtd",
            stopping.clone(),
            move || {
                // By its full path: libvirt counts its own executable's ctime into the "self"
                // ctime that validates the capabilities cache only when argv[0] is a path it can
                // stat, and the refreshed cache carries libvirtd's ctime (see
                // [`super::caps_cache::refresh`]). Started as plain `libvirtd`, the two disagreed
                // whenever an image unpack gave libvirtd a later second than its QEMU driver, and
                // libvirt probed QEMU again.
                let mut command = Command::new(super::caps_cache::LIBVIRTD);
                command
                    .arg("--config")
                    .arg(&libvirtd_conf)
                    .arg("--pid-file")
                    .arg(&libvirtd_pid)
                    .env("LIBVIRT_DRIVER_DIR", &drivers)
                    // One malloc arena: the daemon serves one client and one VM, and an arena per
                    // thread kept about 1.6 MiB more resident.
                    .env("MALLOC_ARENA_MAX", "1")
                    .envs(session_env.iter().map(|(name, dir)| (name, dir)));
                if let Some(cpu) = startup_cpu::pin_to_lowest_cpu(&mut command) {
                    tracing::debug!(cpu, "libvirtd starts pinned");
                }
                command
            },
            restarted,
        )?;
        let daemons = Self {
            libvirtd,
            stopping,
            paths: paths.clone(),
        };
        wait_until_serving(&paths.socket(), &paths.uri(), timeout)
            .await
            .map_err(|reason| DaemonError::NotReady {
                socket: paths.socket(),
                timeout,
                reason,
                log: paths.log("libvirtd"),
            })?;
        tracing::debug!("libvirtd serves");
        release_startup_cpu(daemons.libvirtd.load(Ordering::SeqCst));
        Ok(daemons)
    }

    /// Records, once a domain runs, the binaries the capabilities cache was made with, so that a
    /// copy of the cache (in an image) stays valid: see [`super::caps_cache`]; and keeps the cache
    /// as the one for this process's KVM access ([`super::caps_variants`]).
    pub fn record_capabilities(&self) {
        let cache = self.paths.capabilities_cache();
        if let Err(e) = super::caps_cache::record(&cache, &loaded_drivers()) {
            tracing::warn!(error = %e, "cannot record the capabilities cache's binaries");
            return;
        }
        let kvm = super::caps_variants::KvmAccess::of_this_process();
        if let Err(e) = super::caps_variants::keep(&cache, kvm) {
            tracing::warn!(error = %e, ?kvm, "cannot keep the capabilities cache for this KVM access");
        }
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

/// Waits until the daemon at `socket` has answered a libvirt connection (`uri`): it listens before
/// its drivers are initialised, and accepts only after.
async fn wait_until_serving(socket: &std::path::Path, uri: &str, timeout: Duration) -> Result<(), NotServing> {
    let deadline = tokio::time::Instant::now() + timeout;
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        if tokio::time::Instant::now() >= deadline {
            return Err(NotServing::NoSocket);
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let uri = uri.to_owned();
    let answered = tokio::task::spawn_blocking(move || crate::libvirt::daemon_answers(&uri));
    match tokio::time::timeout_at(deadline, answered).await {
        // The answer did not come in time, or the thread waiting for it died.
        Err(_) | Ok(Err(_)) => Err(NotServing::NoAnswer),
        Ok(Ok(answer)) => answer.map_err(NotServing::Refused),
    }
}

/// Gives a started daemon's threads the launcher's whole CPU set back.
fn release_startup_cpu(pid: u32) {
    match startup_cpu::release(pid) {
        Ok(threads) => tracing::debug!(pid, threads, "libvirtd serves; its threads released to every CPU"),
        Err(e) => warn!(pid, error = %one_line(&e), "libvirtd stays on the CPU it started on"),
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
    restarted: impl Fn(u32) + Send + 'static,
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
                    restarted(next);
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
