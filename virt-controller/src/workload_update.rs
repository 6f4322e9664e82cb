//! Workload updates, decided: after an upgrade, which VMIs still run a launcher that is not the
//! installed one ("outdated": their `status.launcherContainerImageVersion` is known and differs
//! from virt-controller's `--launcher-image`), and what the KubeVirt CR's
//! `workloadUpdateStrategy` does with them. Upstream's rules: nothing moves until the install is
//! `Deployed` and its observed deployment is the target one; a running outdated VMI that is not
//! already migrating is live-migrated when `LiveMigrate` is listed and it can live-migrate, within
//! the cluster's parallel-migration limit, else its launcher pod is evicted when `Evict` is
//! listed, `batchEvictionSize` at a time, one batch per `batchEvictionInterval`. A workload-update
//! migration of a VMI that is no longer outdated is aborted while its target is not ready yet.
//! Outdated VMIs carry the label `kubevirt.io/outdatedLauncherImage`, and the KubeVirt CR counts
//! the running ones in `status.outdatedVirtualMachineInstanceWorkloads`.

use std::time::Duration;

use kubevirt_api::migratable::reported_live_migratable;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase, WorkloadUpdates};
use kubevirt_api::well_known::labels::OUTDATED_LAUNCHER_IMAGE;

/// When VMIs waiting for a free migration slot are looked at again.
pub const WAIT_FOR_SLOT: Duration = Duration::from_secs(5);
/// The soonest an eviction batch is looked at again, whatever the interval (an interval of `0`
/// would otherwise spin).
pub const MIN_BATCH_WAIT: Duration = Duration::from_secs(1);
/// The name prefix of the migrations the updater creates.
pub const NAME_PREFIX: &str = "kubevirt-workload-update-";

/// One VMI, with what the controller knows about it.
#[derive(Debug)]
pub struct Vmi<'a> {
    /// `namespace/name`.
    pub key: String,
    /// The VMI.
    pub vmi: &'a VirtualMachineInstance,
    /// It is already on its way: one of its migrations is not final, or its launcher pod is
    /// terminating (evicted by an earlier batch).
    pub being_moved: bool,
}

/// Everything the decision reads.
#[derive(Debug)]
pub struct Observed<'a> {
    /// The launcher image new launcher pods get.
    pub launcher_image: &'a str,
    /// Every VMI.
    pub vmis: Vec<Vmi<'a>>,
    /// The install is `Deployed`, and what is deployed is what the CR asks for.
    pub deployed: bool,
    /// The CR's strategy.
    pub updates: &'a WorkloadUpdates,
    /// Migrations that count against the parallel limit (upstream's `IsRunning`).
    pub running_migrations: u32,
    /// The cluster's `parallelMigrationsPerCluster`.
    pub parallel_migrations_per_cluster: u32,
    /// The time since the last eviction batch; `None` before the first.
    pub since_last_batch: Option<Duration>,
    /// The unfinished migrations the updater made: each one's key and its VMI's key.
    pub update_migrations: Vec<(String, String)>,
    /// What the CR's status counts now.
    pub reported_outdated: Option<i64>,
}

/// What to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// VMIs (keys) to label outdated.
    pub label: Vec<String>,
    /// VMIs (keys) whose outdated label goes.
    pub unlabel: Vec<String>,
    /// The running outdated VMIs, once the install is deployed (upstream's
    /// `kubevirt_vmi_number_of_outdated`).
    pub counted: Option<i64>,
    /// The count to write into the CR's status, when it differs.
    pub outdated: Option<i64>,
    /// VMIs (keys) to migrate, in order.
    pub migrate: Vec<String>,
    /// VMIs (keys) whose launcher pod is evicted, in order.
    pub evict: Vec<String>,
    /// Migrations (keys) to delete: their VMI is no longer outdated.
    pub abort: Vec<String>,
    /// When to look again.
    pub requeue: Option<Duration>,
}

/// Whether `vmi` runs a launcher other than `launcher_image`: it is not final and its launcher
/// image is known and differs.
#[must_use]
pub fn is_outdated(vmi: &VirtualMachineInstance, launcher_image: &str) -> bool {
    vmi.status.as_ref().is_some_and(|status| {
        !status.phase.unwrap_or_default().is_final()
            && status
                .launcher_container_image_version
                .as_deref()
                .is_some_and(|image| !image.is_empty() && image != launcher_image)
    })
}

/// One launcher pod of a VMI, as far as choosing the one to evict goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LauncherPod<'a> {
    /// Its name.
    pub name: &'a str,
    /// The node it was scheduled to.
    pub node: Option<&'a str>,
    /// Failed, succeeded or being deleted.
    pub is_down: bool,
    /// A temporary pod that only binds claims (never the VMI's own).
    pub is_temporary: bool,
    /// Its creation time, as RFC 3339 text (which sorts as time does).
    pub created: Option<String>,
}

/// The pod the VMI runs in (upstream's `CurrentVMIPod`): the newest pod on the VMI's node that is
/// not down, whatever it was created for (after a migration it is the former target).
#[must_use]
pub fn current_pod<'a>(pods: &[LauncherPod<'a>], node: Option<&str>) -> Option<&'a str> {
    pods.iter()
        .filter(|p| !p.is_down && !p.is_temporary && p.node.is_some() && p.node == node)
        .max_by(|a, b| a.created.cmp(&b.created).then_with(|| a.name.cmp(b.name)))
        .map(|p| p.name)
}

/// Running and not being deleted: the VMIs the updater counts and moves.
fn is_live(vmi: &VirtualMachineInstance) -> bool {
    vmi.metadata.deletion_timestamp.is_none()
        && vmi.status.as_ref().and_then(|s| s.phase) == Some(VirtualMachineInstancePhase::Running)
}

/// A migration of it is under way, as its status says.
fn is_migrating(vmi: &VirtualMachineInstance) -> bool {
    vmi.status
        .as_ref()
        .and_then(|s| s.migration_state.as_ref())
        .is_some_and(|m| m.completed != Some(true) && m.failed != Some(true))
}

/// Its migration's target domain is ready: too late to abort.
fn target_ready(vmi: &VirtualMachineInstance) -> bool {
    vmi.status
        .as_ref()
        .and_then(|s| s.migration_state.as_ref())
        .is_some_and(|m| m.target_node_domain_ready_timestamp.is_some())
}

fn has_label(vmi: &VirtualMachineInstance) -> bool {
    vmi.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(OUTDATED_LAUNCHER_IMAGE))
}

/// Decides.
#[must_use]
pub fn plan(observed: &Observed<'_>) -> Plan {
    let mut result = Plan::default();
    let mut ready = Vec::new();
    let mut count = 0_i64;
    for entry in &observed.vmis {
        let vmi = entry.vmi;
        let outdated = is_outdated(vmi, observed.launcher_image);
        if outdated && !has_label(vmi) && vmi.metadata.deletion_timestamp.is_none() {
            result.label.push(entry.key.clone());
        } else if !outdated && has_label(vmi) {
            result.unlabel.push(entry.key.clone());
        }
        if !is_live(vmi) {
            continue;
        }
        if !outdated {
            if observed.deployed && !target_ready(vmi) {
                let mine = observed.update_migrations.iter().filter(|(_, of)| *of == entry.key);
                result.abort.extend(mine.map(|(migration, _)| migration.clone()));
            }
            continue;
        }
        count += 1;
        if !is_migrating(vmi) && !entry.being_moved {
            ready.push((entry.key.clone(), reported_live_migratable(vmi)));
        }
    }
    if !observed.deployed {
        // Upstream's updater waits for the install; the label does not.
        result.label.sort();
        result.unlabel.sort();
        return result;
    }
    result.counted = Some(count);
    if observed.reported_outdated != Some(count) {
        result.outdated = Some(count);
    }
    ready.sort();
    let updates = observed.updates;
    let (migratable, others): (Vec<_>, Vec<_>) = ready.into_iter().partition(|(_, m)| updates.live_migrate && *m);
    let free = observed
        .parallel_migrations_per_cluster
        .saturating_sub(observed.running_migrations);
    let free = usize::try_from(free).unwrap_or(usize::MAX);
    if migratable.len() > free {
        result.requeue = Some(WAIT_FOR_SLOT);
    }
    result.migrate = migratable.into_iter().take(free).map(|(key, _)| key).collect();
    if updates.evict && !others.is_empty() {
        let interval = updates.batch_eviction_interval;
        // The time left until the next batch may go; none when it may go now.
        let wait = observed
            .since_last_batch
            .and_then(|since| interval.checked_sub(since))
            .filter(|left| !left.is_zero());
        if let Some(left) = wait {
            result.requeue = Some(earliest(result.requeue, left.max(MIN_BATCH_WAIT)));
        } else {
            let size = usize::try_from(updates.batch_eviction_size).unwrap_or(usize::MAX);
            if others.len() > size {
                result.requeue = Some(earliest(result.requeue, interval.max(MIN_BATCH_WAIT)));
            }
            result.evict = others.into_iter().take(size).map(|(key, _)| key).collect();
        }
    }
    result.label.sort();
    result.unlabel.sort();
    result.abort.sort();
    result
}

/// The sooner of a planned requeue (if any) and `other`.
fn earliest(current: Option<Duration>, other: Duration) -> Duration {
    current.map_or(other, |c| c.min(other))
}

#[cfg(test)]
mod tests;
