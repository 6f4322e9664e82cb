//! The migration controller: keeps the migrations, VMIs and launcher pods it watched, and for one
//! migration at a time observes them, plans ([`crate::migration_plan`]) and applies the plan: the
//! migration's finalizer and label, the target pod, the VMI's migration state (the hand-off, a
//! cancel), the target pod's deletion, the migration's status and events, then its finalizer.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::clock::Clock;
use kubevirt_api::migration_settings::MigrationSettings;
use kubevirt_api::v1::{MigrationPhase, VirtualMachineInstance, VirtualMachineInstanceMigration};
use kubevirt_api::well_known::{finalizers, labels};
use serde_json::json;

use crate::cluster_api::{ApiError, ControllerApi};
use crate::compact::Compact;
use crate::migration_plan::{Observed, Plan, plan};
use crate::pod::{PodConfig, render_target_pod};
use crate::reconcile_error::{ReconcileError, cannot, log_and_retry};
use crate::relist::Relist;
use crate::vmi_lifecycle::PodView;

#[derive(Debug, Default)]
struct Known {
    migrations: BTreeMap<String, Compact<VirtualMachineInstanceMigration>>,
    vmis: HashMap<String, Compact<VirtualMachineInstance>>,
    /// Launcher pods by the VMI's key (`kubevirt.io/created-by` owner), then by name.
    pods: HashMap<String, BTreeMap<String, PodView>>,
    /// The node each VMI is marked for evacuation from (`status.evacuationNodeName`), by its key.
    evacuations: BTreeMap<String, String>,
    /// The relists of the migration, VMI and pod watches under way.
    migration_list: Relist,
    vmi_list: Relist,
    pod_list: Relist,
}

/// The controller.
#[derive(Debug)]
pub struct MigrationController<A, K> {
    api: A,
    clock: K,
    settings: Mutex<MigrationSettings>,
    /// The cluster's `evictionStrategy`.
    eviction_strategy: Mutex<Option<String>>,
    /// What the evacuation remembers between passes.
    evacuation_memory: Mutex<evacuate::Memory>,
    /// The `KubeVirt` CR the workload updater follows.
    kubevirt: Mutex<Option<kubevirt_api::v1::KubeVirt>>,
    /// What the workload updater remembers between passes.
    workload_memory: Mutex<workload_update::Memory>,
    pod_config: Mutex<PodConfig>,
    known: Mutex<Known>,
    /// The claims target pods use: the VMI controller's store, kept from the PVC watch.
    claims: std::sync::Arc<crate::claims::ClaimStore>,
}

fn key_of(namespace: Option<&String>, name: &str) -> String {
    format!("{}/{name}", namespace.map_or("default", String::as_str))
}

fn migration_key(migration: &VirtualMachineInstanceMigration) -> String {
    key_of(
        migration.metadata.namespace.as_ref(),
        migration.metadata.name.as_deref().unwrap_or_default(),
    )
}

/// Of `others`, how many migrations count against the cluster's parallel limit, and how many of
/// those leave `vmi_node`: running ones, and unfinished ones with a target pod just created (a
/// burst of new migrations must not all create their pods before any is counted).
fn running_counts(
    known: &Known,
    others: &[VirtualMachineInstanceMigration],
    vmi_node: Option<&String>,
) -> (usize, usize) {
    let has_target_pod = |m: &VirtualMachineInstanceMigration| {
        let uid = m.metadata.uid.as_deref();
        known
            .pods
            .get(&vmi_key_of(m))
            .is_some_and(|pods| pods.values().any(|p| p.migration_job.as_deref() == uid))
    };
    let running: Vec<&VirtualMachineInstanceMigration> = others
        .iter()
        .filter(|m| {
            let phase = m.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
            phase.is_running() || (!phase.is_final() && has_target_pod(m))
        })
        .collect();
    let from_node = running
        .iter()
        .filter(|m| {
            let node = known
                .vmis
                .get(&vmi_key_of(m))
                .and_then(Compact::get)
                .and_then(|v| v.status?.node_name);
            node.is_some() && node.as_ref() == vmi_node
        })
        .count();
    (running.len(), from_node)
}

/// Puts `value` into `slot`; whether that changed it.
fn replace<T: PartialEq>(slot: &Mutex<T>, value: T) -> bool {
    let mut current = slot.lock().unwrap_or_else(PoisonError::into_inner);
    let changed = *current != value;
    *current = value;
    changed
}

/// The key of the VMI a migration moves.
fn vmi_key_of(migration: &VirtualMachineInstanceMigration) -> String {
    key_of(
        migration.metadata.namespace.as_ref(),
        migration.spec.vmi_name.as_deref().unwrap_or_default(),
    )
}

impl<A: ControllerApi, K: Clock> MigrationController<A, K> {
    /// A controller over `api` rendering target pods with `pod_config` and the claims in
    /// `claims` ([`crate::vmi_controller::VmiController::claim_store`]), as the VMI controller
    /// renders launcher pods.
    pub fn new(api: A, clock: K, pod_config: PodConfig, claims: std::sync::Arc<crate::claims::ClaimStore>) -> Self {
        Self {
            api,
            clock,
            settings: Mutex::new(MigrationSettings::default()),
            eviction_strategy: Mutex::default(),
            evacuation_memory: Mutex::default(),
            kubevirt: Mutex::default(),
            workload_memory: Mutex::default(),
            pod_config: Mutex::new(pod_config),
            known: Mutex::default(),
            claims,
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies the `KubeVirt` resource's migration settings (or, with `None`, the defaults), and
    /// the pod configuration the VMI controller derived from it. Returns every migration when any
    /// of them changed: one waiting for settings it could not use, or for a target pod it could not
    /// render, is looked at again.
    pub fn set_cluster_configuration(
        &self,
        kubevirt: Option<&kubevirt_api::v1::KubeVirt>,
        pod_config: PodConfig,
    ) -> Vec<String> {
        self.follow_kubevirt(kubevirt);
        let config =
            kubevirt_api::v1::ClusterConfig::from_configuration(kubevirt.and_then(|k| k.spec.configuration.as_ref()));
        let changed = [
            replace(&self.pod_config, pod_config),
            replace(&self.settings, config.migrations),
            replace(&self.eviction_strategy, config.eviction_strategy),
        ]
        .contains(&true);
        if changed {
            self.known().migrations.keys().cloned().collect()
        } else {
            Vec::new()
        }
    }

    /// Reconciles one migration; returns when to look again.
    #[tracing::instrument(skip_all, fields(migration = %key))]
    pub async fn reconcile(&self, key: &str) -> Option<Duration> {
        self.try_reconcile(key)
            .await
            .unwrap_or_else(|error| Some(log_and_retry(&error)))
    }

    async fn try_reconcile(&self, key: &str) -> Result<Option<Duration>, ReconcileError> {
        let settings = self.settings.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let (migration, vmi, target, source, other_in_flight, running_in_cluster, running_from_node, siblings) = {
            let known = self.known();
            let Some(migration) = known.migrations.get(key).and_then(Compact::get) else {
                return Ok(None);
            };
            let uid = migration.metadata.uid.clone().unwrap_or_default();
            let vmi_key = vmi_key_of(&migration);
            let vmi = known.vmis.get(&vmi_key).and_then(Compact::get);
            let pods = known.pods.get(&vmi_key);
            let target = pods
                .and_then(|p| p.values().find(|p| p.migration_job.as_deref() == Some(uid.as_str())))
                .cloned();
            let vmi_node = vmi.as_ref().and_then(|v| v.status.as_ref()?.node_name.clone());
            let source = pods
                .and_then(|p| {
                    p.values()
                        .find(|p| !p.is_terminating && p.node.is_some() && p.node == vmi_node)
                })
                .cloned();
            let state_owner = vmi
                .as_ref()
                .and_then(|v| v.status.as_ref()?.migration_state.as_ref()?.migration_uid.clone());
            let others: Vec<VirtualMachineInstanceMigration> = known
                .migrations
                .iter()
                .filter(|(k, _)| k.as_str() != key)
                .filter_map(|(_, m)| m.get())
                .collect();
            let is_unfinished = |m: &VirtualMachineInstanceMigration| {
                !m.status.as_ref().and_then(|s| s.phase).unwrap_or_default().is_final()
            };
            let other_in_flight = others.iter().any(|m| {
                is_unfinished(m)
                    && vmi_key_of(m) == vmi_key
                    && m.metadata.uid.is_some()
                    && m.metadata.uid == state_owner
            });
            let (running, from_node) = running_counts(&known, &others, vmi_node.as_ref());
            let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
            // This VMI's migrations, for the evacuation backoff and the garbage collection.
            let siblings: Vec<VirtualMachineInstanceMigration> = others
                .iter()
                .filter(|m| vmi_key_of(m) == vmi_key)
                .cloned()
                .chain([migration.clone()])
                .collect();
            (
                migration,
                vmi,
                target,
                source,
                other_in_flight,
                count(running),
                count(from_node),
                siblings,
            )
        };
        // The settings matter before the target pod is made (a hold), and at the hand-off, which
        // may come in the same pass that sees the target pod placed.
        let phase = migration.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
        let handed_off = vmi
            .as_ref()
            .and_then(|v| v.status.as_ref()?.migration_state.as_ref()?.migration_uid.clone())
            .is_some_and(|owner| migration.metadata.uid.as_ref() == Some(&owner));
        let resolves = match phase {
            MigrationPhase::Unset | MigrationPhase::Pending => target.is_none(),
            MigrationPhase::Scheduling | MigrationPhase::Scheduled => {
                !handed_off && target.as_ref().is_some_and(|t| t.node.is_some())
            }
            _ => false,
        };
        let (settings, policy) = match &vmi {
            Some(vmi) if resolves => self.resolve_settings(settings, vmi).await?,
            _ => (settings, None),
        };
        let now = Time(self.clock.now());
        let planned = plan(&Observed {
            migration: &migration,
            vmi: vmi.as_ref(),
            target_pod: target.as_ref(),
            source_pod: source.as_ref(),
            other_in_flight,
            running_in_cluster,
            running_from_node,
            settings: &settings,
            policy: policy.as_deref(),
            backoff: crate::migration_history::evacuation_backoff(&migration, &siblings, &now),
            now,
        });
        let requeue = self.apply(migration.clone(), vmi, planned).await?;
        if let Some(status) = migration
            .status
            .as_ref()
            .filter(|s| s.phase.unwrap_or_default().is_final())
        {
            self.finish_state_claims(&migration, status).await?;
            self.collect_finished(&migration, &siblings).await?;
        }
        Ok(requeue)
    }

    /// The settings a migration of `vmi` runs with: the cluster's, overridden by the
    /// `MigrationPolicy` that selects the VMI, whose name comes with them. The namespace's labels
    /// are read only when there is a policy to match.
    async fn resolve_settings(
        &self,
        cluster: MigrationSettings,
        vmi: &VirtualMachineInstance,
    ) -> Result<(MigrationSettings, Option<String>), ReconcileError> {
        let policies = self
            .api
            .list_migration_policies()
            .await
            .map_err(cannot("list the migration policies"))?;
        if policies.is_empty() {
            return Ok((cluster, None));
        }
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let namespace_labels = self
            .api
            .namespace_labels(namespace)
            .await
            .map_err(cannot("read the VMI's namespace"))?;
        let selected = kubevirt_api::migrations::select(&policies, vmi.metadata.labels.as_ref(), &namespace_labels);
        Ok(match selected {
            Some(policy) => {
                let name = policy.metadata.name.clone().unwrap_or_default();
                (cluster.with_policy(&name, &policy.spec), Some(name))
            }
            None => (cluster, None),
        })
    }

    /// Deletes the VMI's oldest finished migrations (of `siblings`) beyond the number kept.
    async fn collect_finished(
        &self,
        migration: &VirtualMachineInstanceMigration,
        siblings: &[VirtualMachineInstanceMigration],
    ) -> Result<(), ReconcileError> {
        let namespace = migration.metadata.namespace.as_deref().unwrap_or("default");
        for name in crate::migration_history::finished_to_delete(siblings) {
            match self.api.delete_migration(namespace, &name).await {
                Ok(()) | Err(ApiError::NotFound(_)) => {}
                Err(error) => return Err(ReconcileError::new(format!("delete old migration {name}"), error)),
            }
        }
        Ok(())
    }

    async fn apply(
        &self,
        mut migration: VirtualMachineInstanceMigration,
        vmi: Option<VirtualMachineInstance>,
        plan: Plan,
    ) -> Result<Option<Duration>, ReconcileError> {
        let namespace = migration
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        if plan.add_finalizer_and_label {
            let mut list = migration.metadata.finalizers.clone().unwrap_or_default();
            if !list.iter().any(|f| f == finalizers::MIGRATION) {
                list.push(finalizers::MIGRATION.to_owned());
            }
            let patch = json!({"metadata": {
                "finalizers": list,
                "labels": {labels::MIGRATION_VMI_NAME: migration.spec.vmi_name},
            }});
            migration = self
                .api
                .patch_migration_metadata(&migration, patch)
                .await
                .map_err(cannot("add the migration's finalizer"))?;
        }
        if plan.create_target_pod
            && let Some(vmi) = &vmi
        {
            self.create_target_pod(&mut migration, vmi).await?;
        }
        if let Some(vmi) = &vmi {
            for event in &plan.vmi_events {
                if let Err(error) = self
                    .api
                    .record_event(vmi, event.kind, event.reason, &event.message)
                    .await
                {
                    tracing::warn!(error = %error, "cannot record an event");
                }
            }
        }
        if let Some(vmi) = vmi.filter(|_| plan.vmi_migration_state.is_some() || plan.vmi_target_node_label.is_some()) {
            self.write_vmi(vmi, &plan).await?;
        }
        if let Some(name) = &plan.delete_target_pod {
            match self.api.delete_pod(&namespace, name).await {
                Ok(()) | Err(ApiError::NotFound(_)) => {}
                Err(error) => return Err(ReconcileError::new(format!("delete target pod {name}"), error)),
            }
        }
        for event in &plan.events {
            if let Err(error) = self
                .api
                .record_migration_event(&migration, event.kind, event.reason, &event.message)
                .await
            {
                tracing::warn!(error = %error, "cannot record an event");
            }
        }
        if let Some(mut status) = plan.status {
            state_claims::keep_names(&migration, &mut status);
            // The state is handed over (or the target's claim dropped) before the migration says
            // it is over, as upstream's: a next migration then finds the claim the guest uses.
            self.finish_state_claims(&migration, &status).await?;
            migration.status = Some(status);
            migration = self
                .api
                .update_migration_status(&migration)
                .await
                .map_err(cannot("write the migration's status"))?;
        }
        if plan.remove_finalizer {
            let mut list = migration.metadata.finalizers.clone().unwrap_or_default();
            list.retain(|f| f != finalizers::MIGRATION);
            self.api
                .patch_migration_metadata(&migration, json!({"metadata": {"finalizers": list}}))
                .await
                .map_err(cannot("release the migration's finalizer"))?;
        }
        Ok(plan.requeue)
    }

    async fn create_target_pod(
        &self,
        migration: &mut VirtualMachineInstanceMigration,
        vmi: &VirtualMachineInstance,
    ) -> Result<(), ReconcileError> {
        let state = self.state_claims(migration, vmi).await?;
        let migration: &VirtualMachineInstanceMigration = migration;
        let namespace = migration
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_owned());
        let config = self.pod_config(vmi);
        // A claim that went is waited for (retried with backoff, as upstream's); a VMI that cannot
        // be rendered needs a change of it or of the configuration, not a retry.
        let claims = match self.claims.modes_for(vmi) {
            Ok(claims) => claims,
            Err(missing) => {
                let message = format!("Error creating pod: {missing}");
                if let Err(error) = self
                    .api
                    .record_migration_event(migration, "Warning", "FailedCreate", &message)
                    .await
                {
                    tracing::warn!(error = %error, "cannot record an event");
                }
                let claim = format!("PersistentVolumeClaim {}/{}", missing.namespace, missing.name);
                return Err(ReconcileError::new(
                    "render the migration target pod",
                    crate::cluster_api::ApiError::NotFound(claim),
                ));
            }
        };
        let claims = claims.with_state_claim(state.map(|s| s.target));
        let (outcome, event) = match render_target_pod(vmi, migration, &config, &claims) {
            Err(error) => (
                Ok(()),
                ("Warning", "FailedCreate", format!("Error creating pod: {error}")),
            ),
            Ok(pod) => match self.api.create_pod(&namespace, &pod).await {
                Ok(created) => {
                    let name = created.metadata.name.clone().unwrap_or_default();
                    self.on_pod_created(&created);
                    (
                        Ok(()),
                        (
                            "Normal",
                            "SuccessfulCreate",
                            format!("Created migration target pod {name}"),
                        ),
                    )
                }
                Err(error) => {
                    let message = format!("Error creating pod: {error}");
                    (
                        Err(ReconcileError::new("create the migration target pod", error)),
                        ("Warning", "FailedCreate", message),
                    )
                }
            },
        };
        let (kind, reason, message) = event;
        if let Err(error) = self.api.record_migration_event(migration, kind, reason, &message).await {
            tracing::warn!(error = %error, "cannot record an event");
        }
        outcome
    }

    /// The target pod is rendered as the VMI's launcher pod was, with the VMI controller's pod
    /// configuration.
    fn pod_config(&self, _vmi: &VirtualMachineInstance) -> PodConfig {
        self.pod_config.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    async fn write_vmi(&self, mut vmi: VirtualMachineInstance, plan: &Plan) -> Result<(), ReconcileError> {
        if let Some(node) = &plan.vmi_target_node_label {
            vmi = self
                .api
                .patch_vmi_metadata(
                    &vmi,
                    json!({"metadata": {"labels": {labels::MIGRATION_TARGET_NODE_NAME: node}}}),
                )
                .await
                .map_err(cannot("label the VMI with the target node"))?;
        }
        if let Some(state) = &plan.vmi_migration_state {
            vmi.status.get_or_insert_default().migration_state = Some(state.clone());
            let written = self
                .api
                .update_vmi_status(&vmi)
                .await
                .map_err(cannot("write the VMI's migration state"))?;
            self.on_vmi_written(&written);
        }
        Ok(())
    }
}

mod evacuate;
mod workload_update;
pub use workload_update::WORKLOAD_UPDATE_KEY;
mod observe;
mod state_claims;
