//! The import populator's flow, pass by pass: the target naming its VolumeImportSource,
//! `PendingPopulation` until a node is chosen, the prime claim on that node, its importer, the
//! annotations and progress copied to the target, the rebinding, the prime's removal.

use cdi_api::DataVolumePhase;
use k8s_openapi::api::core::v1::PersistentVolume;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::super::tests::{data_volume, facts, kinds, now, phase_written, pod};
use super::*;
use crate::import_plan::plan;

fn http() -> DataVolume {
    data_volume(&json!({"http": {"url": "http://server/disk.img"}}))
}

pub(super) fn status_written(steps: &[Step]) -> &DataVolumeStatus {
    steps
        .iter()
        .find_map(|s| match s {
            Step::WriteStatus(status) => Some(&**status),
            _ => None,
        })
        .expect("a status write")
}

/// The target a first pass over a CSI class creates, as the API server gives it back.
pub(super) fn target(dv: &DataVolume, phase: &str, annotations: &[(&str, &str)]) -> PersistentVolumeClaim {
    let mut first = facts(dv, None, None);
    first.populator.csi_class = true;
    let steps = plan(&first, &now());
    let Some(Step::CreateClaim(claim)) = steps.into_iter().find(|s| matches!(s, Step::CreateClaim(_))) else {
        panic!("a first pass creates the target")
    };
    let mut claim = *claim;
    claim.metadata.uid = Some("claim-uid".to_owned());
    claim.metadata.resource_version = Some("7".to_owned());
    let all = claim.metadata.annotations.get_or_insert_default();
    all.extend(annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    claim.status = Some(serde_json::from_value(json!({"phase": phase})).expect("status"));
    claim
}

/// The prime a pass over `target` creates, as the API server gives it back.
pub(super) fn prime(
    dv: &DataVolume,
    target: &PersistentVolumeClaim,
    phase: &str,
    annotations: &[(&str, &str)],
) -> PersistentVolumeClaim {
    let steps = plan(&facts(dv, Some(target), None), &now());
    let Some(Step::CreateClaim(claim)) = steps.into_iter().find(|s| matches!(s, Step::CreateClaim(_))) else {
        panic!("the pass creates the prime")
    };
    let mut claim = *claim;
    claim.metadata.uid = Some("prime-uid".to_owned());
    claim
        .metadata
        .annotations
        .get_or_insert_default()
        .extend(annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
    claim.spec.get_or_insert_default().volume_name = (phase != "Pending").then(|| "pvc-1".to_owned());
    claim.status = Some(serde_json::from_value(json!({"phase": phase})).expect("status"));
    claim
}

fn prime_pod(phase: &str, state: &serde_json::Value) -> k8s_openapi::api::core::v1::Pod {
    let mut pod = pod(phase, state);
    pod.metadata.name = Some("importer-prime-claim-uid".to_owned());
    let owner = &mut pod.metadata.owner_references.get_or_insert_default()[0];
    owner.uid = "prime-uid".to_owned();
    owner.name = "prime-claim-uid".to_owned();
    pod
}

pub(super) fn volume(bound_to: (&str, &str)) -> PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": "pvc-1", "resourceVersion": "3"},
        "spec": {"claimRef": {"namespace": "vms", "name": bound_to.0, "uid": bound_to.1}}
    }))
    .expect("volume")
}

pub(super) fn annotations_of(steps: &[Step], target_claim: bool) -> &BTreeMap<String, String> {
    steps
        .iter()
        .find_map(|s| match s {
            Step::AnnotateClaim(a) if target_claim => Some(a),
            Step::AnnotateNamedClaim(_, a) if !target_claim => Some(a),
            _ => None,
        })
        .expect("annotations")
}

/// The first pass over a DataVolume into a CSI class: its source object's kind and JSON, and its
/// target claim, made before its status is written.
pub(super) fn first_csi_pass(dv: &DataVolume) -> (SourceKind, serde_json::Value, PersistentVolumeClaim) {
    let mut first = facts(dv, None, None);
    first.populator.csi_class = true;
    let steps = plan(&first, &now());
    assert_eq!(kinds(&steps), ["CreatePopulationSource", "CreateClaim", "WriteStatus"]);
    let mut steps = steps.into_iter();
    match (steps.next(), steps.next()) {
        (Some(Step::CreatePopulationSource(source)), Some(Step::CreateClaim(claim))) => {
            let json = match &source {
                PopulationSource::Import(object) => serde_json::to_value(object),
                PopulationSource::Upload(object) => serde_json::to_value(object),
            };
            (source.kind(), json.expect("json"), *claim)
        }
        other => panic!("the source, then the claim: {other:?}"),
    }
}

#[test]
fn an_import_into_a_csi_class_names_its_volume_import_source() {
    let dv = http();
    let (kind, source, claim) = first_csi_pass(&dv);
    assert_eq!(kind, SourceKind::Import);
    assert_eq!(source["metadata"]["name"], "volume-import-source-dv-uid");
    assert_eq!(source["metadata"]["ownerReferences"][0]["kind"], "DataVolume");
    assert_eq!(
        source["spec"]["source"],
        json!({"http": {"url": "http://server/disk.img"}})
    );
    let claim = serde_json::to_value(&claim).expect("json");
    assert_eq!(
        claim["spec"]["dataSourceRef"],
        json!({"apiGroup": "cdi.kubevirt.io", "kind": "VolumeImportSource", "name": "volume-import-source-dv-uid"})
    );
    assert_eq!(
        claim["metadata"]["annotations"].get(ann::ENDPOINT),
        None,
        "the prime has the source"
    );

    // Not a CSI class, or the DataVolume says no: filled in place.
    let steps = plan(&facts(&dv, None, None), &now());
    assert_eq!(kinds(&steps), ["CreateClaim", "WriteStatus"]);
    let mut declined = dv.clone();
    declined.metadata.annotations = Some(BTreeMap::from([(USE_POPULATOR.to_owned(), "false".to_owned())]));
    let mut csi = facts(&declined, None, None);
    csi.populator.csi_class = true;
    assert_eq!(kinds(&plan(&csi, &now())), ["CreateClaim", "WriteStatus"]);
    let mut unclear = dv.clone();
    unclear.metadata.annotations = Some(BTreeMap::from([(USE_POPULATOR.to_owned(), "maybe".to_owned())]));
    let mut csi = facts(&unclear, None, None);
    csi.populator.csi_class = true;
    let steps = plan(&csi, &now());
    assert_eq!(kinds(&steps), ["WriteStatus", "Event"]);
    let message = &status_written(&steps).conditions[0].state.message;
    assert!(
        message.as_deref().is_some_and(|m| m.contains(USE_POPULATOR)),
        "{message:?}"
    );
}

#[test]
fn an_unbound_target_waits_for_its_first_consumer_as_pending_population() {
    let dv = http();
    let pending = target(&dv, "Pending", &[]);
    let mut waiting = facts(&dv, Some(&pending), None);
    waiting.wait_for_first_consumer = true;
    let steps = plan(&waiting, &now());
    assert_eq!(kinds(&steps), ["WriteStatus"], "no prime before a node is chosen");
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::PendingPopulation));

    let chosen = target(&dv, "Pending", &[(SELECTED_NODE, "node-b")]);
    let mut scheduled = facts(&dv, Some(&chosen), None);
    scheduled.wait_for_first_consumer = true;
    let steps = plan(&scheduled, &now());
    assert_eq!(kinds(&steps), ["CreateClaim", "WriteStatus"]);
    let Step::CreateClaim(prime) = &steps[0] else {
        unreachable!()
    };
    let prime = serde_json::to_value(prime).expect("json");
    assert_eq!(prime["metadata"]["name"], "prime-claim-uid");
    assert_eq!(
        prime["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk", "uid": "claim-uid",
                "controller": true, "blockOwnerDeletion": true}])
    );
    let annotations = &prime["metadata"]["annotations"];
    assert_eq!(annotations[SELECTED_NODE], "node-b");
    assert_eq!(annotations[IMMEDIATE_BINDING], "");
    assert_eq!(annotations[ann::ENDPOINT], "http://server/disk.img");
    assert_eq!(annotations[POPULATOR_KIND], "VolumeImportSource");
    assert_eq!(prime["spec"].get("dataSourceRef"), None);
    assert_eq!(prime["spec"]["storageClassName"], "local");
}

#[test]
fn the_prime_is_filled_and_its_annotations_and_progress_reach_the_target() {
    let dv = http();
    let pending = target(&dv, "Pending", &[]);
    let bound = prime(&dv, &pending, "Bound", &[]);
    let mut first = facts(&dv, Some(&pending), None);
    first.populator.prime = Some(&bound);
    let steps = plan(&first, &now());
    assert_eq!(kinds(&steps), ["CreatePod", "AnnotateClaim", "WriteStatus"]);
    let Step::CreatePod(created) = &steps[0] else {
        unreachable!()
    };
    let created = serde_json::to_value(created).expect("json");
    assert_eq!(created["metadata"]["name"], "importer-prime-claim-uid");
    assert_eq!(created["metadata"]["ownerReferences"][0]["uid"], "prime-uid");
    assert_eq!(created["metadata"]["annotations"][DATA_VOLUME_OF_POD], "vms/disk");
    let copied = annotations_of(&steps, true);
    assert_eq!(copied[PRIME_NAME], "prime-claim-uid");
    assert_eq!(copied[PROGRESS], "N/A");
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::ImportScheduled));

    let importing = prime(&dv, &pending, "Bound", &[(ann::IMPORT_POD, "importer-prime-claim-uid")]);
    let running = prime_pod("Running", &json!({"running": {}}));
    let mut second = facts(&dv, Some(&pending), Some(&running));
    second.populator.prime = Some(&importing);
    second.progress = Some(42.5);
    let steps = plan(&second, &now());
    assert_eq!(annotations_of(&steps, false)[ann::POD_PHASE], "Running", "the prime's");
    let copied = annotations_of(&steps, true);
    assert_eq!(copied[ann::POD_PHASE], "Running");
    assert_eq!(copied[PROGRESS], "42.50%");
    let status = status_written(&steps);
    assert_eq!(status.phase, DataVolumePhase::ImportInProgress);
    assert_eq!(status.progress.as_deref(), Some("42.50%"));
    assert!(
        !kinds(&steps).contains(&"RebindVolume"),
        "nothing is rebound before the import is done"
    );
}

#[test]
fn a_filled_prime_s_volume_is_rebound_to_the_target_and_the_prime_goes() {
    let dv = http();
    let pending = target(&dv, "Pending", &[]);
    let importing = prime(&dv, &pending, "Bound", &[(ann::IMPORT_POD, "importer-prime-claim-uid")]);
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    let done = prime_pod(
        "Succeeded",
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}),
    );
    let held = volume(("prime-claim-uid", "prime-uid"));
    let mut pass = facts(&dv, Some(&pending), Some(&done));
    pass.populator.prime = Some(&importing);
    pass.populator.prime_volume = Some(&held);
    pass.populator.source_object = true;
    let steps = plan(&pass, &now());
    let order = kinds(&steps);
    let annotate = order
        .iter()
        .position(|k| *k == "AnnotateClaim")
        .expect("target annotated");
    let rebind = order.iter().position(|k| *k == "RebindVolume").expect("rebound");
    assert!(
        annotate < rebind,
        "the target has the prime's annotations before it binds: {order:?}"
    );
    assert_eq!(annotations_of(&steps, true)[ann::POD_PHASE], "Succeeded");
    assert_eq!(annotations_of(&steps, true)[PROGRESS], "100.0%");
    let Step::RebindVolume(rebound) = &steps[rebind] else {
        unreachable!()
    };
    let reference = rebound
        .spec
        .as_ref()
        .and_then(|s| s.claim_ref.as_ref())
        .expect("claimRef");
    assert_eq!(
        (
            reference.name.as_deref(),
            reference.uid.as_deref(),
            reference.resource_version.as_deref()
        ),
        (Some("disk"), Some("claim-uid"), Some("7"))
    );
    assert_eq!(
        rebound.metadata.resource_version.as_deref(),
        Some("3"),
        "a replace of the version read"
    );
    assert!(order.contains(&"DeletePopulationSource"));
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Succeeded));

    // A volume the target has already, or a third claim's, is not touched again.
    for claim_ref in [("disk", "claim-uid"), ("other", "other-uid")] {
        let elsewhere = volume(claim_ref);
        let complete_prime = prime(
            &dv,
            &pending,
            "Bound",
            &[
                (ann::IMPORT_POD, "importer-prime-claim-uid"),
                (ann::POD_PHASE, "Succeeded"),
            ],
        );
        let mut again = facts(&dv, Some(&pending), None);
        again.populator.prime = Some(&complete_prime);
        again.populator.prime_volume = Some(&elsewhere);
        assert!(!kinds(&plan(&again, &now())).contains(&"RebindVolume"), "{claim_ref:?}");
    }

    // The target bound, the prime left Lost: the prime goes.
    let filled = target(
        &dv,
        "Bound",
        &[(ann::POD_PHASE, "Succeeded"), (PRIME_NAME, "prime-claim-uid")],
    );
    let lost = prime(&dv, &pending, "Lost", &[(ann::POD_PHASE, "Succeeded")]);
    let mut cleanup_pass = facts(&dv, Some(&filled), None);
    cleanup_pass.populator.prime = Some(&lost);
    let steps = plan(&cleanup_pass, &now());
    assert!(
        steps
            .iter()
            .any(|s| matches!(s, Step::DeleteNamedClaim(n) if n == "prime-claim-uid")),
        "{steps:?}"
    );
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Succeeded));

    // A prime whose pod is kept stays too.
    let kept = prime(
        &dv,
        &pending,
        "Lost",
        &[(ann::POD_PHASE, "Succeeded"), (ann::POD_RETAIN, "true")],
    );
    let mut retained = facts(&dv, Some(&filled), None);
    retained.populator.prime = Some(&kept);
    assert!(!kinds(&plan(&retained, &now())).contains(&"DeleteNamedClaim"));
}

#[test]
fn a_failed_import_fails_the_data_volume_and_binds_nothing() {
    let dv = http();
    let pending = target(&dv, "Pending", &[]);
    let failed = prime(
        &dv,
        &pending,
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-prime-claim-uid"),
            (ann::POD_PHASE, "Failed"),
            (ann::FATAL_ERROR, "true"),
        ],
    );
    let held = volume(("prime-claim-uid", "prime-uid"));
    let mut pass = facts(&dv, Some(&pending), None);
    pass.populator.prime = Some(&failed);
    pass.populator.prime_volume = Some(&held);
    let steps = plan(&pass, &now());
    assert_eq!(annotations_of(&steps, true)[ann::FATAL_ERROR], "true");
    assert!(!kinds(&steps).contains(&"RebindVolume"));
    assert!(!kinds(&steps).contains(&"CreatePod"), "a fatal import gets no new pod");
    assert_eq!(phase_written(&steps), Some(DataVolumePhase::Failed));
}

#[test]
fn a_pod_of_the_prime_s_name_the_prime_does_not_control_is_refused() {
    let dv = http();
    let pending = target(&dv, "Pending", &[]);
    let bound = prime(&dv, &pending, "Bound", &[]);
    let stranger = pod("Running", &json!({"running": {}}));
    let mut pass = facts(&dv, Some(&pending), Some(&stranger));
    pass.populator.prime = Some(&bound);
    let steps = plan(&pass, &now());
    assert!(!kinds(&steps).contains(&"CreatePod"));
    assert!(
        steps
            .iter()
            .any(|s| matches!(s, Step::Event(e) if e.reason == crate::import_plan::RESOURCE_EXISTS)),
        "{steps:?}"
    );
}

#[test]
fn the_prime_s_importer_runs_on_the_chosen_node_and_the_phase_waits_for_the_prime_to_bind() {
    let dv = http();
    let chosen = target(&dv, "Pending", &[(SELECTED_NODE, "node-b")]);
    let mut waiting = facts(&dv, Some(&chosen), None);
    waiting.wait_for_first_consumer = true;
    let unbound = prime(&dv, &chosen, "Pending", &[]);
    waiting.populator.prime = Some(&unbound);
    let steps = plan(&waiting, &now());
    let Some(Step::CreatePod(pod)) = steps.iter().find(|s| matches!(s, Step::CreatePod(_))) else {
        panic!("the importer: {steps:?}")
    };
    assert_eq!(pod.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("node-b"));
    let with_pod = prime(
        &dv,
        &chosen,
        "Pending",
        &[(ann::IMPORT_POD, "importer-prime-claim-uid")],
    );
    let scheduled = prime_pod("Pending", &json!({"waiting": {"reason": "ContainerCreating"}}));
    let mut second = facts(&dv, Some(&chosen), Some(&scheduled));
    second.wait_for_first_consumer = true;
    second.populator.prime = Some(&with_pod);
    let mut dv_pending = dv.clone();
    dv_pending.status = Some(DataVolumeStatus {
        phase: DataVolumePhase::PendingPopulation,
        ..DataVolumeStatus::default()
    });
    second.data_volume = &dv_pending;
    let steps = plan(&second, &now());
    assert_ne!(
        phase_written(&steps),
        Some(DataVolumePhase::ImportScheduled),
        "not before the prime is bound: {steps:?}"
    );
}

#[test]
fn only_kubevirt_labels_reach_the_target_and_none_is_overwritten() {
    assert!(copied_label("instancetype.kubevirt.io/default-instancetype"));
    assert!(copied_label("kubevirt.io/os"));
    assert!(!copied_label("app"));
    assert!(!copied_label("velero.io/exclude-from-backup"));
    assert!(!copied_label(".kubevirt.io/x"));
    assert!(!copied_label("evil.io/kubevirt.io"));

    let dv = http();
    let mut pending = target(&dv, "Pending", &[]);
    pending
        .metadata
        .labels
        .get_or_insert_default()
        .insert("kubevirt.io/os".to_owned(), "mine".to_owned());
    let mut done = prime(
        &dv,
        &pending,
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-prime-claim-uid"),
            (ann::POD_PHASE, "Succeeded"),
        ],
    );
    let labels = done.metadata.labels.get_or_insert_default();
    assert_eq!(
        labels.get("velero.io/exclude-from-backup").map(String::as_str),
        Some("true")
    );
    labels.insert("kubevirt.io/os".to_owned(), "theirs".to_owned());
    labels.insert(
        "instancetype.kubevirt.io/default-preference".to_owned(),
        "fedora".to_owned(),
    );
    let mut pass = facts(&dv, Some(&pending), None);
    pass.populator.prime = Some(&done);
    let steps = plan(&pass, &now());
    let copied = steps
        .iter()
        .find_map(|s| match s {
            Step::LabelClaim(labels) => Some(labels.clone()),
            _ => None,
        })
        .expect("labels");
    assert_eq!(
        copied,
        BTreeMap::from([(
            "instancetype.kubevirt.io/default-preference".to_owned(),
            "fedora".to_owned()
        )])
    );
}

#[test]
fn a_volume_bound_to_a_third_claim_is_said_and_left_alone() {
    let dv = http();
    let pending = target(&dv, "Pending", &[]);
    let done = prime(
        &dv,
        &pending,
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-prime-claim-uid"),
            (ann::POD_PHASE, "Succeeded"),
        ],
    );
    let elsewhere = volume(("other", "other-uid"));
    let mut pass = facts(&dv, Some(&pending), None);
    pass.populator.prime = Some(&done);
    pass.populator.prime_volume = Some(&elsewhere);
    let steps = plan(&pass, &now());
    assert!(!kinds(&steps).contains(&"RebindVolume"));
    assert!(
        steps
            .iter()
            .any(|s| matches!(s, Step::Event(e) if e.reason == REBIND_FAILED
            && e.message == "PV pvc-1 bound to unexpected claim other")),
        "{steps:?}"
    );
}

#[test]
fn the_populator_is_refused_for_an_in_tree_class() {
    let mut dv = http();
    dv.metadata.annotations = Some(BTreeMap::from([(USE_POPULATOR.to_owned(), "true".to_owned())]));
    let mut in_tree = facts(&dv, None, None);
    in_tree.populator.in_tree_class = true;
    let steps = plan(&in_tree, &now());
    assert!(!kinds(&steps).contains(&"CreateClaim"), "{steps:?}");
    let message = &status_written(&steps).conditions[0].state.message;
    assert!(message.as_deref().is_some_and(|m| m.contains("in-tree")), "{message:?}");
}

#[test]
fn the_prime_s_scratch_claim_is_placed_on_the_chosen_node() {
    let dv = data_volume(&json!({"registry": {"url": "docker://registry:5000/disks/guest:v1"}}));
    let chosen = target(&dv, "Pending", &[(SELECTED_NODE, "node-b")]);
    let bound = prime(&dv, &chosen, "Bound", &[(ann::IMPORT_POD, "importer-prime-claim-uid")]);
    assert_eq!(
        bound
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ann::REQUIRES_SCRATCH))
            .map(String::as_str),
        Some("true"),
        "a registry import has scratch space from its first pod"
    );
    let waiting = prime_pod("Pending", &json!({"waiting": {"reason": "ContainerCreating"}}));
    let mut pass = facts(&dv, Some(&chosen), Some(&waiting));
    pass.wait_for_first_consumer = true;
    pass.populator.prime = Some(&bound);
    let steps = plan(&pass, &now());
    let Some(Step::CreateScratchClaim(scratch)) = steps.iter().find(|s| matches!(s, Step::CreateScratchClaim(_)))
    else {
        panic!("the scratch claim: {steps:?}")
    };
    let scratch = serde_json::to_value(scratch).expect("json");
    assert_eq!(scratch["metadata"]["name"], "prime-claim-uid-scratch");
    assert_eq!(scratch["metadata"]["annotations"][SELECTED_NODE], "node-b");
    assert_eq!(scratch["metadata"]["labels"][EXCLUDE_FROM_BACKUP], "true");
}

#[test]
fn labels_the_importer_reports_in_the_last_pass_reach_the_target() {
    let dv = data_volume(&json!({"registry": {"url": "docker://registry:5000/disks/guest:v1"}}));
    let pending = target(&dv, "Pending", &[]);
    let importing = prime(&dv, &pending, "Bound", &[(ann::IMPORT_POD, "importer-prime-claim-uid")]);
    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete",
        "labels":{"instancetype.kubevirt.io/default-instancetype":"u1.medium"}}"#;
    let done = prime_pod(
        "Succeeded",
        &json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}),
    );
    let held = volume(("prime-claim-uid", "prime-uid"));
    let mut pass = facts(&dv, Some(&pending), Some(&done));
    pass.populator.prime = Some(&importing);
    pass.populator.prime_volume = Some(&held);
    let steps = plan(&pass, &now());
    let target_labels = steps
        .iter()
        .find_map(|s| match s {
            Step::LabelClaim(labels) => Some(labels.clone()),
            _ => None,
        })
        .expect("the target's labels");
    assert_eq!(
        target_labels
            .get("instancetype.kubevirt.io/default-instancetype")
            .map(String::as_str),
        Some("u1.medium")
    );
    assert!(kinds(&steps).contains(&"RebindVolume"));
}

#[test]
fn a_volume_that_cannot_be_rebound_is_said_once() {
    let mut dv = http();
    dv.status = Some(DataVolumeStatus {
        phase: DataVolumePhase::Succeeded,
        ..DataVolumeStatus::default()
    });
    let pending = target(&dv, "Pending", &[]);
    let done = prime(
        &dv,
        &pending,
        "Bound",
        &[
            (ann::IMPORT_POD, "importer-prime-claim-uid"),
            (ann::POD_PHASE, "Succeeded"),
        ],
    );
    let elsewhere = volume(("other", "other-uid"));
    let mut again = facts(&dv, Some(&pending), None);
    again.populator.prime = Some(&done);
    again.populator.prime_volume = Some(&elsewhere);
    let steps = plan(&again, &now());
    assert!(
        !steps.iter().any(|s| matches!(s, Step::Event(_))),
        "said when it succeeded, not on every pass: {steps:?}"
    );
}
