//! The reconciler: keeps what the handler knows (the node's VMIs from the watch, each domain from
//! its launcher's events), and for one VMI at a time observes, plans ([`crate::plan`]) and applies
//! the plan through the launcher and the API server.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cmd_protocol::domain::DomainSnapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use tracing::{debug, info, instrument, warn};

use crate::clock::Clock;
use crate::cluster_api::{ApiError, ClusterApi, VmiEvent};
use crate::launchers::{LauncherError, Launchers};
use crate::notify_server::DomainNotification;
use crate::plan::{LauncherState, Observation, Step, phase_event, plan};
use crate::status::{LauncherView, access_credentials_event, next_status, waits_for_the_start};

mod launcher_presence;
mod migration;
pub use migration::MigrationNetwork;

/// How the reconciler behaves.
#[derive(Clone, Debug)]
pub struct ReconcilerConfig {
    /// This node.
    pub node: String,
    /// A launcher failing every call this long is declared unresponsive.
    pub unresponsive_after: Duration,
    /// Retry delay after a failed step or write.
    pub retry: Duration,
    /// How the migration proxies reach other nodes.
    pub migration: MigrationNetwork,
}

impl ReconcilerConfig {
    /// Upstream's defaults for `node`.
    #[must_use]
    pub fn for_node(node: &str) -> Self {
        Self {
            node: node.to_owned(),
            unresponsive_after: Duration::from_secs(30),
            retry: Duration::from_secs(1),
            migration: MigrationNetwork::default(),
        }
    }
}

/// What the handler knows.
#[derive(Debug, Default)]
struct Known {
    vmis: HashMap<String, Arc<VirtualMachineInstance>>,
    /// Last copies of VMIs gone from the API, kept until their launcher is cleaned up.
    gone: HashMap<String, Arc<VirtualMachineInstance>>,
    domains: HashMap<String, DomainSnapshot>,
    /// VMIs whose launcher was asked for its domain since this handler started.
    listed: HashSet<String>,
    sockets: HashMap<String, PathBuf>,
    last_acpi: HashMap<String, Timestamp>,
    failing_since: HashMap<String, Timestamp>,
    /// Keys seen during a relist (between `Init` and `InitDone`).
    relisting: Option<HashSet<String>>,
    /// Migration targets whose launcher got `SyncMigrationTarget`, with the migration's UID.
    prepared_targets: HashMap<String, String>,
    /// The migration proxies of the VMIs migrating to or from this node, with the migration's UID.
    proxies: HashMap<String, (String, crate::migration_proxy::Proxy)>,
    /// Sources whose launcher was sent `MigrateVirtualMachine`, with the migration's UID.
    migrations_sent: HashMap<String, String>,
}

/// The reconciler.
#[derive(Debug)]
pub struct Reconciler<C, L, K> {
    config: ReconcilerConfig,
    api: C,
    launchers: L,
    clock: K,
    known: Mutex<Known>,
    /// The handler is stopping: no new migration proxy opens ([`crate::drain`]).
    draining: std::sync::atomic::AtomicBool,
}

/// The phase counts and launcher sockets metrics are built from.
#[derive(Clone, Debug, Default)]
pub struct NodeView {
    /// VMIs by phase.
    pub phases: Vec<(Arc<VirtualMachineInstance>, Phase)>,
    /// Launcher sockets of the VMIs, by `namespace/name`.
    pub sockets: Vec<(String, PathBuf)>,
}

impl<C: ClusterApi, L: Launchers, K: Clock> Reconciler<C, L, K> {
    /// A reconciler with empty knowledge.
    pub fn new(config: ReconcilerConfig, api: C, launchers: L, clock: K) -> Self {
        Self {
            config,
            api,
            launchers,
            clock,
            known: Mutex::default(),
            draining: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// From now on no new migration proxy opens: the handler is stopping.
    pub fn begin_drain(&self) {
        self.draining.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many VMIs have migration proxies open on this node.
    pub fn open_proxies(&self) -> usize {
        self.known().proxies.len()
    }

    fn is_draining(&self) -> bool {
        self.draining.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Keeps a VMI this handler wrote, unless the watch already showed it as new or newer, or
    /// showed it deleted ([`control_loop::own_writes`]): a newer VMI lost here would not come
    /// back until the VMI changed again.
    fn keep_written(&self, key: &str, stored: VirtualMachineInstance) {
        let mut known = self.known();
        let is_newer = known.vmis.get(key).is_some_and(|cached| {
            control_loop::own_writes::replaces_cached(
                stored.metadata.resource_version.as_deref(),
                cached.metadata.resource_version.as_deref(),
            )
        });
        if is_newer {
            known.vmis.insert(key.to_owned(), Arc::new(stored));
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The API side.
    pub fn api(&self) -> &C {
        &self.api
    }

    /// The launchers.
    pub fn launchers(&self) -> &L {
        &self.launchers
    }

    /// This node's name.
    pub fn node(&self) -> &str {
        &self.config.node
    }

    /// Takes in a VMI watch event; returns the keys to reconcile.
    pub fn on_vmi_event(&self, event: Event<VirtualMachineInstance>) -> Vec<String> {
        let mut known = self.known();
        match event {
            Event::Init => {
                known.relisting = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(vmi) => {
                let key = vmi.key();
                if let Some(seen) = known.relisting.as_mut() {
                    seen.insert(key.clone());
                }
                known.gone.remove(&key);
                known.vmis.insert(key.clone(), Arc::new(vmi));
                vec![key]
            }
            Event::InitDone => {
                let seen = known.relisting.take().unwrap_or_default();
                let vanished: Vec<String> = known.vmis.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                for key in &vanished {
                    if let Some(vmi) = known.vmis.remove(key) {
                        known.gone.insert(key.clone(), vmi);
                    }
                }
                vanished
            }
            Event::Apply(vmi) => {
                let key = vmi.key();
                known.gone.remove(&key);
                known.vmis.insert(key.clone(), Arc::new(vmi));
                vec![key]
            }
            Event::Delete(vmi) => {
                let key = vmi.key();
                known.vmis.remove(&key);
                known.gone.insert(key.clone(), Arc::new(vmi));
                vec![key]
            }
        }
    }

    /// Takes in a domain event from a launcher; returns the key to reconcile.
    pub fn on_domain_event(&self, notification: DomainNotification) -> String {
        let key = notification.snapshot.vmi_key();
        debug!(vmi = %key, kind = %notification.kind, state = %notification.snapshot.status.status, "domain event");
        let mut known = self.known();
        known.listed.insert(key.clone());
        known.domains.insert(key.clone(), notification.snapshot);
        key
    }

    /// Every key the handler knows, for a full resync.
    pub fn keys(&self) -> Vec<String> {
        let known = self.known();
        known.vmis.keys().chain(known.gone.keys()).cloned().collect()
    }

    /// A VMI this handler knows, with its launcher socket once it has seen one.
    pub fn lookup(&self, key: &str) -> Option<(Arc<VirtualMachineInstance>, Option<PathBuf>)> {
        let known = self.known();
        let vmi = known.vmis.get(key)?.clone();
        Some((vmi, known.sockets.get(key).cloned()))
    }

    /// What metrics are built from.
    pub fn node_view(&self) -> NodeView {
        let known = self.known();
        NodeView {
            phases: known
                .vmis
                .values()
                .map(|v| (v.clone(), v.status.as_ref().and_then(|s| s.phase).unwrap_or_default()))
                .collect(),
            sockets: known.sockets.iter().map(|(k, s)| (k.clone(), s.clone())).collect(),
        }
    }

    /// Records an event about a known VMI; failures are logged, not fatal.
    pub async fn record(&self, key: &str, event: VmiEvent) {
        let vmi = {
            let known = self.known();
            known.vmis.get(key).or_else(|| known.gone.get(key)).cloned()
        };
        if let Some(vmi) = vmi
            && let Err(error) = self.api.record_event(vmi.as_ref(), &self.config.node, event).await
        {
            warn!(vmi = %key, error = %error, "cannot record an event");
        }
    }

    /// Reconciles one VMI; returns when to look at it again.
    #[instrument(skip(self), fields(node = %self.config.node))]
    pub async fn reconcile(&self, key: &str) -> Option<Duration> {
        let (vmi, vmi_gone) = {
            let known = self.known();
            match (known.vmis.get(key), known.gone.get(key)) {
                (Some(vmi), _) => (vmi.clone(), false),
                (None, Some(vmi)) => (vmi.clone(), true),
                (None, None) => return None,
            }
        };
        let role = (!vmi_gone)
            .then(|| crate::migration::role(&vmi, &self.config.node))
            .flatten();
        if role.is_none() {
            // No migration to or from here (any more): its proxies close.
            let mut known = self.known();
            known.proxies.remove(key);
            known.prepared_targets.remove(key);
            known.migrations_sent.remove(key);
        }
        if let Some(crate::migration::Role::Target(state)) = &role {
            // Boxed: the migration steps would make every reconcile's future large.
            return Box::pin(self.reconcile_target(key, &vmi, state)).await;
        }
        // A VMI on another node is that node's; one gone from this node's watches may have
        // migrated away, and its launcher here still has a domain to undefine.
        if !vmi_gone
            && vmi
                .status
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .is_some_and(|n| n != self.config.node)
        {
            return None;
        }
        let (launcher, socket) = self.observe_launcher(key, &vmi).await;
        let now = self.clock.now();
        let (domain, last_acpi) = {
            let mut known = self.known();
            if matches!(launcher, LauncherState::Absent | LauncherState::Unresponsive) {
                // No launcher answers for the domain any more: what it last reported is void, as
                // upstream's synthetic "domain gone" event for an unresponsive launcher.
                known.domains.remove(key);
            }
            (known.domains.get(key).cloned(), known.last_acpi.get(key).copied())
        };
        // Asked only of VMIs on the pod network: the launchers may look at the pod's files.
        let pod_network_wired = pod_network::plan::uses_pod_network(&vmi)
            && socket
                .as_ref()
                .is_some_and(|s| self.launchers.is_pod_network_wired(s, &vmi));
        let plan = plan(&Observation {
            vmi: &vmi,
            vmi_gone,
            domain: domain.as_ref(),
            launcher,
            now,
            last_acpi,
            pod_network_wired,
        });
        let mut requeue = plan.requeue;
        for event in plan.events {
            self.record(key, event).await;
        }
        for step in &plan.steps {
            if let Err(error) = self
                .apply(key, *step, &vmi, socket.as_ref(), domain.is_none(), now)
                .await
            {
                if error.is_still_starting() {
                    debug!(vmi = %key, reason = %error, "the launcher pod is still starting");
                    requeue = Some(crate::plan::STARTING_RETRY);
                    break;
                }
                // With its causes: "cannot give ... to uid 107" alone does not say why.
                let message = kubevirt_api::error_report::one_line(&error);
                warn!(vmi = %key, step = ?step, error = %message, "step failed");
                // Wiring the pod network was part of Sync before it became a step of its own.
                if matches!(*step, Step::Sync | Step::WirePodNetwork) {
                    self.record(key, VmiEvent::warning("SyncFailed", message)).await;
                }
                self.note_call_failure(key, socket.as_ref(), &error, now);
                requeue = Some(self.config.retry);
                break;
            }
        }
        if let Some(crate::migration::Role::Source(state)) = &role
            && let Some(delay) = Box::pin(self.reconcile_source(key, &vmi, launcher, socket.as_ref(), state)).await
        {
            requeue = Some(requeue.map_or(delay, |r| r.min(delay)));
        }
        if plan.write_status
            && let Some(delay) = self.write_status(key, launcher).await
        {
            requeue = Some(requeue.map_or(delay, |r| r.min(delay)));
        }
        requeue
    }

    async fn apply(
        &self,
        key: &str,
        step: Step,
        vmi: &VirtualMachineInstance,
        socket: Option<&PathBuf>,
        had_no_domain: bool,
        now: Timestamp,
    ) -> Result<(), LauncherError> {
        if step == Step::Cleanup {
            self.launchers.release_volumes(vmi).await?;
            self.cleanup(key);
            return Ok(());
        }
        let Some(socket) = socket else { return Ok(()) };
        match step {
            Step::WirePodNetwork => self.launchers.wire_pod_network(socket, vmi).await?,
            Step::Sync => {
                let synced = self.launchers.sync(socket, vmi).await;
                for notice in self.launchers.take_notices(socket) {
                    self.record(key, VmiEvent::normal("ToleratedSmallPV", &notice)).await;
                }
                synced?;
                if had_no_domain {
                    self.record(key, VmiEvent::normal("Created", "VirtualMachineInstance defined."))
                        .await;
                }
            }
            Step::PressPowerButton => {
                self.launchers.ping(socket).await?;
                self.launchers.shutdown(socket, vmi).await?;
                self.known().last_acpi.insert(key.to_owned(), now);
            }
            Step::Kill => self.launchers.kill(socket, vmi).await?,
            Step::Delete => self.launchers.delete(socket, vmi).await?,
            Step::Cleanup => {}
        }
        self.known().failing_since.remove(key);
        Ok(())
    }

    /// Forgets the VMI's launcher and, for a VMI gone from the API, everything about it.
    fn cleanup(&self, key: &str) {
        let mut known = self.known();
        if let Some(socket) = known.sockets.remove(key) {
            self.launchers.forget(&socket);
        }
        known.domains.remove(key);
        known.last_acpi.remove(key);
        known.failing_since.remove(key);
        known.listed.remove(key);
        known.proxies.remove(key);
        known.prepared_targets.remove(key);
        known.migrations_sent.remove(key);
        if known.gone.remove(key).is_some() {
            info!(vmi = %key, "cleaned up");
        }
    }

    /// Computes and writes the status when it changed; returns a retry delay on failure.
    async fn write_status(&self, key: &str, launcher: LauncherState) -> Option<Duration> {
        let (vmi, domain, socket) = {
            let known = self.known();
            (
                known.vmis.get(key).cloned()?,
                known.domains.get(key).cloned(),
                known.sockets.get(key).cloned(),
            )
        };
        let pod_addresses = socket
            .map(|socket| self.launchers.pod_addresses(&socket, &vmi))
            .unwrap_or_default();
        let view = match launcher {
            LauncherState::Ready => LauncherView::Responsive,
            LauncherState::Starting => LauncherView::Starting,
            LauncherState::Absent | LauncherState::Unresponsive => LauncherView::Unresponsive,
        };
        let now = Time(self.clock.now());
        let status = next_status(&vmi, &self.config.node, domain.as_ref(), view, &now, &pod_addresses);
        if vmi.status.as_ref() == Some(&status) || waits_for_the_start(vmi.status.as_ref(), &status) {
            return None;
        }
        let old_phase = vmi.status.as_ref().and_then(|s| s.phase);
        let new_phase = status.phase;
        let credentials_event = access_credentials_event(vmi.status.as_ref(), &status);
        let mut updated = Box::new(vmi.as_ref().clone());
        updated.status = Some(status);
        match self.api.update_vmi_status(&updated).await {
            Ok(stored) => {
                self.keep_written(key, stored);
                if new_phase != old_phase {
                    info!(vmi = %key, phase = ?new_phase, "phase changed");
                    if let Some(event) = new_phase.and_then(phase_event) {
                        self.record(key, event).await;
                    }
                }
                if let Some(event) = credentials_event {
                    self.record(key, event).await;
                }
                None
            }
            Err(ApiError::Conflict { .. }) => {
                debug!(vmi = %key, "status write conflicted; waiting for the newer VMI");
                Some(self.config.retry)
            }
            Err(error) => {
                warn!(vmi = %key, error = %error, "cannot write the status");
                Some(self.config.retry)
            }
        }
    }
}
