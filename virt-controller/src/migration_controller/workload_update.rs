//! The workload updater, in the migration controller because it reads the same caches: one key
//! ([`WORKLOAD_UPDATE_KEY`]) for the cluster's `KubeVirt` CR. Each pass observes every VMI and
//! migration, decides ([`crate::workload_update::plan`]) and applies: the VMIs' outdated label,
//! the CR's `status.outdatedVirtualMachineInstanceWorkloads`, migrations
//! (`kubevirt-workload-update-…`, annotated `kubevirt.io/workloadUpdateMigration`), evictions of
//! launcher pods and aborted migrations, with upstream's events on the VMIs.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubevirt_api::clock::Clock;
use kubevirt_api::v1::{
    KubeVirt, VirtualMachineInstance, VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationSpec,
    WorkloadUpdates, workload_updates,
};
use kubevirt_api::well_known::{annotations, labels};

use super::{MigrationController, vmi_key_of};
use crate::cluster_api::ControllerApi;
use crate::compact::Compact;
use crate::workload_update::{LauncherPod, NAME_PREFIX, Observed, Plan, Vmi, WAIT_FOR_SLOT, current_pod, plan};

/// The work-queue key of the workload updater (after its `wlu:` prefix).
pub const WORKLOAD_UPDATE_KEY: &str = "kubevirt";

/// What the updater remembers between passes.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// When the last eviction batch went out.
    last_batch: Option<Instant>,
    /// The strategy refusal last logged, so a CR that cannot be followed is logged once.
    refusal: Option<String>,
    /// The running outdated VMIs the last pass counted (none before the install is deployed).
    counted: Option<i64>,
}

/// A new migration of `vmi` to a launcher of the installed image.
fn update_migration(vmi: &VirtualMachineInstance) -> VirtualMachineInstanceMigration {
    VirtualMachineInstanceMigration {
        metadata: ObjectMeta {
            generate_name: Some(NAME_PREFIX.to_owned()),
            namespace: vmi.metadata.namespace.clone(),
            annotations: Some([(annotations::WORKLOAD_UPDATE_MIGRATION.to_owned(), String::new())].into()),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineInstanceMigrationSpec {
            vmi_name: vmi.metadata.name.clone(),
            ..VirtualMachineInstanceMigrationSpec::default()
        },
        status: None,
    }
}

/// Whether the install the CR describes is deployed: `Deployed`, and the observed deployment is
/// the target one.
fn deployed(kubevirt: &KubeVirt) -> bool {
    kubevirt.status.as_ref().is_some_and(|s| {
        s.phase.as_deref() == Some("Deployed")
            && s.observed_deployment_id.is_some()
            && s.observed_deployment_id == s.target_deployment_id
    })
}

/// What a pass reads from the caches.
struct View {
    vmis: Vec<(String, VirtualMachineInstance, bool)>,
    running_migrations: u32,
    update_migrations: Vec<(String, String)>,
}

impl<A: ControllerApi, K: Clock> MigrationController<A, K> {
    /// The running outdated VMIs the last pass counted; `None` before the install was seen
    /// deployed.
    #[must_use]
    pub fn outdated_workloads(&self) -> Option<i64> {
        self.workload_memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .counted
    }

    /// Keeps the `KubeVirt` CR the updater follows (`None` once it is deleted).
    pub(super) fn follow_kubevirt(&self, kubevirt: Option<&KubeVirt>) {
        *self.kubevirt.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = kubevirt.cloned();
    }

    /// Every VMI with whether it is already being moved (an unfinished migration, or a launcher
    /// pod on its node terminating), the migrations that count against the parallel limit, and
    /// the unfinished migrations the updater made that are not being deleted.
    fn observe_workloads(&self) -> View {
        let known = self.known();
        let migrations: Vec<VirtualMachineInstanceMigration> =
            known.migrations.values().filter_map(Compact::get).collect();
        let phase = |m: &VirtualMachineInstanceMigration| m.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
        let unfinished: Vec<&VirtualMachineInstanceMigration> =
            migrations.iter().filter(|m| !phase(m).is_final()).collect();
        let running = unfinished.iter().filter(|m| phase(m).is_running()).count();
        let update_migrations = unfinished
            .iter()
            .filter(|m| {
                m.metadata.deletion_timestamp.is_none()
                    && m.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key(annotations::WORKLOAD_UPDATE_MIGRATION))
            })
            .map(|m| (super::migration_key(m), vmi_key_of(m)))
            .collect();
        let migrating: HashSet<String> = unfinished.iter().map(|m| vmi_key_of(m)).collect();
        let vmis = known
            .vmis
            .iter()
            .filter_map(|(key, vmi)| {
                let vmi = vmi.get()?;
                let node = vmi.status.as_ref().and_then(|s| s.node_name.clone());
                let evicted = known
                    .pods
                    .get(key)
                    .is_some_and(|pods| pods.values().any(|p| p.is_terminating && p.node == node));
                let being_moved = migrating.contains(key) || evicted;
                Some((key.clone(), vmi, being_moved))
            })
            .collect();
        View {
            vmis,
            running_migrations: u32::try_from(running).unwrap_or(u32::MAX),
            update_migrations,
        }
    }

    /// The strategy of `kubevirt`; one that cannot be followed is logged once per change, and
    /// then only labels and the count are kept (no VMI is moved).
    fn strategy_of(&self, kubevirt: &KubeVirt) -> WorkloadUpdates {
        let read = workload_updates(kubevirt.spec.workload_update_strategy.as_ref());
        let mut memory = self
            .workload_memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match read {
            Ok(updates) => {
                memory.refusal = None;
                updates
            }
            Err(error) => {
                let message = error.to_string();
                if memory.refusal.as_deref() != Some(message.as_str()) {
                    tracing::error!(error = %message, "the KubeVirt CR's workloadUpdateStrategy cannot be followed; no VMI is moved");
                    memory.refusal = Some(message);
                }
                WorkloadUpdates::default()
            }
        }
    }

    /// One pass of the workload updater; returns when to look again.
    #[tracing::instrument(skip_all)]
    pub async fn update_workloads(&self) -> Option<Duration> {
        let kubevirt = self
            .kubevirt
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        let updates = self.strategy_of(&kubevirt);
        let launcher_image = self
            .pod_config
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .launcher_image
            .clone();
        let parallel = self
            .settings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .parallel_migrations_per_cluster;
        let since_last_batch = self
            .workload_memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .last_batch
            .map(|at| at.elapsed());
        let view = self.observe_workloads();
        let decided = plan(&Observed {
            launcher_image: &launcher_image,
            vmis: view
                .vmis
                .iter()
                .map(|(key, vmi, being_moved)| Vmi {
                    key: key.clone(),
                    vmi,
                    being_moved: *being_moved,
                })
                .collect(),
            deployed: deployed(&kubevirt),
            updates: &updates,
            running_migrations: view.running_migrations,
            parallel_migrations_per_cluster: parallel,
            since_last_batch,
            update_migrations: view.update_migrations,
            reported_outdated: kubevirt
                .status
                .as_ref()
                .and_then(|s| s.outdated_virtual_machine_instance_workloads),
        });
        self.workload_memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .counted = decided.counted;
        let by_key: HashMap<&str, &VirtualMachineInstance> =
            view.vmis.iter().map(|(key, vmi, _)| (key.as_str(), vmi)).collect();
        let vmi_of = |key: &str| by_key.get(key).copied();
        let failed = self.apply_workload_plan(&kubevirt, &decided, vmi_of).await;
        if failed {
            Some(decided.requeue.map_or(WAIT_FOR_SLOT, |r| r.min(WAIT_FOR_SLOT)))
        } else {
            decided.requeue
        }
    }

    /// Carries out `decided`; whether any write failed.
    async fn apply_workload_plan<'v>(
        &self,
        kubevirt: &KubeVirt,
        decided: &Plan,
        vmi_of: impl Fn(&str) -> Option<&'v VirtualMachineInstance>,
    ) -> bool {
        let mut failed = false;
        for (keys, value) in [
            (&decided.label, serde_json::json!("")),
            (&decided.unlabel, serde_json::Value::Null),
        ] {
            for vmi in keys.iter().filter_map(|key| vmi_of(key)) {
                let patch = serde_json::json!({"metadata": {"labels": {labels::OUTDATED_LAUNCHER_IMAGE: value}}});
                if let Err(error) = self.api.patch_vmi_metadata(vmi, patch).await {
                    tracing::warn!(vmi = %vmi.key(), error = %error, "cannot update the VMI's outdated label");
                    failed = true;
                }
            }
        }
        if let Some(count) = decided.outdated {
            let status = serde_json::json!({"outdatedVirtualMachineInstanceWorkloads": count});
            if let Err(error) = self.api.patch_kubevirt_status(kubevirt, status).await {
                tracing::warn!(error = %error, "cannot write the outdated workload count");
                failed = true;
            }
        }
        for key in &decided.abort {
            failed |= !self.abort_update_migration(key).await;
        }
        for vmi in decided.migrate.iter().filter_map(|key| vmi_of(key)) {
            failed |= !self.create_update_migration(vmi).await;
        }
        if !decided.evict.is_empty() {
            self.workload_memory
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .last_batch = Some(Instant::now());
        }
        for vmi in decided.evict.iter().filter_map(|key| vmi_of(key)) {
            failed |= !self.evict_outdated(vmi).await;
        }
        failed
    }

    /// Creates the update migration of `vmi`, with its event; whether it was created.
    async fn create_update_migration(&self, vmi: &VirtualMachineInstance) -> bool {
        let namespace = vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        match self.api.create_migration(&namespace, &update_migration(vmi)).await {
            Ok(created) => {
                let name = created.metadata.name.clone().unwrap_or_default();
                tracing::info!(vmi = %vmi.key(), migration = %name, "migrating an outdated VMI");
                self.on_migration_created(&created);
                let message = format!("Created Migration {name} for automated workload update");
                self.record_vmi_event(vmi, "Normal", "SuccessfulCreate", &message).await;
                true
            }
            Err(error) => {
                tracing::warn!(vmi = %vmi.key(), error = %error, "cannot create the workload update's migration");
                let message = format!("Error creating a Migration for automated workload update: {error}");
                self.record_vmi_event(vmi, "Warning", "FailedCreate", &message).await;
                false
            }
        }
    }

    /// Evicts the launcher pod `vmi` runs in, with its event; whether the eviction went through.
    async fn evict_outdated(&self, vmi: &VirtualMachineInstance) -> bool {
        let key = vmi.key();
        let node = vmi.status.as_ref().and_then(|s| s.node_name.clone());
        let pod = self.known().pods.get(&key).and_then(|pods| {
            let launchers: Vec<LauncherPod<'_>> = pods
                .values()
                .map(|p| LauncherPod {
                    name: &p.name,
                    node: p.node.as_deref(),
                    is_down: p.is_down(),
                    is_temporary: p.is_temporary,
                    created: p.created.as_ref().map(|t| t.0.to_string()),
                })
                .collect();
            current_pod(&launchers, node.as_deref()).map(str::to_owned)
        });
        let Some(pod) = pod else {
            let message = "Error detecting active pod for VMI during workload update: no launcher pod runs it";
            self.record_vmi_event(vmi, "Warning", "FailedEvict", message).await;
            return false;
        };
        let namespace = vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        match self.api.evict_pod(&namespace, &pod).await {
            Ok(()) => {
                tracing::info!(vmi = %key, pod = %pod, "evicted an outdated VMI's launcher");
                let message = "Initiated eviction of VMI as part of automated workload update";
                self.record_vmi_event(vmi, "Normal", "SuccessfulEvict", message).await;
                true
            }
            Err(error) => {
                tracing::warn!(vmi = %key, pod = %pod, error = %error, "cannot evict an outdated VMI's launcher");
                let message = format!("Error deleting VMI during automated workload update: {error}");
                self.record_vmi_event(vmi, "Warning", "FailedEvict", &message).await;
                false
            }
        }
    }

    /// Deletes the update migration `key` of a VMI that is no longer outdated, with its event on
    /// the VMI; whether it went.
    async fn abort_update_migration(&self, key: &str) -> bool {
        let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
        let migration = self.known().migrations.get(key).and_then(Compact::get);
        let vmi = migration.and_then(|m| self.known_vmi(&vmi_key_of(&m)));
        // A migration already gone is as good as deleted.
        let result = match self.api.delete_migration(namespace, name).await {
            Err(crate::cluster_api::ApiError::NotFound(_)) => Ok(()),
            other => other,
        };
        let Some(vmi) = vmi else { return result.is_ok() };
        let vmi_name = vmi.metadata.name.clone().unwrap_or_default();
        match result {
            Ok(()) => {
                tracing::info!(vmi = %vmi.key(), migration = %key, "aborted a workload update migration");
                let message = format!("Aborted change for vmi: {vmi_name}");
                self.record_vmi_event(&vmi, "Normal", "SuccessfulChangeAbortion", &message)
                    .await;
                true
            }
            Err(error) => {
                tracing::warn!(migration = %key, error = %error, "cannot abort a workload update migration");
                let message = format!("Failed to abort change for vmi: {vmi_name}: {error}");
                self.record_vmi_event(&vmi, "Normal", "FailedChangeAbortion", &message)
                    .await;
                false
            }
        }
    }

    fn known_vmi(&self, key: &str) -> Option<VirtualMachineInstance> {
        self.known().vmis.get(key).and_then(Compact::get)
    }
}
