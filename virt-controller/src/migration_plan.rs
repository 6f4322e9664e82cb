//! What the migration controller does for one `VirtualMachineInstanceMigration`, decided in one
//! pure function from what it observed: the phase ([`crate::migration_phase::step`]) and the
//! writes each phase needs. It keeps the finalizer and the VMI label on the migration, creates the
//! target pod within the parallel-migration limits, hands the migration to virt-handler by writing
//! the VMI's `status.migrationState`, asks virt-handler to abort a cancelled migration, deletes the
//! target pod of a migration that failed, and releases the finalizer once it is final.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::migration_settings::MigrationSettings;
use kubevirt_api::v1::{
    MigrationPhase as Phase, MigrationPhaseTransition, MigrationState, VirtualMachineInstance,
    VirtualMachineInstanceCondition, VirtualMachineInstanceMigration, VirtualMachineInstanceMigrationStatus,
};
use kubevirt_api::well_known::{conditions, finalizers, labels};

use crate::migration_phase::{Observation, Progress, StateView, Step, TargetPod, VmiView, step};
use crate::vmi_lifecycle::PodView;

/// How long to wait before looking again when a parallel-migration limit is reached.
pub const LIMIT_RETRY: Duration = Duration::from_secs(5);
/// How long a target pod may stay unschedulable before it is deleted (and the migration fails).
pub const UNSCHEDULABLE_TIMEOUT_SECONDS: i64 = 5 * 60;
/// How long a target pod may stay Pending for any reason.
pub const PENDING_TIMEOUT_SECONDS: i64 = 15 * 60;
/// How soon a migration held by settings kubevirt-rs does not support is looked at again.
pub const UNSUPPORTED_RETRY: Duration = Duration::from_secs(30);
/// Overrides [`UNSCHEDULABLE_TIMEOUT_SECONDS`] for one migration (upstream's, for tests).
pub const UNSCHEDULABLE_TIMEOUT_ANNOTATION: &str = "kubevirt.io/migrationUnschedulablePodTimeoutSeconds";
/// Overrides [`PENDING_TIMEOUT_SECONDS`] for one migration.
pub const PENDING_TIMEOUT_ANNOTATION: &str = "kubevirt.io/migrationPendingPodTimeoutSeconds";

/// What the controller observed for one migration.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The migration.
    pub migration: &'a VirtualMachineInstanceMigration,
    /// Its VMI, when it exists.
    pub vmi: Option<&'a VirtualMachineInstance>,
    /// Its target pod (labelled with its UID), when one exists.
    pub target_pod: Option<&'a PodView>,
    /// The launcher pod the VMI runs in now (on its node).
    pub source_pod: Option<&'a PodView>,
    /// Another unfinished migration owns the VMI's migration state.
    pub other_in_flight: bool,
    /// Migrations in the cluster that count against `parallelMigrationsPerCluster`.
    pub running_in_cluster: u32,
    /// Of those, the ones leaving the VMI's node.
    pub running_from_node: u32,
    /// The settings the migration runs with: the cluster's, or those of the policy below.
    pub settings: &'a MigrationSettings,
    /// The `MigrationPolicy` that selected the VMI, when one did.
    pub policy: Option<&'a str>,
    /// How long an evacuation's migration still waits after earlier ones failed
    /// ([`crate::migration_history::evacuation_backoff`]).
    pub backoff: Option<Duration>,
    /// Now.
    pub now: Time,
}

/// One event about the migration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedEvent {
    /// `Normal` or `Warning`.
    pub kind: &'static str,
    /// Upstream's reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// The writes for one migration, in the order they are applied.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Put the finalizer and the `kubevirt.io/vmi-name` label on the migration.
    pub add_finalizer_and_label: bool,
    /// Create the target pod.
    pub create_target_pod: bool,
    /// Delete the target pod of this name.
    pub delete_target_pod: Option<String>,
    /// Write the VMI's migration state (the hand-off, or a cancel for virt-handler), and label
    /// the VMI with the target node when given.
    pub vmi_migration_state: Option<MigrationState>,
    /// The target node's label on the VMI.
    pub vmi_target_node_label: Option<String>,
    /// The migration's new status.
    pub status: Option<VirtualMachineInstanceMigrationStatus>,
    /// Remove the finalizer: the migration is final.
    pub remove_finalizer: bool,
    /// Events about the migration.
    pub events: Vec<PlannedEvent>,
    /// Events about its VMI.
    pub vmi_events: Vec<PlannedEvent>,
    /// Look again after this long.
    pub requeue: Option<Duration>,
}

fn event(kind: &'static str, reason: &'static str, message: impl Into<String>) -> PlannedEvent {
    PlannedEvent {
        kind,
        reason,
        message: message.into(),
    }
}

/// What the phase machine sees of the pod.
fn target_view(pod: Option<&PodView>) -> TargetPod {
    match pod {
        None => TargetPod::Missing,
        Some(p) if p.is_terminating || p.phase == "Failed" || p.phase == "Succeeded" => TargetPod::Down,
        Some(p) if p.is_compute_ready && p.phase == "Running" && p.node.is_some() => TargetPod::Ready,
        Some(_) => TargetPod::Pending,
    }
}

/// What the phase machine sees of the VMI's migration state.
fn state_view(state: Option<&MigrationState>, uid: &str) -> StateView {
    match state {
        None => StateView::Cleared,
        Some(s) if s.migration_uid.as_deref() != Some(uid) => StateView::Other,
        Some(s) => StateView::Ours(Progress {
            target_node: s.target_node.is_some(),
            target_address: s.target_node_address.is_some(),
            started: s.start_timestamp.is_some(),
            completed: s.completed == Some(true),
            failed: s.failed == Some(true),
        }),
    }
}

fn has_finalizer(migration: &VirtualMachineInstanceMigration) -> bool {
    migration
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == finalizers::MIGRATION))
}

fn has_label(migration: &VirtualMachineInstanceMigration, vmi_name: &str) -> bool {
    migration
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::MIGRATION_VMI_NAME))
        .is_some_and(|v| v == vmi_name)
}

/// What the phase machine reads.
fn observation(seen: &Observed<'_>, uid: &str, deleting: bool, vmi_state: Option<&MigrationState>) -> Observation {
    Observation {
        vmi: match seen.vmi {
            None => VmiView::Missing,
            Some(v)
                if v.status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(kubevirt_api::v1::VirtualMachineInstancePhase::is_final) =>
            {
                VmiView::Final
            }
            Some(_) => VmiView::Active,
        },
        deleting,
        target_pod: target_view(seen.target_pod),
        state: state_view(vmi_state, uid),
        other_in_flight: seen.other_in_flight,
    }
}

/// Decides the writes for one migration.
#[must_use]
pub fn plan(seen: &Observed<'_>) -> Plan {
    let migration = seen.migration;
    let uid = migration.metadata.uid.clone().unwrap_or_default();
    let vmi_name = migration.spec.vmi_name.clone().unwrap_or_default();
    let current = migration.status.clone().unwrap_or_default();
    let phase = current.phase.unwrap_or_default();
    let deleting = migration.metadata.deletion_timestamp.is_some();
    let vmi_state = seen
        .vmi
        .and_then(|v| v.status.as_ref())
        .and_then(|s| s.migration_state.as_ref());
    let observation = observation(seen, &uid, deleting, vmi_state);
    let mut plan = Plan {
        add_finalizer_and_label: !phase.is_final()
            && !deleting
            && (!has_finalizer(migration) || !has_label(migration, &vmi_name)),
        ..Plan::default()
    };
    let mut status = current.clone();
    let enter = |status: &mut VirtualMachineInstanceMigrationStatus, next: Phase| {
        status.phase = Some(next);
        status.phase_transition_timestamps.push(MigrationPhaseTransition {
            phase: Some(next),
            phase_transition_timestamp: Some(seen.now.clone()),
        });
    };
    let mut abort_condition = false;
    match step(phase, &observation) {
        Step::Stay => {}
        Step::Advance(next) => {
            enter(&mut status, next);
            if next == Phase::Succeeded {
                plan.events.push(event(
                    "Normal",
                    "SuccessfulMigration",
                    "Source node reported migration succeeded",
                ));
            }
        }
        Step::Fail {
            reason,
            abort_requested,
        } => {
            enter(&mut status, Phase::Failed);
            abort_condition = abort_requested;
            plan.events.push(event("Warning", "FailedMigration", reason));
            // virt-handler, which only looks at the VMI, learns of it there.
            if let Some(state) = vmi_state.filter(|s| {
                s.migration_uid.as_deref() == Some(uid.as_str()) && s.failed != Some(true) && s.completed != Some(true)
            }) {
                plan.vmi_migration_state = Some(MigrationState {
                    failed: Some(true),
                    failure_reason: Some(reason.to_owned()),
                    end_timestamp: Some(seen.now.clone()),
                    ..state.clone()
                });
            }
        }
        Step::RequestAbort => {
            abort_condition = true;
            if let Some(state) = vmi_state.filter(|s| s.abort_requested != Some(true)) {
                plan.vmi_migration_state = Some(MigrationState {
                    abort_requested: Some(true),
                    ..state.clone()
                });
                plan.events.push(event(
                    "Normal",
                    "SuccessfulAbortMigration",
                    "Migration is ready to be canceled by virt-handler.",
                ));
            }
        }
    }
    if abort_condition
        && !status
            .conditions
            .iter()
            .any(|c| c.condition_type == conditions::MIGRATION_ABORT_REQUESTED)
    {
        status.conditions.push(VirtualMachineInstanceCondition {
            condition_type: conditions::MIGRATION_ABORT_REQUESTED.to_owned(),
            status: conditions::TRUE.to_owned(),
            last_probe_time: Some(seen.now.clone()),
            ..VirtualMachineInstanceCondition::default()
        });
    }
    let next = status.phase.unwrap_or_default();
    if next.is_final() {
        final_writes(seen, &uid, vmi_state, &mut status, &mut plan);
    } else if !deleting {
        phase_writes(seen, next, &mut plan);
    } else if let Some(pod) = seen.target_pod.filter(|p| !p.is_terminating && !next.is_handed_off()) {
        plan.delete_target_pod = Some(pod.name.clone());
    }
    if status != current {
        plan.status = Some(status);
    }
    plan
}

/// A final migration: keep the VMI's migration state, delete a failed migration's target pod,
/// release the finalizer.
fn final_writes(
    seen: &Observed<'_>,
    uid: &str,
    vmi_state: Option<&MigrationState>,
    status: &mut VirtualMachineInstanceMigrationStatus,
    plan: &mut Plan,
) {
    if let Some(state) = vmi_state.filter(|s| s.migration_uid.as_deref() == Some(uid)) {
        // The VM state claims stay named (the hand-off and its undoing read them).
        let named = status.migration_state.take().unwrap_or_default();
        let mut state = state.clone();
        state.source_persistent_state_pvc_name = state
            .source_persistent_state_pvc_name
            .or(named.source_persistent_state_pvc_name);
        state.target_persistent_state_pvc_name = state
            .target_persistent_state_pvc_name
            .or(named.target_persistent_state_pvc_name);
        status.migration_state = Some(state);
    }
    let failed = status.phase == Some(Phase::Failed);
    if failed && let Some(pod) = seen.target_pod.filter(|p| !p.is_terminating) {
        plan.delete_target_pod = Some(pod.name.clone());
    }
    plan.remove_finalizer = has_finalizer(seen.migration) && (!failed || plan.delete_target_pod.is_none());
    plan.add_finalizer_and_label = false;
}

/// The writes of a running migration's phase.
fn phase_writes(seen: &Observed<'_>, phase: Phase, plan: &mut Plan) {
    let Some(vmi) = seen.vmi else { return };
    match phase {
        Phase::Pending if seen.target_pod.is_none() => {
            let settings = seen.settings;
            if let Some(wait) = seen.backoff {
                plan.vmi_events.push(event(
                    "Warning",
                    "MigrationBackoff",
                    format!("backoff migrating vmi {}", vmi.key()),
                ));
                plan.requeue = Some(wait);
            } else if !settings.unsupported.is_empty() {
                plan.events.push(event(
                    "Warning",
                    "FailedCreate",
                    format!(
                        "the migration settings are not supported by kubevirt-rs: {}",
                        settings.unsupported.join(", ")
                    ),
                ));
                // MigrationPolicies are read, not watched: a changed one is seen at the next look.
                plan.requeue = Some(UNSUPPORTED_RETRY);
            } else if seen.running_in_cluster >= settings.parallel_migrations_per_cluster
                || seen.running_from_node >= settings.parallel_outbound_migrations_per_node
            {
                plan.requeue = Some(LIMIT_RETRY);
            } else if vmi.status.as_ref().and_then(|s| s.phase)
                == Some(kubevirt_api::v1::VirtualMachineInstancePhase::Running)
            {
                plan.create_target_pod = true;
            }
        }
        Phase::Pending | Phase::Scheduling => pending_timeouts(seen, vmi, plan),
        Phase::Scheduled => hand_off(seen, vmi, plan),
        _ => {}
    }
}

/// A timeout in seconds from the migration's `annotation`, else `default`; a value that is not a
/// number is ignored, as upstream does.
fn timeout_seconds(migration: &VirtualMachineInstanceMigration, annotation: &str, default: i64) -> i64 {
    migration
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(annotation))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A target pod still Pending: deleted once unschedulable for too long, or Pending for too long
/// for any reason; the migration then fails because its target pod is gone. Both periods count
/// from the pod's creation, so until one runs out the migration is looked at again when the
/// next could: at the unschedulable deadline even while the pod is not (yet) marked
/// unschedulable, since the scheduler's mark may reach the cache later than its event (#31).
fn pending_timeouts(seen: &Observed<'_>, vmi: &VirtualMachineInstance, plan: &mut Plan) {
    let Some(pod) = seen.target_pod else { return };
    let Some(created) = pod.created.as_ref() else {
        return;
    };
    if pod.phase != "Pending" || pod.is_terminating {
        return;
    }
    let spent = (seen.now.0.as_second() - created.0.as_second()).max(0);
    let migration = seen.migration;
    let unschedulable_limit = timeout_seconds(
        migration,
        UNSCHEDULABLE_TIMEOUT_ANNOTATION,
        UNSCHEDULABLE_TIMEOUT_SECONDS,
    );
    let pending_limit = timeout_seconds(migration, PENDING_TIMEOUT_ANNOTATION, PENDING_TIMEOUT_SECONDS);
    let is_unschedulable = pod
        .unschedulable
        .as_ref()
        .is_some_and(|(reason, _)| reason == "Unschedulable");
    if is_unschedulable {
        plan.events.push(event(
            "Warning",
            "MigrationTargetPodUnschedulable",
            format!(
                "Migration target pod for VMI [{}] is currently unschedulable.",
                vmi.key()
            ),
        ));
    }
    let expired = if is_unschedulable && spent >= unschedulable_limit {
        Some("unschedulable pod timeout period exceeded")
    } else if spent >= pending_limit {
        Some("pending pod timeout period exceeded")
    } else {
        None
    };
    if let Some(reason) = expired {
        plan.delete_target_pod = Some(pod.name.clone());
        plan.events.push(event("Normal", "SuccessfulDelete", reason));
        return;
    }
    let next = [unschedulable_limit, pending_limit]
        .into_iter()
        .map(|limit| limit - spent)
        .filter(|left| *left > 0)
        .min()
        .unwrap_or(1);
    let wait = Duration::from_secs(u64::try_from(next).unwrap_or(1).max(1));
    plan.requeue = Some(plan.requeue.map_or(wait, |r| r.min(wait)));
}

/// Scheduled with a ready target pod: the VMI's migration state names this migration, the nodes
/// and pods, and the settings; virt-handler takes it from there.
fn hand_off(seen: &Observed<'_>, vmi: &VirtualMachineInstance, plan: &mut Plan) {
    let uid = seen.migration.metadata.uid.clone();
    let current = vmi.status.as_ref().and_then(|s| s.migration_state.as_ref());
    if current.is_some_and(|s| s.migration_uid == uid) {
        return;
    }
    let Some(target) = seen.target_pod.filter(|p| p.node.is_some()) else {
        return;
    };
    // The VM state claims the migration's status names go into the VMI's state too, as upstream's.
    let claims = seen.migration.status.as_ref().and_then(|s| s.migration_state.as_ref());
    plan.vmi_migration_state = Some(MigrationState {
        source_persistent_state_pvc_name: claims.and_then(|c| c.source_persistent_state_pvc_name.clone()),
        target_persistent_state_pvc_name: claims.and_then(|c| c.target_persistent_state_pvc_name.clone()),
        migration_uid: uid,
        target_node: target.node.clone(),
        target_pod: Some(target.name.clone()),
        source_node: vmi.status.as_ref().and_then(|s| s.node_name.clone()),
        source_pod: seen.source_pod.map(|p| p.name.clone()),
        migration_configuration: Some(seen.settings.as_configuration()),
        migration_policy_name: seen.policy.map(str::to_owned),
        ..MigrationState::default()
    });
    plan.vmi_target_node_label.clone_from(&target.node);
    plan.events.push(event(
        "Normal",
        "SuccessfulHandOver",
        "Migration target pod is ready for preparation by virt-handler.",
    ));
}

#[cfg(test)]
mod tests;
