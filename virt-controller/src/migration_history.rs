//! What a VMI's earlier migrations decide about the next: how long an evacuation or a workload
//! update waits after earlier ones failed (upstream's backoff), and which finished migrations are deleted
//! (upstream keeps the five newest).

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::{MigrationPhase as Phase, VirtualMachineInstanceMigration};

/// How many finished migrations of a VMI are kept; older ones are deleted.
pub const FINISHED_MIGRATIONS_KEPT: usize = 5;

/// The first wait after a failed evacuation; each further failure in a row doubles it.
pub const BACKOFF_START: Duration = Duration::from_secs(20);

/// How long the evacuation's (or workload update's) migration `migration` still waits before it
/// starts, given the other migrations of its VMI: evacuations and workload updates that failed in
/// a row since the last one that succeeded wait 20 s, 40 s, 80 s … counted from the latest
/// failure. Only the newest of them waits; migrations users create never do.
#[must_use]
pub fn evacuation_backoff(
    migration: &VirtualMachineInstanceMigration,
    siblings: &[VirtualMachineInstanceMigration],
    now: &Time,
) -> Option<Duration> {
    // Upstream's backoff-eligible migrations: evacuations and workload updates.
    let is_evacuation = |m: &VirtualMachineInstanceMigration| {
        use kubevirt_api::well_known::annotations::{EVACUATION_MIGRATION, WORKLOAD_UPDATE_MIGRATION};
        m.metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(EVACUATION_MIGRATION) || a.contains_key(WORKLOAD_UPDATE_MIGRATION))
    };
    if !is_evacuation(migration) {
        return None;
    }
    let created = |m: &VirtualMachineInstanceMigration| m.metadata.creation_timestamp.as_ref().map(|t| t.0);
    let mut evacuations: Vec<&VirtualMachineInstanceMigration> = siblings
        .iter()
        .filter(|m| is_evacuation(m) && m.metadata.uid != migration.metadata.uid)
        .collect();
    if evacuations.iter().any(|m| created(m) > created(migration)) {
        return None;
    }
    evacuations.sort_by_key(|m| std::cmp::Reverse(created(m)));
    let phase = |m: &VirtualMachineInstanceMigration| m.status.as_ref().and_then(|s| s.phase).unwrap_or_default();
    let mut backoff = Duration::ZERO;
    for earlier in &evacuations {
        match phase(earlier) {
            Phase::Succeeded => break,
            Phase::Failed if earlier.metadata.deletion_timestamp.is_none() => {
                backoff = if backoff.is_zero() { BACKOFF_START } else { backoff * 2 };
            }
            _ => {}
        }
    }
    let latest = evacuations.first()?;
    if backoff.is_zero() {
        return None;
    }
    let failed_at = latest
        .status
        .as_ref()?
        .phase_transition_timestamps
        .iter()
        .find(|t| t.phase == Some(Phase::Failed))
        .and_then(|t| t.phase_transition_timestamp.as_ref())
        .map_or(0, |t| t.0.as_millisecond());
    let until = failed_at.saturating_add(i64::try_from(backoff.as_millis()).unwrap_or(i64::MAX));
    let remaining = until.saturating_sub(now.0.as_millisecond());
    (remaining > 0).then(|| Duration::from_millis(u64::try_from(remaining).unwrap_or(0)))
}

/// Of one VMI's migrations, the finished ones to delete: all but the
/// [`FINISHED_MIGRATIONS_KEPT`] newest by creation time (ties by name); migrations being deleted
/// are not counted.
#[must_use]
pub fn finished_to_delete(migrations: &[VirtualMachineInstanceMigration]) -> Vec<String> {
    let mut finished: Vec<&VirtualMachineInstanceMigration> = migrations
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_none())
        .filter(|m| m.status.as_ref().and_then(|s| s.phase).unwrap_or_default().is_final())
        .collect();
    finished.sort_by(|a, b| {
        let created = |m: &VirtualMachineInstanceMigration| m.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(a)
            .cmp(&created(b))
            .then_with(|| a.metadata.name.cmp(&b.metadata.name))
    });
    let excess = finished.len().saturating_sub(FINISHED_MIGRATIONS_KEPT);
    finished
        .into_iter()
        .take(excess)
        .filter_map(|m| m.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests;
