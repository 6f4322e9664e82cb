//! One local run, start to exit:
//!
//! 1. [`prepare_process`] (before any thread exists): load the manifest and make the whole plan
//!    (the volumes, the domain rendered once, the network spec checked), so that every check is
//!    done before anything is created; then create the runtime directory and the libvirt
//!    configuration and enter the private mount namespace.
//! 2. [`run`] (on tokio): become the subreaper, prepare volumes, set the pod network's MAC and MTU
//!    on the domain, start libvirtd, define and start the domain, stream the console,
//!    and supervise the domain until it ends or a signal asks it to stop
//!    ([`crate::supervisor::supervise::supervise`], driven by
//!    [`crate::supervisor::lifecycle::decide`]).
//! 3. Always, whatever happened: destroy what still runs, undefine, stop the daemons, remove the
//!    runtime directory.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase};
use pod_network::local::PrivateNamespace;
use pod_network::plan::CheckedInterfaces;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;
use tracing::{info, instrument, warn};

use super::console;
use super::manifest::load_vmi;
use super::network::{self, LocalNetwork, NetworkError};
use super::runtime_dir::{RuntimeDir, RuntimeDirError};
use crate::domain::{ConvertContext, ConvertError, Domain, InterfaceTaps, apply_interface_links, render};
use crate::emulation::EmulationFlags;
use crate::image_store::ImageStore;
use crate::libvirt::{DomainError, DomainManager, LibvirtDomainManager, LifecycleEvent};
use crate::supervisor::daemons::{DaemonError, LibvirtDaemons, write_configs};
use crate::supervisor::lifecycle::Policy;
use crate::supervisor::namespace::{NamespaceError, enter_private_libvirt_namespace};
use crate::supervisor::reaper::{Reaper, ReaperError};
use crate::supervisor::supervise::{StopSignals, supervise, teardown};
use crate::volumes::{self, PrepareError};

/// How long libvirtd may take to open its socket.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the first connection may take (a cold capability probe takes ~8 s).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a local run keeps its files.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The manifest.
    pub vmi_path: PathBuf,
    /// Instance type and preference manifests the VM names.
    pub with: Vec<PathBuf>,
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
    Manifest(#[from] kubevirt_api::ManifestError),
    /// The domain could not be written as XML.
    #[error(transparent)]
    Xml(#[from] crate::domain::model::XmlError),
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
    /// The host's CPUs, for dedicated CPUs.
    #[error(transparent)]
    HostCpus(#[from] crate::host_cpus::HostCpusError),
}

impl RunError {
    /// 2 when the manifest is at fault, 1 otherwise.
    #[must_use]
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Manifest(_) | Self::Xml(_) | Self::Convert { .. } | Self::NetworkSpec { .. } => 2,
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
    /// The domain, rendered once; the pod network's MAC and MTU are set on it once known.
    domain: Domain,
    /// The network spec, checked once; the network setup plans from it without checking again.
    interfaces: CheckedInterfaces,
    options: RunOptions,
    runtime: RuntimeDir,
    network_namespace: Option<Arc<PrivateNamespace>>,
}

/// The synchronous first step; must run before any thread (tokio included) is started.
pub fn prepare_process(options: RunOptions) -> Result<Prelude, RunError> {
    let vmi = load_vmi(&options.vmi_path, &options.with)?;
    let path = options.vmi_path.display().to_string();
    let convert = |source| RunError::Convert {
        path: path.clone(),
        source,
    };
    let domain_type = options.flags.domain_type().map_err(convert)?;
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let runtime = RuntimeDir::new(&options.runtime_root, &uid)?;
    // The whole plan is made, and so every check done, before anything is created: the volumes
    // (images found, kinds supported), then the domain, rendered once, then the network spec.
    let volumes = volumes::plan(&vmi, &runtime.layout(), &options.store).map_err(|source| RunError::Prepare {
        path: path.clone(),
        source,
    })?;
    let uses_pod_network = pod_network::plan::uses_pod_network(&vmi);
    let ctx = ConvertContext {
        domain_type,
        layout: runtime.layout(),
        container_disk_formats: volumes.container_disk_formats.clone(),
        // The pod network's tap is made by the network setup; without one, libvirt makes plain taps.
        interface_taps: if uses_pod_network {
            InterfaceTaps::PreCreated
        } else {
            InterfaceTaps::LibvirtManaged
        },
        host_cpus: crate::host_cpus::for_vmi(&vmi)?,
        run_as_root: nix::unistd::geteuid().is_root(),
        ..ConvertContext::default()
    };
    let domain = render(&vmi, &ctx).map_err(convert)?;
    let interfaces = pod_network::plan::check_interfaces(&vmi).map_err(|source| RunError::NetworkSpec {
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
        domain,
        interfaces,
        options,
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

/// Sets up the pod network (when the VMI uses it) around [`run_with`], and always takes it down.
async fn run_networked(prelude: &Prelude, reaper: &Reaper) -> Result<VirtualMachineInstancePhase, RunError> {
    let Some(namespace) = &prelude.network_namespace else {
        return run_with(prelude, reaper, None).await;
    };
    let network = LocalNetwork::start(namespace, &prelude.vmi, prelude.interfaces, reaper).await?;
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
    let mut stops = StopSignals::install().map_err(RunError::Signals)?;
    let path = prelude.options.vmi_path.display().to_string();
    let mut domain = prelude.domain.clone();
    if let Some(network) = network {
        apply_interface_links(&mut domain, &network.interface_links());
    }
    let xml = domain.to_xml()?;
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
    let manager = LibvirtDomainManager::new(&paths.uri(), &domain.name, paths.qemu_pid_file(&domain.name), events_tx)?;
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
                after_define: &prelude.volumes.steps,
                reaper,
                path: &path,
                logs: vec![prelude.runtime.serial_console_log(), paths.qemu_log_file(&domain.name)],
            };
            boot_and_supervise(&manager, xml, paused, &booted, &mut events, &mut stops, policy).await
        }
    };
    // A local run has no VM state storage (persistent EFI is refused), so the NVRAM goes too.
    teardown(&manager, &domain.name, &paths.qemu_pid_file(&domain.name), false).await;
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
    /// Volume steps that wait for the defined domain (ConfigDrive).
    after_define: &'a [volumes::Step],
    reaper: &'a Reaper,
    /// The manifest, for errors.
    path: &'a str,
    /// The serial console's log and the domain log, kept bounded.
    logs: Vec<PathBuf>,
}

async fn boot_and_supervise<M: DomainManager>(
    manager: &M,
    xml: String,
    paused: bool,
    booted: &Booted<'_>,
    events: &mut UnboundedReceiver<LifecycleEvent>,
    stops: &mut StopSignals,
    policy: Policy,
) -> Result<VirtualMachineInstancePhase, RunError> {
    manager.define(xml).await?;
    tracing::debug!("domain defined");
    if volumes::has_steps_after_define(booted.after_define) {
        let defined = Domain::from_xml(&manager.live_xml().await?)?;
        volumes::apply_after_define(booted.after_define, &defined, booted.reaper)
            .await
            .map_err(|source| RunError::Prepare {
                path: booted.path.to_owned(),
                source,
            })?;
    }
    manager.start(paused).await?;
    info!(paused, "domain started");
    booted.daemons.record_capabilities();
    let console = console::spawn(booted.runtime.serial_socket());
    let stop_rotation = tokio_util::sync::CancellationToken::new();
    let logs = tokio::spawn(crate::supervisor::log_rotation::keep_bounded(
        booted.logs.clone(),
        crate::supervisor::log_rotation::LogLimit::default(),
        stop_rotation.clone(),
    ));
    let phase = supervise(manager, events, stops, policy).await;
    stop_rotation.cancel();
    let _ = logs.await;
    console.abort();
    Ok(phase?)
}
