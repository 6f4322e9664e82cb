//! The import and upload populators over a claim a user made: which claims they take, which
//! they refuse and why, which wait; then their passes, from the prime claim to the rebinding,
//! with upstream's events on the claim and no DataVolume status.

use std::collections::BTreeMap;

use cdi_api::VolumeImportSource;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::bare_claim::{ClassSeen, IMPORT_FAILED, IMPORT_SUCCEEDED, PRIME_CREATED, Population, plan, population};
use super::populator::{PRIME_NAME, PROGRESS, PopulationSource, SELECTED_NODE};
use super::tests::{facts, kinds, now};
use super::{ImporterSettings, Step};
use crate::claim_annotations::ann;

/// A user's claim naming the VolumeImportSource `source`, of the class `local`.
pub(super) fn claim(phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    serde_json::from_value(json!({
        "metadata": {"name": "disk", "namespace": "vms", "uid": "claim-uid", "resourceVersion": "7",
                     "annotations": annotations},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                 "resources": {"requests": {"storage": "1Gi"}},
                 "dataSourceRef": {"apiGroup": "cdi.kubevirt.io", "kind": "VolumeImportSource", "name": "source"}},
        "status": {"phase": phase}
    }))
    .expect("claim")
}

fn source(spec: &serde_json::Value) -> VolumeImportSource {
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "VolumeImportSource",
        "metadata": {"name": "source", "namespace": "vms"},
        "spec": spec
    }))
    .expect("source")
}

pub(super) fn http_source() -> VolumeImportSource {
    source(&json!({"source": {"http": {"url": "http://server/disk.qcow2"}}, "preallocation": true}))
}

pub(super) fn csi() -> ClassSeen {
    ClassSeen::Provisioner("kubevirt.io.hostpath-provisioner".to_owned())
}

fn decide(claim: &PersistentVolumeClaim, source: Option<&VolumeImportSource>) -> Population {
    let source = source.map(|s| PopulationSource::Import(Box::new(s.clone())));
    population(
        claim,
        source.as_ref(),
        Some(&csi()),
        false,
        &ImporterSettings::default(),
    )
}

/// [`population`] of a claim whose source is given as the object its kind is.
fn decide_with(
    claim: &PersistentVolumeClaim,
    source: &VolumeImportSource,
    class: Option<&ClassSeen>,
    prime: bool,
    settings: &ImporterSettings,
) -> Population {
    let source = PopulationSource::Import(Box::new(source.clone()));
    population(claim, Some(&source), class, prime, settings)
}

fn refused(outcome: Population) -> String {
    match outcome {
        Population::Refuse(why) => why,
        other => panic!("a refusal: {other:?}"),
    }
}

pub(super) fn filled_as(outcome: Population) -> cdi_api::DataVolume {
    match outcome {
        Population::Fill(data_volume) => *data_volume,
        other => panic!("filled: {other:?}"),
    }
}

#[test]
fn a_claim_naming_a_volume_import_source_is_filled_as_a_data_volume_of_its_name_and_uid() {
    let data_volume = filled_as(decide(&claim("Pending", &[]), Some(&http_source())));
    let json = serde_json::to_value(&data_volume).expect("json");
    assert_eq!(json["metadata"]["name"], "disk");
    assert_eq!(json["metadata"]["namespace"], "vms");
    // The importer reports its progress under the target's UID, as upstream's.
    assert_eq!(json["metadata"]["uid"], "claim-uid");
    assert_eq!(
        json["spec"]["source"],
        json!({"http": {"url": "http://server/disk.qcow2"}})
    );
    assert_eq!(json["spec"]["preallocation"], true);

    // A source that names nothing is blank, as upstream's populator takes it.
    let blank = filled_as(decide(&claim("Pending", &[]), Some(&source(&json!({})))));
    assert_eq!(
        serde_json::to_value(&blank.spec.source).expect("json"),
        json!({"blank": {}})
    );
}

#[test]
fn claims_that_are_not_the_populators_are_left_alone() {
    let mut other_kind = claim("Pending", &[]);
    other_kind
        .spec
        .as_mut()
        .expect("spec")
        .data_source_ref
        .as_mut()
        .expect("ref")
        .kind = "VolumeCloneSource".to_owned();
    let mut other_group = claim("Pending", &[]);
    other_group
        .spec
        .as_mut()
        .expect("spec")
        .data_source_ref
        .as_mut()
        .expect("ref")
        .api_group = Some("example.com".to_owned());
    let mut none = claim("Pending", &[]);
    none.spec.as_mut().expect("spec").data_source_ref = None;
    let mut data_volumes = claim("Pending", &[]);
    data_volumes.metadata.owner_references = Some(vec![
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "name": "disk", "uid": "dv-uid",
            "controller": true
        }))
        .expect("owner"),
    ]);
    let mut deleting = claim("Pending", &[]);
    deleting.metadata.deletion_timestamp = Some(now());
    for (what, claim) in [
        ("another kind", other_kind),
        ("another group", other_group),
        ("no dataSourceRef", none),
        ("a DataVolume's", data_volumes),
        ("being deleted", deleting),
    ] {
        assert_eq!(decide(&claim, Some(&http_source())), Population::NotOurs, "{what}");
    }
    // Upstream's: a source meant for another claim is not used.
    let elsewhere = source(&json!({"source": {"blank": {}}, "targetClaim": "other"}));
    assert_eq!(decide(&claim("Pending", &[]), Some(&elsewhere)), Population::NotOurs);
    let here = source(&json!({"source": {"blank": {}}, "targetClaim": "disk"}));
    assert!(matches!(
        decide(&claim("Pending", &[]), Some(&here)),
        Population::Fill(_)
    ));
    // Filled, and its source gone since: nothing left to do.
    assert_eq!(decide(&claim("Bound", &[]), None), Population::NotOurs);
}

#[test]
fn a_claim_waits_for_its_source_and_its_class() {
    assert!(matches!(decide(&claim("Pending", &[]), None), Population::Wait(_)));
    let mut classless = claim("Pending", &[]);
    classless.spec.as_mut().expect("spec").storage_class_name = None;
    assert!(matches!(decide(&classless, Some(&http_source())), Population::Wait(_)));
    let missing = decide_with(
        &claim("Pending", &[]),
        &http_source(),
        Some(&ClassSeen::Missing),
        false,
        &ImporterSettings::default(),
    );
    assert_eq!(missing, Population::Wait("storage class local not found".to_owned()));
    // A population under way goes on: the class is not looked at again.
    let under_way = decide_with(
        &claim("Pending", &[]),
        &http_source(),
        Some(&ClassSeen::Missing),
        true,
        &ImporterSettings::default(),
    );
    assert!(matches!(under_way, Population::Fill(_)));
}

#[test]
fn what_cannot_be_populated_here_is_refused_by_name() {
    let mut empty_class = claim("Pending", &[]);
    empty_class.spec.as_mut().expect("spec").storage_class_name = Some(String::new());
    assert!(refused(decide(&empty_class, Some(&http_source()))).contains("empty storage class name"));

    let in_tree = decide_with(
        &claim("Pending", &[]),
        &http_source(),
        Some(&ClassSeen::Provisioner("kubernetes.io/gce-pd".to_owned())),
        false,
        &ImporterSettings::default(),
    );
    assert_eq!(
        refused(in_tree),
        "can't use populator for PVC vms/disk with in-tree storage class kubernetes.io/gce-pd"
    );

    let mut elsewhere = claim("Pending", &[]);
    elsewhere
        .spec
        .as_mut()
        .expect("spec")
        .data_source_ref
        .as_mut()
        .expect("ref")
        .namespace = Some("images".to_owned());
    assert!(refused(decide(&elsewhere, Some(&http_source()))).starts_with("spec.dataSourceRef.namespace"));

    for (spec, words) in [
        (json!({"source": {"s3": {"url": "s3://bucket/disk"}}}), "the s3 source"),
        (
            json!({"source": {"vddk": {"url": "https://vcenter"}}}),
            "the vddk source",
        ),
        (
            json!({"source": {"blank": {}}, "contentType": "archive"}),
            "contentType archive",
        ),
        (
            json!({"source": {"blank": {}}, "checkpoints": [{"previous": "", "current": "a"}]}),
            "checkpoints",
        ),
        (
            json!({"source": {"http": {"url": "http://s/d", "insecureSkipVerify": true}}}),
            "insecureSkipVerify",
        ),
    ] {
        let why = refused(decide(&claim("Pending", &[]), Some(&source(&spec))));
        assert!(why.contains(words), "{spec}: {why}");
    }

    let proxied = ImporterSettings {
        import_proxy: true,
        ..ImporterSettings::default()
    };
    let through_proxy = decide_with(&claim("Pending", &[]), &http_source(), Some(&csi()), false, &proxied);
    assert!(refused(through_proxy).contains("importProxy"));
    // A blank disk reads nothing through a proxy.
    let blank = decide_with(
        &claim("Pending", &[]),
        &source(&json!({"source": {"blank": {}}})),
        Some(&csi()),
        false,
        &proxied,
    );
    assert!(matches!(blank, Population::Fill(_)));
}

pub(super) fn events(steps: &[Step]) -> Vec<(&'static str, &'static str, String)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::ClaimEvent(e) => Some((e.event_type, e.reason, e.message.clone())),
            _ => None,
        })
        .collect()
}

pub(super) fn prime(phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    let annotations: BTreeMap<&str, &str> = annotations.iter().copied().collect();
    serde_json::from_value(json!({
        "metadata": {"name": "prime-claim-uid", "namespace": "vms", "uid": "prime-uid",
                     "annotations": annotations,
                     "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk",
                                          "uid": "claim-uid", "controller": true}]},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "volumeName": "pvc-1",
                 "resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": phase}
    }))
    .expect("prime")
}

#[test]
fn the_first_pass_makes_the_prime_on_the_chosen_node_and_says_so() {
    let target = claim("Pending", &[(SELECTED_NODE, "node-2")]);
    let data_volume = filled_as(decide(&target, Some(&http_source())));
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.wait_for_first_consumer = true;
    let steps = plan(&seen, &now()).steps;
    assert_eq!(kinds(&steps), ["CreateClaim", "ClaimEvent"]);
    let Some(Step::CreateClaim(prime)) = steps.first() else {
        panic!("the prime first")
    };
    let prime = serde_json::to_value(prime).expect("json");
    assert_eq!(prime["metadata"]["name"], "prime-claim-uid");
    assert_eq!(prime["metadata"]["ownerReferences"][0]["uid"], "claim-uid");
    assert_eq!(prime["metadata"]["ownerReferences"][0]["kind"], "PersistentVolumeClaim");
    let annotations = &prime["metadata"]["annotations"];
    assert_eq!(annotations[SELECTED_NODE], "node-2");
    assert_eq!(annotations[ann::ENDPOINT], "http://server/disk.qcow2");
    assert_eq!(annotations[ann::SOURCE], "http");
    assert_eq!(
        annotations["cdi.kubevirt.io/storage.populator.kind"],
        "VolumeImportSource"
    );
    assert_eq!(annotations["cdi.kubevirt.io/storage.preallocation.requested"], "true");
    assert_eq!(prime["spec"]["storageClassName"], "local");
    assert_eq!(prime["spec"].get("dataSourceRef"), None);
    assert_eq!(
        events(&steps),
        [("Normal", PRIME_CREATED, "PVC Prime created successfully".to_owned())]
    );

    // No node chosen yet for a claim waiting for its first consumer: nothing is made.
    let waiting = claim("Pending", &[]);
    let mut seen = facts(&data_volume, Some(&waiting), None);
    seen.wait_for_first_consumer = true;
    assert_eq!(kinds(&plan(&seen, &now()).steps), Vec::<&str>::new());
}

#[test]
fn the_primes_importer_reports_under_the_targets_uid_and_no_status_is_written() {
    let target = claim("Pending", &[(SELECTED_NODE, "node-2")]);
    let data_volume = filled_as(decide(&target, Some(&http_source())));
    let bound = prime("Bound", &[(SELECTED_NODE, "node-2")]);
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.populator.prime = Some(&bound);
    let steps = plan(&seen, &now()).steps;
    assert_eq!(kinds(&steps), ["CreatePod", "AnnotateClaim"]);
    let Some(Step::CreatePod(pod)) = steps.first() else {
        panic!("the importer first")
    };
    let pod = serde_json::to_value(pod).expect("json");
    assert_eq!(pod["metadata"]["name"], "importer-prime-claim-uid");
    assert_eq!(pod["spec"]["nodeName"], "node-2");
    let env = pod["spec"]["containers"][0]["env"].as_array().expect("env");
    let owner_uid = env.iter().find(|e| e["name"] == "OWNER_UID").expect("OWNER_UID");
    assert_eq!(owner_uid["value"], "claim-uid");
    let Some(Step::AnnotateClaim(target_annotations)) = steps.last() else {
        panic!("the target's annotations last")
    };
    assert_eq!(
        target_annotations.get(PRIME_NAME).map(String::as_str),
        Some("prime-claim-uid")
    );
    assert_eq!(target_annotations.get(PROGRESS).map(String::as_str), Some("N/A"));
}

pub(super) fn volume(bound_to: (&str, &str)) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": "pvc-1", "resourceVersion": "3"},
        "spec": {"claimRef": {"namespace": "vms", "name": bound_to.0, "uid": bound_to.1}}
    }))
    .expect("volume")
}

#[test]
fn a_filled_prime_goes_to_the_target_and_the_import_is_said_once() {
    let target = claim("Pending", &[(SELECTED_NODE, "node-2")]);
    let data_volume = filled_as(decide(&target, Some(&http_source())));
    let done = prime(
        "Bound",
        &[
            (ann::POD_PHASE, "Succeeded"),
            (ann::IMPORT_POD, "importer-prime-claim-uid"),
        ],
    );
    let on_prime = volume(("prime-claim-uid", "prime-uid"));
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.populator.prime = Some(&done);
    seen.populator.prime_volume = Some(&on_prime);
    let steps = plan(&seen, &now()).steps;
    assert_eq!(kinds(&steps), ["AnnotateClaim", "RebindVolume", "ClaimEvent"]);
    let Some(Step::AnnotateClaim(copied)) = steps.first() else {
        panic!("the copied annotations first")
    };
    assert_eq!(copied.get(ann::POD_PHASE).map(String::as_str), Some("Succeeded"));
    assert_eq!(copied.get(PROGRESS).map(String::as_str), Some("100.0%"));
    let Some(Step::RebindVolume(rebound)) = steps.get(1) else {
        panic!("the rebinding")
    };
    let reference = rebound
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef");
    assert_eq!(
        (reference.name.as_deref(), reference.uid.as_deref()),
        (Some("disk"), Some("claim-uid"))
    );
    assert_eq!(
        events(&steps),
        [("Normal", IMPORT_SUCCEEDED, "Successfully imported into disk".to_owned())]
    );

    // The next pass, with the phase copied already: not said again.
    let copied_target = claim(
        "Pending",
        &[
            (SELECTED_NODE, "node-2"),
            (ann::POD_PHASE, "Succeeded"),
            (PRIME_NAME, "prime-claim-uid"),
            (PROGRESS, "100.0%"),
        ],
    );
    let mut seen = facts(&data_volume, Some(&copied_target), None);
    seen.populator.prime = Some(&done);
    let on_target = volume(("disk", "claim-uid"));
    seen.populator.prime_volume = Some(&on_target);
    assert_eq!(kinds(&plan(&seen, &now()).steps), Vec::<&str>::new());
    // A rebinding that failed in the pass before is tried, and said, again.
    seen.populator.prime_volume = Some(&on_prime);
    let again = plan(&seen, &now()).steps;
    assert_eq!(kinds(&again), ["RebindVolume", "ClaimEvent"]);
    assert_eq!(events(&again)[0].1, IMPORT_SUCCEEDED);

    // Bound: the prime, left Lost, goes.
    let filled = claim("Bound", &[(ann::POD_PHASE, "Succeeded")]);
    let lost = prime("Lost", &[(ann::POD_PHASE, "Succeeded")]);
    let mut seen = facts(&data_volume, Some(&filled), None);
    seen.populator.prime = Some(&lost);
    let steps = plan(&seen, &now()).steps;
    assert_eq!(kinds(&steps), ["DeleteNamedClaim"]);
}

#[test]
fn a_failed_importer_is_said_on_the_claim_and_a_third_claims_volume_is_warned_once() {
    let target = claim("Pending", &[(SELECTED_NODE, "node-2")]);
    let data_volume = filled_as(decide(&target, Some(&http_source())));
    let failed = prime("Bound", &[(ann::POD_PHASE, "Failed")]);
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.populator.prime = Some(&failed);
    let said = events(&plan(&seen, &now()).steps);
    assert_eq!(said, [("Warning", IMPORT_FAILED, "import into disk failed".to_owned())]);

    let done = prime("Bound", &[(ann::POD_PHASE, "Succeeded")]);
    let elsewhere = volume(("third", "third-uid"));
    let mut seen = facts(&data_volume, Some(&target), None);
    seen.populator.prime = Some(&done);
    seen.populator.prime_volume = Some(&elsewhere);
    let steps = plan(&seen, &now()).steps;
    assert!(
        events(&steps).iter().any(|(kind, reason, message)| *kind == "Warning"
            && *reason == super::populator::REBIND_FAILED
            && message == "PV pvc-1 bound to unexpected claim third"),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|s| matches!(s, Step::WriteStatus(_) | Step::Event(_))));
    assert!(!events(&steps).iter().any(|(_, reason, _)| *reason == IMPORT_SUCCEEDED));

    // The next pass, the phase copied: the warning is not said again.
    let copied = claim("Pending", &[(SELECTED_NODE, "node-2"), (ann::POD_PHASE, "Succeeded")]);
    let mut seen = facts(&data_volume, Some(&copied), None);
    seen.populator.prime = Some(&done);
    seen.populator.prime_volume = Some(&elsewhere);
    assert_eq!(events(&plan(&seen, &now()).steps), Vec::new());
}

#[test]
fn a_pod_of_the_primes_pods_name_that_the_prime_does_not_control_is_said_on_the_claim() {
    let target = claim("Pending", &[(SELECTED_NODE, "node-2")]);
    let data_volume = filled_as(decide(&target, Some(&http_source())));
    let bound = prime("Bound", &[]);
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": "importer-prime-claim-uid", "namespace": "vms", "uid": "other"}
    }))
    .expect("pod");
    let mut seen = facts(&data_volume, Some(&target), Some(&foreign));
    seen.populator.prime = Some(&bound);
    let pass = plan(&seen, &now());
    assert!(pass.refused, "the pass rests: said once");
    assert_eq!(kinds(&pass.steps), ["ClaimEvent"]);
    assert_eq!(events(&pass.steps)[0].1, super::RESOURCE_EXISTS);
}

#[test]
fn a_claim_migrated_to_csi_from_an_in_tree_class_may_be_filled_and_one_under_way_goes_on() {
    let in_tree = ClassSeen::Provisioner("kubernetes.io/gce-pd".to_owned());
    let settings = ImporterSettings::default();
    let migrated = claim("Pending", &[("pv.kubernetes.io/migrated-to", "pd.csi.storage.gke.io")]);
    assert!(matches!(
        decide_with(&migrated, &http_source(), Some(&in_tree), false, &settings),
        Population::Fill(_)
    ));
    // Once its prime exists, what CDIConfig and the class say since does not stop it.
    let proxied = ImporterSettings {
        import_proxy: true,
        ..ImporterSettings::default()
    };
    assert!(matches!(
        decide_with(&claim("Pending", &[]), &http_source(), Some(&in_tree), true, &proxied),
        Population::Fill(_)
    ));
}
