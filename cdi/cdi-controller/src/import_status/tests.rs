use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;

use super::*;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).expect("time"))
}

fn claim(phase: &str, pairs: &[(&str, &str)]) -> ClaimView {
    ClaimView {
        name: "disk".to_owned(),
        namespace: "vms".to_owned(),
        phase: phase.to_owned(),
        annotations: pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        deleting: false,
    }
}

const WORK: Circumstances = Circumstances {
    requires_work: true,
    wait_for_first_consumer: false,
    populating: false,
};

fn status(phase: DataVolumePhase) -> DataVolumeStatus {
    DataVolumeStatus {
        phase,
        ..DataVolumeStatus::default()
    }
}

fn condition<'a>(status: &'a DataVolumeStatus, kind: &str) -> (&'a str, &'a str, &'a str) {
    let found = status
        .conditions
        .iter()
        .find(|c| c.condition_type == kind)
        .unwrap_or_else(|| panic!("no {kind} condition"));
    (
        found.state.status.as_str(),
        found.state.reason.as_deref().unwrap_or_default(),
        found.state.message.as_deref().unwrap_or_default(),
    )
}

/// From, the claim, the circumstances, to, and the event's reason.
type Case = (
    DataVolumePhase,
    Option<ClaimView>,
    Circumstances,
    DataVolumePhase,
    Option<&'static str>,
);

#[test]
#[expect(clippy::too_many_lines, reason = "one table of every phase change")]
fn the_phase_follows_the_claim_and_the_importer_pod() {
    use DataVolumePhase::*;
    let scheduled = [(ann::IMPORT_POD, "importer-disk")];
    let with_phase = |phase: &'static str| vec![(ann::IMPORT_POD, "importer-disk"), (ann::POD_PHASE, phase)];
    let wffc = Circumstances {
        wait_for_first_consumer: true,
        ..WORK
    };
    let populated = Circumstances {
        requires_work: false,
        ..WORK
    };
    let populating = Circumstances {
        populating: true,
        ..WORK
    };
    let pending_population = Circumstances {
        wait_for_first_consumer: true,
        ..populating
    };
    let cases: Vec<Case> = vec![
        // A claim a populator fills stays Pending: the phase follows the prime's importer.
        (
            Unset,
            Some(claim("Pending", &[])),
            pending_population,
            PendingPopulation,
            None,
        ),
        (
            PendingPopulation,
            Some(claim("Pending", &[])),
            populating,
            PendingPopulation,
            None,
        ),
        (
            PendingPopulation,
            Some(claim("Pending", &with_phase("Pending"))),
            populating,
            ImportScheduled,
            Some("ImportScheduled"),
        ),
        (
            ImportScheduled,
            Some(claim("Pending", &with_phase("Running"))),
            populating,
            ImportInProgress,
            Some("ImportInProgress"),
        ),
        (
            ImportInProgress,
            Some(claim("Pending", &with_phase("Succeeded"))),
            populating,
            Succeeded,
            Some("ImportSucceeded"),
        ),
        (
            ImportInProgress,
            Some(claim("Bound", &with_phase("Succeeded"))),
            populating,
            Succeeded,
            Some("ImportSucceeded"),
        ),
        // Without the populator, a Pending claim's importer annotations do not count.
        (
            Pending,
            Some(claim("Pending", &with_phase("Running"))),
            WORK,
            Pending,
            None,
        ),
        (Unset, None, WORK, Pending, None),
        (ImportInProgress, None, WORK, ImportInProgress, None),
        (Unset, Some(claim("Pending", &[])), WORK, Pending, None),
        (Unset, Some(claim("Pending", &[])), wffc, WaitForFirstConsumer, None),
        (Unset, Some(claim("Pending", &[])), populated, Succeeded, None),
        (Pending, Some(claim("Bound", &[])), WORK, PvcBound, None),
        (
            WaitForFirstConsumer,
            Some(claim("Bound", &scheduled)),
            WORK,
            ImportScheduled,
            None,
        ),
        (
            Pending,
            Some(claim("Bound", &with_phase("Pending"))),
            WORK,
            ImportScheduled,
            Some("ImportScheduled"),
        ),
        (
            ImportScheduled,
            Some(claim("Bound", &with_phase("Running"))),
            WORK,
            ImportInProgress,
            Some("ImportInProgress"),
        ),
        (
            ImportInProgress,
            Some(claim("Bound", &with_phase("Running"))),
            WORK,
            ImportInProgress,
            None,
        ),
        (
            ImportInProgress,
            Some(claim("Bound", &with_phase("Failed"))),
            WORK,
            ImportScheduled,
            Some("ImportFailed"),
        ),
        (
            ImportInProgress,
            Some(claim(
                "Bound",
                &[
                    (ann::IMPORT_POD, "importer-disk"),
                    (ann::POD_PHASE, "Failed"),
                    (ann::FATAL_ERROR, "true"),
                ],
            )),
            WORK,
            Failed,
            Some("ImportFailed"),
        ),
        (
            ImportInProgress,
            Some(claim("Bound", &with_phase("Succeeded"))),
            WORK,
            Succeeded,
            Some("ImportSucceeded"),
        ),
        (Pending, Some(claim("Bound", &[])), populated, Succeeded, None),
        (Succeeded, Some(claim("Lost", &[])), WORK, Failed, Some("ErrClaimLost")),
        (ImportScheduled, Some(claim("Strange", &[])), WORK, Unknown, None),
        (Pending, Some(claim("", &[])), WORK, Pending, None),
    ];
    for (from, claim, circumstances, to, event) in cases {
        let (next, emitted) = next_status(&status(from), claim.as_ref(), circumstances, &at(10));
        let label = format!("{from:?} with {claim:?}");
        assert_eq!(next.phase, to, "{label}");
        assert_eq!(emitted.map(|e| e.reason), event, "{label}");
        if to == Succeeded && circumstances.requires_work {
            assert_eq!(next.progress.as_deref(), Some("100.0%"), "{label}");
        }
    }
}

#[test]
fn a_claim_being_deleted_changes_nothing_but_the_conditions() {
    let mut deleting = claim("Bound", &[(ann::POD_PHASE, "Succeeded")]);
    deleting.deleting = true;
    let (next, event) = next_status(
        &status(DataVolumePhase::ImportInProgress),
        Some(&deleting),
        WORK,
        &at(1),
    );
    assert_eq!(next.phase, DataVolumePhase::ImportInProgress);
    assert_eq!(next.claim_name, None);
    assert_eq!(event, None);
}

#[test]
fn restarts_and_the_claim_name_are_copied() {
    let view = claim(
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-disk"),
            (ann::POD_PHASE, "Running"),
            (ann::POD_RESTARTS, "3"),
        ],
    );
    let (next, _) = next_status(&status(DataVolumePhase::ImportInProgress), Some(&view), WORK, &at(1));
    assert_eq!(next.restart_count, Some(3));
    assert_eq!(next.claim_name.as_deref(), Some("disk"));
}

#[test]
fn conditions_read_as_upstreams() {
    let running = claim(
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-disk"),
            (ann::POD_PHASE, "Running"),
            (ann::RUNNING, "true"),
            (ann::RUNNING_REASON, "Pod is running"),
        ],
    );
    let (next, _) = next_status(&status(DataVolumePhase::ImportScheduled), Some(&running), WORK, &at(1));
    assert_eq!(condition(&next, "Bound"), ("True", "Bound", "PVC disk Bound"));
    assert_eq!(condition(&next, "Running"), ("True", "Pod is running", ""));
    assert_eq!(condition(&next, "Ready"), ("False", "TransferRunning", ""));

    let failing = claim(
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-disk"),
            (ann::POD_PHASE, "Running"),
            (ann::RUNNING, "false"),
            (ann::RUNNING_REASON, "Error"),
            (ann::RUNNING_MESSAGE, "Unable to process data: HTTP 404"),
        ],
    );
    let (next, _) = next_status(&next, Some(&failing), WORK, &at(2));
    assert_eq!(
        condition(&next, "Running"),
        ("False", "Error", "Unable to process data: HTTP 404")
    );
    assert_eq!(condition(&next, "Ready"), ("False", "", ""));

    let done = claim(
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-disk"),
            (ann::POD_PHASE, "Succeeded"),
            (ann::RUNNING, "false"),
            (ann::RUNNING_REASON, "Completed"),
        ],
    );
    let (next, _) = next_status(&next, Some(&done), WORK, &at(3));
    assert_eq!(condition(&next, "Ready"), ("True", "", ""));
    assert_eq!(condition(&next, "Running"), ("False", "Completed", ""));

    let (none, _) = next_status(&DataVolumeStatus::default(), None, WORK, &at(1));
    assert_eq!(condition(&none, "Bound"), ("False", "NotFound", "No PVC found"));
    let (pending, _) = next_status(&DataVolumeStatus::default(), Some(&claim("Pending", &[])), WORK, &at(1));
    assert_eq!(condition(&pending, "Bound"), ("False", "Pending", "PVC disk Pending"));
    let unschedulable = claim("Bound", &[(ann::POD_SCHEDULABLE, "false")]);
    let (next, _) = next_status(&DataVolumeStatus::default(), Some(&unschedulable), WORK, &at(1));
    assert_eq!(
        condition(&next, "Running"),
        ("False", "Unschedulable", "Importer pod cannot be scheduled")
    );
}

#[test]
fn a_transition_is_stamped_once_and_a_new_message_only_beats() {
    let failing = |message: &str| {
        claim(
            "Bound",
            &[
                (ann::IMPORT_POD, "importer-disk"),
                (ann::POD_PHASE, "Running"),
                (ann::RUNNING, "false"),
                (ann::RUNNING_MESSAGE, message),
            ],
        )
    };
    let (first, _) = next_status(&DataVolumeStatus::default(), Some(&failing("a")), WORK, &at(1));
    let (same, _) = next_status(&first, Some(&failing("a")), WORK, &at(2));
    assert_eq!(same, first, "nothing changed, nothing written");
    let (changed, _) = next_status(&first, Some(&failing("b")), WORK, &at(3));
    let running = changed
        .conditions
        .iter()
        .find(|c| c.condition_type == "Running")
        .expect("Running");
    assert_eq!(running.state.last_transition_time, Some(at(1)));
    assert_eq!(running.state.last_heartbeat_time, Some(at(3)));
}

#[test]
fn a_running_import_seen_again_later_writes_nothing() {
    let running = claim(
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-disk"),
            (ann::POD_PHASE, "Running"),
            (ann::RUNNING, "true"),
            (ann::RUNNING_REASON, "Pod is running"),
        ],
    );
    let (first, _) = next_status(&status(DataVolumePhase::ImportScheduled), Some(&running), WORK, &at(1));
    let (again, event) = next_status(&first, Some(&running), WORK, &at(50));
    assert_eq!(again, first, "no condition is stamped again");
    assert_eq!(event, None);
}

#[test]
fn an_upload_is_scheduled_ready_once_its_server_is_and_done_when_it_succeeds() {
    use DataVolumePhase::*;
    let upload = |pairs: &[(&'static str, &'static str)]| {
        let mut all = vec![(ann::UPLOAD_REQUEST, "")];
        all.extend_from_slice(pairs);
        claim("Bound", &all)
    };
    let cases: Vec<Case> = vec![
        (Pending, Some(upload(&[])), WORK, UploadScheduled, None),
        (
            UploadScheduled,
            Some(upload(&[(ann::POD_PHASE, "Pending")])),
            WORK,
            UploadScheduled,
            None,
        ),
        (
            PvcBound,
            Some(upload(&[(ann::POD_PHASE, "Pending")])),
            WORK,
            UploadScheduled,
            Some("UploadScheduled"),
        ),
        (
            UploadScheduled,
            Some(upload(&[(ann::POD_PHASE, "Running"), (ann::POD_READY, "false")])),
            WORK,
            UploadScheduled,
            None,
        ),
        (
            UploadScheduled,
            Some(upload(&[(ann::POD_PHASE, "Running"), (ann::POD_READY, "true")])),
            WORK,
            UploadReady,
            Some("UploadReady"),
        ),
        (
            UploadReady,
            Some(upload(&[(ann::POD_PHASE, "Failed")])),
            WORK,
            UploadScheduled,
            Some("UploadFailed"),
        ),
        // A server whose deadline passed is replaced: no phase on the claim meanwhile.
        (
            UploadReady,
            Some(upload(&[(ann::POD_PHASE, ""), (ann::POD_READY, "false")])),
            WORK,
            UploadScheduled,
            None,
        ),
        (
            UploadReady,
            Some(upload(&[(ann::POD_PHASE, "Succeeded")])),
            WORK,
            Succeeded,
            Some("UploadSucceeded"),
        ),
        (
            Unset,
            Some(claim("Pending", &[(ann::UPLOAD_REQUEST, "")])),
            WORK,
            Pending,
            None,
        ),
    ];
    for (from, claim, circumstances, to, event) in cases {
        let (next, emitted) = next_status(&status(from), claim.as_ref(), circumstances, &at(10));
        let label = format!("{from:?} with {claim:?}");
        assert_eq!(next.phase, to, "{label}");
        assert_eq!(emitted.map(|e| e.reason), event, "{label}");
    }
}

#[test]
fn a_clone_follows_the_target_upload_server_with_upstreams_events() {
    let source = ("k8s.io/CloneRequest", "src/golden");
    let cases = [
        (None, DataVolumePhase::CloneScheduled, None),
        (
            Some("Pending"),
            DataVolumePhase::CloneScheduled,
            Some(("CloneScheduled", "Cloning from src/golden into vms/disk scheduled")),
        ),
        (
            Some("Running"),
            DataVolumePhase::CloneInProgress,
            Some(("CloneInProgress", "Cloning from src/golden into vms/disk in progress")),
        ),
        (
            Some("Failed"),
            DataVolumePhase::CloneScheduled,
            Some(("CloneFailed", "Cloning from src/golden into vms/disk failed")),
        ),
        (
            Some("Succeeded"),
            DataVolumePhase::Succeeded,
            Some(("CloneSucceeded", "Successfully cloned from src/golden into vms/disk")),
        ),
    ];
    for (pod_phase, want, want_event) in cases {
        let mut pairs = vec![source];
        if let Some(p) = pod_phase {
            pairs.push(("cdi.kubevirt.io/storage.pod.phase", p));
        }
        let view = claim("Bound", &pairs);
        let (phase, event) = clone_phase(&view, "src/golden", WORK).expect("a phase");
        assert_eq!(phase, want, "{pod_phase:?}");
        assert_eq!(
            event.map(|e| (e.reason, e.message)),
            want_event.map(|(r, m)| (r, m.to_owned())),
            "{pod_phase:?}"
        );
    }
    assert_eq!(
        clone_phase(&claim("Pending", &[source]), "src/golden", WORK),
        None,
        "an unbound target waits"
    );
}
