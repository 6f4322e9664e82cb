//! The launcher's side of `kubevirt.cmd.v1.Cmd` (and `CmdInfo`): each RPC is one operation on the
//! launcher's domain through the [`DomainManager`] seam.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use cmd_protocol::cmd::cmd_server::Cmd;
use cmd_protocol::cmd::{
    DomainResponse, DomainStatsResponse, EmptyRequest, GuestInfoResponse, MigrationRequest, Response, VmiRequest,
};
use cmd_protocol::cmd_info::cmd_info_server::CmdInfo;
use cmd_protocol::cmd_info::{CmdInfoRequest, CmdInfoResponse};
use cmd_protocol::domain::{DomainMetadata, DomainSnapshot, DomainStatusSnapshot};
use cmd_protocol::sockets;
use cmd_protocol::version::SUPPORTED_CMD_VERSIONS;
use kubevirt_api::domain_state::DomainState;
use kubevirt_api::v1::VirtualMachineInstance;
use tonic::{Request, Status};
use tracing::{info, instrument};

use super::access_credentials;
use super::container_disk_check;
use super::pod_volumes::{PodPlan, plan_in_pod};
use super::snapshot::summarize;

mod migration;
use crate::domain::{ConvertContext, InterfaceLink, render};
use crate::guest_network::{self, DhcpServer, PodNetworkError, interface_links};
use crate::libvirt::{DomainManager, DomainStatus};
use crate::supervisor::lifecycle::Policy;
use crate::supervisor::reaper::ToolRunner;
use crate::volumes;
pub use migration::MIGRATION_EVENT;

/// Not a libvirt event: the graceful stop began (the first ACPI press), which the snapshots now
/// carry. virt-handler counts the grace period from it, so it must hear of it: libvirt sends no
/// event for a press.
pub const GRACEFUL_SHUTDOWN_EVENT: i32 = -3;

/// What the service remembers about its VMI between calls.
#[derive(Debug, Default)]
struct Remembered {
    vmi: Option<VirtualMachineInstance>,
    graceful_shutdown_started: Option<String>,
    access_credential: Option<access_credentials::Report>,
    /// The migration this launcher runs as its source: reported in every snapshot.
    migration: Option<cmd_protocol::migration::MigrationMetadata>,
    /// This launcher waits for its VMI's incoming migration.
    migration_target: bool,
}

/// The command service over one domain.
#[derive(Debug)]
pub struct LauncherService<M, R> {
    manager: Arc<M>,
    tools: R,
    base: ConvertContext,
    launcher_image: Option<String>,
    /// `--disk-memory-limit`: the address space `qemu-img` may use to check a containerDisk.
    disk_memory_limit: u64,
    remembered: Arc<Mutex<Remembered>>,
    sync: tokio::sync::Mutex<()>,
    dhcp: Mutex<Option<DhcpServer>>,
    credentials: tokio::sync::Mutex<access_credentials::Propagation>,
    migration: migration::Setup,
    /// Told once the domain that migrated away is deleted: the launcher's work is over.
    migrated_away: tokio::sync::Notify,
}

type Reply<T> = Result<tonic::Response<T>, Status>;

fn ok() -> tonic::Response<Response> {
    tonic::Response::new(Response {
        success: true,
        message: String::new(),
    })
}

fn internal(error: impl std::fmt::Display) -> Status {
    Status::internal(error.to_string())
}

fn is_running(status: DomainStatus) -> bool {
    matches!(
        status.state,
        DomainState::Running | DomainState::Paused | DomainState::Blocked | DomainState::PmSuspended
    )
}

impl<M: DomainManager + 'static, R: ToolRunner + 'static> LauncherService<M, R> {
    /// A service for `manager`'s domain; `base` carries the pod layout and the domain type.
    pub fn new(manager: Arc<M>, tools: R, base: ConvertContext) -> Self {
        Self {
            manager,
            tools,
            base,
            launcher_image: None,
            remembered: Arc::default(),
            sync: tokio::sync::Mutex::new(()),
            dhcp: Mutex::new(None),
            credentials: tokio::sync::Mutex::default(),
            migration: migration::Setup::default(),
            migrated_away: tokio::sync::Notify::new(),
            disk_memory_limit: container_disk_check::DEFAULT_DISK_MEMORY_LIMIT,
        }
    }

    /// Checks containerDisk images with `qemu-img` limited to `bytes` of address space.
    #[must_use]
    pub fn with_disk_memory_limit(mut self, bytes: u64) -> Self {
        self.disk_memory_limit = bytes;
        self
    }

    /// Resolves once the domain migrated to another node and virt-handler deleted what was left
    /// of it here: the source pod's launcher then ends, as upstream's does.
    pub async fn migrated_away(&self) {
        self.migrated_away.notified().await;
    }

    /// Migrates through the sockets under `share_dir` to a libvirt daemon of `driver`
    /// (`session` or `system`, as this launcher's), announcing changes of the migration on
    /// `events` as [`migration::MIGRATION_EVENT`].
    #[must_use]
    pub fn with_migration(
        mut self,
        share_dir: std::path::PathBuf,
        driver: &'static str,
        events: tokio::sync::mpsc::UnboundedSender<crate::libvirt::LifecycleEvent>,
    ) -> Self {
        self.migration = migration::Setup {
            share_dir,
            driver,
            events: Some(events),
        };
        self
    }

    /// Reports `image` as the launcher's container image.
    #[must_use]
    pub fn with_launcher_image(mut self, image: Option<String>) -> Self {
        self.launcher_image = image;
        self
    }

    fn remembered(&self) -> std::sync::MutexGuard<'_, Remembered> {
        self.remembered.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn vmi_of(request: &VmiRequest) -> Result<VirtualMachineInstance, Status> {
        let vmi = request
            .vmi
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("the request carries no VMI"))?;
        serde_json::from_slice(&vmi.vmi_json).map_err(|e| Status::invalid_argument(format!("invalid VMI JSON: {e}")))
    }

    fn context(&self, request: &VmiRequest) -> ConvertContext {
        let mut ctx = self.base.clone();
        if let Some(options) = &request.options {
            // As given: 0 turns the balloon's statistics off (the cluster's memBalloonStatsPeriod).
            ctx.mem_balloon_stats_period = options.mem_balloon_stats_period;
            if let Some(smbios) = &options.virtual_machine_sm_bios {
                ctx.smbios.manufacturer.clone_from(&smbios.manufacturer);
                ctx.smbios.product.clone_from(&smbios.product);
                ctx.smbios.version.clone_from(&smbios.version);
                ctx.smbios.sku.clone_from(&smbios.sku);
                ctx.smbios.family.clone_from(&smbios.family);
            }
            if let Some(cluster) = &options.cluster_config {
                ctx.free_page_reporting = !cluster.free_page_reporting_disabled;
                ctx.bochs_display_for_efi = cluster.bochs_display_for_efi_guests;
                ctx.serial_console_log = !cluster.serial_console_log_disabled;
            }
        }
        ctx
    }

    /// Phase 2 of the pod network: the plan from virt-handler's cache, and its DHCP server (started
    /// once). Returns the MAC and MTU for the domain.
    fn serve_pod_network(
        &self,
        vmi: &VirtualMachineInstance,
        private: &std::path::Path,
    ) -> Result<BTreeMap<String, InterfaceLink>, Status> {
        let plan = guest_network::from_handler_cache(
            vmi,
            &private.join(sockets::POD_INTERFACE_CACHE),
            &private.join(sockets::POD_NETWORK_READY),
        )
        .map_err(|e| match e {
            PodNetworkError::NotReady { .. } => Status::unavailable(e.to_string()),
            PodNetworkError::Plan(_) => Status::invalid_argument(e.to_string()),
            PodNetworkError::Cache(_) | PodNetworkError::Dhcp(_) => internal(e),
        })?;
        if let Some(plan) = &plan {
            let mut dhcp = self.dhcp.lock().unwrap_or_else(PoisonError::into_inner);
            if dhcp.is_none() {
                *dhcp = Some(DhcpServer::start(plan).map_err(internal)?);
            }
        }
        Ok(interface_links(plan.as_ref()))
    }

    /// Makes the pod ready for the domain: the VMI's private directory, its volumes and the pod
    /// network's DHCP server; returns the context to render the domain in and the volume plan.
    async fn prepare_pod(
        &self,
        vmi: &VirtualMachineInstance,
        request: &VmiRequest,
    ) -> Result<(ConvertContext, PodPlan), Status> {
        let mut formats: BTreeMap<String, String> = request
            .options
            .as_ref()
            .map(|o| {
                o.disks_info
                    .iter()
                    .map(|(k, v)| (k.clone(), v.format.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut ctx = self.context(request);
        container_disk_check::check_unreported(&self.tools, vmi, &ctx.layout, &mut formats, self.disk_memory_limit)
            .await
            .map_err(|e| {
                if e.is_bad_input() {
                    Status::invalid_argument(e.to_string())
                } else {
                    internal(e)
                }
            })?;
        ctx.host_cpus =
            crate::host_cpus::for_vmi(vmi).map_err(|e| internal(kubevirt_api::error_report::one_line(&e)))?;
        // The VMI's own directory holds its serial and VNC sockets.
        let private = ctx
            .layout
            .vmi_private_dir(vmi.metadata.uid.as_deref().unwrap_or_default());
        std::fs::create_dir_all(&private).map_err(|e| internal(format!("cannot create {private}: {e}")))?;
        let pod = plan_in_pod(vmi, &ctx.layout, &formats).map_err(|e| Status::invalid_argument(e.to_string()))?;
        volumes::apply(&pod.plan.steps, &self.tools).await.map_err(internal)?;
        ctx.container_disk_formats = pod.plan.container_disk_formats.clone();
        ctx.block_volumes.clone_from(&pod.block_volumes);
        ctx.interface_links = self.serve_pod_network(vmi, std::path::Path::new(&private))?;
        Ok((ctx, pod))
    }

    /// Defines the domain if it does not exist, then starts it if it is down and the VMI has not
    /// run yet. Idempotent.
    #[instrument(skip_all, fields(vmi = %vmi.key()))]
    async fn sync(&self, vmi: VirtualMachineInstance, request: &VmiRequest) -> Result<(), Status> {
        let _one_at_a_time = self.sync.lock().await;
        // Before the domain exists: the events libvirt sends while it is defined and started name
        // the VMI from this (see [`Self::snapshot`]); remembered only afterwards, they went out
        // with no name, and virt-handler could not tell which VMI they were about.
        self.remembered().vmi = Some(vmi.clone());
        let status = self.manager.status().await.map_err(internal)?;
        if status == DomainStatus::NON_EXISTENT && self.remembered().migration_target {
            return Err(Status::failed_precondition(
                "this launcher is the target of a migration: the domain arrives with it",
            ));
        }
        if status == DomainStatus::NON_EXISTENT {
            let (ctx, pod) = self.prepare_pod(&vmi, request).await?;
            let domain = render(&vmi, &ctx).map_err(|e| Status::invalid_argument(e.to_string()))?;
            let xml = domain.to_xml().map_err(internal)?;
            self.manager.define(xml).await.map_err(internal)?;
            info!(domain = %domain.name, "domain defined");
            if volumes::has_steps_after_define(&pod.plan.steps) {
                let live = self.manager.live_xml().await.map_err(internal)?;
                let defined = crate::domain::Domain::from_xml(&live).map_err(internal)?;
                volumes::apply_after_define(&pod.plan.steps, &defined, &self.tools)
                    .await
                    .map_err(internal)?;
            }
        }
        let has_run = vmi
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .is_some_and(|p| p.is_final() || p == kubevirt_api::v1::VirtualMachineInstancePhase::Running);
        let status = self.manager.status().await.map_err(internal)?;
        if status.state == DomainState::Shutoff && !has_run && self.remembered().graceful_shutdown_started.is_none() {
            let paused = vmi.spec.start_strategy.as_deref() == Some("Paused");
            self.manager.start(paused).await.map_err(internal)?;
            info!(paused, "domain started");
        }
        Ok(())
    }

    /// Propagates the access credentials that go through the guest agent when they changed, or
    /// are due again, while the domain runs. Returns whether the outcome the handler sees changed.
    pub async fn sync_access_credentials(&self) -> bool {
        let Some(vmi) = self.remembered().vmi.clone().filter(access_credentials::uses_agent) else {
            return false;
        };
        if !matches!(self.manager.status().await, Ok(s) if s.state == DomainState::Running) {
            return false;
        }
        let mut propagation = self.credentials.lock().await;
        let now = std::time::Instant::now();
        let report = match access_credentials::read_desired(&vmi, &self.base.layout) {
            Err(message) => access_credentials::Report {
                succeeded: false,
                message,
            },
            Ok(desired) if propagation.is_due(&desired, now) => {
                let report = access_credentials::propagate(self.manager.as_ref(), &desired).await;
                propagation.record(desired, &report, now);
                report
            }
            Ok(_) => return false,
        };
        let mut remembered = self.remembered();
        let changed = remembered.access_credential.as_ref() != Some(&report);
        if changed {
            info!(succeeded = report.succeeded, message = %report.message, "access credentials propagated");
        }
        remembered.access_credential = Some(report);
        changed
    }

    /// Whether the domain's NVRAM outlives it: the VMI last synced keeps its EFI variables on VM
    /// state storage.
    #[must_use]
    pub fn keeps_nvram(&self) -> bool {
        self.remembered()
            .vmi
            .as_ref()
            .is_some_and(|vmi| kubevirt_api::persistent_state::has_persistent_efi(&vmi.spec))
    }

    /// How a stop request (SIGTERM) stops the domain: within `grace`, with the power button only
    /// when the defined domain has ACPI; without ACPI it is killed at once, as in local mode. A
    /// domain whose XML cannot be read is assumed to have ACPI: the grace period then ends in a
    /// kill anyway.
    pub async fn stop_policy(&self, grace: std::time::Duration) -> Policy {
        let has_acpi = self
            .manager
            .live_xml()
            .await
            .map_or(true, |xml| summarize(&xml).has_acpi);
        Policy { grace, has_acpi }
    }

    /// The domain as the handler sees it.
    pub async fn snapshot(&self) -> Result<Option<DomainSnapshot>, Status> {
        let status = self.manager.status().await.map_err(internal)?;
        if status == DomainStatus::NON_EXISTENT {
            return Ok(None);
        }
        // A failed read (the domain vanished meanwhile) leaves the summary empty; state and
        // reason still go out.
        let live_xml = self.manager.live_xml().await.unwrap_or_default();
        let remembered = self.remembered();
        let vmi = remembered.vmi.as_ref();
        let namespace = vmi
            .and_then(|v| v.metadata.namespace.clone())
            .unwrap_or_else(|| "default".to_owned());
        let name = vmi.and_then(|v| v.metadata.name.clone()).unwrap_or_default();
        Ok(Some(DomainSnapshot {
            metadata: DomainMetadata {
                name: format!("{namespace}_{name}"),
                namespace,
                uid: vmi.and_then(|v| v.metadata.uid.clone()).unwrap_or_default(),
                deletion_timestamp: None,
                grace_period_seconds: vmi.map(VirtualMachineInstance::termination_grace_period_seconds),
                graceful_shutdown_started: remembered.graceful_shutdown_started.clone(),
                launcher_image: self.launcher_image.clone(),
                access_credential: remembered.access_credential.clone(),
                migration: remembered.migration.clone(),
            },
            spec: summarize(&live_xml),
            status: DomainStatusSnapshot::from_state(status.state, status.reason),
        }))
    }
}

#[tonic::async_trait]
impl<M: DomainManager + 'static, R: ToolRunner + 'static> Cmd for LauncherService<M, R> {
    async fn sync_virtual_machine(&self, request: Request<VmiRequest>) -> Reply<Response> {
        let vmi = Self::vmi_of(request.get_ref())?;
        self.sync(vmi, request.get_ref()).await?;
        Ok(ok())
    }

    async fn shutdown_virtual_machine(&self, request: Request<VmiRequest>) -> Reply<Response> {
        Self::vmi_of(request.get_ref())?;
        let status = self.manager.status().await.map_err(internal)?;
        if is_running(status) {
            self.manager.shutdown().await.map_err(internal)?;
            let first_press = {
                let mut remembered = self.remembered();
                let first = remembered.graceful_shutdown_started.is_none();
                if first {
                    remembered.graceful_shutdown_started = Some(k8s_openapi::jiff::Timestamp::now().to_string());
                }
                first
            };
            if first_press && let Some(events) = &self.migration.events {
                let _ = events.send(crate::libvirt::LifecycleEvent {
                    event: GRACEFUL_SHUTDOWN_EVENT,
                    detail: 0,
                });
            }
        }
        Ok(ok())
    }

    async fn kill_virtual_machine(&self, request: Request<VmiRequest>) -> Reply<Response> {
        Self::vmi_of(request.get_ref())?;
        let status = self.manager.status().await.map_err(internal)?;
        if is_running(status) || status.state == DomainState::ShuttingDown {
            self.manager.destroy().await.map_err(internal)?;
        }
        Ok(ok())
    }

    async fn delete_virtual_machine(&self, request: Request<VmiRequest>) -> Reply<Response> {
        let vmi = Self::vmi_of(request.get_ref())?;
        let status = self.manager.status().await.map_err(internal)?;
        if status != DomainStatus::NON_EXISTENT {
            let keep_nvram = kubevirt_api::persistent_state::has_persistent_efi(&vmi.spec);
            self.manager.undefine(keep_nvram).await.map_err(internal)?;
        }
        let moved = self.remembered().migration.as_ref().is_some_and(|m| m.completed);
        if moved {
            info!("the domain migrated away and is deleted; the launcher is done");
            self.migrated_away.notify_one();
        }
        Ok(ok())
    }

    async fn pause_virtual_machine(&self, request: Request<VmiRequest>) -> Reply<Response> {
        Self::vmi_of(request.get_ref())?;
        self.manager
            .pause()
            .await
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        Ok(ok())
    }

    async fn unpause_virtual_machine(&self, request: Request<VmiRequest>) -> Reply<Response> {
        Self::vmi_of(request.get_ref())?;
        self.manager
            .resume()
            .await
            .map_err(|e| Status::failed_precondition(e.to_string()))?;
        Ok(ok())
    }

    async fn sync_migration_target(&self, request: Request<VmiRequest>) -> Reply<Response> {
        let vmi = Self::vmi_of(request.get_ref())?;
        self.prepare_migration_target(vmi, request.get_ref()).await?;
        Ok(ok())
    }

    async fn migrate_virtual_machine(&self, request: Request<MigrationRequest>) -> Reply<Response> {
        self.start_migration(request.get_ref()).await?;
        Ok(ok())
    }

    async fn cancel_virtual_machine_migration(&self, request: Request<VmiRequest>) -> Reply<Response> {
        Self::vmi_of(request.get_ref())?;
        self.cancel_migration().await?;
        Ok(ok())
    }

    async fn ping(&self, _request: Request<EmptyRequest>) -> Reply<Response> {
        Ok(ok())
    }

    async fn get_domain(&self, _request: Request<EmptyRequest>) -> Reply<DomainResponse> {
        let domain = match self.snapshot().await? {
            Some(snapshot) => serde_json::to_string(&snapshot).map_err(internal)?,
            None => String::new(),
        };
        Ok(tonic::Response::new(DomainResponse {
            response: Some(ok().into_inner()),
            domain,
        }))
    }

    async fn get_domain_stats(&self, _request: Request<EmptyRequest>) -> Reply<DomainStatsResponse> {
        let status = self.manager.status().await.map_err(internal)?;
        let domain_stats = if is_running(status) {
            serde_json::to_string(&self.manager.stats().await.map_err(internal)?).map_err(internal)?
        } else {
            String::new()
        };
        Ok(tonic::Response::new(DomainStatsResponse {
            response: Some(ok().into_inner()),
            domain_stats,
        }))
    }

    async fn get_guest_info(&self, _request: Request<EmptyRequest>) -> Reply<GuestInfoResponse> {
        Err(Status::unimplemented(
            "guest agent support is not implemented by the kubevirt-rs launcher yet",
        ))
    }
}

/// `kubevirt.cmd.info.CmdInfo`: the versions this launcher serves.
#[derive(Clone, Copy, Debug, Default)]
pub struct LauncherInfo;

#[tonic::async_trait]
impl CmdInfo for LauncherInfo {
    async fn info(&self, _request: Request<CmdInfoRequest>) -> Reply<CmdInfoResponse> {
        Ok(tonic::Response::new(CmdInfoResponse {
            supported_cmd_versions: SUPPORTED_CMD_VERSIONS.to_vec(),
        }))
    }
}
