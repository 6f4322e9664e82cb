//! The plan for a `pvc` (clone) DataVolume: held back until its token allows it and its source is
//! there and fits; the target claim marked for the clone; its upload server without scratch space
//! and for the clone's client name; the source pod once the server is ready, unless another pod
//! uses the source; the phases; the source pod's end with the copy or the target.

use cdi_api::DataVolumePhase;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::clone::{CloneFacts, authorize, users_of};
use super::tests::{claim_made_by, data_volume, facts, kinds, now, phase_written, pod};
use super::*;

fn clone_dv() -> DataVolume {
    data_volume(&json!({"pvc": {"namespace": "golden", "name": "base"}}))
}

fn source(size: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "base", "namespace": "golden", "uid": "source-uid"},
        "spec": {"accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                 "resources": {"requests": {"storage": size}}},
        "status": {"phase": "Bound", "capacity": {"storage": size}}
    }))
    .expect("claim")
}

fn allowed<'a>(
    source_claim: Option<&'a PersistentVolumeClaim>,
    source_pod: Option<&'a Pod>,
    users: &'a [String],
) -> CloneFacts<'a> {
    CloneFacts {
        source_claim,
        source_pod,
        source_pod_without_secret: false,
        source_users: users,
        authorized: Ok(()),
    }
}

fn with_clone<'a>(mut facts: ImportFacts<'a>, clone: CloneFacts<'a>) -> ImportFacts<'a> {
    facts.clone = Some(clone);
    facts
}

/// The target claim the first pass creates, as the API server gives it back.
fn target(dv: &DataVolume, phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    let base = source("1Gi");
    claim_made_by(
        &with_clone(facts(dv, None, None), allowed(Some(&base), None, &[])),
        phase,
        annotations,
    )
}

fn server_pod(phase: &str, ready: bool) -> Pod {
    let mut pod = pod(phase, &json!({"running": {"startedAt": "2026-11-30T10:00:00Z"}}));
    pod.metadata.name = Some("cdi-upload-disk".to_owned());
    if let Some(statuses) = pod.status.as_mut().and_then(|s| s.container_statuses.as_mut()) {
        statuses[0].ready = ready;
    }
    pod
}

/// The upload server, done with "Upload Complete".
fn finished_server_pod() -> Pod {
    let mut done = server_pod("Succeeded", false);
    if let Some(statuses) = done.status.as_mut().and_then(|s| s.container_statuses.as_mut()) {
        statuses[0].state = Some(
            serde_json::from_value(
                json!({"terminated": {"exitCode": 0, "message": "{\"message\": \"Upload Complete\"}"}}),
            )
            .expect("state"),
        );
    }
    done
}

/// The bound target whose upload server is ready, with one more annotation.
fn server_ready_target(dv: &DataVolume, extra: (&str, &str)) -> PersistentVolumeClaim {
    target(
        dv,
        "Bound",
        &[(ann::UPLOAD_POD, "cdi-upload-disk"), (ann::POD_READY, "true"), extra],
    )
}

fn source_pod(phase: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "claim-uid-source-pod", "namespace": "golden", "uid": "sp-uid"},
        "status": {"phase": phase}
    }))
    .expect("pod")
}

fn events(steps: &[Step]) -> Vec<(&'static str, String)> {
    steps
        .iter()
        .filter_map(|s| match s {
            Step::Event(e) => Some((e.reason, e.message.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn the_target_claim_is_marked_for_a_copy_from_its_source() {
    let dv = clone_dv();
    let claim = target(&dv, "Pending", &[]);
    assert_eq!(
        serde_json::to_value(&claim.metadata.annotations).expect("json"),
        json!({
            "cdi.kubevirt.io/storage.contentType": "kubevirt",
            "k8s.io/CloneRequest": "golden/base",
            "cdi.kubevirt.io/uploadClientName": "golden/base-vms/disk",
            "cdi.kubevirt.io/cloneType": "copy",
        })
    );
}

#[test]
fn a_clone_is_held_back_by_its_token_its_source_and_its_size() {
    let dv = clone_dv();
    let small = source("1Gi");
    let large = source("2Gi");
    let refused = CloneFacts {
        authorized: Err("the clone token expired"),
        ..allowed(Some(&small), None, &[])
    };
    let cases: [(CloneFacts<'_>, &str, &str); 3] = [
        (
            refused,
            "CloneValidationFailed",
            "The clone doesn't meet the validation requirements: the clone token expired",
        ),
        (
            allowed(None, None, &[]),
            "CloneWithoutSource",
            "The source pvc base doesn't exist",
        ),
        (
            allowed(Some(&large), None, &[]),
            "CloneValidationFailed",
            "The clone doesn't meet the validation requirements: target resources requests storage size is smaller than the source (1132797625 < 2Gi)",
        ),
    ];
    for (clone, reason, message) in cases {
        let steps = plan(&with_clone(facts(&dv, None, None), clone), &now());
        assert_eq!(kinds(&steps), ["WriteStatus", "Event"], "{reason}");
        assert_eq!(phase_written(&steps), Some(DataVolumePhase::Pending));
        assert_eq!(events(&steps), [(reason, message.to_owned())]);
    }
}

#[test]
fn the_upload_server_takes_the_clones_name_without_scratch_then_the_source_pod_comes() {
    let dv = clone_dv();
    let base = source("1Gi");
    let bound = target(&dv, "Bound", &[]);
    let steps = plan(
        &with_clone(facts(&dv, Some(&bound), None), allowed(Some(&base), None, &[])),
        &now(),
    );
    assert_eq!(kinds(&steps), ["CreateUploadServer", "WriteStatus"]);
    let Step::CreateUploadServer(server) = &steps[0] else {
        unreachable!()
    };
    let pod = serde_json::to_value(&server.pod).expect("json");
    let env = pod["spec"]["containers"][0]["env"].as_array().expect("env").clone();
    assert!(env.contains(&json!({"name": "CLIENT_NAME", "value": "golden/base-vms/disk"})));
    assert_eq!(pod["spec"]["volumes"].as_array().map(Vec::len), Some(2), "no scratch");
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::CloneScheduled));
    // Running but not ready: no source pod yet.
    let waiting = target(&dv, "Bound", &[(ann::UPLOAD_POD, "cdi-upload-disk")]);
    let not_ready = server_pod("Running", false);
    let steps = plan(
        &with_clone(
            facts(&dv, Some(&waiting), Some(&not_ready)),
            allowed(Some(&base), None, &[]),
        ),
        &now(),
    );
    assert!(!kinds(&steps).contains(&"CreateCloneSource"), "{:?}", kinds(&steps));
    // Ready: the source pod, named for the target.
    let ready = server_pod("Running", true);
    let steps = plan(
        &with_clone(
            facts(&dv, Some(&waiting), Some(&ready)),
            allowed(Some(&base), None, &[]),
        ),
        &now(),
    );
    let Some(Step::CreateCloneSource(args)) = steps.iter().find(|s| matches!(s, Step::CreateCloneSource(_))) else {
        panic!("the source pod: {:?}", kinds(&steps))
    };
    assert_eq!(args.source_namespace, "golden");
    assert_eq!(args.source, "base");
    assert_eq!(args.target_uid, "claim-uid");
    assert!(args.source_read_write_once);
    assert!(
        steps.contains(&Step::AnnotateClaim(
            [(
                "cdi.kubevirt.io/storage.sourceClonePodName".to_owned(),
                "claim-uid-source-pod".to_owned()
            )]
            .into()
        ))
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::CloneInProgress));
    assert_eq!(
        events(&steps),
        [(
            "CloneInProgress",
            "Cloning from golden/base into vms/disk in progress".to_owned()
        )]
    );
}

#[test]
fn a_source_in_use_waits_with_an_event_per_user() {
    let dv = clone_dv();
    let base = source("1Gi");
    let bound = server_ready_target(&dv, (ann::POD_PHASE, "Running"));
    let ready = server_pod("Running", true);
    let users = ["golden/virt-launcher-vm-abc".to_owned()];
    let steps = plan(
        &with_clone(
            facts(&dv, Some(&bound), Some(&ready)),
            allowed(Some(&base), None, &users),
        ),
        &now(),
    );
    assert!(!kinds(&steps).contains(&"CreateCloneSource"));
    let in_use: Vec<_> = events(&steps)
        .into_iter()
        .filter(|(r, _)| *r == "CloneSourceInUse")
        .collect();
    assert_eq!(
        in_use,
        [(
            "CloneSourceInUse",
            "pod golden/virt-launcher-vm-abc using PersistentVolumeClaim base".to_owned()
        )]
    );
}

#[test]
fn the_copy_done_ends_the_server_and_the_source_pod() {
    let dv = clone_dv();
    let base = source("1Gi");
    let bound = target(
        &dv,
        "Bound",
        &[(ann::UPLOAD_POD, "cdi-upload-disk"), (ann::POD_PHASE, "Running")],
    );
    let done = finished_server_pod();
    let sending = source_pod("Running");
    let steps = plan(
        &with_clone(
            facts(&dv, Some(&bound), Some(&done)),
            allowed(Some(&base), Some(&sending), &[]),
        ),
        &now(),
    );
    assert!(steps.contains(&Step::DeletePod("cdi-upload-disk".to_owned())));
    assert!(steps.contains(&Step::DeleteService("cdi-upload-disk".to_owned())));
    assert!(steps.contains(&Step::DeleteCloneSource {
        namespace: "golden".to_owned(),
        name: "claim-uid-source-pod".to_owned()
    }));
    assert!(steps.contains(&Step::ClaimEvent(crate::claim_annotations::ClaimEvent {
        event_type: "Normal",
        reason: "CloneSucceeded",
        message: "Clone Complete".to_owned()
    })));
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Succeeded));
    assert_eq!(
        events(&steps),
        [(
            "CloneSucceeded",
            "Successfully cloned from golden/base into vms/disk".to_owned()
        )]
    );
}

#[test]
fn a_source_pod_without_its_secret_gets_it_unless_the_copy_is_over() {
    let dv = clone_dv();
    let base = source("1Gi");
    let running = server_ready_target(
        &dv,
        ("cdi.kubevirt.io/storage.sourceClonePodName", "claim-uid-source-pod"),
    );
    let server = server_pod("Running", true);
    let waiting = source_pod("Pending");
    let without_secret = CloneFacts {
        source_pod_without_secret: true,
        ..allowed(Some(&base), Some(&waiting), &[])
    };
    let give = Step::GiveCloneSourceSecret {
        namespace: "golden".to_owned(),
        pod: "claim-uid-source-pod".to_owned(),
        client_name: "golden/base-vms/disk".to_owned(),
    };
    let steps = plan(
        &with_clone(facts(&dv, Some(&running), Some(&server)), without_secret),
        &now(),
    );
    assert!(steps.contains(&give), "{:?}", kinds(&steps));
    assert!(!kinds(&steps).contains(&"CreateCloneSource"), "{:?}", kinds(&steps));
    // With its Secret: nothing for the source pod.
    let steps = plan(
        &with_clone(
            facts(&dv, Some(&running), Some(&server)),
            allowed(Some(&base), Some(&waiting), &[]),
        ),
        &now(),
    );
    assert!(!steps.contains(&give), "{:?}", kinds(&steps));
    // A pod being deleted gets none.
    let mut leaving = source_pod("Running");
    leaving.metadata.deletion_timestamp = Some(now());
    let steps = plan(
        &with_clone(
            facts(&dv, Some(&running), Some(&server)),
            CloneFacts {
                source_pod_without_secret: true,
                ..allowed(Some(&base), Some(&leaving), &[])
            },
        ),
        &now(),
    );
    assert!(!kinds(&steps).contains(&"GiveCloneSourceSecret"), "{:?}", kinds(&steps));
    // The copy is over: the pod goes rather than get its Secret.
    let finished = finished_server_pod();
    let steps = plan(
        &with_clone(facts(&dv, Some(&running), Some(&finished)), without_secret),
        &now(),
    );
    assert!(!kinds(&steps).contains(&"GiveCloneSourceSecret"), "{:?}", kinds(&steps));
    assert!(kinds(&steps).contains(&"DeleteCloneSource"), "{:?}", kinds(&steps));
}

#[test]
fn a_leaving_target_takes_its_source_pod_across_namespaces() {
    let dv = clone_dv();
    let mut leaving = target(
        &dv,
        "Bound",
        &[("cdi.kubevirt.io/storage.sourceClonePodName", "claim-uid-source-pod")],
    );
    leaving.metadata.deletion_timestamp = Some(now());
    assert_eq!(
        orphan_steps(Some(&leaving), None),
        [Step::DeleteCloneSource {
            namespace: "golden".to_owned(),
            name: "claim-uid-source-pod".to_owned()
        }]
    );
}

#[test]
fn the_sources_users_are_live_pods_mounting_it_other_than_the_source_pod() {
    let pod = |name: &str, claim: &str, phase: &str| -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "golden"},
            "spec": {"containers": [], "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]},
            "status": {"phase": phase}
        }))
        .expect("pod")
    };
    let pods = [
        pod("vm", "base", "Running"),
        pod("done", "base", "Succeeded"),
        pod("other", "elsewhere", "Running"),
        pod("claim-uid-source-pod", "base", "Running"),
    ];
    assert_eq!(users_of(&pods, "base", "claim-uid-source-pod"), ["golden/vm"]);
}

#[test]
fn a_token_is_checked_against_the_clone_it_names() {
    let key = cdi_token::generate_key().expect("key");
    let issuer = cdi_token::Issuer::new(&key, cdi_token::UPLOAD_ISSUER, 300).expect("issuer");
    let validator = cdi_token::Validator::new(&issuer.public_key(), cdi_token::UPLOAD_ISSUER, 0);
    let with_token = |payload: &cdi_token::Payload| {
        let mut dv = clone_dv();
        dv.metadata.annotations = Some(
            [(
                "cdi.kubevirt.io/storage.clone.token".to_owned(),
                issuer.issue(payload, 1000),
            )]
            .into(),
        );
        dv
    };
    let right = with_token(&cdi_token::Payload::clone_of("golden", "base", "vms", "disk"));
    assert_eq!(authorize(&right, Some(&validator), "golden", "base", 1100), Ok(()));
    let expired = authorize(&right, Some(&validator), "golden", "base", 2000).expect_err("expired");
    assert!(expired.contains("expired"), "{expired}");
    let other = with_token(&cdi_token::Payload::clone_of("golden", "secret", "vms", "disk"));
    assert!(authorize(&other, Some(&validator), "golden", "base", 1100).is_err());
    let none = authorize(&clone_dv(), Some(&validator), "golden", "base", 1100).expect_err("no token");
    assert!(none.contains("cdi.kubevirt.io/storage.clone.token"), "{none}");
    assert!(authorize(&right, None, "golden", "base", 1100).is_err());
}

#[test]
fn a_claim_not_made_for_this_clone_gets_no_copy() {
    // A DataVolume whose source became a clone after its claim was made (for an import): its
    // token was never checked, so nothing is copied into the claim.
    let imported = super::tests::claim(
        &super::tests::data_volume(&json!({"http": {"url": "http://x/d.img"}})),
        "Bound",
        &[],
    );
    let dv = clone_dv();
    let base = source("1Gi");
    let steps = plan(
        &with_clone(facts(&dv, Some(&imported), None), allowed(Some(&base), None, &[])),
        &now(),
    );
    assert_eq!(kinds(&steps), ["WriteStatus", "Event"]);
    assert!(
        events(&steps)[0]
            .1
            .contains("claim disk was not made for a clone of golden/base"),
        "{:?}",
        events(&steps)
    );
}

#[test]
fn only_a_data_volumes_claim_names_a_source_pod_and_only_its_own_pod_is_deleted() {
    let dv = clone_dv();
    // A claim its namespace's editor made to look like a clone target: no DataVolume controls it.
    let mut crafted = target(
        &dv,
        "Bound",
        &[("cdi.kubevirt.io/storage.sourceClonePodName", "kube-apiserver")],
    );
    crafted.metadata.deletion_timestamp = Some(now());
    crafted.metadata.owner_references = None;
    assert_eq!(super::clone::source_of_leaving(&crafted), None);
    let mut leaving = target(
        &dv,
        "Bound",
        &[("cdi.kubevirt.io/storage.sourceClonePodName", "kube-apiserver")],
    );
    leaving.metadata.deletion_timestamp = Some(now());
    assert_eq!(
        super::clone::source_of_leaving(&leaving),
        Some(("golden".to_owned(), "claim-uid-source-pod".to_owned())),
        "the name comes from the claim's uid, not its annotation"
    );
    let made = crate::clone_source::render(
        &crate::clone_source::CloneSourceArgs {
            target_namespace: "vms".to_owned(),
            target: "disk".to_owned(),
            target_uid: "claim-uid".to_owned(),
            source_namespace: "golden".to_owned(),
            source: "base".to_owned(),
            source_uid: "source-uid".to_owned(),
            source_block: false,
            source_read_write_once: true,
            owner_uid: "dv-uid".to_owned(),
            pod: crate::importer_pod::PodSettings::default(),
        },
        "CA",
    )
    .pod;
    assert!(super::clone::source_pod_of(&made, "vms", "disk"));
    assert!(!super::clone::source_pod_of(&made, "vms", "other"));
    assert!(
        !super::clone::source_pod_of(&source_pod("Running"), "vms", "disk"),
        "a pod without the marks"
    );
}
