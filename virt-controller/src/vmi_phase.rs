//! The VMI controller's phase transitions in one pure function: from the VMI's phase, what is
//! seen of its launcher pod, whether it is being deleted and whether an earlier pod creation or
//! deletion is still unseen, to the one step it takes. The controller owns Pending, Scheduling
//! and Scheduled, and fails a VMI whose pod failed or vanished before the handler took over;
//! from Scheduled on, the handler moves the phase.

use kubevirt_api::v1::VirtualMachineInstancePhase as Phase;

/// `status.reason` of a VMI whose pod failed before the VM ran.
pub const REASON_POD_FAILED: &str = "PodFailed";
/// `status.reason` of a VMI whose pod vanished.
pub const REASON_POD_NOT_EXISTS: &str = "PodNotExists";
/// `status.reason` of a VMI deleted before it was scheduled.
pub const REASON_DELETED: &str = "Deleted";

/// What the controller sees of the VMI's launcher pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodState {
    /// No pod at all.
    Absent,
    /// Only pods that are being deleted.
    Terminating,
    /// A live pod that is not running and ready on a node yet.
    Starting,
    /// A live pod whose `compute` container runs and is ready, on a node.
    Ready,
    /// A live pod that ended (`Failed` or `Succeeded`).
    Down,
}

impl PodState {
    /// Every state, for matrix tests.
    pub const ALL: [Self; 5] = [Self::Absent, Self::Terminating, Self::Starting, Self::Ready, Self::Down];
}

/// The step a VMI's phase takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PhaseStep {
    /// The phase stays.
    Stay,
    /// Create the launcher pod; the VMI goes through Pending to Scheduling in the same write.
    CreatePod,
    /// A pod exists already: through Pending to Scheduling.
    Schedule,
    /// The pod is ready on its node: Scheduled, and the VMI is labelled with the node.
    Scheduled,
    /// Failed, with this `status.reason`.
    Fail(&'static str),
}

/// The one step for a VMI in `phase`.
#[must_use]
pub fn phase_step(phase: Phase, pod: PodState, is_deleting: bool, expectations_satisfied: bool) -> PhaseStep {
    let unprocessed = matches!(phase, Phase::Unset | Phase::Pending);
    if is_deleting {
        return match phase {
            _ if unprocessed => PhaseStep::Fail(REASON_DELETED),
            Phase::Scheduling => PhaseStep::Fail(REASON_POD_FAILED),
            _ => PhaseStep::Stay,
        };
    }
    match (phase, pod) {
        (Phase::Unset | Phase::Pending, PodState::Absent) if expectations_satisfied => PhaseStep::CreatePod,
        (Phase::Unset | Phase::Pending, PodState::Starting | PodState::Ready | PodState::Down) => PhaseStep::Schedule,
        (Phase::Scheduling, PodState::Down) => PhaseStep::Fail(REASON_POD_FAILED),
        (Phase::Scheduling, PodState::Ready) => PhaseStep::Scheduled,
        (Phase::Scheduling | Phase::Scheduled | Phase::Running, PodState::Absent) if expectations_satisfied => {
            PhaseStep::Fail(REASON_POD_NOT_EXISTS)
        }
        _ => PhaseStep::Stay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table, written as rules in order (first match wins) rather than as the function's
    /// match: `None` in a column matches anything.
    struct Rule {
        phases: &'static [Phase],
        pods: &'static [PodState],
        deleting: Option<bool>,
        satisfied: Option<bool>,
        step: PhaseStep,
    }

    const UNPROCESSED: &[Phase] = &[Phase::Unset, Phase::Pending];
    const ANY_POD: &[PodState] = &PodState::ALL;
    const LIVE_POD: &[PodState] = &[PodState::Starting, PodState::Ready, PodState::Down];

    const RULES: &[Rule] = &[
        // Deleted: never scheduled is Deleted, caught scheduling is PodFailed, else the handler
        // (or nobody, once final) finishes it.
        Rule {
            phases: UNPROCESSED,
            pods: ANY_POD,
            deleting: Some(true),
            satisfied: None,
            step: PhaseStep::Fail(REASON_DELETED),
        },
        Rule {
            phases: &[Phase::Scheduling],
            pods: ANY_POD,
            deleting: Some(true),
            satisfied: None,
            step: PhaseStep::Fail(REASON_POD_FAILED),
        },
        Rule {
            phases: &Phase::ALL,
            pods: ANY_POD,
            deleting: Some(true),
            satisfied: None,
            step: PhaseStep::Stay,
        },
        // A new VMI gets its pod only when no pod (not even a terminating one) and no unseen
        // creation or deletion is there.
        Rule {
            phases: UNPROCESSED,
            pods: &[PodState::Absent],
            deleting: None,
            satisfied: Some(true),
            step: PhaseStep::CreatePod,
        },
        Rule {
            phases: UNPROCESSED,
            pods: LIVE_POD,
            deleting: None,
            satisfied: None,
            step: PhaseStep::Schedule,
        },
        Rule {
            phases: &[Phase::Scheduling],
            pods: &[PodState::Down],
            deleting: None,
            satisfied: None,
            step: PhaseStep::Fail(REASON_POD_FAILED),
        },
        Rule {
            phases: &[Phase::Scheduling],
            pods: &[PodState::Ready],
            deleting: None,
            satisfied: None,
            step: PhaseStep::Scheduled,
        },
        Rule {
            phases: &[Phase::Scheduling, Phase::Scheduled, Phase::Running],
            pods: &[PodState::Absent],
            deleting: None,
            satisfied: Some(true),
            step: PhaseStep::Fail(REASON_POD_NOT_EXISTS),
        },
    ];

    fn expected(phase: Phase, pod: PodState, deleting: bool, satisfied: bool) -> PhaseStep {
        RULES
            .iter()
            .find(|r| {
                r.phases.contains(&phase)
                    && r.pods.contains(&pod)
                    && r.deleting.is_none_or(|d| d == deleting)
                    && r.satisfied.is_none_or(|s| s == satisfied)
            })
            .map_or(PhaseStep::Stay, |r| r.step)
    }

    #[test]
    fn every_phase_pod_state_deletion_and_expectation_takes_the_tabled_step() {
        let mut cases = 0;
        for phase in Phase::ALL {
            for pod in PodState::ALL {
                for deleting in [false, true] {
                    for satisfied in [false, true] {
                        assert_eq!(
                            phase_step(phase, pod, deleting, satisfied),
                            expected(phase, pod, deleting, satisfied),
                            "phase {phase:?}, pod {pod:?}, deleting {deleting}, expectations satisfied {satisfied}"
                        );
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 9 * 5 * 2 * 2);
    }

    #[test]
    fn final_phases_never_move_and_the_handlers_phases_move_only_when_the_pod_vanished() {
        for pod in PodState::ALL {
            for deleting in [false, true] {
                for satisfied in [false, true] {
                    for phase in [Phase::Succeeded, Phase::Failed, Phase::Unknown, Phase::WaitingForSync] {
                        assert_eq!(
                            phase_step(phase, pod, deleting, satisfied),
                            PhaseStep::Stay,
                            "{phase:?} {pod:?}"
                        );
                    }
                    for phase in [Phase::Scheduled, Phase::Running] {
                        let vanished = pod == PodState::Absent && satisfied && !deleting;
                        let step = phase_step(phase, pod, deleting, satisfied);
                        assert_eq!(
                            step == PhaseStep::Fail(REASON_POD_NOT_EXISTS),
                            vanished,
                            "{phase:?} {pod:?}"
                        );
                        assert!(matches!(step, PhaseStep::Stay | PhaseStep::Fail(_)));
                    }
                }
            }
        }
    }
}
