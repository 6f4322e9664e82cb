//! What the launcher does next for its running domain: a pure decision from what it observed.
//!
//! Graceful stop follows upstream's contract (virt-handler's `helperVmShutdown` in
//! `pkg/virt-handler/vm.go`): press the ACPI power button, press it again at most every 5 s while
//! the grace period lasts (a booting guest can miss the first press), then destroy. The domain's
//! state decides when the VM is over and with which phase.

use std::time::Duration;

use kubevirt_api::domain_state::{DomainState, StateReason, phase_for_domain};
use kubevirt_api::graceful_stop::{StopClock, StopStep, next_step};
use kubevirt_api::v1::VirtualMachineInstancePhase;

use crate::libvirt::DomainStatus;

/// How often a destroyed domain's state is re-read until it reports Shutoff.
pub const DESTROY_POLL: Duration = Duration::from_millis(50);

/// Progress of a stop that was asked for (SIGTERM, Ctrl-C).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopProgress {
    /// Time since the stop was asked for.
    pub elapsed: Duration,
    /// Time since the last ACPI press, if any.
    pub since_last_acpi: Option<Duration>,
    /// A destroy was already sent.
    pub is_destroy_sent: bool,
}

/// What the launcher saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The domain's state.
    pub status: DomainStatus,
    /// A stop in progress, if any.
    pub stop: Option<StopProgress>,
}

/// Fixed facts about the VM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Policy {
    /// `terminationGracePeriodSeconds`.
    pub grace: Duration,
    /// The guest has ACPI, so the power button can stop it.
    pub has_acpi: bool,
}

impl Policy {
    /// Upstream's "ACPI was usable": a grace period and ACPI. A destroy then means the guest had
    /// to be killed, hence Failed.
    #[must_use]
    pub fn is_acpi_usable(&self) -> bool {
        self.has_acpi && !self.grace.is_zero()
    }
}

/// The next step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing to do until an event, a signal, or the given time passes.
    Wait(Option<Duration>),
    /// Press the ACPI power button.
    SendAcpiShutdown,
    /// Stop the guest at once.
    Destroy,
    /// The VM is over.
    Finish(VirtualMachineInstancePhase),
}

/// Decides the next step.
#[must_use]
pub fn decide(observation: &Observation, policy: &Policy) -> Plan {
    let status = observation.status;
    if status == DomainStatus::NON_EXISTENT {
        // The domain vanished under a running VM.
        return Plan::Finish(VirtualMachineInstancePhase::Failed);
    }
    if let Some(phase) =
        phase_for_domain(status.state, status.reason, policy.is_acpi_usable()).filter(|phase| phase.is_final())
    {
        return Plan::Finish(phase);
    }
    if status.state == DomainState::Shutoff
        && matches!(status.reason, StateReason::Unknown | StateReason::Migrated)
        && observation.stop.is_some()
    {
        // Defined but never started, or migrated away (the guest runs on another node now), and a
        // stop was asked for: nothing runs here.
        return Plan::Finish(VirtualMachineInstancePhase::Succeeded);
    }
    let Some(stop) = observation.stop else {
        return Plan::Wait(None);
    };
    if stop.is_destroy_sent {
        return Plan::Wait(Some(DESTROY_POLL));
    }
    let clock = StopClock {
        elapsed: stop.elapsed,
        since_last_acpi: stop.since_last_acpi,
    };
    match next_step(clock, policy.grace, policy.has_acpi) {
        StopStep::PressPowerButton => Plan::SendAcpiShutdown,
        StopStep::Kill => Plan::Destroy,
        StopStep::Wait(wait) => Plan::Wait(Some(wait)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use VirtualMachineInstancePhase::{Failed, Succeeded};

    const RUNNING: DomainStatus = DomainStatus {
        state: DomainState::Running,
        reason: StateReason::Unknown,
    };
    const GRACE: Policy = Policy {
        grace: Duration::from_secs(30),
        has_acpi: true,
    };

    #[allow(clippy::unnecessary_wraps, reason = "observations hold an optional stop")]
    fn stop(elapsed: u64, since_last_acpi: Option<u64>, is_destroy_sent: bool) -> Option<StopProgress> {
        Some(StopProgress {
            elapsed: Duration::from_secs(elapsed),
            since_last_acpi: since_last_acpi.map(Duration::from_secs),
            is_destroy_sent,
        })
    }

    fn plan(status: DomainStatus, stop: Option<StopProgress>, policy: Policy) -> Plan {
        decide(&Observation { status, stop }, &policy)
    }

    #[test]
    fn a_domain_migrated_away_stops_at_once_and_waits_without_a_stop() {
        let migrated = DomainStatus {
            state: DomainState::Shutoff,
            reason: StateReason::Migrated,
        };
        assert_eq!(plan(migrated, stop(0, None, false), GRACE), Plan::Finish(Succeeded));
        assert_eq!(plan(migrated, None, GRACE), Plan::Wait(None));
    }

    #[test]
    fn a_running_vm_with_no_stop_waits_for_events() {
        assert_eq!(plan(RUNNING, None, GRACE), Plan::Wait(None));
    }

    #[test]
    fn a_stop_presses_the_power_button_then_repeats_every_five_seconds() {
        assert_eq!(plan(RUNNING, stop(0, None, false), GRACE), Plan::SendAcpiShutdown);
        assert_eq!(
            plan(RUNNING, stop(2, Some(2), false), GRACE),
            Plan::Wait(Some(Duration::from_secs(3)))
        );
        assert_eq!(plan(RUNNING, stop(5, Some(5), false), GRACE), Plan::SendAcpiShutdown);
    }

    #[test]
    fn the_wait_never_overshoots_the_grace_period() {
        let short = Policy {
            grace: Duration::from_secs(3),
            has_acpi: true,
        };
        assert_eq!(
            plan(RUNNING, stop(1, Some(1), false), short),
            Plan::Wait(Some(Duration::from_secs(2)))
        );
    }

    #[test]
    fn grace_expiry_destroys_once_then_polls() {
        assert_eq!(plan(RUNNING, stop(30, Some(2), false), GRACE), Plan::Destroy);
        assert_eq!(
            plan(RUNNING, stop(31, Some(3), true), GRACE),
            Plan::Wait(Some(DESTROY_POLL))
        );
    }

    #[test]
    fn without_acpi_or_grace_a_stop_destroys_at_once() {
        let no_acpi = Policy {
            grace: Duration::from_secs(30),
            has_acpi: false,
        };
        let no_grace = Policy {
            grace: Duration::ZERO,
            has_acpi: true,
        };
        assert_eq!(plan(RUNNING, stop(0, None, false), no_acpi), Plan::Destroy);
        assert_eq!(plan(RUNNING, stop(0, None, false), no_grace), Plan::Destroy);
    }

    #[test]
    fn the_domain_state_decides_the_final_phase() {
        let off = |reason| DomainStatus {
            state: DomainState::Shutoff,
            reason,
        };
        assert_eq!(plan(off(StateReason::Shutdown), None, GRACE), Plan::Finish(Succeeded));
        assert_eq!(plan(off(StateReason::Crashed), None, GRACE), Plan::Finish(Failed));
        assert_eq!(
            plan(off(StateReason::Destroyed), stop(30, None, true), GRACE),
            Plan::Finish(Failed)
        );
        let no_acpi = Policy {
            grace: Duration::from_secs(30),
            has_acpi: false,
        };
        assert_eq!(
            plan(off(StateReason::Destroyed), stop(0, None, true), no_acpi),
            Plan::Finish(Succeeded)
        );
        assert_eq!(plan(DomainStatus::NON_EXISTENT, None, GRACE), Plan::Finish(Failed));
    }

    /// Every state x reason x stop stage x policy: the plan is always one of the allowed steps, a
    /// final phase always finishes, and a running VM is never destroyed before its grace ends.
    #[test]
    fn full_matrix_of_states_stops_and_policies() {
        let stops = [
            None,
            stop(0, None, false),
            stop(3, Some(3), false),
            stop(30, Some(5), false),
            stop(40, Some(1), true),
        ];
        let policies = [
            GRACE,
            Policy {
                grace: Duration::ZERO,
                has_acpi: true,
            },
            Policy {
                grace: Duration::from_secs(30),
                has_acpi: false,
            },
        ];
        for state in DomainState::ALL {
            for reason in StateReason::ALL {
                let status = DomainStatus { state, reason };
                for stop in stops {
                    for policy in policies {
                        let got = plan(status, stop, policy);
                        let final_phase =
                            phase_for_domain(state, reason, policy.is_acpi_usable()).filter(|p| p.is_final());
                        if let Some(phase) = final_phase {
                            assert_eq!(got, Plan::Finish(phase), "{state} {reason} {stop:?}");
                        }
                        if got == Plan::Destroy {
                            let s = stop.expect("destroy only during a stop");
                            assert!(!s.is_destroy_sent);
                            assert!(
                                !policy.is_acpi_usable() || s.elapsed >= policy.grace,
                                "{state} {reason} {s:?}"
                            );
                        }
                        if stop.is_none() && final_phase.is_none() && status != DomainStatus::NON_EXISTENT {
                            assert_eq!(got, Plan::Wait(None), "{state} {reason}");
                        }
                    }
                }
            }
        }
    }
}
