//! The reconciler's part of a live migration: the target side's steps and status writes, and the
//! source side's steps; which step comes next is decided in [`crate::migration`].

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cmd_protocol::migration::Channel;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::migration_settings::MigrationSettings;
use kubevirt_api::v1::{MigrationState, VirtualMachineInstance};
use kubevirt_api::well_known::labels;
use tracing::{info, warn};

use super::Reconciler;
use crate::clock::Clock;
use crate::cluster_api::{ClusterApi, VmiEvent};
use crate::launchers::{LauncherError, Launchers};
use crate::migration::{
    SourceSeen, SourceStep, TargetSeen, TargetStep, finalized, options, source_step, target_ports, target_status,
    target_step,
};
use crate::migration_proxy::{Proxy, ProxyError, Security};
use crate::plan::{LauncherState, STARTING_RETRY};

/// How this node's migration proxies reach the other nodes.
#[derive(Clone, Debug, Default)]
pub struct MigrationNetwork {
    /// The address the target proxies listen on and publish (the handler pod's IP); without one
    /// this node cannot be a migration target.
    pub address: Option<IpAddr>,
    /// The handlers' mutual TLS ([`Security::Tls`], read again when its files change), used
    /// unless the migration's settings say `disableTLS`; without it only such migrations run.
    pub tls: Option<std::sync::Arc<crate::migration_tls::MigrationTls>>,
}

impl MigrationNetwork {
    /// How the connections of the migration with `state` are made.
    fn security(&self, state: &MigrationState) -> Result<Security, StepError> {
        let disabled = state
            .migration_configuration
            .as_ref()
            .and_then(|c| c.disable_tls)
            .unwrap_or(false);
        if disabled {
            return Ok(Security::Plain);
        }
        self.tls.as_ref().map(|tls| tls.current()).ok_or(StepError::NoTls)
    }
}

/// Why a migration step failed.
#[derive(Debug, thiserror::Error)]
enum StepError {
    #[error(transparent)]
    Launcher(#[from] LauncherError),
    #[error(transparent)]
    Proxy(#[from] ProxyError),
    #[error("this node has no migration address (virt-handler's --pod-ip-address)")]
    NoAddress,
    #[error("the migration target's address {0:?} is not an IP address")]
    BadAddress(String),
    #[error(
        "no certificates for the migration's mutual TLS (virt-handler's --console-tls-cert-file, --console-tls-key-file, --console-client-ca-file, --migration-client-cert-file and --migration-client-key-file), and the cluster does not set migrations.disableTLS"
    )]
    NoTls,
    #[error("cannot write the VMI: {0}")]
    Write(String),
    #[error("virt-handler is shutting down: no new migration proxy opens")]
    ShuttingDown,
}

/// Go on at once with the next step.
const NEXT: Duration = Duration::from_millis(10);

impl<C: ClusterApi, L: Launchers, K: Clock> Reconciler<C, L, K> {
    /// Target side of `vmi`'s migration: one step, then when to look again.
    pub(super) async fn reconcile_target(
        &self,
        key: &str,
        vmi: &Arc<VirtualMachineInstance>,
        state: &MigrationState,
    ) -> Option<Duration> {
        let (launcher, socket) = self.observe_launcher(key, vmi).await;
        let (LauncherState::Ready, Some(socket)) = (launcher, socket) else {
            return Some(STARTING_RETRY);
        };
        let uid = state.migration_uid.clone().unwrap_or_default();
        let domain = self.known().domains.get(key).cloned();
        let seen = {
            let mut known = self.known();
            forget_other_migrations(&mut known, key, &uid);
            TargetSeen {
                launcher_ready: true,
                needs_pod_network: pod_network::plan::uses_pod_network(vmi)
                    && !self.launchers.is_pod_network_wired(&socket, vmi),
                prepared: known.prepared_targets.contains_key(key),
                proxy_open: known.proxies.contains_key(key),
                domain_running: domain.as_ref().is_some_and(crate::migration::runs_on_target),
            }
        };
        let result = match target_step(state, seen) {
            TargetStep::WirePodNetwork => self
                .launchers
                .wire_pod_network(&socket, vmi)
                .await
                .map_err(StepError::from),
            TargetStep::Prepare => {
                let prepared = self.launchers.sync_migration_target(&socket, vmi).await;
                if prepared.is_ok() {
                    info!(vmi = %key, "the migration target is prepared");
                    self.known().prepared_targets.insert(key.to_owned(), uid.clone());
                }
                prepared.map_err(StepError::from)
            }
            TargetStep::OpenProxy => self.open_target_proxy(key, vmi, &socket, state).await,
            TargetStep::Finalize => self.take_over(key, vmi).await,
            // The proxies' ports again, should their first write have failed.
            TargetStep::Wait => self.write_target_status(key, vmi, self.published(key)).await,
        };
        let settled = matches!(target_step(state, seen), TargetStep::Wait);
        let after = if settled { STARTING_RETRY } else { NEXT };
        Some(self.step_outcome(key, "target", result, after).await)
    }

    async fn open_target_proxy(
        &self,
        key: &str,
        vmi: &VirtualMachineInstance,
        socket: &Path,
        state: &MigrationState,
    ) -> Result<(), StepError> {
        if self.is_draining() {
            return Err(StepError::ShuttingDown);
        }
        let address = self.config.migration.address.ok_or(StepError::NoAddress)?;
        let security = self.config.migration.security(state)?;
        let uid = vmi.metadata.uid.clone().unwrap_or_default();
        let paths = self.launchers.migration_paths(socket);
        let targets = BTreeMap::from([
            (Channel::Libvirt, paths.libvirt()),
            (Channel::Stream, paths.channel_socket(&uid, Channel::Stream)),
            (Channel::Disks, paths.channel_socket(&uid, Channel::Disks)),
        ]);
        let proxy = Proxy::target(address, targets, &security).await?;
        let ports = proxy.status_ports();
        info!(vmi = %key, %address, ?ports, "migration target proxies listen");
        let migration = state.migration_uid.clone().unwrap_or_default();
        self.keep_proxy(key, migration, proxy)?;
        self.write_target_status(key, vmi, Some((address.to_string(), ports)))
            .await
    }

    /// The address and ports of the VMI's open target proxies.
    fn published(&self, key: &str) -> Option<(String, BTreeMap<String, i32>)> {
        let address = self.config.migration.address?;
        let known = self.known();
        let (_, proxy) = known.proxies.get(key)?;
        Some((address.to_string(), proxy.status_ports()))
    }

    /// Writes the target's part of the migration state when it changed.
    async fn write_target_status(
        &self,
        key: &str,
        vmi: &VirtualMachineInstance,
        published: Option<(String, BTreeMap<String, i32>)>,
    ) -> Result<(), StepError> {
        let Some(status) = vmi.status.as_ref() else {
            return Ok(());
        };
        let domain = self.known().domains.get(key).cloned();
        let now = Time(self.clock.now());
        let published = published.as_ref().map(|(a, p)| (a.as_str(), p));
        let wanted = target_status(status, published, domain.as_ref(), &now);
        if &wanted == status {
            return Ok(());
        }
        let mut updated = vmi.clone();
        updated.status = Some(wanted);
        self.store_status(key, &updated).await
    }

    /// Writes `vmi`'s status and keeps the stored VMI.
    async fn store_status(&self, key: &str, vmi: &VirtualMachineInstance) -> Result<(), StepError> {
        let stored = self
            .api
            .update_vmi_status(vmi)
            .await
            .map_err(|e| StepError::Write(e.to_string()))?;
        self.keep_written(key, stored);
        Ok(())
    }

    /// The guest runs here now: the VMI's node label, then its `nodeName` and `completed`. The
    /// label goes first: should the status write fail, the VMI still names this node as its
    /// migration's target and the take-over is tried again; the other order could leave a VMI
    /// whose label no node's handler follows.
    async fn take_over(&self, key: &str, vmi: &VirtualMachineInstance) -> Result<(), StepError> {
        let node = self.config.node.clone();
        let labelled = self
            .api
            .patch_vmi_labels(
                vmi,
                BTreeMap::from([(labels::NODE_NAME.to_owned(), Some(node.clone()))]),
            )
            .await
            .map_err(|e| StepError::Write(e.to_string()))?;
        let Some(status) = labelled.status.as_ref() else {
            return Ok(());
        };
        let mut updated = labelled.clone();
        updated.status = Some(finalized(status, &node, &Time(self.clock.now())));
        self.store_status(key, &updated).await?;
        {
            let mut known = self.known();
            known.proxies.remove(key);
            known.prepared_targets.remove(key);
        }
        info!(vmi = %key, %node, "the migrated VMI runs here now");
        self.record(
            key,
            VmiEvent::normal(
                "Migrated",
                format!("The VirtualMachineInstance migrated to node {node}."),
            ),
        )
        .await;
        Ok(())
    }

    /// Source side of `vmi`'s migration, after the usual steps: at most one step.
    pub(super) async fn reconcile_source(
        &self,
        key: &str,
        vmi: &VirtualMachineInstance,
        launcher: LauncherState,
        socket: Option<&PathBuf>,
        state: &MigrationState,
    ) -> Option<Duration> {
        let uid = state.migration_uid.clone().unwrap_or_default();
        let domain = self.known().domains.get(key).cloned();
        let reported = domain.as_ref().and_then(|d| d.metadata.migration.as_ref());
        let (proxy_open, migrate_sent) = {
            let mut known = self.known();
            forget_other_migrations(&mut known, key, &uid);
            (known.proxies.contains_key(key), known.migrations_sent.contains_key(key))
        };
        let seen = SourceSeen {
            launcher_ready: launcher == LauncherState::Ready && socket.is_some(),
            proxy_open,
            migrate_sent,
            reported,
        };
        let step = source_step(state, seen);
        let result = match (step, socket) {
            (SourceStep::OpenProxy, Some(socket)) => self.open_source_proxy(key, vmi, socket, state),
            (SourceStep::Migrate, Some(socket)) => {
                let options = options(state, &MigrationSettings::default());
                info!(vmi = %key, migration = %options.migration_uid, "migrating");
                self.record(
                    key,
                    VmiEvent::normal("Migrating", "VirtualMachineInstance is migrating."),
                )
                .await;
                let sent = self.launchers.migrate(socket, vmi, &options).await;
                if sent.is_ok() {
                    self.known().migrations_sent.insert(key.to_owned(), uid.clone());
                }
                sent.map_err(StepError::from)
            }
            (SourceStep::AbortUnstarted, _) => self.abort_unstarted(key, vmi, state).await,
            (SourceStep::Cancel, Some(socket)) => {
                info!(vmi = %key, "aborting the migration");
                self.launchers
                    .cancel_migration(socket, vmi)
                    .await
                    .map_err(StepError::from)
            }
            (SourceStep::CloseProxy, _) => {
                self.known().proxies.remove(key);
                Ok(())
            }
            (SourceStep::Wait | SourceStep::OpenProxy | SourceStep::Migrate | SourceStep::Cancel, _) => return None,
        };
        Some(self.step_outcome(key, "source", result, NEXT).await)
    }

    /// When to look again after a step on `side`: `after` once it worked; after a failure, which
    /// is logged and recorded as a `SyncFailed` event with its causes, the retry delay.
    async fn step_outcome(&self, key: &str, side: &str, result: Result<(), StepError>, after: Duration) -> Duration {
        let Err(error) = result else { return after };
        let message = kubevirt_api::error_report::one_line(&error);
        warn!(vmi = %key, side, error = %message, "migration step failed");
        self.record(key, VmiEvent::warning("SyncFailed", message)).await;
        self.config.retry
    }

    /// Keeps a proxy just opened, unless the handler began to stop meanwhile: checked under the
    /// lock the drain counts the open proxies under, so it never misses one; a refused proxy
    /// closes as it is dropped.
    fn keep_proxy(&self, key: &str, migration: String, proxy: crate::migration_proxy::Proxy) -> Result<(), StepError> {
        let mut known = self.known();
        if self.is_draining() {
            return Err(StepError::ShuttingDown);
        }
        known.proxies.insert(key.to_owned(), (migration, proxy));
        Ok(())
    }

    fn open_source_proxy(
        &self,
        key: &str,
        vmi: &VirtualMachineInstance,
        socket: &Path,
        state: &MigrationState,
    ) -> Result<(), StepError> {
        if self.is_draining() {
            return Err(StepError::ShuttingDown);
        }
        let text = state.target_node_address.clone().unwrap_or_default();
        let target: IpAddr = text.parse().map_err(|_| StepError::BadAddress(text.clone()))?;
        let ports = target_ports(state);
        let uid = vmi.metadata.uid.clone().unwrap_or_default();
        let paths = self.launchers.migration_paths(socket);
        let sources = ports
            .keys()
            .map(|channel| (*channel, paths.channel_socket(&uid, *channel)))
            .collect();
        let owner = Some(vmi.runtime_user()).filter(|u| *u != 0);
        let security = self.config.migration.security(state)?;
        let proxy = Proxy::source(target, &ports, sources, owner, &security)?;
        info!(vmi = %key, %target, "migration source proxy sockets open");
        let migration = state.migration_uid.clone().unwrap_or_default();
        self.keep_proxy(key, migration, proxy)?;
        Ok(())
    }

    /// Cancelled before the source launcher got it: the VMI's migration state says failed and
    /// aborted, so virt-controller fails the migration and the target lets go.
    async fn abort_unstarted(
        &self,
        key: &str,
        vmi: &VirtualMachineInstance,
        state: &MigrationState,
    ) -> Result<(), StepError> {
        let mut updated = vmi.clone();
        let status = updated.status.get_or_insert_default();
        status.migration_state = Some(crate::migration::aborted_unstarted(state, &Time(self.clock.now())));
        self.store_status(key, &updated).await?;
        info!(vmi = %key, "the migration was cancelled before it started");
        Ok(())
    }
}

/// Drops what is kept for another (an earlier) migration of the VMI `key`.
fn forget_other_migrations(known: &mut super::Known, key: &str, uid: &str) {
    if known.proxies.get(key).is_some_and(|(of, _)| of != uid) {
        known.proxies.remove(key);
    }
    if known.prepared_targets.get(key).is_some_and(|of| of != uid) {
        known.prepared_targets.remove(key);
    }
    if known.migrations_sent.get(key).is_some_and(|of| of != uid) {
        known.migrations_sent.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_is_required_unless_the_migration_disables_it() {
        let network = MigrationNetwork::default();
        let mut state = MigrationState::default();
        let refused = network.security(&state).expect_err("no certificates");
        assert!(refused.to_string().contains("disableTLS"), "{refused}");
        state.migration_configuration = Some(kubevirt_api::v1::MigrationConfiguration {
            disable_tls: Some(true),
            ..kubevirt_api::v1::MigrationConfiguration::default()
        });
        assert!(matches!(network.security(&state), Ok(Security::Plain)));
    }
}
