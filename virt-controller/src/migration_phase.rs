//! The migration controller's phase machine in one pure function: from a
//! `VirtualMachineInstanceMigration`'s phase and what is seen of its VMI, the VMI's migration state
//! and the target pod, to the next phase and why. Upstream's rules, first match wins: a final
//! migration stays; a missing or finished VMI, a cancel before virt-handler has it, a target pod
//! that is down or gone, a migration state that was cleared, taken over or reported failed, all
//! fail it; a cancel after the hand-off asks virt-handler to abort; otherwise it moves one phase
//! forward when the step's condition holds.

use kubevirt_api::v1::MigrationPhase as Phase;

/// What is seen of the VMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmiView {
    /// Not found.
    Missing,
    /// Succeeded or Failed.
    Final,
    /// Any other phase.
    Active,
}

impl VmiView {
    /// Every value, for matrix tests.
    pub const ALL: [Self; 3] = [Self::Missing, Self::Final, Self::Active];
}

/// What is seen of the target pod (the launcher pod labelled with this migration's UID).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetPod {
    /// None.
    Missing,
    /// Created, not running and ready yet.
    Pending,
    /// Running and ready on a node.
    Ready,
    /// Ended, or being deleted.
    Down,
}

impl TargetPod {
    /// Every value, for matrix tests.
    pub const ALL: [Self; 4] = [Self::Missing, Self::Pending, Self::Ready, Self::Down];
}

/// The VMI's `status.migrationState` as it concerns this migration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StateView {
    /// None.
    Cleared,
    /// It names another migration.
    Other,
    /// It names this one.
    Ours(Progress),
}

/// What virt-handler has written into the VMI's migration state for this migration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools, reason = "each is one status field upstream")]
pub struct Progress {
    /// `targetNode` is set.
    pub target_node: bool,
    /// `targetNodeAddress` is set: the target's proxies listen.
    pub target_address: bool,
    /// `startTimestamp` is set.
    pub started: bool,
    /// `completed`.
    pub completed: bool,
    /// `failed`.
    pub failed: bool,
}

impl StateView {
    /// Every value (every combination of the progress flags), for matrix tests.
    #[must_use]
    pub fn all() -> Vec<Self> {
        let mut all = vec![Self::Cleared, Self::Other];
        for bits in 0..32_u8 {
            all.push(Self::Ours(Progress {
                target_node: bits & 1 != 0,
                target_address: bits & 2 != 0,
                started: bits & 4 != 0,
                completed: bits & 8 != 0,
                failed: bits & 16 != 0,
            }));
        }
        all
    }
}

/// Everything the decision reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The VMI.
    pub vmi: VmiView,
    /// The migration has a deletion timestamp: the user cancels it.
    pub deleting: bool,
    /// The target pod.
    pub target_pod: TargetPod,
    /// The VMI's migration state.
    pub state: StateView,
    /// Another unfinished migration owns the VMI's migration state.
    pub other_in_flight: bool,
}

/// Why a migration failed: the event's message, upstream's words.
pub mod failure {
    /// The VMI is gone.
    pub const VMI_MISSING: &str = "Migration failed because vmi does not exist.";
    /// The VMI stopped.
    pub const VMI_FINAL: &str = "Migration failed vmi shutdown during migration.";
    /// Deleted before virt-handler had it.
    pub const CANCELED: &str = "Migration failed due to being canceled";
    /// The target pod ended.
    pub const TARGET_POD_DOWN: &str = "Migration failed because target pod shutdown during migration";
    /// The target pod vanished.
    pub const TARGET_POD_GONE: &str = "Migration target pod was removed during active migration.";
    /// The VMI's migration state vanished.
    pub const STATE_CLEARED: &str = "VMI's migration state was cleared during the active migration.";
    /// Another migration owns the VMI's migration state.
    pub const STATE_TAKEN: &str =
        "VMI's migration state was taken over by another migration job during active migration.";
    /// virt-handler reported the failure.
    pub const SOURCE_FAILED: &str = "source node reported migration failed";
    /// Another migration of the VMI runs.
    pub const NOT_ELIGIBLE: &str = "VMI is not eligible for migration because another migration job is in progress.";
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The phase stays.
    Stay,
    /// Move forward to this phase.
    Advance(Phase),
    /// Failed, for this reason ([`failure`]); `abort_requested` adds the
    /// `migrationAbortRequested` condition (a cancel).
    Fail {
        /// The event's message.
        reason: &'static str,
        /// It was cancelled.
        abort_requested: bool,
    },
    /// Cancelled after the hand-off: add `migrationAbortRequested`, ask virt-handler to abort
    /// (the VMI's `migrationState.abortRequested`), and wait for it to report.
    RequestAbort,
}

fn fail(reason: &'static str) -> Step {
    Step::Fail {
        reason,
        abort_requested: false,
    }
}

/// The next step for a migration in `phase`.
#[must_use]
pub fn step(phase: Phase, seen: &Observation) -> Step {
    if phase.is_final() {
        return Step::Stay;
    }
    match seen.vmi {
        VmiView::Missing => return fail(failure::VMI_MISSING),
        VmiView::Final => return fail(failure::VMI_FINAL),
        VmiView::Active => {}
    }
    if seen.deleting && !phase.is_handed_off() {
        return Step::Fail {
            reason: failure::CANCELED,
            abort_requested: true,
        };
    }
    match seen.target_pod {
        TargetPod::Down => return fail(failure::TARGET_POD_DOWN),
        TargetPod::Missing if phase.is_target_created() => return fail(failure::TARGET_POD_GONE),
        TargetPod::Missing | TargetPod::Pending | TargetPod::Ready => {}
    }
    let ours = match seen.state {
        StateView::Cleared if phase.is_handed_off() => return fail(failure::STATE_CLEARED),
        StateView::Other if phase.is_handed_off() => return fail(failure::STATE_TAKEN),
        StateView::Cleared | StateView::Other => None,
        StateView::Ours(progress) => Some(progress),
    };
    if ours.is_some_and(|p| p.failed) {
        return fail(failure::SOURCE_FAILED);
    }
    let ours_done = ours.is_some_and(|p| p.completed);
    if seen.deleting && !(phase == Phase::Running && ours_done) {
        // A cancel that came too late (the guest already moved) ends in Succeeded below.
        return Step::RequestAbort;
    }
    let ours = ours.unwrap_or_default();
    let (ready, next) = match phase {
        Phase::Unset if seen.other_in_flight => return fail(failure::NOT_ELIGIBLE),
        Phase::Unset => (true, Phase::Pending),
        Phase::Pending => (seen.target_pod != TargetPod::Missing, Phase::Scheduling),
        Phase::Scheduling => (seen.target_pod == TargetPod::Ready, Phase::Scheduled),
        Phase::Scheduled => (
            ours.target_node && matches!(seen.state, StateView::Ours(_)),
            Phase::PreparingTarget,
        ),
        Phase::PreparingTarget => (ours.target_node && ours.target_address, Phase::TargetReady),
        Phase::TargetReady => (ours.started, Phase::Running),
        Phase::Running => (ours.completed, Phase::Succeeded),
        Phase::Succeeded | Phase::Failed => (false, phase),
    };
    if ready { Step::Advance(next) } else { Step::Stay }
}

#[cfg(test)]
mod tests;
