//! Evacuation, decided: which of the VMIs marked for evacuation from a node (their
//! `status.evacuationNodeName`, set by virt-api's pod-eviction webhook) get a migration now.
//! Upstream's rules: a VMI that still runs on the node (phase Running), is not shutting down, whose eviction
//! strategy wants a migration, that is live migratable, has no unfinished migration and a single
//! active pod, gets one, within the cluster's and the node's parallel-migration limits.

use std::time::Duration;

use kubevirt_api::migratable::{eviction_strategy, reported_live_migratable};
use kubevirt_api::migration_settings::MigrationSettings;
use kubevirt_api::v1::VirtualMachineInstance;

/// When a node with VMIs waiting for a free migration slot is looked at again.
pub const WAIT_FOR_SLOT: Duration = Duration::from_secs(5);
/// When a node with VMIs that cannot migrate is looked at again (they may become migratable).
pub const WAIT_FOR_MIGRATABLE: Duration = Duration::from_secs(60);
/// The longest wait after failures to create a node's migrations.
pub const MAX_CREATE_RETRY: Duration = Duration::from_secs(5 * 60);

/// When to try again after `failures` creations in a row failed: [`WAIT_FOR_SLOT`], doubling
/// with each failure, at most [`MAX_CREATE_RETRY`].
#[must_use]
pub fn create_retry(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    WAIT_FOR_SLOT.saturating_mul(1 << doublings).min(MAX_CREATE_RETRY)
}

/// One VMI marked for evacuation from the node, with what the controller knows about it.
#[derive(Debug)]
pub struct Candidate<'a> {
    /// `namespace/name`.
    pub key: String,
    /// The VMI.
    pub vmi: &'a VirtualMachineInstance,
    /// One of its migrations is not final.
    pub has_unfinished_migration: bool,
    /// Its launcher pods that are not down.
    pub active_pods: usize,
}

/// Everything the decision reads.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The node being evacuated.
    pub node: &'a str,
    /// The VMIs marked for evacuation from it.
    pub candidates: Vec<Candidate<'a>>,
    /// The cluster's `evictionStrategy`, for VMIs without their own.
    pub default_strategy: Option<&'a str>,
    /// Unfinished migrations in the cluster.
    pub unfinished_in_cluster: u32,
    /// Unfinished migrations of VMIs that run on this node.
    pub unfinished_from_node: u32,
    /// The limits.
    pub settings: &'a MigrationSettings,
}

/// What to do for the node.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// The VMIs (keys) to create a migration for, in order.
    pub migrate: Vec<String>,
    /// The VMIs that want to migrate but are not live migratable (an event each).
    pub not_migratable: Vec<String>,
    /// When to look at the node again.
    pub requeue: Option<Duration>,
}

/// Whether a VMI with `strategy` is migrated when its pod is evicted: `LiveMigrate` always,
/// `LiveMigrateIfPossible` when it can be; `External` leaves it to someone else, `None` to the
/// eviction.
#[must_use]
pub fn migrates_on_eviction(strategy: Option<&str>, live_migratable: bool) -> bool {
    match strategy {
        Some("LiveMigrate") => true,
        Some("LiveMigrateIfPossible") => live_migratable,
        _ => false,
    }
}

/// Whether the VMI still needs to leave `node`: it runs there and is not already moving.
fn still_on(vmi: &VirtualMachineInstance, node: &str) -> bool {
    let Some(status) = vmi.status.as_ref() else {
        return false;
    };
    let migrating = status
        .migration_state
        .as_ref()
        .is_some_and(|m| m.completed != Some(true) && m.failed != Some(true));
    status.evacuation_node_name.as_deref() == Some(node)
        && status.node_name.as_deref() == Some(node)
        && !migrating
        && status.phase == Some(kubevirt_api::v1::VirtualMachineInstancePhase::Running)
        && vmi.metadata.deletion_timestamp.is_none()
}

/// Decides for one node.
#[must_use]
pub fn plan(observed: &Observed<'_>) -> Plan {
    let mut result = Plan::default();
    let mut ready = Vec::new();
    for candidate in &observed.candidates {
        let vmi = candidate.vmi;
        if !still_on(vmi, observed.node) {
            continue;
        }
        let strategy = eviction_strategy(vmi, observed.default_strategy);
        let migratable = reported_live_migratable(vmi);
        if !migrates_on_eviction(strategy, migratable) {
            continue;
        }
        if !migratable {
            result.not_migratable.push(candidate.key.clone());
            continue;
        }
        if candidate.has_unfinished_migration || candidate.active_pods > 1 {
            continue;
        }
        ready.push(candidate.key.clone());
    }
    ready.sort();
    let settings = observed.settings;
    let free = settings
        .parallel_migrations_per_cluster
        .saturating_sub(observed.unfinished_in_cluster)
        .min(
            settings
                .parallel_outbound_migrations_per_node
                .saturating_sub(observed.unfinished_from_node),
        );
    let free = usize::try_from(free).unwrap_or(usize::MAX);
    if ready.len() > free {
        result.requeue = Some(WAIT_FOR_SLOT);
    }
    ready.truncate(free);
    result.migrate = ready;
    if result.requeue.is_none() && !result.not_migratable.is_empty() {
        result.requeue = Some(WAIT_FOR_MIGRATABLE);
    }
    result.not_migratable.sort();
    result
}

#[cfg(test)]
mod tests;
