//! One reconcile, decided: from what the handler observed about a VMI, its domain and its
//! launcher, the steps to take, the events to record and when to look again. Pure; the
//! reconciler applies the plan ([`crate::reconciler`]).

use std::time::Duration;

use cmd_protocol::domain::DomainSnapshot;
use k8s_openapi::jiff::Timestamp;
use kubevirt_api::domain_state::{DomainState, StateReason};
use kubevirt_api::graceful_stop::{StopClock, StopStep, next_step};
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};

use crate::cluster_api::VmiEvent;
use crate::decide::{Action, DomainView, VmiView, decide};

/// How long to wait for a launcher that is still starting.
pub const STARTING_RETRY: Duration = Duration::from_secs(1);

/// The launcher as observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LauncherState {
    /// It serves commands.
    Ready,
    /// Its pod is there; it does not serve commands yet.
    Starting,
    /// Nothing of it is on this node.
    Absent,
    /// It stopped answering.
    Unresponsive,
}

/// What the handler observed for one VMI.
#[derive(Clone, Copy, Debug)]
pub struct Observation<'a> {
    /// The VMI: in the API, or the last copy of one that is gone.
    pub vmi: &'a VirtualMachineInstance,
    /// The VMI is gone from the API.
    pub vmi_gone: bool,
    /// The domain, as the launcher last reported it.
    pub domain: Option<&'a DomainSnapshot>,
    /// The launcher.
    pub launcher: LauncherState,
    /// Now.
    pub now: Timestamp,
    /// When this handler last pressed the power button for the VMI.
    pub last_acpi: Option<Timestamp>,
}

/// One step of a plan, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `SyncVirtualMachine`.
    Sync,
    /// `ShutdownVirtualMachine` (ACPI).
    PressPowerButton,
    /// `KillVirtualMachine`.
    Kill,
    /// `DeleteVirtualMachine` (undefine).
    Delete,
    /// Release the launcher client and forget the VMI's domain.
    Cleanup,
}

/// The plan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Steps, in order.
    pub steps: Vec<Step>,
    /// Events to record.
    pub events: Vec<VmiEvent>,
    /// Look again after this long.
    pub requeue: Option<Duration>,
    /// Compute and write the VMI's status after the steps.
    pub write_status: bool,
}

/// The domain as the decision table sees it; a snapshot of a domain that no longer exists is no
/// domain.
fn domain_view(domain: Option<&DomainSnapshot>) -> DomainView {
    match domain {
        Some(d) if (d.status.state(), d.status.reason()) != (DomainState::NoState, StateReason::NonExistent) => {
            DomainView::Present {
                state: d.status.state(),
                is_marked_for_graceful_shutdown: false,
            }
        }
        _ => DomainView::Missing,
    }
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    Duration::try_from(to.duration_since(from)).unwrap_or(Duration::ZERO)
}

/// The graceful-stop step: ACPI at once and at most every 5 s while the grace period lasts,
/// counted from when the launcher saw the first press; then kill.
fn shutdown_step(observed: &Observation<'_>, domain: Option<&DomainSnapshot>) -> (Step, Option<Duration>) {
    let grace_seconds = domain
        .and_then(|d| d.metadata.grace_period_seconds)
        .unwrap_or_else(|| observed.vmi.termination_grace_period_seconds());
    let grace = Duration::from_secs(u64::try_from(grace_seconds).unwrap_or(0));
    let started = domain
        .and_then(|d| d.metadata.graceful_shutdown_started.as_deref())
        .and_then(|t| t.parse::<Timestamp>().ok());
    let clock = StopClock {
        elapsed: started.map_or(Duration::ZERO, |s| elapsed(s, observed.now)),
        since_last_acpi: observed.last_acpi.map(|at| elapsed(at, observed.now)),
    };
    let has_acpi = domain.is_none_or(|d| d.spec.has_acpi);
    match next_step(clock, grace, has_acpi) {
        StopStep::PressPowerButton => {
            let remaining = grace.saturating_sub(clock.elapsed);
            (
                Step::PressPowerButton,
                Some(kubevirt_api::graceful_stop::ACPI_RESEND_INTERVAL.min(remaining)),
            )
        }
        StopStep::Kill => (Step::Kill, None),
        StopStep::Wait(wait) => (Step::Sync, Some(wait)),
    }
}

/// Decides what to do for one VMI.
#[must_use]
pub fn plan(observed: &Observation<'_>) -> Plan {
    let vmi = observed.vmi;
    let status = vmi.status.as_ref();
    let phase = status.and_then(|s| s.phase).unwrap_or_default();
    let is_deleting = vmi.metadata.deletion_timestamp.is_some();
    let mut plan = Plan::default();
    // Not scheduled here (yet): virt-controller owns the VMI until it is Scheduled.
    if !observed.vmi_gone && !is_deleting && matches!(phase, Phase::Unset | Phase::Pending | Phase::Scheduling) {
        return plan;
    }
    let vmi_view = if observed.vmi_gone {
        VmiView::Missing
    } else {
        VmiView::Present { phase, is_deleting }
    };
    plan.write_status = !observed.vmi_gone && !phase.is_final();
    let ready = observed.launcher == LauncherState::Ready;
    match decide(vmi_view, domain_view(observed.domain)) {
        Action::Shutdown if ready => {
            let (step, requeue) = shutdown_step(observed, observed.domain);
            match step {
                Step::PressPowerButton => {
                    plan.steps.push(Step::PressPowerButton);
                    if observed.last_acpi.is_none() {
                        plan.events
                            .push(VmiEvent::normal("ShuttingDown", "Signaled Graceful Shutdown"));
                    }
                }
                Step::Kill => {
                    plan.steps.push(Step::Kill);
                    plan.events.push(VmiEvent::normal("Deleted", "Signaled Deletion"));
                }
                Step::Sync | Step::Delete | Step::Cleanup => {}
            }
            plan.requeue = requeue;
        }
        Action::Delete if ready => plan.steps.push(Step::Delete),
        Action::Shutdown | Action::Delete => match observed.launcher {
            LauncherState::Starting => plan.requeue = Some(STARTING_RETRY),
            // Nothing is left to stop.
            LauncherState::Absent | LauncherState::Unresponsive => plan.steps.push(Step::Cleanup),
            LauncherState::Ready => {}
        },
        Action::Cleanup => plan.steps.push(Step::Cleanup),
        Action::Update => match observed.launcher {
            LauncherState::Ready => plan.steps.push(Step::Sync),
            LauncherState::Starting => plan.requeue = Some(STARTING_RETRY),
            LauncherState::Absent | LauncherState::Unresponsive => {}
        },
    }
    plan
}

/// The event for a phase the handler just wrote, as upstream records it.
#[must_use]
pub fn phase_event(phase: Phase) -> Option<VmiEvent> {
    match phase {
        Phase::Running => Some(VmiEvent::normal("Started", "VirtualMachineInstance started.")),
        Phase::Succeeded => Some(VmiEvent::normal("Stopped", "The VirtualMachineInstance was shut down.")),
        Phase::Failed => Some(VmiEvent::warning("Stopped", "The VirtualMachineInstance crashed.")),
        Phase::Unset
        | Phase::Pending
        | Phase::Scheduling
        | Phase::Scheduled
        | Phase::Unknown
        | Phase::WaitingForSync => None,
    }
}
