//! The migration phase machine over every phase and every observation (9 phases × 3 VMI views ×
//! 2 deletion states × 4 target pods × 34 migration states × 2), checked against the rules, and the
//! happy path and each failure spelled out.

use kubevirt_api::v1::MigrationPhase as Phase;

use super::*;

fn every_observation() -> Vec<Observation> {
    let mut all = Vec::new();
    for vmi in VmiView::ALL {
        for deleting in [false, true] {
            for target_pod in TargetPod::ALL {
                for state in StateView::all() {
                    for other_in_flight in [false, true] {
                        all.push(Observation {
                            vmi,
                            deleting,
                            target_pod,
                            state,
                            other_in_flight,
                        });
                    }
                }
            }
        }
    }
    all
}

/// The phase after `phase` on the happy path.
fn successor(phase: Phase) -> Option<Phase> {
    let index = Phase::ALL.iter().position(|p| *p == phase)?;
    Phase::ALL.get(index + 1).copied().filter(|next| *next != Phase::Failed)
}

/// What the rules say, written as the rule list rather than as the function's control flow.
fn expected(phase: Phase, seen: &Observation) -> Step {
    let ours = match seen.state {
        StateView::Ours(p) => Some(p),
        StateView::Cleared | StateView::Other => None,
    };
    let failures: [(bool, &'static str, bool); 9] = [
        (seen.vmi == VmiView::Missing, failure::VMI_MISSING, false),
        (seen.vmi == VmiView::Final, failure::VMI_FINAL, false),
        (seen.deleting && !phase.is_handed_off(), failure::CANCELED, true),
        (seen.target_pod == TargetPod::Down, failure::TARGET_POD_DOWN, false),
        (
            seen.target_pod == TargetPod::Missing && phase.is_target_created(),
            failure::TARGET_POD_GONE,
            false,
        ),
        (
            seen.state == StateView::Cleared && phase.is_handed_off(),
            failure::STATE_CLEARED,
            false,
        ),
        (
            seen.state == StateView::Other && phase.is_handed_off(),
            failure::STATE_TAKEN,
            false,
        ),
        (ours.is_some_and(|p| p.failed), failure::SOURCE_FAILED, false),
        (
            phase == Phase::Unset && seen.other_in_flight && !seen.deleting,
            failure::NOT_ELIGIBLE,
            false,
        ),
    ];
    if phase.is_final() {
        return Step::Stay;
    }
    if let Some((_, reason, abort_requested)) = failures.iter().find(|(applies, _, _)| *applies) {
        return Step::Fail {
            reason,
            abort_requested: *abort_requested,
        };
    }
    let p = ours.unwrap_or_default();
    let too_late = phase == Phase::Running && ours.is_some() && p.completed;
    if seen.deleting && !too_late {
        return Step::RequestAbort;
    }
    let condition = match phase {
        Phase::Unset => true,
        Phase::Pending => seen.target_pod != TargetPod::Missing,
        Phase::Scheduling => seen.target_pod == TargetPod::Ready,
        Phase::Scheduled => ours.is_some() && p.target_node,
        Phase::PreparingTarget => p.target_node && p.target_address,
        Phase::TargetReady => p.started,
        Phase::Running => p.completed,
        Phase::Succeeded | Phase::Failed => false,
    };
    match successor(phase) {
        Some(next) if condition => Step::Advance(next),
        _ => Step::Stay,
    }
}

#[test]
fn every_phase_and_observation_follows_the_rules() {
    let observations = every_observation();
    assert_eq!(observations.len(), 3 * 2 * 4 * 34 * 2);
    for phase in Phase::ALL {
        for seen in &observations {
            let got = step(phase, seen);
            assert_eq!(got, expected(phase, seen), "{phase:?} with {seen:?}");
            match got {
                Step::Advance(next) => assert_eq!(Some(next), successor(phase), "one phase at a time"),
                Step::RequestAbort => assert!(phase.is_handed_off(), "only virt-handler aborts"),
                Step::Stay | Step::Fail { .. } => {}
            }
        }
    }
}

fn ours(progress: Progress) -> StateView {
    StateView::Ours(progress)
}

fn seen(target_pod: TargetPod, state: StateView) -> Observation {
    Observation {
        vmi: VmiView::Active,
        deleting: false,
        target_pod,
        state,
        other_in_flight: false,
    }
}

#[test]
fn the_happy_path_goes_through_every_phase() {
    let full = Progress {
        target_node: true,
        target_address: true,
        started: true,
        completed: true,
        failed: false,
    };
    let path = [
        (
            Phase::Unset,
            seen(TargetPod::Missing, StateView::Cleared),
            Phase::Pending,
        ),
        (
            Phase::Pending,
            seen(TargetPod::Pending, StateView::Cleared),
            Phase::Scheduling,
        ),
        (
            Phase::Scheduling,
            seen(TargetPod::Ready, StateView::Cleared),
            Phase::Scheduled,
        ),
        (
            Phase::Scheduled,
            seen(
                TargetPod::Ready,
                ours(Progress {
                    target_node: true,
                    ..Progress::default()
                }),
            ),
            Phase::PreparingTarget,
        ),
        (
            Phase::PreparingTarget,
            seen(
                TargetPod::Ready,
                ours(Progress {
                    target_node: true,
                    target_address: true,
                    ..Progress::default()
                }),
            ),
            Phase::TargetReady,
        ),
        (
            Phase::TargetReady,
            seen(
                TargetPod::Ready,
                ours(Progress {
                    completed: false,
                    ..full
                }),
            ),
            Phase::Running,
        ),
        (Phase::Running, seen(TargetPod::Ready, ours(full)), Phase::Succeeded),
    ];
    for (from, observation, to) in path {
        assert_eq!(step(from, &observation), Step::Advance(to), "{from:?}");
    }
}

#[test]
fn a_cancel_fails_before_the_hand_off_and_asks_virt_handler_after() {
    let mut cancelled = seen(TargetPod::Pending, StateView::Cleared);
    cancelled.deleting = true;
    assert_eq!(
        step(Phase::Scheduling, &cancelled),
        Step::Fail {
            reason: failure::CANCELED,
            abort_requested: true
        }
    );
    let mut running = seen(
        TargetPod::Ready,
        ours(Progress {
            target_node: true,
            target_address: true,
            started: true,
            ..Progress::default()
        }),
    );
    running.deleting = true;
    assert_eq!(step(Phase::Running, &running), Step::RequestAbort);
    // virt-handler aborted and reported it: Failed.
    running.state = ours(Progress {
        failed: true,
        ..Progress::default()
    });
    assert_eq!(step(Phase::Running, &running), fail(failure::SOURCE_FAILED));
}

#[test]
fn a_cancel_after_the_guest_moved_still_ends_in_success() {
    let mut late = seen(
        TargetPod::Ready,
        ours(Progress {
            target_node: true,
            target_address: true,
            started: true,
            completed: true,
            failed: false,
        }),
    );
    late.deleting = true;
    assert_eq!(step(Phase::Running, &late), Step::Advance(Phase::Succeeded));
}

#[test]
fn a_second_migration_of_a_vmi_is_not_eligible() {
    let mut busy = seen(TargetPod::Missing, StateView::Other);
    busy.other_in_flight = true;
    assert_eq!(step(Phase::Unset, &busy), fail(failure::NOT_ELIGIBLE));
}
