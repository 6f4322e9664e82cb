//! The evacuation controller, in the migration controller because it reads the same caches: for
//! one node at a time (`evac:<node>` keys) it observes the VMIs marked for evacuation from it,
//! decides ([`crate::evacuation::plan`]) and creates their migrations
//! (`kubevirt-evacuation-…`, annotated with the node), with upstream's events on the VMI.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kubevirt_api::clock::Clock;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationSpec};
use kubevirt_api::well_known::annotations;

use super::{MigrationController, vmi_key_of};
use crate::cluster_api::ControllerApi;
use crate::compact::Compact;
use crate::evacuation::{Candidate, Observed, plan};

/// The name prefix of the migrations an evacuation creates.
pub const EVACUATION_NAME_PREFIX: &str = "kubevirt-evacuation-";

/// A new migration of `vmi` off `node`.
fn evacuation_migration(vmi: &VirtualMachineInstance, node: &str) -> VirtualMachineInstanceMigration {
    VirtualMachineInstanceMigration {
        metadata: ObjectMeta {
            generate_name: Some(EVACUATION_NAME_PREFIX.to_owned()),
            namespace: vmi.metadata.namespace.clone(),
            annotations: Some([(annotations::EVACUATION_MIGRATION.to_owned(), node.to_owned())].into()),
            ..ObjectMeta::default()
        },
        spec: VirtualMachineInstanceMigrationSpec {
            vmi_name: vmi.metadata.name.clone(),
            ..VirtualMachineInstanceMigrationSpec::default()
        },
        status: None,
    }
}

/// What the evacuation remembers between passes.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// Creations that failed in a row, by node, and when the last one did: the next try waits
    /// longer, whatever change wakes the node up before.
    failures: std::collections::HashMap<String, (u32, std::time::Instant)>,
    /// The VMIs (key and the node they are marked for) already reported not migratable; one is
    /// reported again once it was migratable, unmarked or gone in between.
    reported_unmigratable: std::collections::HashSet<(String, String)>,
}

/// What [`MigrationController::observe_node`] found.
struct NodeView {
    /// The marked VMIs: key, VMI, active pods.
    marked: Vec<(String, VirtualMachineInstance, usize)>,
    /// The VMI keys of the unfinished migrations.
    unfinished: Vec<String>,
    /// How many of those leave the node.
    leaving: usize,
}

impl<A: ControllerApi, K: Clock> MigrationController<A, K> {
    /// The nodes with VMIs marked for evacuation: each is looked at after every VMI or migration
    /// change, as a change may free a slot or mark another VMI.
    #[must_use]
    pub fn evacuating_nodes(&self) -> Vec<String> {
        let mut nodes: Vec<String> = self.known().evacuations.values().cloned().collect();
        nodes.sort();
        nodes.dedup();
        nodes
    }

    /// What the decision for `node` reads, from the caches: the VMIs marked for evacuation from
    /// it with their active pod counts, and the VMI keys of the unfinished migrations together
    /// with how many of them leave this node.
    fn observe_node(&self, node: &str) -> NodeView {
        let known = self.known();
        let active_pods = |key: &str| {
            known
                .pods
                .get(key)
                .map_or(0, |pods| pods.values().filter(|p| !p.is_down()).count())
        };
        let marked = known
            .evacuations
            .iter()
            .filter(|(_, marked)| marked.as_str() == node)
            .filter_map(|(key, _)| {
                let vmi = known.vmis.get(key).and_then(Compact::get)?;
                Some((key.clone(), vmi, active_pods(key)))
            })
            .collect();
        let unfinished: Vec<String> = known
            .migrations
            .values()
            .filter_map(Compact::get)
            .filter(|m| !m.status.as_ref().and_then(|s| s.phase).unwrap_or_default().is_final())
            .map(|m| vmi_key_of(&m))
            .collect();
        let leaving = unfinished
            .iter()
            .filter(|key| {
                known
                    .vmis
                    .get(*key)
                    .and_then(Compact::get)
                    .and_then(|v| v.status?.node_name)
                    .is_some_and(|n| n == node)
            })
            .count();
        NodeView {
            marked,
            unfinished,
            leaving,
        }
    }

    /// Evacuates `node` as far as the limits allow; returns when to look again.
    #[tracing::instrument(skip_all, fields(node = %node))]
    pub async fn evacuate(&self, node: &str) -> Option<Duration> {
        let settings = self
            .settings
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let default_strategy = self
            .eviction_strategy
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        if let Some(wait) = self.still_backing_off(node) {
            return Some(wait);
        }
        let view = self.observe_node(node);
        if view.marked.is_empty() {
            // Nothing (left) to evacuate: the node's past failures no longer count.
            self.evacuation_memory
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .failures
                .remove(node);
        }
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let candidates = view
            .marked
            .iter()
            .map(|(key, vmi, pods)| Candidate {
                key: key.clone(),
                vmi,
                has_unfinished_migration: view.unfinished.contains(key),
                active_pods: *pods,
            })
            .collect();
        let decided = plan(&Observed {
            node,
            candidates,
            default_strategy: default_strategy.as_deref(),
            unfinished_in_cluster: count(view.unfinished.len()),
            unfinished_from_node: count(view.leaving),
            settings: &settings,
        });
        let vmi_of = |key: &str| view.marked.iter().find(|(k, _, _)| k == key).map(|(_, vmi, _)| vmi);
        let mut failed = false;
        for key in &decided.migrate {
            let Some(vmi) = vmi_of(key) else { continue };
            failed |= !self.create_evacuation_migration(vmi, node).await;
        }
        let (retry, newly_unmigratable) = {
            let mut memory = self
                .evacuation_memory
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let retry = if failed {
                let previous = memory.failures.get(node).map_or(0, |(count, _)| *count);
                let failures = previous.saturating_add(1);
                memory
                    .failures
                    .insert(node.to_owned(), (failures, std::time::Instant::now()));
                Some(crate::evacuation::create_retry(failures))
            } else {
                if !decided.migrate.is_empty() {
                    memory.failures.remove(node);
                }
                None
            };
            // Reported once while it stays so; again after it was migratable, unmarked or gone.
            let marks = self.known().evacuations.clone();
            memory.reported_unmigratable.retain(|(key, marked_for)| {
                marks.get(key) == Some(marked_for) && (marked_for != node || decided.not_migratable.contains(key))
            });
            let newly: Vec<String> = decided
                .not_migratable
                .iter()
                .filter(|key| memory.reported_unmigratable.insert(((*key).clone(), node.to_owned())))
                .cloned()
                .collect();
            (retry, newly)
        };
        for key in &newly_unmigratable {
            if let Some(vmi) = vmi_of(key) {
                self.record_vmi_event(
                    vmi,
                    "Normal",
                    "FailedCreate",
                    "VirtualMachineInstance is not migrateable",
                )
                .await;
            }
        }
        retry.or(decided.requeue)
    }

    /// How long `node` still waits after its last failed creation.
    fn still_backing_off(&self, node: &str) -> Option<Duration> {
        let memory = self
            .evacuation_memory
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (failures, at) = memory.failures.get(node)?;
        crate::evacuation::create_retry(*failures)
            .checked_sub(at.elapsed())
            .filter(|left| !left.is_zero())
    }

    /// Creates the migration of `vmi` off `node`, with its event; whether it was created.
    async fn create_evacuation_migration(&self, vmi: &VirtualMachineInstance, node: &str) -> bool {
        let namespace = vmi.metadata.namespace.clone().unwrap_or_else(|| "default".to_owned());
        let key = vmi.key();
        let (created, kind, reason, message) = match self
            .api
            .create_migration(&namespace, &evacuation_migration(vmi, node))
            .await
        {
            Ok(created) => {
                let name = created.metadata.name.clone().unwrap_or_default();
                tracing::info!(vmi = %key, migration = %name, "evacuating");
                self.on_migration_created(&created);
                (true, "Normal", "SuccessfulCreate", format!("Created Migration {name}"))
            }
            Err(error) => {
                tracing::warn!(vmi = %key, error = %error, "cannot create the evacuation's migration");
                (
                    false,
                    "Warning",
                    "FailedCreate",
                    format!("Error creating a Migration: {error}"),
                )
            }
        };
        self.record_vmi_event(vmi, kind, reason, &message).await;
        created
    }

    pub(super) async fn record_vmi_event(
        &self,
        vmi: &VirtualMachineInstance,
        kind: &'static str,
        reason: &str,
        message: &str,
    ) {
        if let Err(error) = self.api.record_event(vmi, kind, reason, message).await {
            tracing::warn!(error = %error, "cannot record an event");
        }
    }
}
