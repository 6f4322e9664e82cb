//! What the VM controller does with a VM's VMI, by run strategy and state-change requests
//! (upstream's `pkg/virt-controller/watch/vm/vm.go`): create it, delete it, or leave it, and which
//! state-change request is consumed. Pure.

use kubevirt_api::v1::{RunStrategy, VirtualMachineInstancePhase as Phase};

/// The VM's VMI as the controller sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmiView {
    /// Its UID.
    pub uid: String,
    /// Its phase.
    pub phase: Phase,
    /// It has a deletion timestamp.
    pub is_deleting: bool,
}

impl VmiView {
    fn is_final(&self) -> bool {
        self.phase.is_final()
    }
}

/// The first entry of `status.stateChangeRequests` (only the first is ever acted on).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeRequest {
    /// Start, paused if asked.
    Start {
        /// `data.paused == "true"`.
        paused: bool,
    },
    /// Stop the VMI with this UID (any VMI when `None`).
    Stop {
        /// The VMI's UID.
        uid: Option<String>,
    },
}

/// What the controller observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// `spec.runStrategy` (or `spec.running`).
    pub strategy: RunStrategy,
    /// `status.runStrategy`: the strategy last acted on.
    pub recorded_strategy: Option<RunStrategy>,
    /// The VMI, if one exists.
    pub vmi: Option<VmiView>,
    /// The first state-change request.
    pub request: Option<ChangeRequest>,
    /// A crash-loop backoff is still running.
    pub backing_off: bool,
}

/// The action on the VMI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Leave things as they are.
    Nothing,
    /// Create the VMI from the template (with `startStrategy: Paused` if asked).
    Create {
        /// Start paused.
        paused: bool,
    },
    /// Delete the VMI.
    Delete,
    /// A Halted VM got a Start request: switch its strategy to Always (upstream's start path).
    SwitchToAlways,
    /// Wait for the crash-loop backoff before creating.
    WaitForBackoff,
}

/// The decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The action.
    pub action: Action,
    /// Drop the first state-change request (it is done or void).
    pub trim_first_request: bool,
    /// Append a Start request (RerunOnFailure restarts a failed VMI this way).
    pub append_start_request: bool,
}

fn stop_matches(request: Option<&ChangeRequest>, vmi: &VmiView) -> bool {
    matches!(request, Some(ChangeRequest::Stop { uid: Some(uid) }) if *uid == vmi.uid)
        || matches!(request, Some(ChangeRequest::Stop { uid: None }))
}

fn start_requested(request: Option<&ChangeRequest>) -> Option<bool> {
    match request {
        Some(ChangeRequest::Start { paused }) => Some(*paused),
        _ => None,
    }
}

/// Upstream's trimming rule: a Stop goes once no VMI (or no matching VMI) is left or it names no
/// UID; a Start goes once a running (non-final, non-deleting) VMI exists.
#[must_use]
pub fn is_first_request_done(observed: &Observed) -> bool {
    match (&observed.request, &observed.vmi) {
        (None, _) | (Some(ChangeRequest::Start { .. }), None) => false,
        (Some(ChangeRequest::Stop { .. }), None) | (Some(ChangeRequest::Stop { uid: None }), Some(_)) => true,
        (Some(ChangeRequest::Stop { uid: Some(uid) }), Some(vmi)) => *uid != vmi.uid,
        (Some(ChangeRequest::Start { .. }), Some(vmi)) => !vmi.is_final() && !vmi.is_deleting,
    }
}

/// Decides the action for one VM.
#[must_use]
pub fn decide(observed: &Observed) -> Decision {
    let request = observed.request.as_ref();
    let create = |paused: bool| {
        if observed.backing_off {
            Action::WaitForBackoff
        } else {
            Action::Create { paused }
        }
    };
    let mut append_start_request = false;
    let action = match (&observed.vmi, observed.strategy) {
        // A VMI on its way out is waited for, whatever the strategy.
        (Some(vmi), _) if vmi.is_deleting => Action::Nothing,
        (None, RunStrategy::Always | RunStrategy::Once) => create(start_requested(request).unwrap_or(false)),
        (None, RunStrategy::RerunOnFailure) => {
            let changed = observed.recorded_strategy != Some(RunStrategy::RerunOnFailure);
            match start_requested(request) {
                Some(paused) => create(paused),
                None if changed => create(false),
                None => Action::Nothing,
            }
        }
        (None, RunStrategy::Manual) => start_requested(request).map_or(Action::Nothing, create),
        (None, RunStrategy::Halted) => {
            if start_requested(request).is_some() {
                Action::SwitchToAlways
            } else {
                Action::Nothing
            }
        }
        (Some(vmi), RunStrategy::Always) => {
            if stop_matches(request, vmi) || vmi.is_final() {
                Action::Delete
            } else {
                Action::Nothing
            }
        }
        (Some(vmi), RunStrategy::RerunOnFailure) => {
            if stop_matches(request, vmi) || vmi.phase == Phase::Succeeded {
                Action::Delete
            } else if vmi.phase == Phase::Failed {
                append_start_request = true;
                Action::Delete
            } else {
                Action::Nothing
            }
        }
        (Some(vmi), RunStrategy::Manual) => {
            if stop_matches(request, vmi) {
                Action::Delete
            } else {
                Action::Nothing
            }
        }
        (Some(_), RunStrategy::Halted) => Action::Delete,
        (Some(_), RunStrategy::Once) | (_, RunStrategy::WaitAsReceiver) => Action::Nothing,
    };
    Decision {
        action,
        trim_first_request: is_first_request_done(observed),
        append_start_request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "vmi-uid";

    #[derive(Clone, Copy, Debug)]
    enum State {
        Absent,
        Pending,
        Running,
        Succeeded,
        Failed,
        Deleting,
    }

    const STATES: [State; 6] = [
        State::Absent,
        State::Pending,
        State::Running,
        State::Succeeded,
        State::Failed,
        State::Deleting,
    ];

    fn vmi(state: State) -> Option<VmiView> {
        let (phase, is_deleting) = match state {
            State::Absent => return None,
            State::Pending => (Phase::Pending, false),
            State::Running => (Phase::Running, false),
            State::Succeeded => (Phase::Succeeded, false),
            State::Failed => (Phase::Failed, false),
            State::Deleting => (Phase::Running, true),
        };
        Some(VmiView {
            uid: UID.to_owned(),
            phase,
            is_deleting,
        })
    }

    fn requests() -> Vec<Option<ChangeRequest>> {
        vec![
            None,
            Some(ChangeRequest::Start { paused: false }),
            Some(ChangeRequest::Start { paused: true }),
            Some(ChangeRequest::Stop {
                uid: Some(UID.to_owned()),
            }),
            Some(ChangeRequest::Stop {
                uid: Some("older-vmi".to_owned()),
            }),
            Some(ChangeRequest::Stop { uid: None }),
        ]
    }

    /// Upstream's run-strategy table, row by row, written out by VMI state.
    fn expected(
        strategy: RunStrategy,
        recorded: Option<RunStrategy>,
        state: State,
        request: Option<&ChangeRequest>,
    ) -> Action {
        use Action::{Create, Delete, Nothing, SwitchToAlways};
        let start = match request {
            Some(ChangeRequest::Start { paused }) => Some(*paused),
            _ => None,
        };
        let stop_for_this_vmi = match request {
            Some(ChangeRequest::Stop { uid }) => uid.as_deref().is_none_or(|u| u == UID),
            _ => false,
        };
        match state {
            State::Deleting => Nothing,
            State::Absent => match strategy {
                RunStrategy::Always | RunStrategy::Once => Create {
                    paused: start == Some(true),
                },
                RunStrategy::RerunOnFailure if start.is_some() || recorded != Some(strategy) => Create {
                    paused: start == Some(true),
                },
                RunStrategy::Manual if start.is_some() => Create {
                    paused: start == Some(true),
                },
                RunStrategy::Halted if start.is_some() => SwitchToAlways,
                _ => Nothing,
            },
            State::Pending | State::Running => match strategy {
                RunStrategy::Always | RunStrategy::RerunOnFailure | RunStrategy::Manual if stop_for_this_vmi => Delete,
                RunStrategy::Halted => Delete,
                _ => Nothing,
            },
            State::Succeeded | State::Failed => match strategy {
                RunStrategy::Always | RunStrategy::RerunOnFailure | RunStrategy::Halted => Delete,
                RunStrategy::Manual if stop_for_this_vmi => Delete,
                _ => Nothing,
            },
        }
    }

    #[test]
    fn every_strategy_by_every_vmi_state_by_every_request() {
        let strategies = [
            (RunStrategy::Always, Some(RunStrategy::Always)),
            (RunStrategy::RerunOnFailure, Some(RunStrategy::RerunOnFailure)),
            (RunStrategy::RerunOnFailure, Some(RunStrategy::Halted)),
            (RunStrategy::Manual, Some(RunStrategy::Manual)),
            (RunStrategy::Halted, Some(RunStrategy::Halted)),
            (RunStrategy::Once, None),
        ];
        let mut cases = 0;
        for (strategy, recorded) in strategies {
            for state in STATES {
                for request in requests() {
                    let observed = Observed {
                        strategy,
                        recorded_strategy: recorded,
                        vmi: vmi(state),
                        request: request.clone(),
                        backing_off: false,
                    };
                    let decision = decide(&observed);
                    assert_eq!(
                        decision.action,
                        expected(strategy, recorded, state, request.as_ref()),
                        "{strategy} (recorded {recorded:?}), VMI {state:?}, request {request:?}"
                    );
                    let restarts = strategy == RunStrategy::RerunOnFailure
                        && matches!(state, State::Failed)
                        && !matches!(request, Some(ChangeRequest::Stop { ref uid }) if uid.as_deref().is_none_or(|u| u == UID));
                    assert_eq!(
                        decision.append_start_request, restarts,
                        "{strategy}, {state:?}, {request:?}"
                    );
                    cases += 1;
                }
            }
        }
        assert_eq!(cases, 6 * 6 * 6);
    }

    #[test]
    fn requests_are_trimmed_as_upstream_trims_them() {
        let observed = |state, request| Observed {
            strategy: RunStrategy::Manual,
            recorded_strategy: Some(RunStrategy::Manual),
            vmi: vmi(state),
            request: Some(request),
            backing_off: false,
        };
        let stop_this = ChangeRequest::Stop {
            uid: Some(UID.to_owned()),
        };
        assert!(is_first_request_done(&observed(State::Absent, stop_this.clone())));
        assert!(!is_first_request_done(&observed(State::Running, stop_this.clone())));
        assert!(is_first_request_done(&observed(
            State::Running,
            ChangeRequest::Stop {
                uid: Some("older".to_owned())
            }
        )));
        let start = ChangeRequest::Start { paused: false };
        assert!(!is_first_request_done(&observed(State::Absent, start.clone())));
        assert!(is_first_request_done(&observed(State::Pending, start.clone())));
        assert!(!is_first_request_done(&observed(State::Failed, start.clone())));
        assert!(!is_first_request_done(&observed(State::Deleting, start)));
    }

    #[test]
    fn a_backoff_delays_creation_only() {
        let observed = Observed {
            strategy: RunStrategy::Always,
            recorded_strategy: Some(RunStrategy::Always),
            vmi: None,
            request: None,
            backing_off: true,
        };
        assert_eq!(decide(&observed).action, Action::WaitForBackoff);
        let running = Observed {
            vmi: vmi(State::Failed),
            ..observed
        };
        assert_eq!(decide(&running).action, Action::Delete);
    }
}
