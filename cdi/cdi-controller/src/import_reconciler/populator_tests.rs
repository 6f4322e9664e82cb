//! The import populator's flow through the fake API server: every write of every pass, from the
//! DataVolume to its claim bound to the filled volume.

use std::collections::BTreeMap;

use cdi_api::DataVolumePhase;
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::tests::phase;
use super::*;
use crate::cdi_pki::FixedCertificates;
use crate::cluster_api::fake::FakeCdiApi;
use crate::import_progress::FakeMetrics;

const PROVISIONER: &str = "kubevirt.io.hostpath-provisioner";

fn now() -> Time {
    Time(Timestamp::from_second(100).expect("time"))
}

/// The default class is a CSI driver's, binding on first consumer.
fn api() -> FakeCdiApi {
    let api = FakeCdiApi::default();
    {
        let mut state = api.state();
        state.classes = vec![
            serde_json::from_value(json!({
                "metadata": {"name": "hostpath-csi", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                "provisioner": PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer"
            }))
            .expect("class"),
        ];
        state.csi_drivers = vec![PROVISIONER.to_owned()];
        state.data_volumes.insert(
            "vms/disk".to_owned(),
            serde_json::from_value(json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
                "metadata": {"name": "disk", "namespace": "vms", "uid": "dv-uid"},
                "spec": {"source": {"http": {"url": "http://server/disk.img"}},
                         "storage": {"resources": {"requests": {"storage": "1Gi"}}}}
            }))
            .expect("data volume"),
        );
    }
    api
}

async fn pass(api: &FakeCdiApi) -> Vec<String> {
    let settings = ImporterSettings {
        image: "cdi-importer:latest".to_owned(),
        ..ImporterSettings::default()
    };
    reconcile(
        api,
        &FakeMetrics::default(),
        &FixedCertificates,
        "vms",
        "disk",
        &settings,
        &now(),
    )
    .await
    .expect("pass");
    api.take_writes()
}

fn set_claim(api: &FakeCdiApi, name: &str, uid: &str, phase: &str, volume: Option<&str>) {
    if let Some(claim) = api.state().claims.get_mut(&format!("vms/{name}")) {
        claim.metadata.uid = Some(uid.to_owned());
        claim.spec.get_or_insert_default().volume_name = volume.map(str::to_owned);
        claim.status = serde_json::from_value(json!({"phase": phase})).ok();
    }
}

/// The volume the prime claim was bound to.
fn prime_volume() -> k8s_openapi::api::core::v1::PersistentVolume {
    serde_json::from_value(json!({
        "metadata": {"name": "pv-1", "resourceVersion": "3"},
        "spec": {"storageClassName": "hostpath-csi",
                 "claimRef": {"namespace": "vms", "name": "prime-claim-uid", "uid": "prime-uid"}}
    }))
    .expect("volume")
}

#[tokio::test]
async fn an_import_fills_a_prime_claim_whose_volume_goes_to_the_target() {
    let api = api();
    assert_eq!(
        pass(&api).await,
        [
            "create VolumeImportSource vms/volume-import-source-dv-uid",
            "create claim vms/disk",
            "status vms/disk Pending"
        ]
    );
    set_claim(&api, "disk", "claim-uid", "Pending", None);
    assert_eq!(pass(&api).await, ["status vms/disk PendingPopulation"]);
    assert_eq!(pass(&api).await, Vec::<String>::new(), "it waits for a node");

    // The VM's pod is scheduled: the scheduler chose a node for the claim.
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        claim
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("volume.kubernetes.io/selected-node".to_owned(), "node-b".to_owned());
    }
    assert_eq!(pass(&api).await, ["create claim vms/prime-claim-uid"]);
    set_claim(&api, "prime-claim-uid", "prime-uid", "Bound", Some("pv-1"));
    api.state().volumes = vec![prime_volume()];
    let writes = pass(&api).await;
    assert_eq!(
        writes,
        [
            "create pod vms/importer-prime-claim-uid",
            "annotate claim vms/disk populator.progress,populator.pvcPrime,preallocation.requested",
            "status vms/disk ImportScheduled",
        ]
    );
    let pod = api.state().pods["vms/importer-prime-claim-uid"].clone();
    assert_eq!(pod.metadata.owner_references.expect("owner")[0].name, "prime-claim-uid");

    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    if let Some(pod) = api.state().pods.get_mut("vms/importer-prime-claim-uid") {
        pod.status = serde_json::from_value(json!({"phase": "Succeeded", "containerStatuses": [{
            "name": "importer", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}}]}))
        .ok();
    }
    let writes = pass(&api).await;
    assert_eq!(
        writes,
        [
            "annotate claim vms/prime-claim-uid condition.running,condition.running.message,condition.running.reason,import.importPodName,pod.phase,pod.restarts,pod.schedulable",
            "event PersistentVolumeClaim disk Normal ImportSucceeded",
            "delete pod vms/importer-prime-claim-uid",
            "annotate claim vms/disk condition.running,condition.running.message,condition.running.reason,pod.phase,pod.restarts,pod.schedulable,populator.progress",
            "rebind volume pv-1 to disk",
            "delete VolumeImportSource vms/volume-import-source-dv-uid",
            "status vms/disk Succeeded",
            "event DataVolume disk Normal ImportSucceeded",
        ]
    );
    assert_eq!(phase(&api), DataVolumePhase::Succeeded);

    // The volume controller binds the target and leaves the prime Lost.
    set_claim(&api, "disk", "claim-uid", "Bound", Some("pv-1"));
    set_claim(&api, "prime-claim-uid", "prime-uid", "Lost", Some("pv-1"));
    assert_eq!(
        pass(&api).await,
        ["delete claim vms/prime-claim-uid", "status vms/disk Succeeded"],
        "the prime goes; Bound becomes True"
    );
    assert_eq!(pass(&api).await, Vec::<String>::new(), "done");
    assert_eq!(phase(&api), DataVolumePhase::Succeeded);
}

/// An upload (`virtctl image-upload --force-bind`) into the CSI class: its VolumeUploadSource,
/// the prime claim at once, the prime's upload server, and the source's removal once done.
#[tokio::test]
async fn an_upload_fills_a_prime_claim_through_its_upload_server() {
    let api = api();
    if let Some(dv) = api.state().data_volumes.get_mut("vms/disk") {
        dv.spec.source = serde_json::from_value(json!({"upload": {}})).ok();
        dv.metadata.annotations = Some(BTreeMap::from([(
            import_plan::IMMEDIATE_BINDING.to_owned(),
            "true".to_owned(),
        )]));
    }
    assert_eq!(
        pass(&api).await,
        [
            "create VolumeUploadSource vms/volume-upload-source-dv-uid",
            "create claim vms/disk",
            "status vms/disk Pending"
        ]
    );
    set_claim(&api, "disk", "claim-uid", "Pending", None);
    assert_eq!(
        pass(&api).await,
        ["create claim vms/prime-claim-uid", "status vms/disk Pending"]
    );
    set_claim(&api, "prime-claim-uid", "prime-uid", "Bound", Some("pv-1"));
    assert_eq!(
        pass(&api).await,
        [
            "create service vms/cdi-upload-prime-claim-uid",
            "put secret vms/cdi-upload-prime-claim-uid",
            "create pod vms/cdi-upload-prime-claim-uid",
            "annotate claim vms/disk populator.pvcPrime,preallocation.requested",
            "status vms/disk UploadScheduled",
        ]
    );
    let pod = api.state().pods["vms/cdi-upload-prime-claim-uid"].clone();
    assert_eq!(pod.metadata.owner_references.expect("owner")[0].name, "prime-claim-uid");
    assert_eq!(
        pod.metadata.annotations.expect("annotations")[populator::DATA_VOLUME_OF_POD],
        "vms/disk"
    );
    assert_eq!(phase(&api), DataVolumePhase::UploadScheduled);

    // The server is ready, then done.
    let set_pod = |phase: &str, ready: bool, state: serde_json::Value| {
        if let Some(pod) = api.state().pods.get_mut("vms/cdi-upload-prime-claim-uid") {
            pod.status = serde_json::from_value(json!({"phase": phase, "containerStatuses": [{
                "name": "cdi-upload-server", "image": "u", "imageID": "", "ready": ready,
                "restartCount": 0, "state": state}]}))
            .ok();
        }
    };
    set_pod("Running", true, json!({"running": {}}));
    let writes = pass(&api).await;
    assert!(
        writes
            .iter()
            .any(|w| w.starts_with("annotate claim vms/disk ") && w.contains("pod.ready")),
        "the readiness reaches the target: {writes:?}"
    );
    assert_eq!(phase(&api), DataVolumePhase::UploadReady);
    api.state().volumes = vec![prime_volume()];
    set_pod(
        "Succeeded",
        false,
        json!({"terminated": {"exitCode": 0, "reason": "Completed", "message": "Upload Complete"}}),
    );
    let writes = pass(&api).await;
    for write in [
        "delete pod vms/cdi-upload-prime-claim-uid",
        "delete service vms/cdi-upload-prime-claim-uid",
        "delete secret vms/cdi-upload-prime-claim-uid",
        "rebind volume pv-1 to disk",
        "delete VolumeUploadSource vms/volume-upload-source-dv-uid",
        "status vms/disk Succeeded",
        "event DataVolume disk Normal UploadSucceeded",
    ] {
        assert!(writes.iter().any(|w| w == write), "{write} in {writes:?}");
    }
    assert_eq!(phase(&api), DataVolumePhase::Succeeded);

    // The volume controller binds the target and leaves the prime Lost: the prime goes.
    set_claim(&api, "disk", "claim-uid", "Bound", Some("pv-1"));
    set_claim(&api, "prime-claim-uid", "prime-uid", "Lost", Some("pv-1"));
    let writes = pass(&api).await;
    assert!(
        writes.iter().any(|w| w == "delete claim vms/prime-claim-uid"),
        "{writes:?}"
    );
    assert_eq!(pass(&api).await, Vec::<String>::new(), "done");
    assert_eq!(phase(&api), DataVolumePhase::Succeeded);
}
