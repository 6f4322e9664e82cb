//! Launchers simulated in memory: each holds one domain that follows the commands at once and
//! reports every change as a domain event, as a real launcher's notify client would.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use cmd_protocol::domain::{DomainMetadata, DomainSnapshot, DomainSpecSummary, DomainStatusSnapshot};
use cmd_protocol::migration::{AbortStatus, MigrationMetadata, MigrationMode, MigrationOptions};
use cmd_protocol::stats::DomainStats;
use kubevirt_api::domain_state::{DomainState, StateReason};
use kubevirt_api::v1::VirtualMachineInstance;
use tokio::sync::mpsc::UnboundedSender;

use super::{LauncherError, Launchers, MigrationPaths, Presence};
use crate::notify_server::DomainNotification;

#[derive(Debug, Default)]
struct Fleet {
    /// Launchers by socket; `None` while there is no domain.
    domains: HashMap<PathBuf, Option<DomainSnapshot>>,
    unresponsive: Vec<PathBuf>,
    commands: HashMap<&'static str, usize>,
    /// Sockets whose (simulated) pod network is wired.
    wired: Vec<PathBuf>,
    /// Sockets whose launcher's devices cannot be given to it: every sync fails.
    refused_devices: Vec<PathBuf>,
    /// Sockets whose launcher answers too late: every sync times out.
    late: Vec<PathBuf>,
    /// What the next sync of each socket's pod preparation has to say (`take_notices`).
    notices: HashMap<PathBuf, Vec<String>>,
    /// The options of each `MigrateVirtualMachine`, by socket.
    migrations: HashMap<PathBuf, Vec<MigrationOptions>>,
    /// Where the simulated pods keep their migration sockets.
    migration_root: Option<PathBuf>,
}

/// The fake fleet.
#[derive(Debug)]
pub struct FakeLaunchers {
    fleet: Mutex<Fleet>,
    events: UnboundedSender<DomainNotification>,
}

impl FakeLaunchers {
    /// A fleet with no launcher yet; domain events go to `events`.
    #[must_use]
    pub fn new(events: UnboundedSender<DomainNotification>) -> Self {
        Self {
            fleet: Mutex::default(),
            events,
        }
    }

    fn fleet(&self) -> std::sync::MutexGuard<'_, Fleet> {
        self.fleet.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The socket of the launcher of the VMI with `uid`.
    #[must_use]
    pub fn socket_of(uid: &str) -> PathBuf {
        PathBuf::from("/fake-launchers").join(uid)
    }

    /// Starts a launcher (its pod is running) for the VMI with `uid`.
    pub fn start_launcher(&self, uid: &str) {
        self.fleet().domains.insert(Self::socket_of(uid), None);
    }

    /// The launcher stops answering (its process hangs or died without its socket going away).
    pub fn stop_answering(&self, uid: &str) {
        self.fleet().domains.remove(&Self::socket_of(uid));
    }

    /// From now on, the launcher's devices cannot be given to it (the kernel refuses with EPERM),
    /// so every sync fails with that cause.
    pub fn refuse_devices(&self, uid: &str) {
        self.fleet().refused_devices.push(Self::socket_of(uid));
    }

    /// The next sync of the VMI's launcher makes a claim's image smaller than asked, with
    /// `notice` to say so.
    pub fn tolerate_small_volume(&self, uid: &str, notice: &str) {
        self.fleet()
            .notices
            .entry(Self::socket_of(uid))
            .or_default()
            .push(notice.to_owned());
    }

    /// From now on, the launcher is too slow to answer a sync in time (a node busy starting many
    /// VMs): every sync fails with the client's timeout.
    pub fn answer_late(&self, uid: &str) {
        self.fleet().late.push(Self::socket_of(uid));
    }

    /// How many times the command `name` (`sync`, `shutdown`, `kill`, `delete`,
    /// `wire_pod_network`) was sent.
    #[must_use]
    pub fn command_count(&self, name: &str) -> usize {
        self.fleet().commands.get(name).copied().unwrap_or(0)
    }

    /// The simulated pods keep their migration sockets under `root/<uid>/`.
    pub fn keep_migration_sockets_in(&self, root: &Path) {
        self.fleet().migration_root = Some(root.to_owned());
    }

    /// The options of every `MigrateVirtualMachine` the launcher of `uid` got.
    #[must_use]
    pub fn migrations(&self, uid: &str) -> Vec<MigrationOptions> {
        self.fleet()
            .migrations
            .get(&Self::socket_of(uid))
            .cloned()
            .unwrap_or_default()
    }

    /// The migrated domain arrives in the target launcher of `uid` and runs.
    pub fn receive_migrated_domain(&self, uid: &str, vmi: &VirtualMachineInstance) {
        let snapshot = {
            let mut fleet = self.fleet();
            let Some(domain) = fleet.domains.get_mut(&Self::socket_of(uid)) else {
                return;
            };
            *domain = Some(new_domain(vmi));
            domain.clone()
        };
        if let Some(snapshot) = snapshot {
            self.notify("ADDED", snapshot);
        }
    }

    /// The source launcher of `uid` reports its migration over: the guest moved (`Ok`; the
    /// domain shuts off, reason `Migrated`) or stayed (`Err` with the reason).
    pub fn end_migration(&self, uid: &str, outcome: Result<(), &str>) {
        let snapshot = {
            let mut fleet = self.fleet();
            let Some(Some(domain)) = fleet.domains.get_mut(&Self::socket_of(uid)) else {
                return;
            };
            let Some(migration) = domain.metadata.migration.as_mut() else {
                return;
            };
            migration.end_timestamp = Some(k8s_openapi::jiff::Timestamp::now().to_string());
            match outcome {
                Ok(()) => {
                    migration.completed = true;
                    domain.status = DomainStatusSnapshot::from_state(DomainState::Shutoff, StateReason::Migrated);
                }
                Err(reason) => {
                    migration.failed = true;
                    reason.clone_into(&mut migration.failure_reason);
                    if migration.abort_status == Some(AbortStatus::Aborting) {
                        migration.abort_status = Some(AbortStatus::Succeeded);
                    }
                }
            }
            domain.clone()
        };
        self.notify("MODIFIED", snapshot);
    }

    /// The domain's state changes on its own (a crash, the guest powering off).
    pub fn domain_changes(&self, uid: &str, state: DomainState, reason: StateReason) {
        let snapshot = {
            let mut fleet = self.fleet();
            let Some(Some(domain)) = fleet.domains.get_mut(&Self::socket_of(uid)) else {
                return;
            };
            domain.status = DomainStatusSnapshot::from_state(state, reason);
            domain.clone()
        };
        self.notify("MODIFIED", snapshot);
    }

    fn notify(&self, kind: &str, snapshot: DomainSnapshot) {
        let _ = self.events.send(DomainNotification {
            kind: kind.to_owned(),
            snapshot,
        });
    }

    /// Applies `change` to the launcher's domain and reports the new domain.
    fn command(
        &self,
        socket: &Path,
        name: &'static str,
        change: impl FnOnce(&mut Option<DomainSnapshot>) -> Option<&'static str>,
    ) -> Result<(), LauncherError> {
        let (kind, snapshot) = {
            let mut fleet = self.fleet();
            *fleet.commands.entry(name).or_default() += 1;
            let domain = fleet
                .domains
                .get_mut(socket)
                .ok_or_else(|| LauncherError::Gone(socket.to_owned()))?;
            let Some(kind) = change(domain) else {
                return Ok(());
            };
            (kind, domain.clone())
        };
        if let Some(snapshot) = snapshot {
            self.notify(kind, snapshot);
        }
        Ok(())
    }
}

/// A running domain for `vmi`, as a launcher reports it.
fn new_domain(vmi: &VirtualMachineInstance) -> DomainSnapshot {
    let namespace = vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
    DomainSnapshot {
        metadata: DomainMetadata {
            name: format!("{namespace}_{}", vmi.metadata.name.as_deref().unwrap_or_default()),
            namespace,
            uid: vmi.metadata.uid.clone().unwrap_or_default(),
            grace_period_seconds: Some(vmi.termination_grace_period_seconds()),
            ..DomainMetadata::default()
        },
        spec: DomainSpecSummary {
            has_acpi: true,
            machine: Some("pc-q35-7.2".to_owned()),
            ..DomainSpecSummary::default()
        },
        status: DomainStatusSnapshot::from_state(DomainState::Running, StateReason::Unknown),
    }
}

fn set(domain: &mut Option<DomainSnapshot>, state: DomainState, reason: StateReason) -> Option<&'static str> {
    let snapshot = domain.as_mut()?;
    snapshot.status = DomainStatusSnapshot::from_state(state, reason);
    Some("MODIFIED")
}

impl Launchers for FakeLaunchers {
    fn locate(&self, vmi: &VirtualMachineInstance) -> Presence {
        let socket = Self::socket_of(vmi.metadata.uid.as_deref().unwrap_or_default());
        if self.fleet().domains.contains_key(&socket) {
            Presence::Ready(socket)
        } else {
            Presence::Absent
        }
    }

    fn is_pod_network_wired(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> bool {
        self.fleet().wired.iter().any(|s| s == socket)
    }

    /// Simulated pods have no network namespace: the wiring is only recorded.
    async fn wire_pod_network(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let mut fleet = self.fleet();
        *fleet.commands.entry("wire_pod_network").or_default() += 1;
        if !fleet.domains.contains_key(socket) {
            return Err(LauncherError::Gone(socket.to_owned()));
        }
        fleet.wired.push(socket.to_owned());
        Ok(())
    }

    async fn ping(&self, socket: &Path) -> Result<(), LauncherError> {
        if self.fleet().domains.contains_key(socket) {
            Ok(())
        } else {
            Err(LauncherError::Gone(socket.to_owned()))
        }
    }

    async fn sync(&self, socket: &Path, vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        if self.fleet().late.iter().any(|s| s == socket) {
            return Err(LauncherError::Transport(
                cmd_protocol::transport::TransportError::Call {
                    call: "SyncVirtualMachine",
                    message: "Timeout expired".to_owned(),
                },
            ));
        }
        if self.fleet().refused_devices.iter().any(|s| s == socket) {
            return Err(LauncherError::Devices(crate::device_ownership::DeviceOwnershipError {
                path: PathBuf::from("/proc/1/root/dev/kvm"),
                owner: 107,
                source: nix::errno::Errno::EPERM,
            }));
        }
        self.command(socket, "sync", |domain| {
            if domain.is_some() {
                return None;
            }
            *domain = Some(new_domain(vmi));
            Some("ADDED")
        })
    }

    async fn shutdown(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.command(socket, "shutdown", |domain| {
            set(domain, DomainState::Shutoff, StateReason::Shutdown)
        })
    }

    async fn kill(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.command(socket, "kill", |domain| {
            set(domain, DomainState::Shutoff, StateReason::Destroyed)
        })
    }

    async fn pause(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.command(socket, "pause", |domain| {
            set(domain, DomainState::Paused, StateReason::User)
        })
    }

    async fn unpause(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.command(socket, "unpause", |domain| {
            set(domain, DomainState::Running, StateReason::Unknown)
        })
    }

    async fn delete(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        let gone = {
            let mut fleet = self.fleet();
            *fleet.commands.entry("delete").or_default() += 1;
            fleet
                .domains
                .get_mut(socket)
                .ok_or_else(|| LauncherError::Gone(socket.to_owned()))?
                .take()
        };
        if let Some(mut gone) = gone {
            gone.status = DomainStatusSnapshot::default();
            gone.metadata.deletion_timestamp = Some(k8s_openapi::jiff::Timestamp::now().to_string());
            self.notify("MODIFIED", gone);
        }
        Ok(())
    }

    async fn domain(&self, socket: &Path) -> Result<Option<DomainSnapshot>, LauncherError> {
        self.fleet()
            .domains
            .get(socket)
            .cloned()
            .ok_or_else(|| LauncherError::Gone(socket.to_owned()))
    }

    async fn stats(&self, socket: &Path) -> Result<Option<DomainStats>, LauncherError> {
        let domain = self.domain(socket).await?;
        Ok(domain.map(|d| DomainStats {
            name: d.metadata.name,
            cpu_time_ns: 1_500_000_000,
            vcpus: 1,
            ..DomainStats::default()
        }))
    }

    fn mark_unresponsive(&self, socket: &Path) {
        self.fleet().unresponsive.push(socket.to_owned());
    }

    fn is_unresponsive(&self, socket: &Path) -> bool {
        let fleet = self.fleet();
        fleet.unresponsive.iter().any(|s| s == socket)
    }

    fn forget(&self, _socket: &Path) {}

    fn take_notices(&self, socket: &Path) -> Vec<String> {
        self.fleet().notices.remove(socket).unwrap_or_default()
    }

    /// Simulated launchers have no pods to mount into.
    async fn release_volumes(&self, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        Ok(())
    }

    /// Simulated launchers have no pod network.
    fn pod_addresses(&self, _socket: &Path, _vmi: &VirtualMachineInstance) -> BTreeMap<String, Vec<String>> {
        BTreeMap::new()
    }

    async fn sync_migration_target(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.command(socket, "sync_migration_target", |_| None)
    }

    async fn migrate(
        &self,
        socket: &Path,
        _vmi: &VirtualMachineInstance,
        options: &MigrationOptions,
    ) -> Result<(), LauncherError> {
        self.fleet()
            .migrations
            .entry(socket.to_owned())
            .or_default()
            .push(options.clone());
        let uid = options.migration_uid.clone();
        self.command(socket, "migrate", move |domain| {
            domain.as_mut()?.metadata.migration = Some(MigrationMetadata {
                uid,
                start_timestamp: Some(k8s_openapi::jiff::Timestamp::now().to_string()),
                mode: Some(MigrationMode::PreCopy),
                ..MigrationMetadata::default()
            });
            Some("MODIFIED")
        })
    }

    async fn cancel_migration(&self, socket: &Path, _vmi: &VirtualMachineInstance) -> Result<(), LauncherError> {
        self.command(socket, "cancel_migration", |domain| {
            domain.as_mut()?.metadata.migration.as_mut()?.abort_status = Some(AbortStatus::Aborting);
            Some("MODIFIED")
        })
    }

    fn migration_paths(&self, socket: &Path) -> MigrationPaths {
        let root = self.fleet().migration_root.clone().unwrap_or_else(std::env::temp_dir);
        let pod = root.join(socket.file_name().unwrap_or_default());
        // The pod's volumes directory exists before any migration, as the kubelet makes it.
        if let Err(error) = std::fs::create_dir_all(&pod) {
            tracing::warn!(pod = %pod.display(), %error, "cannot make the fake pod's directory");
        }
        MigrationPaths {
            root: pod,
            share_dir: PathBuf::from("share"),
            libvirt_socket: PathBuf::from("libvirt-sock"),
        }
    }
}
