//! One local run, start to exit:
//!
//! 1. [`prepare_process`] (before any thread exists): load and check the manifest, create the
//!    runtime directory and the libvirt configuration, enter the private mount namespace.
//! 2. [`run`] (on tokio): become the subreaper, prepare volumes, render the domain, start libvirtd
//!    and virtlogd, define and start the domain, stream the console, and supervise the domain
//!    until it ends or a signal asks it to stop ([`supervise`], driven by [`lifecycle::decide`]).
//! 3. Always, whatever happened: destroy what still runs, undefine, stop the daemons, remove the
//!    runtime directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kubevirt_api::domain_state::DomainState;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pod_network::local::PrivateNamespace;
use tokio::signal::unix::{Signal as SignalStream, SignalKind, signal};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tracing::{info, instrument, warn};

use super::console;
use super::lifecycle::{self, Observation, Plan, Policy, StopProgress};
use super::network::{self, LocalNetwork, NetworkError};
use super::runtime_dir::{RuntimeDir, RuntimeDirError};
use super::volumes::{self, PrepareError};
use crate::commands::render::{EmulationFlags, RenderError, ensure_uid, load_vmi};
use crate::domain::{ConvertContext, ConvertError, DomainType, InterfaceTaps, render};
use crate::image_store::ImageStore;
use crate::libvirt::{DomainError, DomainManager, DomainStatus, LibvirtDomainManager, LifecycleEvent};
use crate::supervisor::daemons::{DaemonError, LibvirtDaemons, write_configs};
use crate::supervisor::namespace::{NamespaceError, enter_private_libvirt_namespace};
use crate::supervisor::reaper::{Reaper, ReaperError};

/// How often the domain is re-read when no event arrives (a safety net for missed events).
const POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How long libvirtd may take to open its socket.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the first connection may take (a cold capability probe takes ~8 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the domain may stay unreachable (libvirtd restarting) before the run gives up.
const UNREACHABLE_LIMIT: Duration = Duration::from_secs(30);

/// Where a local run keeps its files.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The manifest.
    pub vmi_path: PathBuf,
    /// Emulation flags.
    pub flags: EmulationFlags,
    /// Parent of the runtime directory.
    pub runtime_root: PathBuf,
    /// libvirt's persistent capabilities cache.
    pub cache_dir: PathBuf,
    /// The local image store.
    pub store: ImageStore,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The manifest is invalid.
    #[error(transparent)]
    Manifest(#[from] RenderError),
    /// The VMI cannot become a domain.
    #[error("{path}: {source}")]
    Convert {
        /// The manifest.
        path: String,
        /// What is wrong.
        source: ConvertError,
    },
    /// A volume could not be prepared.
    #[error("{path}: {source}")]
    Prepare {
        /// The manifest.
        path: String,
        /// What is wrong.
        source: PrepareError,
    },
    /// The runtime directory.
    #[error(transparent)]
    RuntimeDir(#[from] RuntimeDirError),
    /// The mount namespace.
    #[error(transparent)]
    Namespace(#[from] NamespaceError),
    /// The daemons.
    #[error(transparent)]
    Daemon(#[from] DaemonError),
    /// A domain operation.
    #[error(transparent)]
    Domain(#[from] DomainError),
    /// The reaper.
    #[error(transparent)]
    Reaper(#[from] ReaperError),
    /// Signal handlers.
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    /// The interfaces cannot be wired.
    #[error("{path}: {source}")]
    NetworkSpec {
        /// The manifest.
        path: String,
        /// What is wrong.
        source: pod_network::plan::PlanError,
    },
    /// The pod network.
    #[error(transparent)]
    Network(#[from] NetworkError),
}

impl RunError {
    /// 2 when the manifest is at fault, 1 otherwise.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Manifest(_) | Self::Convert { .. } | Self::NetworkSpec { .. } => 2,
            Self::Prepare { source, .. } if source.is_bad_input() => 2,
            _ => 1,
        }
    }
}

/// Everything [`prepare_process`] settled before threads start.
#[derive(Debug)]
pub struct Prelude {
    vmi: VirtualMachineInstance,
    volumes: volumes::Plan,
    options: RunOptions,
    domain_type: DomainType,
    runtime: RuntimeDir,
    network_namespace: Option<Arc<PrivateNamespace>>,
}

/// The synchronous first step; must run before any thread (tokio included) is started.
pub fn prepare_process(options: RunOptions) -> Result<Prelude, RunError> {
    let mut vmi = load_vmi(&options.vmi_path).map_err(RenderError::from)?;
    ensure_uid(&mut vmi);
    let path = options.vmi_path.display().to_string();
    let convert = |source| RunError::Convert {
        path: path.clone(),
        source,
    };
    let is_kvm_present = std::path::Path::new("/dev/kvm").exists();
    let domain_type = DomainType::decide(
        is_kvm_present,
        options.flags.allow_emulation,
        options.flags.force_emulation,
    )
    .map_err(convert)?;
    // Check the spec before creating anything: containerDisk formats are placeholders here.
    render(
        &vmi,
        &ConvertContext::assuming_container_disk_format(domain_type, &vmi, "raw"),
    )
    .map_err(convert)?;
    pod_network::plan::check_interfaces(&vmi).map_err(|source| RunError::NetworkSpec {
        path: path.clone(),
        source,
    })?;
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let runtime = RuntimeDir::new(&options.runtime_root, &uid)?;
    // Every volume is checked (images found, kinds supported) before anything is created.
    let volumes = volumes::plan(&vmi, &runtime.layout(), &options.store).map_err(|source| RunError::Prepare {
        path: path.clone(),
        source,
    })?;
    runtime.create()?;
    let entered = write_configs(&runtime.daemon_paths())
        .map_err(RunError::from)
        .and_then(|()| {
            enter_private_libvirt_namespace(&runtime.daemon_paths().config_dir(), &options.cache_dir)?;
            Ok(network::enter_namespace(&vmi)?)
        });
    let network_namespace = match entered {
        Ok(namespace) => namespace.map(Arc::new),
        Err(e) => {
            let _ = runtime.remove();
            return Err(e);
        }
    };
    Ok(Prelude {
        vmi,
        volumes,
        options,
        domain_type,
        runtime,
        network_namespace,
    })
}

/// The asynchronous rest: runs the VM and always cleans up. Returns the VM's final phase.
pub async fn run(prelude: Prelude) -> Result<VirtualMachineInstancePhase, RunError> {
    let result = match Reaper::install() {
        Ok(reaper) => run_networked(&prelude, &reaper).await,
        Err(e) => Err(e.into()),
    };
    if let Err(e) = prelude.runtime.remove() {
        warn!(path = %prelude.runtime.path().display(), error = %e, "cannot remove the runtime directory");
    }
    result
}

/// Stop requests: SIGTERM and SIGINT.
pub(crate) struct StopSignals {
    term: SignalStream,
    interrupt: SignalStream,
}

impl StopSignals {
    pub(crate) fn install() -> Result<Self, RunError> {
        Ok(Self {
            term: signal(SignalKind::terminate()).map_err(RunError::Signals)?,
            interrupt: signal(SignalKind::interrupt()).map_err(RunError::Signals)?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.interrupt.recv() => {}
        }
    }
}

/// Sets up the pod network (when the VMI uses it) around [`run_with`], and always takes it down.
async fn run_networked(prelude: &Prelude, reaper: &Reaper) -> Result<VirtualMachineInstancePhase, RunError> {
    let Some(namespace) = &prelude.network_namespace else {
        return run_with(prelude, reaper, None).await;
    };
    let network = LocalNetwork::start(namespace, &prelude.vmi, reaper).await?;
    eprintln!("virt-launcher: {}", network.describe());
    let result = run_with(prelude, reaper, Some(&network)).await;
    network.stop(namespace, reaper).await;
    result
}

#[instrument(skip_all, fields(vmi = %prelude.vmi.key()))]
async fn run_with(
    prelude: &Prelude,
    reaper: &Reaper,
    network: Option<&LocalNetwork>,
) -> Result<VirtualMachineInstancePhase, RunError> {
    let mut stops = StopSignals::install()?;
    let path = prelude.options.vmi_path.display().to_string();
    let ctx = ConvertContext {
        domain_type: prelude.domain_type,
        layout: prelude.runtime.layout(),
        container_disk_formats: prelude.volumes.container_disk_formats.clone(),
        // The pod network's tap is made by the network setup; without one, libvirt makes plain taps.
        interface_taps: if network.is_some() {
            InterfaceTaps::PreCreated
        } else {
            InterfaceTaps::LibvirtManaged
        },
        interface_links: network.map(LocalNetwork::interface_links).unwrap_or_default(),
        ..ConvertContext::default()
    };
    let domain = render(&prelude.vmi, &ctx).map_err(|source| RunError::Convert {
        path: path.clone(),
        source,
    })?;
    let xml = domain.to_xml().map_err(RenderError::from)?;
    let policy = Policy {
        grace: Duration::from_secs(u64::try_from(prelude.vmi.termination_grace_period_seconds()).unwrap_or(0)),
        has_acpi: domain.features.as_ref().is_some_and(|f| f.acpi.is_some()),
    };
    let paths = prelude.runtime.daemon_paths();
    // libvirtd starts while the volumes are prepared.
    let (daemons, prepared) = tokio::join!(
        LibvirtDaemons::start(reaper, &paths, SOCKET_TIMEOUT),
        volumes::apply(&prelude.volumes.steps, reaper)
    );
    let daemons = daemons?;
    if let Err(source) = prepared {
        daemons.stop().await;
        return Err(RunError::Prepare { path, source });
    }
    let (events_tx, mut events) = tokio::sync::mpsc::unbounded_channel();
    let manager = LibvirtDomainManager::new(&paths.uri(), &domain.name, events_tx)?;
    let started = Instant::now();
    let outcome = match tokio::time::timeout(CONNECT_TIMEOUT, manager.connect()).await {
        Err(_) => Err(RunError::Domain(DomainError::Connect {
            uri: paths.uri(),
            message: format!("no answer within {CONNECT_TIMEOUT:?}"),
        })),
        Ok(Err(e)) => Err(e.into()),
        Ok(Ok(())) => {
            info!(
                elapsed_ms = started.elapsed().as_millis(),
                "connected to the private libvirt"
            );
            let paused = prelude.vmi.spec.start_strategy.as_deref() == Some("Paused");
            let booted = Booted {
                daemons: &daemons,
                runtime: &prelude.runtime,
            };
            boot_and_supervise(&manager, xml, paused, &booted, &mut events, &mut stops, policy).await
        }
    };
    teardown(&manager, &domain.name).await;
    drop(manager);
    tracing::debug!("domain torn down; stopping the daemons");
    daemons.stop().await;
    tracing::debug!("daemons stopped");
    outcome
}

/// What a booted domain is supervised with.
struct Booted<'a> {
    daemons: &'a LibvirtDaemons,
    runtime: &'a RuntimeDir,
}

async fn boot_and_supervise(
    manager: &LibvirtDomainManager,
    xml: String,
    paused: bool,
    booted: &Booted<'_>,
    events: &mut UnboundedReceiver<LifecycleEvent>,
    stops: &mut StopSignals,
    policy: Policy,
) -> Result<VirtualMachineInstancePhase, RunError> {
    manager.define(xml).await?;
    tracing::debug!("domain defined");
    manager.start(paused).await?;
    info!(paused, "domain started");
    booted.daemons.record_capabilities();
    let console = console::spawn(booted.runtime.serial_socket());
    let phase = supervise(manager, events, stops, policy).await;
    console.abort();
    Ok(phase?)
}

/// Drives the domain until it is over, following [`lifecycle::decide`].
pub async fn supervise<M: DomainManager>(
    manager: &M,
    events: &mut UnboundedReceiver<LifecycleEvent>,
    stops: &mut (impl StopSource + ?Sized),
    policy: Policy,
) -> Result<VirtualMachineInstancePhase, DomainError> {
    let mut stop: Option<(Instant, Option<Instant>, bool)> = None;
    let mut unreachable_since: Option<Instant> = None;
    let mut are_events_closed = false;
    loop {
        let status = match manager.status().await {
            Ok(status) => {
                unreachable_since = None;
                status
            }
            Err(e) => {
                // libvirtd may be restarting; the adapter reconnects on the next call.
                let since = *unreachable_since.get_or_insert_with(Instant::now);
                if since.elapsed() > UNREACHABLE_LIMIT {
                    return Err(e);
                }
                warn!(error = %e, "cannot read the domain state; retrying");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let now = Instant::now();
        let progress = stop.map(|(asked, last_acpi, destroyed)| StopProgress {
            elapsed: now - asked,
            since_last_acpi: last_acpi.map(|t| now - t),
            is_destroy_sent: destroyed,
        });
        match lifecycle::decide(&Observation { status, stop: progress }, &policy) {
            Plan::Finish(phase) => {
                info!(%phase, state = %status.state, reason = %status.reason, "domain is over");
                return Ok(phase);
            }
            Plan::SendAcpiShutdown => {
                info!("pressing the ACPI power button");
                if let Err(e) = manager.shutdown().await {
                    warn!(error = %e, "ACPI shutdown failed");
                }
                if let Some(s) = stop.as_mut() {
                    s.1 = Some(Instant::now());
                }
            }
            Plan::Destroy => {
                info!("destroying the domain");
                if let Err(e) = manager.destroy().await {
                    warn!(error = %e, "destroy failed");
                }
                if let Some(s) = stop.as_mut() {
                    s.2 = true;
                }
            }
            Plan::Wait(timeout) => {
                let timeout = timeout.unwrap_or(POLL_INTERVAL).min(POLL_INTERVAL);
                tokio::select! {
                    event = events.recv(), if !are_events_closed => are_events_closed = event.is_none(),
                    () = stops.next_stop() => {
                        match stop.as_mut() {
                            None => {
                                info!(grace_s = policy.grace.as_secs(), "stop requested");
                                stop = Some((Instant::now(), None, false));
                            }
                            // A second request cuts the grace period short.
                            Some(s) if !s.2 => s.0 = Instant::now().checked_sub(policy.grace).unwrap_or(s.0),
                            Some(_) => {}
                        }
                    }
                    () = tokio::time::sleep(timeout) => {}
                }
            }
        }
    }
}

/// Where stop requests come from: signals in production, a channel in tests.
pub trait StopSource {
    /// Resolves when a stop is requested.
    fn next_stop(&mut self) -> impl std::future::Future<Output = ()> + Send;
}

impl StopSource for StopSignals {
    async fn next_stop(&mut self) {
        self.recv().await;
    }
}

impl StopSource for tokio::sync::mpsc::UnboundedReceiver<()> {
    async fn next_stop(&mut self) {
        if self.recv().await.is_none() {
            std::future::pending::<()>().await;
        }
    }
}

/// Leaves nothing running: destroys a live domain, undefines it, and as a last resort kills a
/// QEMU that libvirt no longer tracks.
pub(crate) async fn teardown(manager: &LibvirtDomainManager, name: &str) {
    let pid_file = PathBuf::from(format!("/run/libvirt/qemu/{name}.pid"));
    let qemu_pid = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|p| p.trim().parse::<i32>().ok());
    match manager.status().await {
        Ok(status)
            if matches!(
                status.state,
                DomainState::Running
                    | DomainState::Paused
                    | DomainState::Blocked
                    | DomainState::ShuttingDown
                    | DomainState::PmSuspended
            ) =>
        {
            if let Err(e) = manager.destroy().await {
                warn!(error = %e, "destroy during teardown failed");
            }
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "cannot read the domain state during teardown"),
    }
    match manager.status().await {
        Ok(status) if status != DomainStatus::NON_EXISTENT => {
            if let Err(e) = manager.undefine().await {
                warn!(error = %e, "undefine failed");
            }
        }
        _ => {}
    }
    if let Some(pid) = qemu_pid.filter(|p| *p > 0) {
        // Only a process that is still this domain's QEMU (pids get reused).
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let is_our_qemu = String::from_utf8_lossy(&cmdline).contains(&format!("guest={name}"));
        if is_our_qemu && kill(Pid::from_raw(pid), None).is_ok() {
            warn!(pid, "QEMU outlived its domain; killing it");
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}
