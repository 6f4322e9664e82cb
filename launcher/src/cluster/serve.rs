//! Cluster mode start to exit: the same private libvirt as local mode, then the command socket.
//!
//! 1. Before any thread: check the flags, write the libvirt configuration, enter the private mount
//!    namespace.
//! 2. On tokio: reaper, daemons, connection; serve `Cmd` and `CmdInfo` on
//!    `<share dir>/sockets/launcher-init-sock` and rename it to `launcher-sock` once serving.
//! 3. On SIGTERM or SIGINT: stop the domain gracefully (ACPI every 5 s for the grace period, then
//!    destroy), undefine it, stop the daemons, remove the sockets.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cmd_protocol::cmd::cmd_server::CmdServer;
use cmd_protocol::cmd_info::cmd_info_server::CmdInfoServer;
use cmd_protocol::sockets::{INIT_SOCKET, READY_SOCKET, mark_ready};
use cmd_protocol::transport::listen;
use tracing::{info, warn};

use super::service::{LauncherInfo, LauncherService};
use crate::domain::{ConvertContext, DomainType, PathLayout};
use crate::libvirt::LibvirtDomainManager;
use crate::local::lifecycle::Policy;
use crate::local::run::{StopSignals, StopSource as _, supervise, teardown};
use crate::supervisor::daemons::{DaemonPaths, LibvirtDaemons, write_configs};
use crate::supervisor::namespace::enter_private_libvirt_namespace;
use crate::supervisor::reaper::Reaper;

/// How long libvirtd may take to open its socket.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);

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
}

impl ServeOptions {
    fn daemon_paths(&self) -> DaemonPaths {
        DaemonPaths::new(PathBuf::from(&self.layout.private_dir).join("libvirt-rs"))
    }

    fn socket_dir(&self) -> PathBuf {
        self.share_dir.join("sockets")
    }
}

fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("virt-launcher: error: {message}");
    ExitCode::from(code)
}

/// Serves until SIGTERM; never panics, always cleans up.
#[must_use]
pub fn main(options: &ServeOptions) -> ExitCode {
    let paths = options.daemon_paths();
    let prepared = write_configs(&paths)
        .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
        .and_then(|()| {
            enter_private_libvirt_namespace(&paths.config_dir(), &options.cache_dir)
                .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
        });
    if let Err(message) = prepared {
        return fail(&message, 1);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}"), 1),
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
    let error = |e: &dyn std::fmt::Display| e.to_string();
    let reaper = Reaper::install().map_err(|e| error(&e))?;
    let mut stops = StopSignals::install().map_err(|e| error(&e))?;
    let daemons = LibvirtDaemons::start(&reaper, paths, SOCKET_TIMEOUT)
        .await
        .map_err(|e| error(&e))?;
    let domain_name = format!("{}_{}", options.namespace, options.name);
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let outcome = async {
        let manager =
            Arc::new(LibvirtDomainManager::new(&paths.uri(), &domain_name, events_tx).map_err(|e| error(&e))?);
        manager.connect().await.map_err(|e| error(&e))?;
        let base = ConvertContext {
            domain_type: options.domain_type,
            layout: options.layout.clone(),
            ..ConvertContext::default()
        };
        let service = LauncherService::new(manager.clone(), reaper.clone(), base);
        let incoming = listen(&options.socket_dir().join(INIT_SOCKET)).map_err(|e| error(&e))?;
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(CmdServer::new(service))
                .add_service(CmdInfoServer::new(LauncherInfo))
                .serve_with_incoming(incoming),
        );
        mark_ready(&options.socket_dir()).map_err(|e| error(&e))?;
        info!(socket = %options.socket_dir().join(READY_SOCKET).display(), "serving commands");
        stops.next_stop().await;
        info!("stop requested; stopping the domain gracefully");
        server.abort();
        let policy = Policy {
            grace: Duration::from_secs(options.grace_period_seconds),
            has_acpi: true,
        };
        let (stop, mut stop_now) = tokio::sync::mpsc::unbounded_channel();
        let _ = stop.send(());
        if let Err(e) = supervise(manager.as_ref(), &mut events, &mut stop_now, policy).await {
            warn!(error = %e, "graceful stop failed");
        }
        teardown(manager.as_ref(), &domain_name).await;
        Ok::<(), String>(())
    }
    .await;
    daemons.stop().await;
    outcome
}
