use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

fn pod(phase: &str, state: &Value, restarts: i32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "importer-disk"},
        "status": {
            "phase": phase,
            "containerStatuses": [{
                "name": "importer", "image": "cdi-importer:latest", "imageID": "", "ready": false,
                "restartCount": restarts, "state": state
            }]
        }
    }))
    .expect("pod")
}

fn terminated(exit_code: i32, reason: &str, message: &str) -> Value {
    json!({"terminated": {"exitCode": exit_code, "reason": reason, "message": message}})
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// The annotations a case sets, without the pod name and schedulable flag every case sets.
fn running_of(observed: &Observed) -> Vec<(&str, &str)> {
    [
        ann::POD_PHASE,
        ann::POD_RESTARTS,
        ann::RUNNING,
        ann::RUNNING_MESSAGE,
        ann::RUNNING_REASON,
    ]
    .iter()
    .map(|k| (*k, observed.annotations.get(*k).map_or("-", String::as_str)))
    .collect()
}

#[test]
fn each_pod_state_becomes_upstreams_running_annotations() {
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let not_found = "Unable to process data: GET http://server/disk.img: HTTP 404 Not Found";
    let cases: Vec<(&str, Pod, [&str; 5], bool)> = vec![
        (
            "running",
            pod("Running", &json!({"running": {}}), 0),
            ["Running", "0", "true", "", POD_RUNNING],
            false,
        ),
        (
            "complete",
            pod("Succeeded", &terminated(0, "Completed", complete), 0),
            ["Succeeded", "0", "false", "Import Complete", "Completed"],
            true,
        ),
        (
            "failed, restarting",
            pod("Running", &terminated(1, "Error", not_found), 2),
            ["Running", "2", "false", not_found, "Error"],
            false,
        ),
        (
            "creating",
            pod("Pending", &json!({"waiting": {"reason": "ContainerCreating"}}), 0),
            ["Pending", "0", "false", "", "ContainerCreating"],
            false,
        ),
        (
            "too large",
            pod(
                "Running",
                &terminated(
                    1,
                    "Error",
                    "Unable to process data: virtual image size 9 is larger than the reported available storage 1. A larger PVC is required",
                ),
                0,
            ),
            [
                "Running",
                "0",
                "false",
                "DataVolume too small to contain image",
                "Error",
            ],
            false,
        ),
    ];
    for (name, pod, expected, delete) in cases {
        let observed = observe_importer(&BTreeMap::new(), &pod);
        let want: Vec<(&str, &str)> = [
            ann::POD_PHASE,
            ann::POD_RESTARTS,
            ann::RUNNING,
            ann::RUNNING_MESSAGE,
            ann::RUNNING_REASON,
        ]
        .into_iter()
        .zip(expected)
        .collect();
        assert_eq!(running_of(&observed), want, "{name}");
        assert_eq!(observed.delete_pod, delete, "{name}");
        assert_eq!(observed.annotations[ann::IMPORT_POD], "importer-disk", "{name}");
    }
}

#[test]
fn a_crash_loop_keeps_the_last_message_and_restarts_never_go_back() {
    let before = annotations(&[
        (ann::RUNNING_MESSAGE, "Unable to process data: 404"),
        (ann::RUNNING_REASON, "Error"),
        (ann::POD_RESTARTS, "5"),
    ]);
    let observed = observe_importer(
        &before,
        &pod("Running", &json!({"waiting": {"reason": "CrashLoopBackOff"}}), 3),
    );
    assert_eq!(
        running_of(&observed),
        [
            (ann::POD_PHASE, "Running"),
            (ann::POD_RESTARTS, "5"),
            (ann::RUNNING, "false"),
            (ann::RUNNING_MESSAGE, "Unable to process data: 404"),
            (ann::RUNNING_REASON, "Error"),
        ]
    );
}

#[test]
fn an_image_that_cannot_be_pulled_is_named() {
    let mut pulling = pod(
        "Pending",
        &json!({"waiting": {"reason": "ImagePullBackOff", "message": "back-off"}}),
        0,
    );
    if let Some(status) = pulling.status.as_mut().and_then(|s| s.container_statuses.as_mut()) {
        status[0].started = Some(false);
    }
    let observed = observe_importer(&BTreeMap::new(), &pulling);
    assert_eq!(observed.annotations[ann::RUNNING_REASON], IMAGE_PULL_FAILED);
    assert_eq!(
        observed.annotations[ann::RUNNING_MESSAGE],
        "failed to pull image: cdi-importer:latest"
    );
}

#[test]
fn a_request_for_scratch_space_replaces_the_pod_without_a_phase() {
    let scratch = r#"{"scratchSpaceRequired":true,"preallocationApplied":false,"message":"Import Complete"}"#;
    let before = annotations(&[(ann::POD_PHASE, "Running"), (ann::POD_RETAIN, "true")]);
    let observed = observe_importer(&before, &pod("Succeeded", &terminated(0, "Completed", scratch), 0));
    assert_eq!(observed.annotations[ann::REQUIRES_SCRATCH], "true");
    assert_eq!(
        observed.annotations[ann::POD_PHASE],
        "Running",
        "the phase is not Succeeded"
    );
    assert_eq!(observed.annotations[ann::RUNNING_REASON], SCRATCH_REQUIRED_REASON);
    assert_eq!(observed.annotations[ann::RUNNING_MESSAGE], SCRATCH_REQUIRED_MESSAGE);
    assert!(
        observed.delete_pod,
        "deleted even when retained: a new pod mounts the scratch claim"
    );
    assert!(observed.events.is_empty());
}

#[test]
fn a_checksum_mismatch_is_fatal() {
    let mismatch =
        r#"{"message":"Unable to process data: checksum mismatch: expected sha256:00, calculated sha256:11"}"#;
    let observed = observe_importer(
        &BTreeMap::new(),
        &pod("Succeeded", &terminated(0, "Completed", mismatch), 0),
    );
    assert_eq!(observed.annotations[ann::POD_PHASE], "Failed");
    assert_eq!(observed.annotations[ann::FATAL_ERROR], "true");
    assert_eq!(observed.annotations[ann::RUNNING_REASON], CHECKSUM_ERROR);
    assert!(observed.annotations[ann::RUNNING_MESSAGE].contains("checksum mismatch"));
    assert!(observed.delete_pod);
    assert_eq!(observed.events[0].reason, "ErrImportFailed");
}

#[test]
fn completion_is_announced_and_a_retained_pod_stays() {
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":true,"message":"Import Complete"}"#;
    let observed = observe_importer(
        &annotations(&[(ann::POD_RETAIN, "true")]),
        &pod("Succeeded", &terminated(0, "Completed", complete), 0),
    );
    assert!(!observed.delete_pod);
    assert_eq!(observed.annotations[ann::PREALLOCATION_APPLIED], "true");
    assert_eq!(
        observed.events,
        [ClaimEvent {
            event_type: "Normal",
            reason: "ImportSucceeded",
            message: "Import Successful".to_owned()
        }]
    );
}

#[test]
fn an_unschedulable_pending_pod_is_marked() {
    let mut pending = pod("Pending", &json!({"waiting": {"reason": "ContainerCreating"}}), 0);
    if let Some(status) = pending.status.as_mut() {
        status.conditions =
            serde_json::from_value(json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]))
                .ok();
    }
    assert_eq!(
        observe_importer(&BTreeMap::new(), &pending).annotations[ann::POD_SCHEDULABLE],
        "false"
    );
    let running = pod("Running", &json!({"running": {}}), 0);
    assert_eq!(
        observe_importer(&BTreeMap::new(), &running).annotations[ann::POD_SCHEDULABLE],
        "true"
    );
}

#[test]
fn each_outcome_is_announced_once() {
    let not_found = "Unable to process data: GET http://server/disk.img: HTTP 404 Not Found";
    let failed = pod("Running", &terminated(1, "Error", not_found), 1);
    let first = observe_importer(&BTreeMap::new(), &failed);
    assert_eq!(first.events.len(), 1);
    let again = observe_importer(&first.annotations, &failed);
    assert!(again.events.is_empty(), "the same failure seen again");
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let done = pod("Succeeded", &terminated(0, "Completed", complete), 0);
    let retained = annotations(&[(ann::POD_RETAIN, "true")]);
    let first = observe_importer(&retained, &done);
    assert_eq!(first.events.len(), 1);
    assert!(
        observe_importer(&first.annotations, &done).events.is_empty(),
        "a retained pod seen again"
    );
}

#[test]
fn rusts_words_for_a_full_disk_are_shortened_too() {
    assert_eq!(
        simplify("writing: No space left on device (os error 28)"),
        "DataVolume too small to contain image"
    );
    assert_eq!(
        simplify("virtual image size is larger than the reported available storage 1. A larger PVC is required"),
        "DataVolume too small to contain image"
    );
    assert_eq!(simplify("HTTP 404"), "HTTP 404");
}

fn with_ready(mut pod: Pod, ready: bool) -> Pod {
    if let Some(statuses) = pod.status.as_mut().and_then(|s| s.container_statuses.as_mut()) {
        for status in statuses {
            status.ready = ready;
        }
    }
    pod.metadata.name = Some("cdi-upload-disk".to_owned());
    pod
}

#[test]
fn an_upload_server_reports_its_phase_and_readiness_and_goes_once_done() {
    let running = json!({"running": {"startedAt": "2026-11-29T10:00:00Z"}});
    let starting = observe_upload(&BTreeMap::new(), &with_ready(pod("Running", &running, 0), false));
    assert_eq!(starting.annotations[ann::POD_PHASE], "Running");
    assert_eq!(starting.annotations[ann::POD_READY], "false");
    assert_eq!(starting.annotations[ann::UPLOAD_POD], "cdi-upload-disk");
    assert!(!starting.delete_pod);
    let ready = observe_upload(&starting.annotations, &with_ready(pod("Running", &running, 0), true));
    assert_eq!(ready.annotations[ann::POD_READY], "true");
    assert_eq!(ready.annotations[ann::RUNNING], "true");
    assert!(ready.events.is_empty());
    let message = r#"{"message":"Upload Complete","preallocationApplied":true}"#;
    let done = observe_upload(
        &ready.annotations,
        &with_ready(pod("Succeeded", &terminated(0, "Completed", message), 0), false),
    );
    assert_eq!(done.annotations[ann::POD_PHASE], "Succeeded");
    assert_eq!(done.annotations[ann::PREALLOCATION_APPLIED], "true");
    assert_eq!(done.annotations[ann::RUNNING_MESSAGE], "Upload Complete");
    assert!(done.delete_pod);
    assert_eq!(
        done.events,
        [ClaimEvent {
            event_type: "Normal",
            reason: "UploadSucceeded",
            message: "Upload Successful".to_owned(),
        }]
    );
    let again = observe_upload(
        &done.annotations,
        &with_ready(pod("Succeeded", &terminated(0, "Completed", message), 0), false),
    );
    assert!(again.events.is_empty(), "announced once");
    let mut retained = done.annotations.clone();
    retained.insert(ann::POD_RETAIN.to_owned(), "true".to_owned());
    let kept = observe_upload(
        &retained,
        &with_ready(pod("Succeeded", &terminated(0, "Completed", message), 0), false),
    );
    assert!(!kept.delete_pod, "retainAfterCompletion keeps it");
}

#[test]
fn an_upload_server_whose_deadline_passed_goes_without_a_phase() {
    let message = r#"{"message":"Deadline Passed","deadlinePassed":true}"#;
    let observed = observe_upload(
        &annotations(&[(ann::POD_PHASE, "Running"), (ann::POD_READY, "true")]),
        &with_ready(pod("Succeeded", &terminated(0, "Completed", message), 0), false),
    );
    assert_eq!(observed.annotations[ann::POD_PHASE], "");
    assert_eq!(observed.annotations[ann::POD_READY], "false");
    assert!(observed.delete_pod);
    assert!(observed.events.is_empty());
}

/// A pod with `policy`, whose phase is `phase`, with one container per entry of `states`.
fn pod_of(policy: Option<&str>, phase: &str, states: &[Value]) -> Pod {
    let containers: Vec<Value> = (0..states.len()).map(|i| json!({"name": format!("c{i}")})).collect();
    let statuses: Vec<Value> = states
        .iter()
        .enumerate()
        .map(|(i, state)| {
            json!({"name": format!("c{i}"), "image": "i", "imageID": "", "ready": false, "restartCount": 0, "state": state})
        })
        .collect();
    let mut spec = json!({"containers": containers});
    if let Some(policy) = policy {
        spec["restartPolicy"] = json!(policy);
    }
    serde_json::from_value(json!({
        "metadata": {"name": "importer-disk"},
        "spec": spec,
        "status": {"phase": phase, "containerStatuses": statuses}
    }))
    .expect("pod")
}

#[test]
fn a_pod_that_cannot_restart_has_succeeded_once_every_container_exited_zero() {
    let running = json!({"running": {}});
    let (done, failed) = (terminated(0, "Completed", ""), terminated(1, "Error", "boom"));
    let states: [(&str, Vec<Value>); 5] = [
        ("one running", vec![running.clone()]),
        ("one exited 0", vec![done.clone()]),
        ("one exited 1", vec![failed.clone()]),
        ("one of two exited 0", vec![done.clone(), running]),
        ("both exited 0", vec![done.clone(), done]),
    ];
    for policy in [None, Some("Always"), Some("OnFailure"), Some("Never")] {
        for phase in ["Pending", "Running", "Succeeded", "Failed", ""] {
            for (what, containers) in &states {
                let settled = settled_phase(&pod_of(policy, phase, containers));
                let early = policy.is_some_and(|p| p != "Always")
                    && matches!(phase, "Pending" | "Running")
                    && matches!(*what, "one exited 0" | "both exited 0");
                let expected = if early { "Succeeded" } else { phase };
                assert_eq!(settled, expected, "{policy:?}, {phase}, {what}");
            }
        }
    }
    // A container the kubelet has not reported yet keeps the pod's own phase.
    let mut partial = pod_of(Some("OnFailure"), "Running", &[terminated(0, "Completed", "")]);
    if let Some(spec) = partial.spec.as_mut() {
        spec.containers.push(spec.containers[0].clone());
    }
    assert_eq!(settled_phase(&partial), "Running");
}

#[test]
fn an_importer_that_exited_zero_completes_its_claim_before_the_kubelet_says_so() {
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let exited = pod_of(Some("OnFailure"), "Running", &[terminated(0, "Completed", complete)]);
    let observed = observe_importer(&BTreeMap::new(), &exited);
    assert_eq!(observed.annotations[ann::POD_PHASE], "Succeeded");
    assert!(observed.delete_pod, "the finished importer goes");
    assert!(observed.events.iter().any(|e| e.reason == "ImportSucceeded"));
    let upload = observe_upload(&BTreeMap::new(), &exited);
    assert_eq!(upload.annotations[ann::POD_PHASE], "Succeeded");
    assert!(upload.delete_pod, "the finished upload server goes");
    // One that failed is still the kubelet's to restart.
    let failed = pod_of(Some("OnFailure"), "Running", &[terminated(1, "Error", "boom")]);
    assert_eq!(
        observe_importer(&BTreeMap::new(), &failed).annotations[ann::POD_PHASE],
        "Running"
    );
}

#[test]
fn an_importer_that_exited_zero_asking_for_scratch_space_is_not_done() {
    let asks = r#"{"scratchSpaceRequired":true,"preallocationApplied":false,"message":""}"#;
    let exited = pod_of(Some("OnFailure"), "Running", &[terminated(0, "Completed", asks)]);
    let before = annotations(&[(ann::POD_PHASE, "Running")]);
    let observed = observe_importer(&before, &exited);
    assert_eq!(observed.annotations[ann::POD_PHASE], "Running", "not Succeeded");
    assert_eq!(observed.annotations[ann::REQUIRES_SCRATCH], "true");
    assert!(observed.delete_pod, "replaced by a pod with scratch space");
    assert!(observed.events.iter().all(|e| e.reason != "ImportSucceeded"));
}
