//! The upload populator over a claim a user made: the VolumeUploadSource read, the prime with
//! an upload server, the volume handed over and the upload said on the claim.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::bare_claim::{Population, UPLOAD_SUCCEEDED, plan, population};
use super::bare_claim_tests::{claim, csi, events, filled_as, http_source, prime, volume};
use super::populator::{PROGRESS, PopulationSource, SELECTED_NODE};
use super::tests::{facts, kinds, now};
use super::{ImporterSettings, Step};
use crate::claim_annotations::ann;

/// A user's claim naming the VolumeUploadSource `upload`.
fn upload_claim(phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    let mut claim = claim(phase, annotations);
    let reference = claim
        .spec
        .as_mut()
        .expect("spec")
        .data_source_ref
        .as_mut()
        .expect("ref");
    reference.kind = "VolumeUploadSource".to_owned();
    reference.name = "upload".to_owned();
    claim
}

fn upload_source(spec: &serde_json::Value) -> PopulationSource {
    PopulationSource::Upload(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "VolumeUploadSource",
            "metadata": {"name": "upload", "namespace": "vms"},
            "spec": spec
        }))
        .expect("source"),
    ))
}

#[test]
fn a_claim_naming_a_volume_upload_source_gets_a_prime_with_an_upload_server() {
    let target = upload_claim("Pending", &[(SELECTED_NODE, "node-2")]);
    let settings = ImporterSettings::default();
    let upload = upload_source(&json!({"contentType": "kubevirt", "preallocation": false}));
    let data_volume = filled_as(population(&target, Some(&upload), Some(&csi()), false, &settings));
    assert_eq!(
        serde_json::to_value(&data_volume.spec.source).expect("json"),
        json!({"upload": {}})
    );
    assert_eq!(data_volume.spec.preallocation, Some(false));
    // A source of the other kind of the same name is not this claim's.
    assert!(matches!(
        population(
            &target,
            Some(&PopulationSource::Import(Box::new(http_source()))),
            Some(&csi()),
            false,
            &settings
        ),
        Population::Wait(_)
    ));

    let mut seen = facts(&data_volume, Some(&target), None);
    seen.wait_for_first_consumer = true;
    let steps = plan(&seen, &now()).steps;
    assert_eq!(kinds(&steps), ["CreateClaim", "ClaimEvent"]);
    let Some(Step::CreateClaim(prime_claim)) = steps.first() else {
        panic!("the prime first")
    };
    let prime_json = serde_json::to_value(prime_claim).expect("json");
    let annotations = &prime_json["metadata"]["annotations"];
    assert_eq!(annotations[ann::UPLOAD_REQUEST], "");
    assert_eq!(
        annotations["cdi.kubevirt.io/storage.populator.kind"],
        "VolumeUploadSource"
    );

    let bound = prime("Bound", &[(SELECTED_NODE, "node-2"), (ann::UPLOAD_REQUEST, "")]);
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.populator.prime = Some(&bound);
    let steps = plan(&seen, &now()).steps;
    assert_eq!(kinds(&steps), ["CreateUploadServer", "AnnotateClaim"]);
    let Some(Step::CreateUploadServer(server)) = steps.first() else {
        panic!("the upload server first")
    };
    assert_eq!(server.pod.metadata.name.as_deref(), Some("cdi-upload-prime-claim-uid"));
    assert_eq!(
        server.pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some("node-2")
    );
    let Some(Step::AnnotateClaim(target_annotations)) = steps.last() else {
        panic!("the target's annotations")
    };
    assert_eq!(
        target_annotations.get(PROGRESS),
        None,
        "an upload's progress is not followed"
    );

    let done = prime(
        "Bound",
        &[
            (ann::POD_PHASE, "Succeeded"),
            (ann::UPLOAD_REQUEST, ""),
            (ann::UPLOAD_POD, "cdi-upload-prime-claim-uid"),
        ],
    );
    let on_prime = volume(("prime-claim-uid", "prime-uid"));
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.populator.prime = Some(&done);
    seen.populator.prime_volume = Some(&on_prime);
    let steps = plan(&seen, &now()).steps;
    assert!(steps.iter().any(|s| matches!(s, Step::RebindVolume(_))), "{steps:?}");
    assert_eq!(
        events(&steps),
        [("Normal", UPLOAD_SUCCEEDED, "Successfully uploaded into disk".to_owned())]
    );
}
