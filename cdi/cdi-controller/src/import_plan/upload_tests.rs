//! The plan for an `upload` DataVolume: its claim marked for upload, the upload server (Service,
//! certificate, pod) once the claim is bound, scratch space for the pod, the phases from the
//! server's readiness, and the server's end.

use cdi_api::DataVolumePhase;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::tests::{claim, data_volume, facts, kinds, now, phase_written, pod};
use super::*;

fn upload() -> DataVolume {
    data_volume(&json!({"upload": {}}))
}

/// The upload server's pod, ready or not.
pub(super) fn server_pod(phase: &str, ready: bool, state: &serde_json::Value) -> Pod {
    let mut pod = pod(phase, state);
    pod.metadata.name = Some("cdi-upload-disk".to_owned());
    if let Some(statuses) = pod.status.as_mut().and_then(|s| s.container_statuses.as_mut()) {
        statuses[0].ready = ready;
    }
    pod
}

#[test]
fn an_upload_claim_is_marked_for_upload_with_scratch_space() {
    let dv = upload();
    let steps = plan(&facts(&dv, None, None), &now());
    assert_eq!(kinds(&steps), ["CreateClaim", "WriteStatus"]);
    let Step::CreateClaim(created) = &steps[0] else {
        unreachable!()
    };
    assert_eq!(
        serde_json::to_value(&created.metadata.annotations).expect("json"),
        json!({
            "cdi.kubevirt.io/storage.contentType": "kubevirt",
            "cdi.kubevirt.io/storage.upload.target": "",
            "cdi.kubevirt.io/storage.import.requiresScratch": "true",
        })
    );
}

#[test]
fn a_bound_claim_gets_its_upload_server_which_expires_after_twelve_hours() {
    let dv = upload();
    let bound = claim(&dv, "Bound", &[]);
    let steps = plan(&facts(&dv, Some(&bound), None), &now());
    assert_eq!(kinds(&steps), ["CreateUploadServer", "WriteStatus"]);
    let Step::CreateUploadServer(server) = &steps[0] else {
        unreachable!()
    };
    let pod = serde_json::to_value(&server.pod).expect("json");
    assert_eq!(pod["metadata"]["name"], "cdi-upload-disk");
    assert_eq!(pod["metadata"]["ownerReferences"][0]["uid"], "claim-uid");
    let env = &pod["spec"]["containers"][0]["env"];
    let var = |name: &str| {
        env.as_array()
            .and_then(|vars| vars.iter().find(|v| v["name"] == name))
            .map(|v| v["value"].clone())
    };
    // now() is 100 s after the epoch.
    assert_eq!(var("DEADLINE"), Some(json!("1970-01-01T12:01:40Z")));
    // The claim's request: 1Gi grown by the filesystem overhead.
    assert_eq!(var("UPLOAD_IMAGE_SIZE"), Some(json!("1132797625")));
    assert_eq!(var("FILESYSTEM_OVERHEAD"), Some(json!("0.055")));
    assert_eq!(
        pod["spec"]["volumes"][2]["persistentVolumeClaim"]["claimName"],
        "disk-scratch"
    );
    assert_eq!(server.service.metadata.name.as_deref(), Some("cdi-upload-disk"));
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::UploadScheduled));
}

/// `pod` as made with a scratch claim: gated until the claim is there.
fn gated(mut pod: Pod) -> Pod {
    pod.spec.get_or_insert_default().scheduling_gates = Some(vec![k8s_openapi::api::core::v1::PodSchedulingGate {
        name: crate::importer_pod::SCRATCH_GATE.to_owned(),
    }]);
    pod
}

#[test]
fn a_gated_server_gets_its_scratch_claim_and_then_its_gate_lifted_in_one_pass() {
    let dv = upload();
    let bound = claim(&dv, "Bound", &[(ann::UPLOAD_POD, "cdi-upload-disk")]);
    let pending = gated(server_pod(
        "Pending",
        false,
        &json!({"waiting": {"reason": "SchedulingGated"}}),
    ));
    let steps = plan(&facts(&dv, Some(&bound), Some(&pending)), &now());
    assert_eq!(
        kinds(&steps),
        [
            "AnnotateClaim",
            "CreateScratchClaim",
            "UngatePod",
            "WriteStatus",
            "Event"
        ]
    );
    assert!(steps.contains(&Step::UngatePod("cdi-upload-disk".to_owned())));
    // A pass that made the claim but failed before the gate: the next lifts it.
    let Some(Step::CreateScratchClaim(scratch)) = steps.iter().find(|s| matches!(s, Step::CreateScratchClaim(_)))
    else {
        unreachable!()
    };
    let mut made = (**scratch).clone();
    if let Some(owner) = made.metadata.owner_references.as_mut().and_then(|o| o.first_mut()) {
        owner.uid = pending.metadata.uid.clone().unwrap_or_default();
    }
    let mut again = facts(&dv, Some(&bound), Some(&pending));
    again.scratch_claim = Some(&made);
    let steps = plan(&again, &now());
    assert!(
        steps.contains(&Step::UngatePod("cdi-upload-disk".to_owned())),
        "{:?}",
        kinds(&steps)
    );
    assert!(!kinds(&steps).contains(&"CreateScratchClaim"));
    // Once lifted, nothing more.
    let lifted = server_pod("Pending", false, &json!({"waiting": {"reason": "ContainerCreating"}}));
    let mut after = facts(&dv, Some(&bound), Some(&lifted));
    after.scratch_claim = Some(&made);
    assert!(!kinds(&plan(&after, &now())).contains(&"UngatePod"));
}

#[test]
fn the_server_gets_scratch_space_then_is_ready_then_goes_with_its_service() {
    let dv = upload();
    let running = json!({"running": {"startedAt": "2026-11-29T10:00:00Z"}});
    let bound = claim(&dv, "Bound", &[(ann::UPLOAD_POD, "cdi-upload-disk")]);
    let pending = server_pod("Pending", false, &json!({"waiting": {"reason": "ContainerCreating"}}));
    let steps = plan(&facts(&dv, Some(&bound), Some(&pending)), &now());
    assert_eq!(
        kinds(&steps),
        ["AnnotateClaim", "CreateScratchClaim", "WriteStatus", "Event"]
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::UploadScheduled));
    let ready = server_pod("Running", true, &running);
    let steps = plan(&facts(&dv, Some(&bound), Some(&ready)), &now());
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::UploadReady));
    let Step::AnnotateClaim(annotations) = &steps[0] else {
        panic!("{steps:?}")
    };
    assert_eq!(annotations.get(ann::POD_READY).map(String::as_str), Some("true"));
    let message = r#"{"message":"Upload Complete","preallocationApplied":false}"#;
    let done = server_pod(
        "Succeeded",
        false,
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": message}}),
    );
    let steps = plan(&facts(&dv, Some(&bound), Some(&done)), &now());
    assert_eq!(
        kinds(&steps),
        [
            "AnnotateClaim",
            "ClaimEvent",
            "DeletePod",
            "DeleteService",
            "DeleteSecret",
            "WriteStatus",
            "Event"
        ]
    );
    assert_eq!(steps[2], Step::DeletePod("cdi-upload-disk".to_owned()));
    assert_eq!(steps[3], Step::DeleteService("cdi-upload-disk".to_owned()));
    assert_eq!(
        steps[4],
        Step::DeleteSecret("cdi-upload-disk".to_owned()),
        "its key goes too"
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Succeeded));
}

#[test]
fn a_server_whose_deadline_passed_is_replaced_and_its_service_kept() {
    let dv = upload();
    let bound = claim(
        &dv,
        "Bound",
        &[
            (ann::UPLOAD_POD, "cdi-upload-disk"),
            (ann::POD_PHASE, "Running"),
            (ann::POD_READY, "true"),
        ],
    );
    let message = r#"{"message":"Deadline Passed","deadlinePassed":true}"#;
    let expired = server_pod(
        "Succeeded",
        false,
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": message}}),
    );
    let steps = plan(&facts(&dv, Some(&bound), Some(&expired)), &now());
    assert_eq!(kinds(&steps), ["AnnotateClaim", "DeletePod", "WriteStatus"]);
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::UploadScheduled));
    // Once it is gone, the next pass makes a new one.
    let Step::AnnotateClaim(annotations) = &steps[0] else {
        unreachable!()
    };
    let mut after = bound.clone();
    after
        .metadata
        .annotations
        .get_or_insert_default()
        .extend(annotations.clone());
    let steps = plan(&facts(&dv, Some(&after), None), &now());
    assert_eq!(kinds(&steps)[0], "CreateUploadServer");
}
