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
use crate::status::{LauncherView, compute_phase};

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
    /// The launcher pod's network is wired for the VMI (phase 1 of the pod network is done).
    pub pod_network_wired: bool,
}

/// One step of a plan, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Phase 1 of the pod network, in the launcher pod's network namespace, before its first
    /// Sync ([`crate::network_wiring`]).
    WirePodNetwork,
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
                Step::WirePodNetwork | Step::Sync | Step::Delete | Step::Cleanup => {}
            }
            plan.requeue = requeue;
        }
        Action::Delete if ready => {
            // A dead domain is undefined only once the VMI's final phase is written (or the VMI
            // is gone): undefining first would leave no domain to compute that phase from.
            let next = compute_phase(phase, observed.domain, LauncherView::Responsive).unwrap_or(phase);
            if observed.vmi_gone || phase.is_final() || !next.is_final() {
                plan.steps.push(Step::Delete);
            }
        }
        Action::Shutdown | Action::Delete => match observed.launcher {
            LauncherState::Starting => plan.requeue = Some(STARTING_RETRY),
            // Nothing is left to stop.
            LauncherState::Absent | LauncherState::Unresponsive => plan.steps.push(Step::Cleanup),
            LauncherState::Ready => {}
        },
        Action::Cleanup => plan.steps.push(Step::Cleanup),
        Action::Update => match observed.launcher {
            LauncherState::Ready => {
                if !observed.pod_network_wired && pod_network::plan::uses_pod_network(observed.vmi) {
                    plan.steps.push(Step::WirePodNetwork);
                }
                plan.steps.push(Step::Sync);
            }
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

#[cfg(test)]
mod tests {
    use cmd_protocol::domain::{DomainMetadata, DomainSpecSummary, DomainStatusSnapshot};
    use kubevirt_api::v1::VirtualMachineInstanceStatus;

    use super::*;

    fn vmi(phase: Phase, deleting: bool) -> VirtualMachineInstance {
        let mut vmi = VirtualMachineInstance::default();
        vmi.metadata.name = Some("vm".to_owned());
        vmi.metadata.namespace = Some("default".to_owned());
        if deleting {
            vmi.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::UNIX_EPOCH,
            ));
        }
        vmi.status = Some(VirtualMachineInstanceStatus {
            phase: Some(phase),
            ..VirtualMachineInstanceStatus::default()
        });
        vmi
    }

    fn domain(state: DomainState, reason: StateReason, started: Option<&str>) -> DomainSnapshot {
        DomainSnapshot {
            metadata: DomainMetadata {
                name: "default_vm".to_owned(),
                namespace: "default".to_owned(),
                grace_period_seconds: Some(30),
                graceful_shutdown_started: started.map(str::to_owned),
                ..DomainMetadata::default()
            },
            spec: DomainSpecSummary {
                has_acpi: true,
                ..DomainSpecSummary::default()
            },
            status: DomainStatusSnapshot::from_state(state, reason),
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).expect("time")
    }

    fn observe<'a>(vmi: &'a VirtualMachineInstance, domain: Option<&'a DomainSnapshot>) -> Observation<'a> {
        Observation {
            vmi,
            vmi_gone: false,
            domain,
            launcher: LauncherState::Ready,
            now: at(0),
            last_acpi: None,
            pod_network_wired: false,
        }
    }

    #[test]
    fn a_scheduled_vmi_is_synced_and_a_pending_one_is_left_to_the_controller() {
        let scheduled = vmi(Phase::Scheduled, false);
        let synced = plan(&observe(&scheduled, None));
        assert_eq!(synced.steps, vec![Step::Sync]);
        assert!(synced.write_status);
        for phase in [Phase::Unset, Phase::Pending, Phase::Scheduling] {
            assert_eq!(plan(&observe(&vmi(phase, false), None)), Plan::default(), "{phase:?}");
        }
    }

    #[test]
    fn the_pod_network_is_wired_before_the_first_sync_and_only_until_it_is() {
        let mut on_pod_network = vmi(Phase::Scheduled, false);
        on_pod_network.spec.networks = vec![kubevirt_api::v1::Network {
            name: "default".to_owned(),
            pod: Some(kubevirt_api::v1::PodNetwork::default()),
            ..kubevirt_api::v1::Network::default()
        }];
        on_pod_network.spec.domain.devices.interfaces = vec![kubevirt_api::v1::Interface {
            name: "default".to_owned(),
            masquerade: Some(kubevirt_api::v1::EmptyObject::default()),
            ..kubevirt_api::v1::Interface::default()
        }];
        assert_eq!(
            plan(&observe(&on_pod_network, None)).steps,
            vec![Step::WirePodNetwork, Step::Sync]
        );
        let wired = Observation {
            pod_network_wired: true,
            ..observe(&on_pod_network, None)
        };
        assert_eq!(plan(&wired).steps, vec![Step::Sync]);
        let starting = Observation {
            launcher: LauncherState::Starting,
            ..observe(&on_pod_network, None)
        };
        assert!(
            plan(&starting).steps.is_empty(),
            "nothing to wire into before the launcher serves"
        );
        let without = vmi(Phase::Scheduled, false);
        assert_eq!(plan(&observe(&without, None)).steps, vec![Step::Sync]);
    }

    #[test]
    fn a_starting_launcher_is_waited_for_and_an_absent_one_is_not_synced() {
        let scheduled = vmi(Phase::Scheduled, false);
        let starting = plan(&Observation {
            launcher: LauncherState::Starting,
            ..observe(&scheduled, None)
        });
        assert_eq!((starting.steps.len(), starting.requeue), (0, Some(STARTING_RETRY)));
        let absent = plan(&Observation {
            launcher: LauncherState::Absent,
            ..observe(&scheduled, None)
        });
        assert!(
            absent.steps.is_empty() && absent.write_status,
            "the status turns Failed"
        );
    }

    #[test]
    fn deletion_presses_the_button_every_five_seconds_then_kills_at_the_grace_end() {
        let deleting = vmi(Phase::Running, true);
        let fresh = domain(DomainState::Running, StateReason::Unknown, None);
        let first = plan(&observe(&deleting, Some(&fresh)));
        assert_eq!(first.steps, vec![Step::PressPowerButton]);
        assert_eq!(
            first.events,
            vec![VmiEvent::normal("ShuttingDown", "Signaled Graceful Shutdown")]
        );
        assert_eq!(first.requeue, Some(Duration::from_secs(5)));

        let started = at(0).to_string();
        let pressed = domain(DomainState::Running, StateReason::Unknown, Some(&started));
        let soon = plan(&Observation {
            now: at(2),
            last_acpi: Some(at(0)),
            ..observe(&deleting, Some(&pressed))
        });
        assert!(soon.steps.is_empty() && soon.events.is_empty());
        assert_eq!(soon.requeue, Some(Duration::from_secs(3)));

        let again = plan(&Observation {
            now: at(5),
            last_acpi: Some(at(0)),
            ..observe(&deleting, Some(&pressed))
        });
        assert_eq!(again.steps, vec![Step::PressPowerButton]);
        assert!(again.events.is_empty(), "ShuttingDown is recorded once");

        let expired = plan(&Observation {
            now: at(30),
            last_acpi: Some(at(25)),
            ..observe(&deleting, Some(&pressed))
        });
        assert_eq!(expired.steps, vec![Step::Kill]);
        assert_eq!(expired.events, vec![VmiEvent::normal("Deleted", "Signaled Deletion")]);
    }

    #[test]
    fn a_dead_domain_is_deleted_and_then_everything_is_cleaned_up() {
        let done = vmi(Phase::Succeeded, false);
        let off = domain(DomainState::Shutoff, StateReason::Shutdown, None);
        let delete = plan(&observe(&done, Some(&off)));
        assert_eq!(delete.steps, vec![Step::Delete]);
        assert!(!delete.write_status, "final VMIs are not written");
        let gone = domain(DomainState::NoState, StateReason::NonExistent, None);
        assert_eq!(plan(&observe(&done, Some(&gone))).steps, vec![Step::Cleanup]);
        let vanished = Observation {
            vmi_gone: true,
            ..observe(&done, None)
        };
        let cleanup = plan(&vanished);
        assert_eq!(cleanup.steps, vec![Step::Cleanup]);
        assert!(!cleanup.write_status);
    }

    #[test]
    fn a_deleted_vmi_records_its_final_phase_before_its_domain_is_undefined() {
        let deleting = vmi(Phase::Running, true);
        let off = domain(DomainState::Shutoff, StateReason::Shutdown, None);
        let first = plan(&observe(&deleting, Some(&off)));
        assert!(
            first.steps.is_empty() && first.write_status,
            "Succeeded is written first"
        );
        let succeeded = vmi(Phase::Succeeded, true);
        assert_eq!(plan(&observe(&succeeded, Some(&off))).steps, vec![Step::Delete]);
        let gone = Observation {
            vmi_gone: true,
            ..observe(&deleting, Some(&off))
        };
        assert_eq!(plan(&gone).steps, vec![Step::Delete]);
    }

    #[test]
    fn a_vmi_gone_with_its_launcher_unreachable_is_cleaned_up_not_waited_on() {
        let gone = vmi(Phase::Running, false);
        let running = domain(DomainState::Running, StateReason::Unknown, None);
        for launcher in [LauncherState::Absent, LauncherState::Unresponsive] {
            let cleaned = plan(&Observation {
                vmi_gone: true,
                launcher,
                ..observe(&gone, Some(&running))
            });
            assert_eq!(cleaned.steps, vec![Step::Cleanup], "{launcher:?}");
        }
    }

    #[test]
    fn phase_events_match_upstream() {
        assert_eq!(
            phase_event(Phase::Running).map(|e| e.reason),
            Some("Started".to_owned())
        );
        assert_eq!(phase_event(Phase::Failed).map(|e| e.event_type), Some("Warning"));
        assert_eq!(phase_event(Phase::Scheduled), None);
    }
}
