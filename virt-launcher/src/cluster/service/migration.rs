//! Live migration in the command service. The target launcher prepares its pod and waits for the
//! domain to arrive; the source launcher migrates peer to peer through the pod's migration
//! sockets, watches the progress ([`crate::cluster::migration_monitor`]) and reports it in its
//! domain snapshots.

use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use cmd_protocol::cmd::{MigrationRequest, VmiRequest};
use cmd_protocol::migration::{AbortStatus, Channel, MigrationMetadata, MigrationMode, MigrationOptions, socket_path};
use kubevirt_api::domain_state::DomainState;
use kubevirt_api::v1::VirtualMachineInstance;
use tokio::sync::mpsc::UnboundedSender;
use tonic::Status;
use tracing::{info, warn};

use super::{LauncherService, Remembered, internal};
use crate::cluster::migration_monitor::{Action, Limits, Watch};
use crate::libvirt::{DomainManager, LifecycleEvent, MigrationParams};
use crate::supervisor::reaper::ToolRunner;

/// Not a libvirt event: the migration's progress or outcome changed, so the handler gets a fresh
/// snapshot.
pub const MIGRATION_EVENT: i32 = -2;
/// How often a running migration's progress is read.
const TICK: Duration = Duration::from_millis(500);

/// Where the migration sockets are and how the target's daemon is reached.
#[derive(Debug, Default)]
pub(super) struct Setup {
    /// The pod's share directory (`/var/run/kubevirt`), which holds `migrationproxy/`.
    pub share_dir: PathBuf,
    /// The libvirt driver of both launchers' daemons: `session` or `system`.
    pub driver: &'static str,
    /// Where changes of the migration are announced.
    pub events: Option<UnboundedSender<LifecycleEvent>>,
}

impl Setup {
    /// libvirt's parameters for migrating the VMI `uid` with `options`, copying `copied_disks`.
    fn params(&self, uid: &str, options: &MigrationOptions, copied_disks: Vec<String>) -> MigrationParams {
        let socket = |channel| socket_path(&self.share_dir, uid, channel);
        MigrationParams {
            destination_uri: format!(
                "qemu+unix:///{}?socket={}",
                self.driver,
                socket(Channel::Libvirt).display()
            ),
            stream_uri: format!("unix://{}", socket(Channel::Stream).display()),
            disks_uri: (!copied_disks.is_empty()).then(|| format!("unix://{}", socket(Channel::Disks).display())),
            copied_disks,
            bandwidth_mib_per_second: options.bandwidth_mib_per_second,
            auto_converge: options.allow_auto_converge,
            post_copy: options.allow_post_copy,
            unsafe_migration: options.unsafe_migration,
        }
    }

    fn announce(&self) {
        if let Some(events) = &self.events {
            let _ = events.send(LifecycleEvent {
                event: MIGRATION_EVENT,
                detail: 0,
            });
        }
    }
}

fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().to_string()
}

fn remembered(shared: &Mutex<Remembered>) -> std::sync::MutexGuard<'_, Remembered> {
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<M: DomainManager + 'static, R: ToolRunner + 'static> LauncherService<M, R> {
    /// Target side: prepares the pod for the domain that the migration brings (volumes, the pod
    /// network's DHCP server with the same lease) and remembers to wait for it. Idempotent.
    pub(super) async fn prepare_migration_target(
        &self,
        vmi: VirtualMachineInstance,
        request: &VmiRequest,
    ) -> Result<(), Status> {
        let _one_at_a_time = self.sync.lock().await;
        if self.remembered().migration_target {
            return Ok(());
        }
        let status = self.manager.status().await.map_err(internal)?;
        if status != crate::libvirt::DomainStatus::NON_EXISTENT {
            return Err(Status::failed_precondition(
                "this launcher already has a domain: it cannot receive a migration",
            ));
        }
        let (ctx, pod) = self.prepare_pod(&vmi, request).await?;
        if crate::volumes::has_steps_after_define(&pod.plan.steps) {
            // What a sync makes once the domain is defined (ConfigDrive seeds), made here from this
            // launcher's own rendering: the domain that arrives reads them at the same paths.
            let rendered = crate::domain::render(&vmi, &ctx).map_err(|e| Status::invalid_argument(e.to_string()))?;
            crate::volumes::apply_after_define(&pod.plan.steps, &rendered, &self.tools)
                .await
                .map_err(internal)?;
        }
        // The target's QEMU listens on the migration sockets here.
        let proxy_dir = self.migration.share_dir.join(cmd_protocol::migration::PROXY_DIR);
        std::fs::create_dir_all(&proxy_dir)
            .map_err(|e| internal(format!("cannot create {}: {e}", proxy_dir.display())))?;
        let mut remembered = self.remembered();
        remembered.vmi = Some(vmi);
        remembered.migration_target = true;
        info!("prepared to receive the migration");
        Ok(())
    }

    /// Source side: starts migrating the running domain and returns; the outcome is reported in
    /// the snapshot's migration metadata. Asking again for the same migration changes nothing.
    pub(super) async fn start_migration(&self, request: &MigrationRequest) -> Result<(), Status> {
        let vmi = request
            .vmi
            .as_ref()
            .ok_or_else(|| Status::invalid_argument("the request carries no VMI"))?;
        let vmi: VirtualMachineInstance = serde_json::from_slice(&vmi.vmi_json)
            .map_err(|e| Status::invalid_argument(format!("invalid VMI JSON: {e}")))?;
        let options: MigrationOptions = serde_json::from_slice(&request.options)
            .map_err(|e| Status::invalid_argument(format!("invalid migration options: {e}")))?;
        if options.migration_uid.is_empty() {
            return Err(Status::invalid_argument("migration options: migrationUid is empty"));
        }
        let uid = vmi
            .metadata
            .uid
            .clone()
            .filter(|u| !u.is_empty())
            .ok_or_else(|| Status::invalid_argument("the VMI has no metadata.uid"))?;
        let _one_at_a_time = self.sync.lock().await;
        if let Some(current) = self.remembered().migration.as_ref() {
            let is_over = current.completed || current.failed;
            if current.uid == options.migration_uid {
                return Ok(());
            }
            if !is_over {
                return Err(Status::failed_precondition(format!(
                    "migration {} is still running",
                    current.uid
                )));
            }
        }
        let status = self.manager.status().await.map_err(internal)?;
        if !matches!(status.state, DomainState::Running | DomainState::Paused) {
            return Err(Status::failed_precondition(format!(
                "the domain is {} ({}): only a running domain migrates",
                status.state, status.reason
            )));
        }
        let live = self.manager.live_xml().await.map_err(internal)?;
        let domain = crate::domain::Domain::from_xml(&live).map_err(internal)?;
        let params = self.migration.params(&uid, &options, copied_disks(&vmi, &domain));
        {
            let mut remembered = self.remembered();
            remembered.vmi = Some(vmi);
            remembered.migration = Some(MigrationMetadata {
                uid: options.migration_uid.clone(),
                start_timestamp: Some(now()),
                mode: Some(MigrationMode::PreCopy),
                ..MigrationMetadata::default()
            });
        }
        self.migration.announce();
        info!(migration = %options.migration_uid, destination = %params.destination_uri, "migration started");
        let manager = self.manager.clone();
        let shared = self.remembered.clone();
        let events = self.migration.events.clone();
        tokio::spawn(async move {
            let outcome = run(manager.as_ref(), &shared, params, &options).await;
            finish(&shared, outcome);
            if let Some(events) = events {
                let _ = events.send(LifecycleEvent {
                    event: MIGRATION_EVENT,
                    detail: 0,
                });
            }
        });
        Ok(())
    }

    /// Source side: aborts the running migration; the guest goes on here.
    pub(super) async fn cancel_migration(&self) -> Result<(), Status> {
        let running = self
            .remembered()
            .migration
            .as_ref()
            .is_some_and(|m| !m.completed && !m.failed);
        if !running {
            return Err(Status::failed_precondition(
                "failed to cancel migration - vmi is not migrating",
            ));
        }
        if let Some(migration) = self.remembered().migration.as_mut() {
            migration.abort_status = Some(AbortStatus::Aborting);
        }
        self.migration.announce();
        if let Err(e) = self.manager.abort_migration().await {
            if let Some(migration) = self.remembered().migration.as_mut() {
                migration.abort_status = Some(AbortStatus::Failed);
            }
            self.migration.announce();
            return Err(Status::failed_precondition(e.to_string()));
        }
        info!("migration abort requested");
        Ok(())
    }
}

/// The target names of the domain's disks whose images are copied to the target: the writable
/// disks of volumes that are not shared storage (a claim, a DataVolume, a shared hostDisk), found
/// by their `ua-<volume>` aliases. Upstream's block migration copies the same ones.
fn copied_disks(vmi: &VirtualMachineInstance, domain: &crate::domain::Domain) -> Vec<String> {
    domain
        .devices
        .disk
        .iter()
        .filter(|disk| disk.readonly.is_none() && disk.device == "disk")
        .filter(|disk| {
            let name = disk.alias.as_ref().and_then(|a| a.name.strip_prefix("ua-"));
            let volume = name.and_then(|n| vmi.spec.volumes.iter().find(|v| v.name == n));
            volume.is_some_and(|v| {
                let shared = v.persistent_volume_claim.is_some()
                    || v.data_volume.is_some()
                    || v.host_disk.as_ref().is_some_and(|h| h.shared == Some(true));
                !shared
            })
        })
        .map(|disk| disk.target.dev.clone())
        .collect()
}

/// How a migration ended, from the monitor's point of view.
struct Outcome {
    result: Result<(), String>,
    /// Why the monitor aborted it, when it did.
    monitor_reason: Option<String>,
}

/// Migrates while the monitor watches: every tick reads the progress into the metadata and acts
/// on what [`Watch::tick`] decides.
async fn run<M: DomainManager>(
    manager: &M,
    shared: &Mutex<Remembered>,
    params: MigrationParams,
    options: &MigrationOptions,
) -> Outcome {
    let started = Instant::now();
    let migration = manager.migrate(params);
    tokio::pin!(migration);
    let mut watch = Watch::default();
    let mut monitor_reason = None;
    let mut largest_total = 0;
    // Set once the migration job is there to take it.
    let mut downtime_to_set = options.max_downtime_ms;
    let mut ticks = tokio::time::interval(TICK);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            result = &mut migration => {
                return Outcome { result: result.map_err(|e| e.to_string()), monitor_reason };
            }
            _ = ticks.tick() => {}
        }
        if monitor_reason.is_some() {
            continue;
        }
        let progress = manager.migration_progress().await.unwrap_or_else(|e| {
            warn!(error = %e, "cannot read the migration's progress");
            None
        });
        if let Some(progress) = progress
            && let Some(metadata) = remembered(shared).migration.as_mut()
        {
            metadata.progress = Some(progress);
        }
        // Tried again at every tick until libvirt takes it: a setting is never dropped.
        if progress.is_some()
            && let Some(milliseconds) = downtime_to_set
        {
            match manager.set_max_downtime(milliseconds).await {
                Ok(()) => downtime_to_set = None,
                Err(error) => warn!(error = %error, milliseconds, "cannot set the migration's maximum downtime yet"),
            }
        }
        // The budget counts the most data libvirt has said it moves: a tick that reads nothing
        // (no job yet, or the switchover) does not shrink it.
        largest_total = largest_total.max(progress.map_or(0, |p| p.data_total_bytes));
        let limits = Limits::for_size(
            largest_total,
            options.completion_timeout_per_gib,
            options.progress_timeout_seconds,
            options.allow_post_copy,
        );
        match watch.tick(started.elapsed(), progress, limits) {
            Action::Continue => {}
            Action::StartPostCopy => {
                info!("the migration did not converge in time; switching to post-copy");
                match manager.start_post_copy().await {
                    Ok(()) => {
                        watch.post_copy_started();
                        if let Some(metadata) = remembered(shared).migration.as_mut() {
                            metadata.mode = Some(MigrationMode::PostCopy);
                        }
                    }
                    // Out of time and no post-copy: the migration cannot finish as asked.
                    Err(e) => {
                        let reason = format!(
                            "Live migration is not completed after {} seconds and cannot switch to post-copy: {e}",
                            started.elapsed().as_secs()
                        );
                        warn!(%reason, "aborting the migration");
                        if manager.abort_migration().await.is_ok() {
                            monitor_reason = Some(reason);
                        }
                    }
                }
            }
            Action::Abort(reason) => {
                warn!(%reason, "aborting the migration");
                match manager.abort_migration().await {
                    Ok(()) => monitor_reason = Some(reason),
                    Err(e) => warn!(error = %e, "cannot abort the migration"),
                }
            }
        }
    }
}

/// Records how the migration ended.
fn finish(shared: &Mutex<Remembered>, outcome: Outcome) {
    let mut remembered = remembered(shared);
    let Some(metadata) = remembered.migration.as_mut() else {
        return;
    };
    metadata.end_timestamp = Some(now());
    match outcome.result {
        Ok(()) => {
            info!(migration = %metadata.uid, "migration completed");
            metadata.completed = true;
            if metadata.abort_status == Some(AbortStatus::Aborting) {
                metadata.abort_status = Some(AbortStatus::Failed);
            }
        }
        Err(message) => {
            metadata.failed = true;
            let cancelled = metadata.abort_status == Some(AbortStatus::Aborting);
            metadata.failure_reason = match (outcome.monitor_reason, cancelled) {
                (Some(reason), _) => reason,
                // Upstream's reason, its trailing space included.
                (None, true) => "Live migration aborted ".to_owned(),
                (None, false) => explained(message),
            };
            if cancelled {
                metadata.abort_status = Some(AbortStatus::Succeeded);
            }
            warn!(migration = %metadata.uid, reason = %metadata.failure_reason, "migration failed");
        }
    }
}

/// libvirt's reason for a failed migration, with the likely cause when QEMU refuses post-copy:
/// with `VIR_MIGRATE_POSTCOPY` libvirt turns on QEMU's post-copy capability before a page moves,
/// and QEMU on the target needs `userfaultfd` for it. The kernel gives that to a process without
/// `CAP_SYS_PTRACE` only where `vm.unprivileged_userfaultfd` is 1 (kernels from 5.11 default to
/// 0), and the runtime's default seccomp profile denies the call. QEMU's "Postcopy is not
/// supported" has other causes too (a memory backend that cannot do it), hence "most likely".
fn explained(message: String) -> String {
    if message.contains("Userfaultfd not available") || message.contains("Postcopy is not supported") {
        format!(
            "{message} (allowPostCopy: QEMU on the target node most likely lacks userfaultfd, which post-copy \
             needs: a QEMU without CAP_SYS_PTRACE gets it only where the node's sysctl \
             vm.unprivileged_userfaultfd is 1 and the pod's seccomp profile allows it; unprivileged launcher \
             pods run under the runtime's default profile (RuntimeDefault), which denies it: turn allowPostCopy off)"
        )
    } else {
        message
    }
}

#[cfg(test)]
mod tests;
