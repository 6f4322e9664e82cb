use cdi_api::DataVolumePhase;
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::cdi_pki::FixedCertificates;
use crate::cluster_api::fake::FakeCdiApi;
use crate::import_progress::FakeMetrics;

pub(super) fn now() -> Time {
    Time(Timestamp::from_second(100).expect("time"))
}

pub(super) fn settings() -> ImporterSettings {
    ImporterSettings {
        image: "cdi-importer:latest".to_owned(),
        pull_policy: "IfNotPresent".to_owned(),
        ..ImporterSettings::default()
    }
}

fn data_volume() -> DataVolume {
    serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "disk", "namespace": "vms", "uid": "dv-uid"},
        "spec": {"source": {"http": {"url": "http://server/disk.img"}},
                 "storage": {"resources": {"requests": {"storage": "1Gi"}}}}
    }))
    .expect("data volume")
}

/// A default class without a provisioner, with one static volume: its modes are the profile's.
pub(super) fn api() -> FakeCdiApi {
    let api = FakeCdiApi::default();
    {
        let mut state = api.state();
        state.classes =
            vec![serde_json::from_value(json!({
            "metadata": {"name": "local", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "Immediate"
        }))
        .expect("class")];
        state.volumes = vec![
            serde_json::from_value(json!({
                "metadata": {"name": "pv0"},
                "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"], "volumeMode": "Filesystem",
                         "capacity": {"storage": "2Gi"}, "hostPath": {"path": "/srv/pv0"}}
            }))
            .expect("volume"),
        ];
    }
    api
}

/// One pass with the status the fake holds, as the controller's cache would give it.
async fn pass(api: &FakeCdiApi) -> Vec<String> {
    pass_reading(api, &FakeMetrics::default()).await.0
}

/// [`pass`] with the importers' metrics pages in `metrics`; gives the writes and what is next.
async fn pass_reading(api: &FakeCdiApi, metrics: &FakeMetrics) -> (Vec<String>, Next) {
    api.state()
        .data_volumes
        .entry("vms/disk".to_owned())
        .or_insert_with(data_volume);
    let next = reconcile(api, metrics, &FixedCertificates, "vms", "disk", &settings(), &now())
        .await
        .expect("pass");
    (api.take_writes(), next)
}

/// What a pass over `namespace/name` says is next.
async fn next_of(api: &FakeCdiApi, name: &str) -> Next {
    reconcile(
        api,
        &FakeMetrics::default(),
        &FixedCertificates,
        "vms",
        name,
        &settings(),
        &now(),
    )
    .await
    .expect("pass")
}

fn set_claim_phase(api: &FakeCdiApi, phase: &str) {
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        claim.metadata.uid = Some("claim-uid".to_owned());
        claim.status = serde_json::from_value(json!({"phase": phase})).ok();
    }
}

fn set_pod_status(api: &FakeCdiApi, status: &serde_json::Value) {
    if let Some(pod) = api.state().pods.get_mut("vms/importer-disk") {
        pod.status = serde_json::from_value(status.clone()).ok();
    }
}

pub(super) fn phase(api: &FakeCdiApi) -> DataVolumePhase {
    api.state()
        .statuses
        .get("vms/disk")
        .map(|s| s.phase)
        .unwrap_or_default()
}

#[tokio::test]
async fn an_import_runs_from_claim_to_success_and_then_rests() {
    let api = api();
    assert_eq!(pass(&api).await, ["create claim vms/disk", "status vms/disk Pending"]);
    let claim = api.state().claims["vms/disk"].clone();
    let spec = claim.spec.expect("spec");
    assert_eq!(spec.storage_class_name.as_deref(), Some("local"), "the default class");
    assert_eq!(
        spec.access_modes,
        Some(vec!["ReadWriteOnce".to_owned()]),
        "the profile from the class's volumes"
    );
    set_claim_phase(&api, "Pending");
    assert_eq!(
        pass(&api).await,
        ["status vms/disk Pending"],
        "the claim's name and Bound condition"
    );
    assert_eq!(
        pass(&api).await,
        Vec::<String>::new(),
        "nothing changes while the claim is pending"
    );

    set_claim_phase(&api, "Bound");
    assert_eq!(
        pass(&api).await,
        ["create pod vms/importer-disk", "status vms/disk ImportScheduled"]
    );
    let pod = api.state().pods["vms/importer-disk"].clone();
    let env = serde_json::to_value(&pod.spec.expect("spec").containers[0].env).expect("env");
    assert!(
        env.as_array()
            .is_some_and(|e| e.contains(&json!({"name": "FILESYSTEM_OVERHEAD", "value": "0.06"}))),
        "{env}"
    );

    set_pod_status(
        &api,
        &json!({"phase": "Running", "containerStatuses": [{"name": "importer", "image": "i", "imageID": "",
        "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
    );
    let writes = pass(&api).await;
    assert_eq!(
        writes[0],
        "annotate claim vms/disk condition.running,condition.running.message,condition.running.reason,import.importPodName,pod.phase,pod.restarts,pod.schedulable"
    );
    assert_eq!(
        writes[1..],
        [
            "status vms/disk ImportInProgress",
            "event DataVolume disk Normal ImportInProgress"
        ]
    );

    // The running importer's progress, read from its metrics.
    assert_eq!(
        api.state().statuses["vms/disk"].progress.as_deref(),
        Some("N/A"),
        "upstream's placeholder"
    );
    set_pod_status(
        &api,
        &json!({"phase": "Running", "podIP": "10.244.1.7", "containerStatuses": [{"name": "importer", "image": "i",
        "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}}]}),
    );
    let metrics = FakeMetrics::default();
    let uid = data_volume().metadata.uid.expect("uid");
    metrics.0.lock().expect("metrics").insert(
        "10.244.1.7".to_owned(),
        format!("kubevirt_cdi_import_progress_total{{ownerUID=\"{uid}\"}} 45.678\n"),
    );
    let (writes, next) = pass_reading(&api, &metrics).await;
    assert_eq!(writes, ["status vms/disk ImportInProgress"]);
    assert_eq!(api.state().statuses["vms/disk"].progress.as_deref(), Some("45.68%"));
    assert_eq!(next, Next::Soon, "looked at again soon while the importer runs");
    let (writes, _) = pass_reading(&api, &FakeMetrics::default()).await;
    assert_eq!(
        writes,
        Vec::<String>::new(),
        "a pod that does not answer leaves the progress"
    );

    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    set_pod_status(
        &api,
        &json!({"phase": "Succeeded", "containerStatuses": [{"name": "importer", "image": "i", "imageID": "",
        "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}}]}),
    );
    let writes = pass(&api).await;
    assert_eq!(
        writes[1..],
        [
            "event PersistentVolumeClaim disk Normal ImportSucceeded",
            "delete pod vms/importer-disk",
            "status vms/disk Succeeded",
            "event DataVolume disk Normal ImportSucceeded",
        ]
    );
    assert_eq!(phase(&api), DataVolumePhase::Succeeded);
    assert_eq!(pass(&api).await, Vec::<String>::new(), "a finished import rests");
    assert_eq!(next_of(&api, "disk").await, Next::Rest);
}

#[tokio::test]
async fn cdi_config_sets_the_overhead_and_a_missing_class_is_named() {
    let api = api();
    api.state().config = serde_json::from_value(json!({
        "metadata": {"name": "config"}, "spec": {},
        "status": {"filesystemOverhead": {"global": "0.1", "storageClass": {"local": "0.2"}}}
    }))
    .ok();
    pass(&api).await;
    set_claim_phase(&api, "Bound");
    pass(&api).await;
    let pod = api.state().pods["vms/importer-disk"].clone();
    let env = serde_json::to_value(&pod.spec.expect("spec").containers[0].env).expect("env");
    assert!(
        env.as_array()
            .is_some_and(|e| e.contains(&json!({"name": "FILESYSTEM_OVERHEAD", "value": "0.2"}))),
        "{env}"
    );

    let empty = FakeCdiApi::default();
    let writes = pass(&empty).await;
    assert_eq!(
        next_of(&empty, "gone").await,
        Next::Rest,
        "a DataVolume that is gone rests"
    );
    assert_eq!(
        writes,
        [
            "status vms/disk Pending",
            "event DataVolume disk Warning ErrClaimNotValid"
        ]
    );
    let status = empty.state().statuses["vms/disk"].clone();
    let bound = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "Bound")
        .expect("Bound");
    assert_eq!(
        bound.state.message.as_deref(),
        Some("PVC spec is missing accessMode and no storageClass to choose profile")
    );
}

#[tokio::test]
async fn an_empty_class_name_means_no_class_even_with_a_default() {
    let api = api();
    let mut static_claim = data_volume();
    if let Some(storage) = static_claim.spec.storage.as_mut() {
        storage.storage_class_name = Some(String::new());
        storage.access_modes = vec!["ReadWriteOnce".to_owned()];
    }
    api.state().data_volumes.insert("vms/disk".to_owned(), static_claim);
    assert_eq!(pass(&api).await, ["create claim vms/disk", "status vms/disk Pending"]);
    let claim = api.state().claims["vms/disk"].clone();
    let spec = claim.spec.expect("spec");
    assert_eq!(
        spec.storage_class_name.as_deref(),
        Some(""),
        "bound to a static volume, not the default class"
    );
    let request = spec
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").cloned());
    assert_eq!(
        request.map(|q| q.0).as_deref(),
        Some("1073741824"),
        "no class, no overhead"
    );
}

#[tokio::test]
async fn a_claim_left_deleting_by_its_data_volume_gets_its_importer_pod_removed() {
    let api = api();
    pass(&api).await;
    set_claim_phase(&api, "Bound");
    pass(&api).await;
    assert!(api.state().pods.contains_key("vms/importer-disk"));
    // The DataVolume is deleted; the garbage collector marks its claim, which waits for its pod.
    api.state().data_volumes.clear();
    let created = api.state().pods["vms/importer-disk"].clone();
    let mut pod = created;
    pod.metadata.owner_references = serde_json::from_value(json!([
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk", "uid": "claim-uid", "controller": true}
    ]))
    .ok();
    api.state().pods.insert("vms/importer-disk".to_owned(), pod);
    release_claim(&api, "vms", "disk").await.expect("pass");
    assert_eq!(
        api.take_writes(),
        Vec::<String>::new(),
        "the claim stays: so does the pod"
    );
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        claim.metadata.deletion_timestamp = Some(now());
    }
    release_claim(&api, "vms", "disk").await.expect("pass");
    assert_eq!(api.take_writes(), ["delete pod vms/importer-disk"]);
    release_claim(&api, "vms", "gone")
        .await
        .expect("a claim that is not there");
    assert_eq!(api.take_writes(), Vec::<String>::new());
}

#[tokio::test]
async fn an_upload_server_is_made_with_its_service_and_certificate_and_its_claim_released() {
    let api = api();
    let mut upload = data_volume();
    upload.spec.source = serde_json::from_value(json!({"upload": {}})).ok();
    api.state().data_volumes.insert("vms/disk".to_owned(), upload);
    pass(&api).await;
    set_claim_phase(&api, "Bound");
    let writes = pass(&api).await;
    assert_eq!(
        writes,
        [
            "create service vms/cdi-upload-disk",
            "put secret vms/cdi-upload-disk",
            "create pod vms/cdi-upload-disk",
            "status vms/disk UploadScheduled",
        ]
    );
    let secret = serde_json::to_value(&api.state().secrets["vms/cdi-upload-disk"]).expect("json");
    assert_eq!(secret["data"]["tls.key"], "S0VZ", "the issued key");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "claim-uid");
    // A claim on its way out releases its upload server.
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        claim.metadata.deletion_timestamp = Some(now());
    }
    release_claim(&api, "vms", "disk").await.expect("released");
    assert_eq!(api.take_writes(), ["delete pod vms/cdi-upload-disk"]);
}

/// The DataVolume `vms/disk` whose `sourceRef` names the DataSource `images/golden`.
fn data_volume_of_source_ref() -> DataVolume {
    let mut with_ref = data_volume();
    with_ref.spec.source = None;
    with_ref.spec.source_ref = Some(cdi_api::data_volume::DataVolumeSourceRef {
        kind: "DataSource".to_owned(),
        namespace: Some("images".to_owned()),
        name: "golden".to_owned(),
    });
    with_ref
}

#[tokio::test]
async fn a_source_ref_waits_for_its_data_source_then_clones_its_claim() {
    let api = api();
    let with_ref = data_volume_of_source_ref();
    api.state().data_volumes.insert("vms/disk".to_owned(), with_ref);
    pass(&api).await;
    assert_eq!(phase(&api), DataVolumePhase::Pending);
    let status = api.state().statuses.get("vms/disk").cloned().unwrap_or_default();
    assert!(
        status
            .conditions
            .iter()
            .any(|c| c.state.message.as_deref() == Some("DataSource images/golden not found")),
        "{status:?}"
    );
    assert!(api.state().claims.is_empty(), "no claim while the source is unknown");

    // The DataSource appears: the DataVolume is now a clone of its claim, held back by its
    // missing clone token (it was not admitted by cdi-apiserver here) rather than the DataSource.
    api.state().data_sources.insert(
        "images/golden".to_owned(),
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
            "metadata": {"name": "golden", "namespace": "images"},
            "spec": {"source": {"pvc": {"namespace": "images", "name": "disk-image"}}}
        }))
        .expect("data source"),
    );
    pass(&api).await;
    let status = api.state().statuses.get("vms/disk").cloned().unwrap_or_default();
    let messages: Vec<String> = status
        .conditions
        .iter()
        .filter_map(|c| c.state.message.clone())
        .collect();
    assert!(
        messages.iter().all(|m| !m.contains("DataSource")) && messages.iter().any(|m| m.contains("clone token")),
        "a clone now: {messages:?}"
    );
}

#[tokio::test]
async fn a_source_ref_clone_keeps_the_source_its_claim_names_and_one_with_both_fails() {
    let api = api();
    let with_ref = data_volume_of_source_ref();
    api.state().data_volumes.insert("vms/disk".to_owned(), with_ref.clone());
    // The claim was made for the clone of images/disk-image; the DataSource has gone since.
    api.state().claims.insert(
        "vms/disk".to_owned(),
        serde_json::from_value(json!({
            "metadata": {"name": "disk", "namespace": "vms",
                         "annotations": {"k8s.io/CloneRequest": "images/disk-image"}},
            "spec": {}
        }))
        .expect("claim"),
    );
    pass(&api).await;
    let status = api.state().statuses.get("vms/disk").cloned().unwrap_or_default();
    assert!(
        status
            .conditions
            .iter()
            .all(|c| !c.state.message.clone().unwrap_or_default().contains("DataSource")),
        "the clone goes on from its claim's source: {status:?}"
    );

    let mut both = with_ref;
    both.spec.source = data_volume().spec.source;
    api.state().data_volumes.insert("vms/disk".to_owned(), both);
    api.state().claims.clear();
    api.state().statuses.clear();
    pass(&api).await;
    assert_eq!(phase(&api), DataVolumePhase::Failed);
    let status = api.state().statuses.get("vms/disk").cloned().unwrap_or_default();
    assert!(
        status.conditions.iter().any(|c| c.state.message.as_deref()
            == Some("Data volume should have either Source or SourceRef, or be externally populated")),
        "{status:?}"
    );
}
