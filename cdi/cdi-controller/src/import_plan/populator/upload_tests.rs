//! The upload populator's flow, pass by pass: the target naming its VolumeUploadSource, the prime
//! claim marked for upload with scratch space, its upload server on the prime's node, the phases
//! from the server's readiness copied to the target, the rebinding once the upload is done.

use cdi_api::DataVolumePhase;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::super::tests::{data_volume, facts, kinds, now, phase_written};
use super::tests::{annotations_of, first_csi_pass, prime, status_written, target, volume};
use super::*;
use crate::import_plan::plan;

fn upload() -> DataVolume {
    data_volume(&json!({"upload": {}}))
}

/// The prime claim's upload server pod.
fn server_pod(phase: &str, ready: bool, state: &serde_json::Value) -> Pod {
    let mut pod = super::super::upload_tests::server_pod(phase, ready, state);
    pod.metadata.name = Some("cdi-upload-prime-claim-uid".to_owned());
    let owner = &mut pod.metadata.owner_references.get_or_insert_default()[0];
    owner.uid = "prime-uid".to_owned();
    owner.name = "prime-claim-uid".to_owned();
    pod
}

#[test]
fn an_upload_into_a_csi_class_names_its_volume_upload_source_and_fills_a_prime() {
    let dv = upload();
    let (kind, source, claim) = first_csi_pass(&dv);
    assert_eq!(kind, SourceKind::Upload);
    assert_eq!(source["kind"], "VolumeUploadSource");
    assert_eq!(source["metadata"]["name"], "volume-upload-source-dv-uid");
    assert_eq!(source["metadata"]["ownerReferences"][0]["uid"], "dv-uid");
    let claim = serde_json::to_value(&claim).expect("json");
    assert_eq!(
        claim["spec"]["dataSourceRef"],
        json!({"apiGroup": "cdi.kubevirt.io", "kind": "VolumeUploadSource", "name": "volume-upload-source-dv-uid"})
    );
    assert_eq!(
        claim["metadata"]["annotations"],
        json!({"cdi.kubevirt.io/storage.contentType": "kubevirt"}),
        "the prime is the upload's target"
    );

    // `--force-bind`: the prime is made at once, marked for the upload, with scratch space.
    let mut forced = dv.clone();
    forced.metadata.annotations = Some(BTreeMap::from([(IMMEDIATE_BINDING.to_owned(), "true".to_owned())]));
    let pending = target(&forced, "Pending", &[]);
    let mut waiting = facts(&forced, Some(&pending), None);
    waiting.wait_for_first_consumer = true;
    let steps = plan(&waiting, &now());
    assert_eq!(kinds(&steps), ["CreateClaim", "WriteStatus"]);
    let Step::CreateClaim(prime_claim) = &steps[0] else {
        unreachable!()
    };
    let annotations = serde_json::to_value(&prime_claim.metadata.annotations).expect("json");
    assert_eq!(annotations[ann::UPLOAD_REQUEST], "");
    assert_eq!(annotations[ann::REQUIRES_SCRATCH], "true");
    assert_eq!(annotations[POPULATOR_KIND], "VolumeUploadSource");
    assert_eq!(annotations[IMMEDIATE_BINDING], "");

    // Without it, the target waits for its first consumer.
    let unforced = target(&dv, "Pending", &[]);
    let mut waiting = facts(&dv, Some(&unforced), None);
    waiting.wait_for_first_consumer = true;
    let steps = plan(&waiting, &now());
    assert_eq!(kinds(&steps), ["WriteStatus"]);
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::PendingPopulation));
}

#[test]
fn the_primes_upload_server_runs_on_its_node_and_its_readiness_reaches_the_target() {
    let dv = upload();
    let pending = target(&dv, "Pending", &[(SELECTED_NODE, "node-b")]);
    let bound = prime(&dv, &pending, "Bound", &[]);
    let mut first = facts(&dv, Some(&pending), None);
    first.populator.prime = Some(&bound);
    let steps = plan(&first, &now());
    assert_eq!(kinds(&steps), ["CreateUploadServer", "AnnotateClaim", "WriteStatus"]);
    let Step::CreateUploadServer(server) = &steps[0] else {
        unreachable!()
    };
    let created = serde_json::to_value(&server.pod).expect("json");
    assert_eq!(created["metadata"]["name"], "cdi-upload-prime-claim-uid");
    assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "prime-uid");
    assert_eq!(created["metadata"]["annotations"][DATA_VOLUME_OF_POD], "vms/disk");
    assert_eq!(created["spec"]["nodeName"], "node-b");
    // Placed by hand, so no scheduler waits for the scratch claim: not gated (the API server
    // refuses a gated pod with a node).
    assert_eq!(created["spec"]["schedulingGates"], json!(null));
    assert_eq!(
        server.service.metadata.name.as_deref(),
        Some("cdi-upload-prime-claim-uid")
    );
    let copied = annotations_of(&steps, true);
    assert_eq!(copied[PRIME_NAME], "prime-claim-uid");
    assert_eq!(copied.get(PROGRESS), None, "an upload's progress is not followed");
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::UploadScheduled));

    let serving = prime(
        &dv,
        &pending,
        "Bound",
        &[(ann::UPLOAD_POD, "cdi-upload-prime-claim-uid")],
    );
    let ready = server_pod("Running", true, &json!({"running": {}}));
    let mut second = facts(&dv, Some(&pending), Some(&ready));
    second.populator.prime = Some(&serving);
    let steps = plan(&second, &now());
    let on_prime = annotations_of(&steps, false);
    assert_eq!(on_prime[ann::POD_READY], "true", "the prime's");
    let copied = annotations_of(&steps, true);
    assert_eq!(
        (copied[ann::POD_PHASE].as_str(), copied[ann::POD_READY].as_str()),
        ("Running", "true")
    );
    assert_eq!(
        copied.get(ann::UPLOAD_REQUEST),
        None,
        "the target is not marked for upload"
    );
    assert_eq!(status_written(&steps).phase, DataVolumePhase::UploadReady);

    // A server waiting for its scratch space gets it on the prime's node.
    let waiting = server_pod("Pending", false, &json!({"waiting": {"reason": "ContainerCreating"}}));
    let mut third = facts(&dv, Some(&pending), Some(&waiting));
    third.populator.prime = Some(&serving);
    let steps = plan(&third, &now());
    let scratch = steps
        .iter()
        .find_map(|s| match s {
            Step::CreateScratchClaim(claim) => Some(claim),
            _ => None,
        })
        .expect("a scratch claim");
    assert_eq!(scratch.metadata.name.as_deref(), Some("prime-claim-uid-scratch"));
    assert_eq!(
        scratch.metadata.annotations.as_ref().and_then(|a| a.get(SELECTED_NODE)),
        Some(&"node-b".to_owned())
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::UploadScheduled));

    // A server that failed: said on the DataVolume, which waits for the next one.
    let failed = server_pod(
        "Failed",
        false,
        &json!({"terminated": {"exitCode": 1, "reason": "Error", "message": "disk full"}}),
    );
    let mut fourth = facts(&dv, Some(&pending), Some(&failed));
    fourth.populator.prime = Some(&serving);
    let steps = plan(&fourth, &now());
    assert_eq!(annotations_of(&steps, true)[ann::POD_PHASE], "Failed");
    assert_eq!(status_written(&steps).phase, DataVolumePhase::UploadScheduled);
    assert!(
        steps
            .iter()
            .any(|s| matches!(s, Step::Event(e) if e.reason == "UploadFailed")),
        "{steps:?}"
    );
    assert!(!kinds(&steps).contains(&"RebindVolume"));
}

#[test]
fn a_claim_naming_another_populator_than_the_data_volumes_source_is_left_alone() {
    let dv = upload();
    let mut claim = target(&dv, "Pending", &[]);
    if let Some(reference) = claim.spec.as_mut().and_then(|s| s.data_source_ref.as_mut()) {
        reference.kind = "VolumeImportSource".to_owned();
    }
    assert_eq!(plan(&facts(&dv, Some(&claim), None), &now()), Vec::new());
}

#[test]
fn a_finished_upload_rebinds_the_primes_volume_and_its_source_goes() {
    let dv = upload();
    let pending = target(&dv, "Pending", &[]);
    let serving = prime(
        &dv,
        &pending,
        "Bound",
        &[
            (ann::UPLOAD_POD, "cdi-upload-prime-claim-uid"),
            (ann::POD_PHASE, "Running"),
            (ann::POD_READY, "true"),
        ],
    );
    let done = server_pod(
        "Succeeded",
        false,
        &json!({"terminated": {"exitCode": 0, "reason": "Completed"}}),
    );
    let held = volume(("prime-claim-uid", "prime-uid"));
    let mut pass = facts(&dv, Some(&pending), Some(&done));
    pass.populator.prime = Some(&serving);
    pass.populator.prime_volume = Some(&held);
    pass.populator.source_object = true;
    let steps = plan(&pass, &now());
    let order = kinds(&steps);
    for kind in ["DeletePod", "DeleteService", "DeleteSecret", "RebindVolume"] {
        assert!(order.contains(&kind), "{kind} in {order:?}");
    }
    assert!(
        steps.iter().any(|s| matches!(
            s,
            Step::DeletePopulationSource(SourceKind::Upload, name) if name == "volume-upload-source-dv-uid"
        )),
        "{order:?}"
    );
    assert_eq!(annotations_of(&steps, true)[ann::POD_PHASE], "Succeeded");
    let status = status_written(&steps);
    assert_eq!(status.phase, DataVolumePhase::Succeeded);
    let events: Vec<_> = steps
        .iter()
        .filter_map(|s| match s {
            Step::Event(e) => Some(e.reason),
            _ => None,
        })
        .collect();
    assert_eq!(events, ["UploadSucceeded"]);
}

#[test]
fn a_forced_prime_s_server_goes_through_the_scheduler_gated_until_its_scratch_claim_is_made() {
    let mut forced = upload();
    forced.metadata.annotations = Some(BTreeMap::from([(IMMEDIATE_BINDING.to_owned(), "true".to_owned())]));
    // No node chosen: the target asked for immediate binding.
    let pending = target(&forced, "Pending", &[(IMMEDIATE_BINDING, "")]);
    let unbound = prime(&forced, &pending, "Pending", &[]);
    let mut first = facts(&forced, Some(&pending), None);
    first.wait_for_first_consumer = true;
    first.populator.prime = Some(&unbound);
    let steps = plan(&first, &now());
    let Some(Step::CreateUploadServer(server)) = steps.iter().find(|s| matches!(s, Step::CreateUploadServer(_))) else {
        panic!("the server: {:?}", kinds(&steps))
    };
    let created = serde_json::to_value(&server.pod).expect("json");
    assert_eq!(created["spec"]["nodeName"], json!(null), "the scheduler places it");
    assert_eq!(
        created["spec"]["schedulingGates"],
        json!([{"name": crate::importer_pod::SCRATCH_GATE}])
    );
    // Its pass makes the scratch claim, then lifts the gate of the prime's server.
    let mut gated = server_pod("Pending", false, &json!({"waiting": {"reason": "SchedulingGated"}}));
    gated.spec = server.pod.spec.clone();
    let mut second = facts(&forced, Some(&pending), Some(&gated));
    second.wait_for_first_consumer = true;
    second.populator.prime = Some(&unbound);
    let steps = plan(&second, &now());
    let made = kinds(&steps);
    let scratch = made
        .iter()
        .position(|k| *k == "CreateScratchClaim")
        .expect("the scratch claim");
    let lifted = made.iter().position(|k| *k == "UngatePod").expect("the gate lifted");
    assert!(scratch < lifted, "{made:?}");
    assert!(steps.contains(&Step::UngatePod("cdi-upload-prime-claim-uid".to_owned())));
}
