//! virt-handler on a node, assembled: the notify server, the launchers behind their sockets, the
//! reconcile loop, the heartbeat and the HTTP endpoint, all stopped by one token. Generic over the
//! API side, so tests run the whole handler against `FakeClusterApi`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::clock::{Clock, SystemClock};
use crate::cluster_api::ClusterApi;
use crate::launchers::{Launchers, SocketLaunchers};
use crate::node_mounts::{HostMounts, NodeMounts};
use crate::notify_server::NotifySink;
use crate::reconciler::{Reconciler, ReconcilerConfig};
use crate::runner::{RunOptions, channels};
use control_loop::http::Endpoints;

/// Where things are and how often they happen.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's name.
    pub node: String,
    /// The handler's share directory; its notify server listens on `domain-notify.sock` there.
    pub share_dir: PathBuf,
    /// The kubelet's pods directory, through which launcher sockets are reached.
    pub pods_dir: PathBuf,
    /// The kubelet's CPU manager state file.
    pub cpu_manager_state: PathBuf,
    /// Launchers asked for statistics at once per scrape.
    pub max_metric_requests: usize,
    /// The HTTP endpoint (`/healthz`, `/metrics`); `None` serves none.
    pub listen: Option<SocketAddr>,
    /// The endpoint's TLS (the handler's certificate); `None` serves plain HTTP.
    pub endpoint_tls: Option<Arc<rustls::ServerConfig>>,
    /// The heartbeat interval.
    pub heartbeat: Duration,
    /// Loop settings.
    pub run: RunOptions,
    /// Reconciler settings.
    pub reconciler: ReconcilerConfig,
    /// The console server (pause, unpause, serial console for virt-api); `None` serves none.
    pub console: Option<ConsoleServerConfig>,
    /// A process in the node's mount namespace (`/proc/1`: the handler runs with `hostPID`),
    /// where containerDisk images are mounted for launchers.
    pub node_process: PathBuf,
    /// The binary that makes those mounts ([`crate::mount_helper`]): this one.
    pub mount_helper: PathBuf,
    /// The kubelet's device-plugins directory, where the kvm, tun and vhost-net plugins register
    /// ([`crate::device_plugins`]); `None` runs none.
    pub device_plugin_dir: Option<PathBuf>,
    /// `--graceful-shutdown-seconds`: how long a stop waits for open migration proxies
    /// ([`crate::drain`]).
    pub graceful_shutdown: Duration,
}

/// Where and how the console server listens.
#[derive(Clone, Debug)]
pub struct ConsoleServerConfig {
    /// Address and port (upstream's 8186).
    pub listen: SocketAddr,
    /// Its TLS, normally requiring virt-api's client certificate.
    pub tls: Arc<rustls::ServerConfig>,
}

impl NodeConfig {
    /// The notify server's socket.
    #[must_use]
    pub fn notify_socket(&self) -> PathBuf {
        self.share_dir.join(cmd_protocol::sockets::HANDLER_NOTIFY_SOCKET)
    }
}

/// Why the handler could not start.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// The HTTP port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The notify socket could not be bound.
    #[error(transparent)]
    Notify(#[from] cmd_protocol::transport::TransportError),
    /// Migration proxies were still open when the graceful shutdown period ended.
    #[error("timed out waiting for migration listeners to terminate: {open} still open after {seconds} s")]
    DrainTimeout {
        /// How many VMIs still had proxies.
        open: usize,
        /// The period (`--graceful-shutdown-seconds`).
        seconds: u64,
    },
}

/// Drains the migration proxies from `signal` on, then cancels `stop` ([`crate::drain`]).
fn spawn_drain<C, L, K>(
    reconciler: &Arc<Reconciler<C, L, K>>,
    signal: CancellationToken,
    stop: CancellationToken,
    grace: Duration,
) -> tokio::task::JoinHandle<usize>
where
    C: ClusterApi + Send + Sync + 'static,
    L: Launchers + 'static,
    K: Clock + 'static,
{
    let (draining, counting) = (reconciler.clone(), reconciler.clone());
    tokio::spawn(crate::drain::drain_then_stop(
        signal,
        stop,
        grace,
        move || draining.begin_drain(),
        move || counting.open_proxies(),
    ))
}

/// The run's outcome once the drain is over: an error when proxies were still open.
async fn drained(drain: tokio::task::JoinHandle<usize>, grace: Duration) -> Result<(), NodeError> {
    match drain.await {
        Ok(0) => Ok(()),
        Ok(open) => Err(NodeError::DrainTimeout {
            open,
            seconds: grace.as_secs(),
        }),
        Err(error) => {
            warn!(error = %error, "the graceful shutdown task failed");
            Ok(())
        }
    }
}

/// The real handler's endpoints.
struct NodeEndpoints<C, L, K> {
    reconciler: Arc<Reconciler<C, L, K>>,
    max_metric_requests: usize,
    stop: CancellationToken,
}

impl<C: ClusterApi, L: Launchers, K: Clock> Endpoints for NodeEndpoints<C, L, K> {
    fn healthy(&self) -> bool {
        !self.stop.is_cancelled()
    }

    async fn metrics(&self) -> String {
        crate::metrics::scrape(&self.reconciler, self.max_metric_requests).await
    }
}

/// How often images left mounted for launchers that are gone are looked for.
const ORPHANED_IMAGES_INTERVAL: Duration = Duration::from_secs(60);

/// Releases containerDisk images mounted for launchers that are gone, at start and then every
/// [`ORPHANED_IMAGES_INTERVAL`], until `stop`.
async fn release_orphaned_images(mounts: Arc<dyn NodeMounts>, pods_dir: PathBuf, stop: CancellationToken) {
    loop {
        let (mounts, pods_dir_now) = (mounts.clone(), pods_dir.clone());
        match tokio::task::spawn_blocking(move || {
            crate::container_disks::release_orphans(mounts.as_ref(), &pods_dir_now)
        })
        .await
        {
            Ok(Ok(0)) => {}
            Ok(Ok(released)) => info!(released, "released images of launchers that are gone"),
            Ok(Err(error)) => warn!(error = %error, "cannot release the images of launchers that are gone"),
            Err(error) => warn!(error = %error, "the image release task failed"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(ORPHANED_IMAGES_INTERVAL) => {}
        }
    }
}

/// The launchers of this node, told the cluster's configuration as `settings` has it.
fn launchers(
    config: &NodeConfig,
    notify_socket: &std::path::Path,
    mounts: Arc<dyn NodeMounts>,
    settings: crate::cluster_settings::Settings,
) -> SocketLaunchers {
    SocketLaunchers::new(
        &config.node,
        &config.pods_dir,
        notify_socket,
        mounts,
        Arc::new(pod_network::commands::SystemCommands::new()),
        settings,
    )
}

/// The console server's listener, when it is configured.
fn bind_console(console: Option<&ConsoleServerConfig>) -> Result<Option<std::net::TcpListener>, NodeError> {
    console
        .map(|console| {
            std::net::TcpListener::bind(console.listen).map_err(|source| NodeError::Listen {
                addr: console.listen,
                source,
            })
        })
        .transpose()
}

/// The node's heartbeat until `stop` ([`crate::heartbeat`]).
fn spawn_heartbeat<C: ClusterApi>(config: &NodeConfig, api: C, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    let (node, state, every) = (config.node.clone(), config.cpu_manager_state.clone(), config.heartbeat);
    tokio::spawn(async move { crate::heartbeat::run(&api, &SystemClock, &node, &state, every, stop).await })
}

/// Waits for the first list of the `KubeVirt` resources; false when `signal` comes first or the
/// watch of them ended.
async fn wait_for_settings(mut settings: crate::cluster_settings::Settings, signal: &CancellationToken) -> bool {
    info!("waiting for the cluster configuration (the KubeVirt resource)");
    tokio::select! {
        () = signal.cancelled() => false,
        known = settings.wait_for(Option::is_some) => known.is_ok(),
    }
}

/// Runs virt-handler for `config.node` until `stop`; everything it started is stopped and its
/// sockets are removed when it returns.
pub async fn run<C: ClusterApi + Clone>(
    config: NodeConfig,
    api: C,
    signal: CancellationToken,
) -> Result<(), NodeError> {
    // `signal` starts the graceful shutdown; `stop` ends everything once it is over.
    let stop = CancellationToken::new();
    let listener = match config.listen {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|source| NodeError::Listen { addr, source })?,
        ),
        None => None,
    };
    let (senders, inputs) = channels();
    let notify_socket = config.notify_socket();
    // Bind first, so a launcher's first event finds the socket.
    let notify_incoming = cmd_protocol::transport::listen(&notify_socket)?;
    let notify = tokio::spawn(crate::notify_server::serve_incoming(
        notify_incoming,
        notify_socket.clone(),
        NotifySink {
            domains: senders.domains.clone(),
            k8s: senders.k8s.clone(),
        },
        stop.clone(),
    ));
    let mounts: Arc<dyn NodeMounts> = Arc::new(HostMounts::new(&config.node_process, &config.mount_helper));
    let orphans = tokio::spawn(release_orphaned_images(
        mounts.clone(),
        config.pods_dir.clone(),
        stop.clone(),
    ));
    let (publish, settings) = tokio::sync::watch::channel(None);
    let follower = tokio::spawn(crate::cluster_settings::follow(
        api.watch_kubevirts(),
        publish,
        stop.clone(),
    ));
    let launchers = launchers(&config, &notify_socket, mounts, settings.clone());
    let reconciler = Arc::new(Reconciler::new(
        config.reconciler.clone(),
        api.clone(),
        launchers,
        SystemClock,
    ));
    let console_listener = bind_console(config.console.as_ref())?;
    let http = listener.map(|listener| {
        let endpoints = Arc::new(NodeEndpoints {
            reconciler: reconciler.clone(),
            max_metric_requests: config.max_metric_requests,
            // Not ready from the signal on, as upstream's handler.
            stop: signal.clone(),
        });
        let tls = config.endpoint_tls.clone();
        tokio::spawn(control_loop::http::serve(listener, endpoints, tls, stop.clone()))
    });
    let console = console_listener
        .zip(config.console.as_ref())
        .map(|(listener, console)| {
            let state = Arc::new(crate::console_server::ConsoleState::new(
                reconciler.clone(),
                config.pods_dir.clone(),
            ));
            tokio::spawn(crate::console_server::serve(
                listener,
                console.tls.clone(),
                state,
                stop.clone(),
            ))
        });
    let drain = spawn_drain(&reconciler, signal.clone(), stop.clone(), config.graceful_shutdown);
    // As upstream's handler, nothing reaches the node (its heartbeat, device plugins, VMIs) before
    // the cluster's configuration is known (the first list of the KubeVirt resources).
    let mut node_tasks = Vec::new();
    if wait_for_settings(settings, &signal).await {
        info!(node = %config.node, notify = %notify_socket.display(), "virt-handler running");
        node_tasks.push(spawn_heartbeat(&config, api.clone(), stop.clone()));
        node_tasks.extend(
            config
                .device_plugin_dir
                .clone()
                .map(|dir| tokio::spawn(crate::device_plugins::run(dir, PathBuf::from("/"), stop.clone()))),
        );
        let vmis = api.watch_vmis(&config.node);
        crate::runner::run(reconciler, vmis, inputs, config.run, stop.clone()).await;
    } else {
        // A signal, or the configuration's watch ended: stop at once (nothing runs to drain).
        stop.cancel();
    }
    for task in [Some(notify), http, console, Some(orphans), Some(follower)]
        .into_iter()
        .flatten()
        .chain(node_tasks)
    {
        if let Err(error) = task.await {
            warn!(error = %error, "a handler task failed");
        }
    }
    drained(drain, config.graceful_shutdown).await
}
