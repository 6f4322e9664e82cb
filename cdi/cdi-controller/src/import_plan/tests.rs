use cdi_api::DataVolumePhase;
use cdi_api::storage_profile::{ClaimPropertySet, StorageProfileStatus};
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::sources::insecure_registry;
use super::*;

pub(super) fn now() -> Time {
    Time(Timestamp::from_second(100).expect("time"))
}

pub(super) fn data_volume(source: &serde_json::Value) -> DataVolume {
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "disk", "namespace": "vms", "uid": "dv-uid"},
        "spec": {"source": source, "storage": {"resources": {"requests": {"storage": "1Gi"}}}}
    }))
    .expect("data volume")
}

fn http() -> DataVolume {
    data_volume(&json!({"http": {"url": "http://server/disk.img"}}))
}

fn class() -> ChosenClass {
    ChosenClass {
        name: "local".to_owned(),
        profile: Some(StorageProfileStatus {
            claim_property_sets: vec![ClaimPropertySet {
                access_modes: vec!["ReadWriteOnce".to_owned()],
                volume_mode: Some("Filesystem".to_owned()),
            }],
            ..StorageProfileStatus::default()
        }),
        filesystem_overhead: "0.055".to_owned(),
    }
}

fn settings() -> ImporterSettings {
    ImporterSettings {
        image: "cdi-importer:latest".to_owned(),
        pull_policy: "IfNotPresent".to_owned(),
        ..ImporterSettings::default()
    }
}

/// The claim a first pass creates, as the API server gives it back in `phase` with `annotations`.
pub(super) fn claim(dv: &DataVolume, phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    claim_made_by(&facts(dv, None, None), phase, annotations)
}

/// The claim a first pass over `facts` creates, as the API server gives it back in `phase` with
/// `annotations`.
pub(super) fn claim_made_by(
    facts: &ImportFacts<'_>,
    phase: &str,
    annotations: &[(&str, &str)],
) -> PersistentVolumeClaim {
    let steps = plan(facts, &now());
    let Some(Step::CreateClaim(claim)) = steps.into_iter().next() else {
        panic!("a first pass creates the claim")
    };
    let mut claim = *claim;
    claim.metadata.uid = Some("claim-uid".to_owned());
    let all = claim.metadata.annotations.get_or_insert_default();
    all.extend(annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    claim.status = Some(serde_json::from_value(json!({"phase": phase})).expect("status"));
    claim
}

pub(super) fn pod(phase: &str, state: &serde_json::Value) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": "importer-disk", "uid": "pod-uid", "ownerReferences": [
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk", "uid": "claim-uid", "controller": true}]},
        "status": {"phase": phase, "containerStatuses": [{
            "name": "importer", "image": "cdi-importer:latest", "imageID": "", "ready": false,
            "restartCount": 0, "state": state}]}
    }))
    .expect("pod")
}

static SETTINGS: std::sync::LazyLock<ImporterSettings> = std::sync::LazyLock::new(settings);
static CLASS: std::sync::LazyLock<ChosenClass> = std::sync::LazyLock::new(class);

pub(super) fn facts<'a>(
    dv: &'a DataVolume,
    claim: Option<&'a PersistentVolumeClaim>,
    pod: Option<&'a Pod>,
) -> ImportFacts<'a> {
    ImportFacts {
        data_volume: dv,
        claim,
        pod,
        scratch_claim: None,
        class: Some(&CLASS),
        wait_for_first_consumer: false,
        settings: &SETTINGS,
        progress: None,
        clone: None,
        source_ref: None,
        populator: PopulatorFacts::default(),
    }
}

pub(super) fn phase_written(steps: &[Step]) -> Option<DataVolumePhase> {
    steps.iter().find_map(|s| match s {
        Step::WriteStatus(status) => Some(status.phase),
        _ => None,
    })
}

pub(super) fn kinds(steps: &[Step]) -> Vec<&'static str> {
    steps
        .iter()
        .map(|s| match s {
            Step::CreateClaim(_) => "CreateClaim",
            Step::AnnotateClaim(_) => "AnnotateClaim",
            Step::LabelClaim(_) => "LabelClaim",
            Step::DeletePod(_) => "DeletePod",
            Step::CreatePod(_) => "CreatePod",
            Step::CreateUploadServer(_) => "CreateUploadServer",
            Step::DeleteService(_) => "DeleteService",
            Step::DeleteSecret(_) => "DeleteSecret",
            Step::CreateScratchClaim(_) => "CreateScratchClaim",
            Step::UngatePod(_) => "UngatePod",
            Step::ClaimEvent(_) => "ClaimEvent",
            Step::CreateCloneSource(_) => "CreateCloneSource",
            Step::GiveCloneSourceSecret { .. } => "GiveCloneSourceSecret",
            Step::DeleteCloneSource { .. } => "DeleteCloneSource",
            Step::AnnotateNamedClaim(..) => "AnnotateNamedClaim",
            Step::LabelNamedClaim(..) => "LabelNamedClaim",
            Step::DeleteNamedClaim(_) => "DeleteNamedClaim",
            Step::CreatePopulationSource(_) => "CreatePopulationSource",
            Step::DeletePopulationSource(..) => "DeletePopulationSource",
            Step::RebindVolume(_) => "RebindVolume",
            Step::WriteStatus(_) => "WriteStatus",
            Step::Event(_) => "Event",
        })
        .collect()
}

#[test]
fn a_new_data_volume_gets_its_claim_owned_and_annotated() {
    let dv = http();
    let steps = plan(&facts(&dv, None, None), &now());
    assert_eq!(kinds(&steps), ["CreateClaim", "WriteStatus"]);
    let Step::CreateClaim(created) = &steps[0] else {
        unreachable!()
    };
    let created = serde_json::to_value(created).expect("json");
    assert_eq!(created["metadata"]["name"], "disk");
    assert_eq!(
        created["metadata"]["ownerReferences"],
        json!([{"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "name": "disk", "uid": "dv-uid",
                "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(
        created["metadata"]["annotations"][ann::ENDPOINT],
        "http://server/disk.img"
    );
    assert_eq!(created["metadata"]["annotations"][ann::SOURCE], "http");
    assert_eq!(created["spec"]["storageClassName"], "local");
    assert_eq!(created["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Pending));
}

#[test]
fn the_importer_starts_once_the_claim_is_bound() {
    let dv = http();
    let pending = claim(&dv, "Pending", &[]);
    let steps = plan(&facts(&dv, Some(&pending), None), &now());
    assert_eq!(kinds(&steps), ["WriteStatus"], "no pod for an unbound claim");
    let bound = claim(&dv, "Bound", &[]);
    let steps = plan(&facts(&dv, Some(&bound), None), &now());
    assert_eq!(kinds(&steps), ["CreatePod", "WriteStatus"]);
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::ImportScheduled));
    let Step::CreatePod(created) = &steps[0] else {
        unreachable!()
    };
    let created = serde_json::to_value(created).expect("json");
    assert_eq!(created["metadata"]["name"], "importer-disk");
    assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "claim-uid");
    let env = &created["spec"]["containers"][0]["env"];
    // The claim's request: 1Gi grown by the filesystem overhead, which the importer takes back off.
    assert!(
        env.as_array()
            .is_some_and(|e| e.contains(&json!({"name": "IMPORTER_IMAGE_SIZE", "value": "1132797625"}))),
        "{env}"
    );
    assert!(
        env.as_array()
            .is_some_and(|e| e.contains(&json!({"name": "FILESYSTEM_OVERHEAD", "value": "0.055"})))
    );
}

#[test]
fn wait_for_first_consumer_waits_unless_immediate_binding_is_asked_for() {
    let dv = http();
    let pending = claim(&dv, "Pending", &[]);
    let mut wffc = facts(&dv, Some(&pending), None);
    wffc.wait_for_first_consumer = true;
    let steps = plan(&wffc, &now());
    assert_eq!(kinds(&steps), ["WriteStatus"]);
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::WaitForFirstConsumer));
    let immediate = claim(&dv, "Pending", &[(IMMEDIATE_BINDING, "")]);
    let mut asked = facts(&dv, Some(&immediate), None);
    asked.wait_for_first_consumer = true;
    assert_eq!(
        kinds(&plan(&asked, &now())),
        ["CreatePod", "WriteStatus"],
        "the importer is the first consumer"
    );
}

#[test]
fn the_pod_is_followed_to_completion_and_removed() {
    let dv = http();
    let bound = claim(&dv, "Bound", &[(ann::IMPORT_POD, "importer-disk")]);
    let running = pod("Running", &json!({"running": {}}));
    let steps = plan(&facts(&dv, Some(&bound), Some(&running)), &now());
    assert_eq!(kinds(&steps), ["AnnotateClaim", "WriteStatus", "Event"]);
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::ImportInProgress));

    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let done = pod(
        "Succeeded",
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}),
    );
    let steps = plan(&facts(&dv, Some(&bound), Some(&done)), &now());
    assert_eq!(
        kinds(&steps),
        ["AnnotateClaim", "ClaimEvent", "DeletePod", "WriteStatus", "Event"]
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Succeeded));
    let Step::AnnotateClaim(annotations) = &steps[0] else {
        unreachable!()
    };
    assert_eq!(annotations[ann::POD_PHASE], "Succeeded");

    let finished = claim(
        &dv,
        "Bound",
        &[(ann::IMPORT_POD, "importer-disk"), (ann::POD_PHASE, "Succeeded")],
    );
    let steps = plan(&facts(&dv, Some(&finished), None), &now());
    assert!(
        !kinds(&steps).contains(&"CreatePod"),
        "a complete claim gets no new pod"
    );
}

#[test]
fn scratch_space_replaces_the_pod_with_one_that_mounts_it() {
    let dv = http();
    let bound = claim(&dv, "Bound", &[(ann::IMPORT_POD, "importer-disk")]);
    let scratch = r#"{"scratchSpaceRequired":true,"preallocationApplied":false,"message":"Import Complete"}"#;
    let asked = pod(
        "Succeeded",
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": scratch}}),
    );
    let steps = plan(&facts(&dv, Some(&bound), Some(&asked)), &now());
    assert_eq!(&kinds(&steps)[..2], ["AnnotateClaim", "DeletePod"]);

    let needs = claim(
        &dv,
        "Bound",
        &[(ann::IMPORT_POD, "importer-disk"), (ann::REQUIRES_SCRATCH, "true")],
    );
    let steps = plan(&facts(&dv, Some(&needs), None), &now());
    let Some(Step::CreatePod(second)) = steps.iter().find(|s| matches!(s, Step::CreatePod(_))) else {
        panic!("a second pod: {steps:?}")
    };
    let second = serde_json::to_value(second).expect("json");
    assert_eq!(
        second["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"],
        "disk-scratch"
    );

    let waiting = pod("Pending", &json!({"waiting": {"reason": "ContainerCreating"}}));
    let steps = plan(&facts(&dv, Some(&needs), Some(&waiting)), &now());
    let Some(Step::CreateScratchClaim(made)) = steps.iter().find(|s| matches!(s, Step::CreateScratchClaim(_))) else {
        panic!("the scratch claim: {steps:?}")
    };
    let made = serde_json::to_value(made).expect("json");
    assert_eq!(made["metadata"]["name"], "disk-scratch");
    assert_eq!(made["metadata"]["ownerReferences"][0]["kind"], "Pod");
    assert_eq!(made["spec"]["storageClassName"], "local");
    assert_eq!(made["spec"]["resources"]["requests"]["storage"], "1132797625");
}

#[test]
fn what_cannot_go_on_says_why_once() {
    let registry = data_volume(&json!({"s3": {"url": "https://bucket.example/disk"}}));
    let steps = plan(&facts(&registry, None, None), &now());
    assert_eq!(kinds(&steps), ["WriteStatus", "Event"]);
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Failed));
    let Step::WriteStatus(status) = &steps[0] else {
        unreachable!()
    };
    let mut again = registry.clone();
    again.status = Some((**status).clone());
    assert_eq!(
        plan(&facts(&again, None, None), &now()),
        [],
        "written once, announced once"
    );

    let mut no_size = http();
    no_size.spec.storage = Some(cdi_api::StorageSpec::default());
    let steps = plan(&facts(&no_size, None, None), &now());
    let Some(Step::Event(event)) = steps.last() else {
        panic!("an event")
    };
    assert_eq!(
        (event.reason, event.message.as_str()),
        (CLAIM_NOT_VALID, "PVC Spec is not valid - missing storage size")
    );

    let dv = http();
    let mut foreign = claim(&dv, "Bound", &[]);
    foreign.metadata.owner_references = None;
    let steps = plan(&facts(&dv, Some(&foreign), None), &now());
    let Some(Step::Event(event)) = steps.last() else {
        panic!("an event")
    };
    assert_eq!(event.reason, RESOURCE_EXISTS);
    assert!(!kinds(&steps).contains(&"CreatePod"));
}

#[test]
fn a_fatal_claim_or_a_deleted_data_volume_gets_no_pod() {
    let dv = http();
    let fatal = claim(&dv, "Bound", &[(ann::FATAL_ERROR, "true"), (ann::POD_PHASE, "Failed")]);
    assert!(!kinds(&plan(&facts(&dv, Some(&fatal), None), &now())).contains(&"CreatePod"));
    let mut deleted = http();
    deleted.metadata.deletion_timestamp = Some(now());
    assert_eq!(plan(&facts(&deleted, None, None), &now()), []);
}

#[test]
fn a_claim_on_its_way_out_gets_its_importer_pod_removed() {
    let dv = http();
    let mut leaving = claim(&dv, "Bound", &[(ann::IMPORT_POD, "importer-disk")]);
    leaving.metadata.deletion_timestamp = Some(now());
    let crashing = pod("Running", &json!({"waiting": {"reason": "CrashLoopBackOff"}}));
    let steps = plan(&facts(&dv, Some(&leaving), Some(&crashing)), &now());
    assert_eq!(
        steps
            .iter()
            .filter(|s| matches!(s, Step::DeletePod(_)))
            .collect::<Vec<_>>(),
        [&Step::DeletePod("importer-disk".to_owned())]
    );
    assert!(!kinds(&steps).contains(&"CreatePod"));

    // The DataVolume deleting (foreground) or gone: the same.
    let mut deleted = http();
    deleted.metadata.deletion_timestamp = Some(now());
    assert_eq!(
        plan(&facts(&deleted, Some(&leaving), Some(&crashing)), &now()),
        [Step::DeletePod("importer-disk".to_owned())]
    );
    assert_eq!(
        orphan_steps(Some(&leaving), Some(&crashing)),
        [Step::DeletePod("importer-disk".to_owned())]
    );
    // Not while the claim stays, nor for a pod the claim does not control.
    let staying = claim(&dv, "Bound", &[]);
    assert_eq!(orphan_steps(Some(&staying), Some(&crashing)), []);
    let mut foreign = crashing.clone();
    foreign.metadata.owner_references = None;
    assert_eq!(orphan_steps(Some(&leaving), Some(&foreign)), []);
    assert_eq!(orphan_steps(None, Some(&crashing)), []);
}

#[test]
fn a_pod_of_that_name_the_claim_does_not_control_is_never_trusted() {
    let dv = http();
    let bound = claim(&dv, "Bound", &[(ann::IMPORT_POD, "importer-disk")]);
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let mut forged = pod(
        "Succeeded",
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}),
    );
    forged.metadata.owner_references = None;
    let steps = plan(&facts(&dv, Some(&bound), Some(&forged)), &now());
    assert_eq!(kinds(&steps), ["WriteStatus", "Event"]);
    assert_ne!(phase_written(&steps), Some(DataVolumePhase::Succeeded));
    let Some(Step::Event(event)) = steps.last() else {
        panic!("an event")
    };
    assert_eq!(event.reason, RESOURCE_EXISTS);
}

#[test]
fn a_scratch_claim_left_by_an_earlier_pod_sends_the_new_pod_away() {
    let dv = http();
    let needs = claim(
        &dv,
        "Bound",
        &[(ann::IMPORT_POD, "importer-disk"), (ann::REQUIRES_SCRATCH, "true")],
    );
    let waiting = pod("Pending", &json!({"waiting": {"reason": "ContainerCreating"}}));
    let stale: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "disk-scratch", "namespace": "vms", "deletionTimestamp": "2026-01-01T00:00:00Z",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "importer-disk", "uid": "old-pod", "controller": true}]}
    }))
    .expect("claim");
    let mut with_stale = facts(&dv, Some(&needs), Some(&waiting));
    with_stale.scratch_claim = Some(&stale);
    let steps = plan(&with_stale, &now());
    assert!(
        steps.contains(&Step::DeletePod("importer-disk".to_owned())),
        "{:?}",
        kinds(&steps)
    );
    assert!(!kinds(&steps).contains(&"CreateScratchClaim"));
}

#[test]
fn an_import_proxy_is_refused_rather_than_bypassed() {
    let dv = http();
    let proxied = ImporterSettings {
        import_proxy: true,
        ..settings()
    };
    let mut with_proxy = facts(&dv, None, None);
    with_proxy.settings = &proxied;
    let steps = plan(&with_proxy, &now());
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Failed));
    assert!(!kinds(&steps).contains(&"CreateClaim"));
}

#[test]
fn a_registry_import_has_scratch_space_from_its_first_pod() {
    let dv =
        data_volume(&json!({"registry": {"url": "docker://registry.disks:5000/testguest:v1", "certConfigMap": "ca"}}));
    let bound = claim(&dv, "Bound", &[]);
    let annotations = bound.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations[ann::SOURCE], "registry");
    assert_eq!(annotations[ann::ENDPOINT], "docker://registry.disks:5000/testguest:v1");
    assert_eq!(annotations[ann::REQUIRES_SCRATCH], "true");
    let steps = plan(&facts(&dv, Some(&bound), None), &now());
    let Some(Step::CreatePod(first)) = steps.iter().find(|s| matches!(s, Step::CreatePod(_))) else {
        panic!("the importer pod: {steps:?}")
    };
    let first = serde_json::to_value(first).expect("json");
    assert_eq!(
        first["spec"]["volumes"][1]["persistentVolumeClaim"]["claimName"],
        "disk-scratch"
    );
    let env = &first["spec"]["containers"][0]["env"];
    assert_eq!(env[0], json!({"name": "IMPORTER_SOURCE", "value": "registry"}));
    assert!(
        env.as_array()
            .expect("env")
            .contains(&json!({"name": "INSECURE_TLS", "value": "false"})),
        "{env}"
    );

    // A registry in CDIConfig's insecureRegistries, named by host and port as the URL has them.
    let insecure = ImporterSettings {
        insecure_registries: vec!["registry.disks:5000".to_owned()],
        ..settings()
    };
    let with_insecure = ImportFacts {
        settings: &insecure,
        ..facts(&dv, Some(&bound), None)
    };
    let steps = plan(&with_insecure, &now());
    let Some(Step::CreatePod(pod)) = steps.iter().find(|s| matches!(s, Step::CreatePod(_))) else {
        panic!("the importer pod: {steps:?}")
    };
    let env = serde_json::to_value(&pod.spec.as_ref().expect("spec").containers[0].env).expect("env");
    assert!(
        env.as_array()
            .expect("env")
            .contains(&json!({"name": "INSECURE_TLS", "value": "true"})),
        "{env}"
    );
    let source = ImportSource::Registry(dv.spec.source.clone().and_then(|s| s.registry).expect("registry"));
    for other in [
        "registry.disks",
        "registry.disks:5001",
        "docker://registry.disks:5000",
        "",
    ] {
        assert!(
            !insecure_registry(&source, &[other.to_owned()]),
            "{other:?} is another registry"
        );
    }
}

#[test]
fn registry_sources_this_cdi_does_not_pull_fail_with_the_reason() {
    let cases = [
        (
            json!({"url": "docker://r/disk", "pullMethod": "node"}),
            "registry.pullMethod node",
        ),
        (json!({"imageStream": "fedora"}), "registry.imageStream"),
        (json!({"url": "oci-archive:/disk.tar"}), "oci-archive transport"),
        (json!({"url": "http://r/disk"}), "must start with docker://"),
        (json!({}), "registry.url is not set"),
        (
            json!({"url": "docker://quay.io/Upper/Case"}),
            "registry.url: Could not parse image",
        ),
    ];
    for (registry, expected) in cases {
        let dv = data_volume(&json!({ "registry": registry }));
        let steps = plan(&facts(&dv, None, None), &now());
        assert_eq!(phase_written(&steps), Some(DataVolumePhase::Failed), "{registry}");
        let Some(Step::Event(event)) = steps.last() else {
            panic!("an event: {steps:?}")
        };
        assert_eq!(event.reason, UNSUPPORTED);
        assert!(event.message.contains(expected), "{}: {expected}", event.message);
    }
    let proxied = ImporterSettings {
        import_proxy: true,
        ..settings()
    };
    let dv = data_volume(&json!({"registry": {"url": "docker://r/disk"}}));
    let steps = plan(
        &ImportFacts {
            settings: &proxied,
            ..facts(&dv, None, None)
        },
        &now(),
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Failed));
}

#[test]
fn a_registry_image_s_labels_reach_the_claim() {
    let dv = data_volume(&json!({"registry": {"url": "docker://registry.disks:5000/testguest:v1"}}));
    let bound = claim(&dv, "Bound", &[(ann::IMPORT_POD, "importer-disk")]);
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete",
        "labels":{"instancetype.kubevirt.io/default-instancetype":"u1.medium"}}"#;
    let done = pod(
        "Succeeded",
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}),
    );
    let steps = plan(&facts(&dv, Some(&bound), Some(&done)), &now());
    let labels: Vec<_> = steps
        .iter()
        .filter_map(|s| match s {
            Step::LabelClaim(labels) => Some(labels.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        labels,
        [BTreeMap::from([(
            "instancetype.kubevirt.io/default-instancetype".to_owned(),
            "u1.medium".to_owned()
        )])]
    );
    // Labels the claim has already are not written again.
    let mut labelled = bound.clone();
    labelled.metadata.labels.get_or_insert_default().insert(
        "instancetype.kubevirt.io/default-instancetype".to_owned(),
        "u1.medium".to_owned(),
    );
    let steps = plan(&facts(&dv, Some(&labelled), Some(&done)), &now());
    assert!(!kinds(&steps).contains(&"LabelClaim"), "{steps:?}");
}

#[test]
fn a_source_ref_without_a_source_waits_and_one_of_another_kind_fails() {
    let dv = data_volume(&json!({"pvc": {"namespace": "images", "name": "golden"}}));
    let missing = SourceRefProblem::Waiting("DataSource images/golden not found".to_owned());
    let waiting = ImportFacts {
        source_ref: Some(&missing),
        ..facts(&dv, None, None)
    };
    let steps = plan(&waiting, &now());
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Pending));
    assert!(
        steps.iter().any(|s| matches!(s, Step::Event(e) if e.reason == clone::WITHOUT_SOURCE && e.message == "DataSource images/golden not found")),
        "{steps:?}"
    );
    assert!(!steps.iter().any(|s| matches!(s, Step::CreateClaim(_))), "no claim yet");

    let kind = SourceRefProblem::Unsupported("DataVolume sourceRef kind PVC not supported".to_owned());
    let other_kind = ImportFacts {
        source_ref: Some(&kind),
        ..facts(&dv, None, None)
    };
    assert_eq!(phase_written(&plan(&other_kind, &now())), Some(DataVolumePhase::Failed));
}

#[test]
fn a_resolved_source_ref_is_cloned_as_its_claim() {
    let mut dv = data_volume(&json!({"blank": {}}));
    dv.spec.source = None;
    dv.spec.source_ref = Some(cdi_api::data_volume::DataVolumeSourceRef {
        kind: "DataSource".to_owned(),
        namespace: Some("images".to_owned()),
        name: "golden".to_owned(),
    });
    let resolved: cdi_api::DataVolumeSource =
        serde_json::from_value(json!({"pvc": {"namespace": "images", "name": "disk"}})).expect("a source");
    let effective = with_source(&dv, resolved);
    assert_eq!(effective.spec.source_ref, None);
    assert_eq!(
        transfer(&effective),
        Some(Transfer::Clone {
            namespace: "images".to_owned(),
            name: "disk".to_owned()
        })
    );
    assert_eq!(effective.metadata, dv.metadata, "the same DataVolume");
}
