//! Cluster mode start to exit: the same private libvirt as local mode, then the command socket.
//!
//! 1. Before any thread: check the flags, write the libvirt configuration, and as root enter the
//!    private mount namespace (or adopt the container's libvirt directories). As any other user the
//!    daemon is a session daemon whose directories are all the launcher's own (an unprivileged
//!    launcher pod, docs/security.md).
//! 2. On tokio: reaper, daemons, connection; serve `Cmd` and `CmdInfo` on
//!    `<share dir>/sockets/launcher-init-sock` and rename it to `launcher-sock` once serving.
//!    Every lifecycle event goes to virt-handler as a domain snapshot ([`super::notify`]).
//! 3. On SIGTERM or SIGINT: stop the domain gracefully (ACPI every 5 s for the grace period, then
//!    destroy) while still serving virt-handler, which writes the VMI's final phase from the
//!    stopped domain and then deletes it; after that (or [`HANDOVER_WINDOW`]) undefine what is
//!    left, send the last domain events, stop the daemons, remove the sockets.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cmd_protocol::cmd::cmd_server::CmdServer;
use cmd_protocol::cmd_info::cmd_info_server::CmdInfoServer;
use cmd_protocol::domain::{DomainMetadata, DomainSnapshot};
use cmd_protocol::sockets::{INIT_SOCKET, READY_SOCKET, mark_ready};
use cmd_protocol::transport::listen;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::notify::{Notifier, event_type};
use super::service::{LauncherInfo, LauncherService};
use super::start_deadline;
use kubevirt_api::error_report::one_line;

use crate::commands::process::{self, fail};
use crate::domain::{ConvertContext, DomainType, PathLayout};
use crate::libvirt::{DomainManager, DomainStatus, LibvirtDomainManager, LifecycleEvent};
use crate::supervisor::daemons::{DaemonMode, DaemonPaths, LibvirtDaemons, write_configs};
use crate::supervisor::log_rotation::{self, LogLimit};
use crate::supervisor::namespace::{adopt_container_libvirt, enter_private_libvirt_namespace};
use crate::supervisor::reaper::{Reaper, ToolRunner};
use crate::supervisor::supervise::{StopSignals, StopSource as _, supervise, teardown};

/// How long libvirtd may take to open its socket.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// After a stop, how long the stopped domain waits for virt-handler to write the VMI's final
/// phase and delete it. Exiting first would leave the handler with a launcher gone before its
/// domain's end was seen, which it reports as a failure (found on a real cluster).
/// With `LAST_EVENTS_TIMEOUT` and the teardown it stays within the 15 s the launcher pod's grace
/// period gives beyond the launcher's own.
pub const HANDOVER_WINDOW: Duration = Duration::from_secs(5);
/// How long the last domain events may take to reach virt-handler at exit.
const LAST_EVENTS_TIMEOUT: Duration = Duration::from_secs(3);

/// The flags virt-controller passes (upstream's names), plus where local state goes.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// VMI name.
    pub name: String,
    /// VMI namespace.
    pub namespace: String,
    /// VMI UID.
    pub uid: String,
    /// `terminationGracePeriodSeconds` as virt-controller passes it.
    pub grace_period_seconds: u64,
    /// The domain type.
    pub domain_type: DomainType,
    /// `--kubevirt-share-dir`: holds `sockets/`.
    pub share_dir: PathBuf,
    /// Paths the domain refers to (`--ephemeral-disk-dir`, `--container-disk-dir`, `--ovmf-path`).
    pub layout: PathLayout,
    /// libvirt's capabilities cache.
    pub cache_dir: PathBuf,
    /// The launcher's container image, reported in every domain snapshot.
    pub launcher_image: Option<String>,
    /// The launcher has a container of its own: libvirt's directories are used in place, with no
    /// private mount namespace (which would need `CAP_SYS_ADMIN`).
    pub container_libvirt: bool,
    /// `--qemu-timeout`: how long the guest may take to start ([`super::start_deadline`]); zero
    /// waits for ever.
    pub qemu_timeout: Duration,
    /// `--disk-memory-limit`: the address space `qemu-img` may use to check a containerDisk.
    pub disk_memory_limit: u64,
}

impl ServeOptions {
    /// A system daemon as root; a session daemon in an unprivileged launcher pod.
    fn daemon_paths(&self) -> DaemonPaths {
        let private = PathBuf::from(&self.layout.private_dir);
        DaemonPaths::with_mode(
            private.join(cmd_protocol::migration::LAUNCHER_LIBVIRT_DIR),
            DaemonMode::for_this_process(&self.cache_dir, &private),
        )
    }

    fn socket_dir(&self) -> PathBuf {
        self.share_dir.join("sockets")
    }

    /// Where virt-handler receives domain events (it injects this socket into the pod).
    fn notify_socket(&self) -> PathBuf {
        self.share_dir.join(cmd_protocol::sockets::NOTIFY_PIPE)
    }

    /// The final event's snapshot: the domain is gone.
    fn gone(&self) -> DomainSnapshot {
        DomainSnapshot {
            metadata: DomainMetadata {
                name: format!("{}_{}", self.namespace, self.name),
                namespace: self.namespace.clone(),
                uid: self.uid.clone(),
                deletion_timestamp: Some(k8s_openapi::jiff::Timestamp::now().to_string()),
                ..DomainMetadata::default()
            },
            ..DomainSnapshot::default()
        }
    }
}

/// Forwards lifecycle events to the graceful-stop loop and, as domain snapshots, to virt-handler.
/// When `finish` is cancelled it sends what is still queued and a last event saying the domain
/// is gone, then returns.
fn forward_events<M: DomainManager + 'static, R: ToolRunner + 'static>(
    options: &ServeOptions,
    service: Arc<LauncherService<M, R>>,
    mut events: UnboundedReceiver<LifecycleEvent>,
    to_stop_loop: UnboundedSender<LifecycleEvent>,
    finish: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    let mut notifier = Notifier::new(options.notify_socket());
    let options = options.clone();
    tokio::spawn(async move {
        loop {
            let event = tokio::select! {
                event = events.recv() => event,
                () = finish.cancelled() => events.try_recv().ok(),
            };
            let Some(event) = event else { break };
            let _ = to_stop_loop.send(event);
            let (snapshot, kind) = match service.snapshot().await {
                // VIR_DOMAIN_EVENT_DEFINED and _STARTED announce the domain; the rest modify it.
                Ok(Some(snapshot)) if matches!(event.event, 0 | 2) => (snapshot, event_type::ADDED),
                Ok(Some(snapshot)) => (snapshot, event_type::MODIFIED),
                Ok(None) => (options.gone(), event_type::MODIFIED),
                Err(status) => {
                    warn!(error = %status.message(), "cannot read the domain for an event");
                    continue;
                }
            };
            let _ = notifier.send(&snapshot, kind).await;
        }
        let _ = notifier.send(&options.gone(), event_type::MODIFIED).await;
    })
}

/// Not a libvirt event: the access credentials' outcome changed, so the handler gets a fresh
/// snapshot.
pub const ACCESS_CREDENTIALS_EVENT: i32 = -1;

/// Propagates guest agent access credentials every tick until `finish`, announcing a changed
/// outcome as a domain event.
fn propagate_access_credentials<M: DomainManager + 'static, R: ToolRunner + 'static>(
    service: Arc<LauncherService<M, R>>,
    events: UnboundedSender<LifecycleEvent>,
    finish: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(super::access_credentials::TICK);
        loop {
            tokio::select! {
                () = finish.cancelled() => break,
                _ = ticks.tick() => {}
            }
            if service.sync_access_credentials().await {
                let _ = events.send(LifecycleEvent {
                    event: ACCESS_CREDENTIALS_EVENT,
                    detail: 0,
                });
            }
        }
    })
}

/// Waits until the stopped domain is deleted (virt-handler's Delete, once it wrote the final
/// phase), at most `window`.
async fn wait_for_handover<M: DomainManager>(manager: &M, window: Duration) {
    let deadline = tokio::time::Instant::now() + window;
    while tokio::time::Instant::now() < deadline {
        if matches!(manager.status().await, Ok(status) if status == DomainStatus::NON_EXISTENT) {
            info!("virt-handler deleted the stopped domain");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    warn!(
        window_s = window.as_secs(),
        "virt-handler did not delete the stopped domain in time"
    );
}

/// Serves until SIGTERM; never panics, always cleans up.
#[must_use]
pub fn main(options: &ServeOptions) -> ExitCode {
    let code = serve_until_stopped(options);
    release_container_disks(Path::new(&options.layout.container_disk_dir));
    code
}

/// Removes the containerDisk sidecars' sockets (`*.sock` in the pod's container-disks
/// directory), as upstream's launcher does when it exits: each sidecar ends once its socket is
/// gone, so the pod completes (a migrated VMI's source pod, a stopped guest's pod).
pub fn release_container_disks(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "sock")
            && let Err(e) = std::fs::remove_file(&path)
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a containerDisk socket");
        }
    }
}

fn serve_until_stopped(options: &ServeOptions) -> ExitCode {
    let paths = options.daemon_paths();
    let prepared = write_configs(&paths).map_err(|e| one_line(&e)).and_then(|()| {
        let prepared = match paths.mode() {
            // A session daemon's paths are all under the launcher's directory already.
            DaemonMode::Session { .. } => Ok(()),
            DaemonMode::System if options.container_libvirt => {
                adopt_container_libvirt(&paths.config_dir(), &options.cache_dir)
            }
            DaemonMode::System => enter_private_libvirt_namespace(&paths.config_dir(), &options.cache_dir),
        };
        prepared.map_err(|e| one_line(&e))
    });
    if let Err(message) = prepared {
        return fail(&message, 1);
    }
    let runtime = match process::runtime() {
        Ok(runtime) => runtime,
        Err(code) => return code,
    };
    let result = runtime.block_on(serve(options, &paths));
    runtime.shutdown_timeout(Duration::from_millis(100));
    for name in [INIT_SOCKET, READY_SOCKET] {
        let _ = std::fs::remove_file(options.socket_dir().join(name));
    }
    let _ = std::fs::remove_dir_all(paths.config_dir().parent().unwrap_or(&paths.config_dir()));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message, 1),
    }
}

async fn serve(options: &ServeOptions, paths: &DaemonPaths) -> Result<(), String> {
    let error = |e: &(dyn std::error::Error + 'static)| one_line(e);
    let reaper = Reaper::install().map_err(|e| error(&e))?;
    let mut stops = StopSignals::install().map_err(|e| format!("cannot install signal handlers: {}", one_line(&e)))?;
    let daemons = LibvirtDaemons::start(&reaper, paths, SOCKET_TIMEOUT)
        .await
        .map_err(|e| error(&e))?;
    let domain_name = format!("{}_{}", options.namespace, options.name);
    let (events_tx, lifecycle) = tokio::sync::mpsc::unbounded_channel();
    let outcome = async {
        let credentials_changed = events_tx.clone();
        let migration_changed = events_tx.clone();
        let driver = match paths.mode() {
            DaemonMode::Session { .. } => "session",
            DaemonMode::System => "system",
        };
        let manager = Arc::new(
            LibvirtDomainManager::new(&paths.uri(), &domain_name, paths.qemu_pid_file(&domain_name), events_tx)
                .map_err(|e| error(&e))?,
        );
        manager.connect().await.map_err(|e| error(&e))?;
        let base = ConvertContext {
            domain_type: options.domain_type,
            layout: options.layout.clone(),
            // libvirt's mode follows the launcher's user (DaemonMode::for_this_process), and with
            // it where EFI variables go: an unprivileged launcher's session daemon keeps them under
            // its private directory.
            run_as_root: nix::unistd::geteuid().is_root(),
            ..ConvertContext::default()
        };
        let service = Arc::new(
            LauncherService::new(manager.clone(), reaper.clone(), base)
                .with_launcher_image(options.launcher_image.clone())
                .with_disk_memory_limit(options.disk_memory_limit)
                .with_migration(options.share_dir.clone(), driver, migration_changed),
        );
        let incoming = listen(&options.socket_dir().join(INIT_SOCKET)).map_err(|e| error(&e))?;
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(CmdServer::from_arc(service.clone()))
                .add_service(CmdInfoServer::new(LauncherInfo))
                .serve_with_incoming(incoming),
        );
        if let Err(e) = mark_ready(&options.socket_dir()) {
            server.abort();
            return Err(error(&e));
        }
        // Started once nothing above can fail, so an early error leaves no task behind; the
        // lifecycle events of a sync served meanwhile wait in their channel.
        let (to_stop_loop, mut events) = tokio::sync::mpsc::unbounded_channel();
        let finish = CancellationToken::new();
        let forwarder = forward_events(options, service.clone(), lifecycle, to_stop_loop, finish.clone());
        let credentials = propagate_access_credentials(service.clone(), credentials_changed, finish.clone());
        let logs = tokio::spawn(log_rotation::keep_bounded(
            vec![
                PathBuf::from(options.layout.serial_console_log(&options.uid)),
                paths.qemu_log_file(&domain_name),
            ],
            LogLimit::default(),
            finish.clone(),
        ));
        info!(socket = %options.socket_dir().join(READY_SOCKET).display(), "serving commands");
        let mut ended = Ok(());
        tokio::select! {
            () = stops.next_stop() => info!("stop requested; stopping the domain gracefully"),
            () = service.migrated_away() => info!("the VMI runs on another node now; stopping"),
            () = start_deadline::overdue(manager.as_ref(), options.qemu_timeout) => {
                ended = Err(format!(
                    "timed out waiting for domain to be defined: no guest started within the --qemu-timeout of {}s",
                    options.qemu_timeout.as_secs()
                ));
            }
        }
        let policy = service
            .stop_policy(Duration::from_secs(options.grace_period_seconds))
            .await;
        let (stop, mut stop_now) = tokio::sync::mpsc::unbounded_channel();
        let _ = stop.send(());
        if let Err(e) = supervise(manager.as_ref(), &mut events, &mut stop_now, policy).await {
            warn!(error = %e, "graceful stop failed");
        }
        // Without the notify pipe virt-handler places, no handler watches this launcher.
        if options.notify_socket().exists() {
            wait_for_handover(manager.as_ref(), HANDOVER_WINDOW).await;
        }
        server.abort();
        teardown(
            manager.as_ref(),
            &domain_name,
            &paths.qemu_pid_file(&domain_name),
            service.keeps_nvram(),
        )
        .await;
        finish.cancel();
        credentials.abort();
        logs.abort();
        if tokio::time::timeout(LAST_EVENTS_TIMEOUT, forwarder).await.is_err() {
            warn!("the last domain events did not reach virt-handler in time");
        }
        ended
    }
    .await;
    daemons.stop().await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::release_container_disks;

    #[test]
    fn only_the_container_disk_sockets_are_removed() {
        let dir = tempfile::tempdir().expect("dir");
        let socket = dir.path().join("disk_0.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("socket");
        std::fs::write(dir.path().join("disk_0"), b"image").expect("file");
        release_container_disks(dir.path());
        assert!(!socket.exists(), "the sidecar's socket is gone");
        assert!(dir.path().join("disk_0").exists(), "nothing else is touched");
        release_container_disks(&dir.path().join("missing"));
    }
}
