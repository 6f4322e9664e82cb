//! `spec.workloadUpdateStrategy` of the KubeVirt CR, read: which methods move the VMIs whose
//! launcher is not the installed one, and how fast evictions go. Upstream's defaults: no method
//! (nothing moves), batches of 10 evictions, one batch a minute.

use std::time::Duration;

use operator_kit::duration;

use super::WorkloadUpdateStrategy;

/// The field this reads.
const FIELD: &str = "spec.workloadUpdateStrategy";
/// The method that live-migrates outdated VMIs.
pub const LIVE_MIGRATE: &str = "LiveMigrate";
/// The method that evicts their launcher pods.
pub const EVICT: &str = "Evict";
/// VMIs evicted per batch when `batchEvictionSize` is not given.
pub const DEFAULT_BATCH_EVICTION_SIZE: u32 = 10;
/// The time between eviction batches when `batchEvictionInterval` is not given.
pub const DEFAULT_BATCH_EVICTION_INTERVAL: Duration = Duration::from_secs(60);

/// What the strategy says, with the defaults filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadUpdates {
    /// Outdated VMIs that can live-migrate are migrated.
    pub live_migrate: bool,
    /// Outdated VMIs that are not migrated have their launcher pod evicted.
    pub evict: bool,
    /// Evictions per batch.
    pub batch_eviction_size: u32,
    /// The time between two batches.
    pub batch_eviction_interval: Duration,
}

impl Default for WorkloadUpdates {
    fn default() -> Self {
        Self {
            live_migrate: false,
            evict: false,
            batch_eviction_size: DEFAULT_BATCH_EVICTION_SIZE,
            batch_eviction_interval: DEFAULT_BATCH_EVICTION_INTERVAL,
        }
    }
}

impl WorkloadUpdates {
    /// Some method moves outdated VMIs.
    #[must_use]
    pub fn any_method(&self) -> bool {
        self.live_migrate || self.evict
    }
}

/// Why a strategy cannot be followed: one message per bad field, each naming it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct WorkloadUpdateError(pub Vec<String>);

/// Reads `strategy` (the CR's, `None` when it has none).
///
/// # Errors
/// [`WorkloadUpdateError`] for a method other than `LiveMigrate` and `Evict`, a batch size under
/// one, or an interval that is not a Go duration (`1m0s`, `30s`).
pub fn workload_updates(strategy: Option<&WorkloadUpdateStrategy>) -> Result<WorkloadUpdates, WorkloadUpdateError> {
    let mut updates = WorkloadUpdates::default();
    let Some(strategy) = strategy else {
        return Ok(updates);
    };
    let mut errors = Vec::new();
    for (index, method) in strategy.workload_update_methods.iter().flatten().enumerate() {
        match method.as_str() {
            LIVE_MIGRATE => updates.live_migrate = true,
            EVICT => updates.evict = true,
            other => errors.push(format!(
                "{FIELD}.workloadUpdateMethods[{index}]: {other:?} is not a method; use {LIVE_MIGRATE} or {EVICT}"
            )),
        }
    }
    if let Some(size) = strategy.batch_eviction_size {
        match u32::try_from(size) {
            Ok(size) if size > 0 => updates.batch_eviction_size = size,
            _ => errors.push(format!(
                "{FIELD}.batchEvictionSize: {size} is not a number of VMIs; give 1 or more"
            )),
        }
    }
    if let Some(interval) = &strategy.batch_eviction_interval {
        match duration::seconds(&format!("{FIELD}.batchEvictionInterval"), interval) {
            Ok(seconds) => updates.batch_eviction_interval = Duration::from_secs(seconds.unsigned_abs()),
            Err(error) => errors.push(error.to_string()),
        }
    }
    if errors.is_empty() {
        Ok(updates)
    } else {
        Err(WorkloadUpdateError(errors))
    }
}

#[cfg(test)]
#[path = "workload_updates_tests.rs"]
mod tests;
