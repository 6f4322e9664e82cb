//! The import populator over a claim a user made, through the fake API server: every write of
//! every pass, from the claim naming its VolumeImportSource to the claim bound to the filled
//! volume; and the claims it waits for, refuses or leaves alone.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::bare_claim::{names_population_source, reconcile};
use super::*;
use crate::cdi_pki::FixedCertificates;
use crate::cluster_api::fake::FakeCdiApi;
use crate::import_plan::populator::PopulationSource;
use crate::import_progress::FakeMetrics;

const PROVISIONER: &str = "kubevirt.io.hostpath-provisioner";

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(100).expect("time"))
}

fn user_claim() -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "metadata": {"name": "disk", "namespace": "vms", "uid": "claim-uid", "resourceVersion": "7"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "hostpath-csi",
                 "resources": {"requests": {"storage": "1Gi"}},
                 "dataSourceRef": {"apiGroup": "cdi.kubevirt.io", "kind": "VolumeImportSource", "name": "image"}},
        "status": {"phase": "Pending"}
    }))
    .expect("claim")
}

fn import_source(spec: &serde_json::Value) -> PopulationSource {
    PopulationSource::Import(Box::new(
        serde_json::from_value(json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "VolumeImportSource",
            "metadata": {"name": "image", "namespace": "vms"},
            "spec": spec
        }))
        .expect("source"),
    ))
}

/// A CSI class binding on first consumer, and the user's claim; no VolumeImportSource yet.
fn api() -> FakeCdiApi {
    let api = FakeCdiApi::default();
    {
        let mut state = api.state();
        state.classes = vec![
            serde_json::from_value(json!({
                "metadata": {"name": "hostpath-csi"},
                "provisioner": PROVISIONER, "volumeBindingMode": "WaitForFirstConsumer"
            }))
            .expect("class"),
        ];
        state.csi_drivers = vec![PROVISIONER.to_owned()];
        state.claims.insert("vms/disk".to_owned(), user_claim());
    }
    api
}

async fn pass(api: &FakeCdiApi) -> (Next, Vec<String>) {
    let settings = ImporterSettings {
        image: "cdi-importer:latest".to_owned(),
        ..ImporterSettings::default()
    };
    let next = reconcile(
        api,
        &FakeMetrics::default(),
        &FixedCertificates,
        ("vms", "disk"),
        &settings,
        &now(),
    )
    .await
    .expect("pass");
    (next, api.take_writes())
}

fn set_claim(api: &FakeCdiApi, name: &str, uid: &str, phase: &str, volume: Option<&str>) {
    if let Some(claim) = api.state().claims.get_mut(&format!("vms/{name}")) {
        claim.metadata.uid = Some(uid.to_owned());
        claim.spec.get_or_insert_default().volume_name = volume.map(str::to_owned);
        claim.status = serde_json::from_value(json!({"phase": phase})).ok();
    }
}

#[tokio::test]
async fn a_users_claim_is_filled_from_its_volume_import_source_and_gets_the_volume() {
    let api = api();
    assert_eq!(
        pass(&api).await,
        (Next::LookAgain, Vec::new()),
        "it waits for its VolumeImportSource"
    );
    api.state().population_sources.insert(
        "vms/image".to_owned(),
        import_source(&json!({"source": {"http": {"url": "http://server/disk.qcow2"}}})),
    );
    assert_eq!(
        pass(&api).await,
        (Next::Rest, Vec::new()),
        "it waits for a node: a change of the claim"
    );

    // A pod that uses the claim is scheduled: the scheduler chose a node for it.
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        claim
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("volume.kubernetes.io/selected-node".to_owned(), "node-b".to_owned());
    }
    assert_eq!(
        pass(&api).await.1,
        [
            "create claim vms/prime-claim-uid",
            "event PersistentVolumeClaim disk Normal CreatedPVCPrimeSuccessfully"
        ]
    );
    set_claim(&api, "prime-claim-uid", "prime-uid", "Bound", Some("pv-1"));
    api.state().volumes = vec![
        serde_json::from_value(json!({
            "metadata": {"name": "pv-1", "resourceVersion": "3"},
            "spec": {"storageClassName": "hostpath-csi",
                     "claimRef": {"namespace": "vms", "name": "prime-claim-uid", "uid": "prime-uid"}}
        }))
        .expect("volume"),
    ];
    assert_eq!(
        pass(&api).await.1,
        [
            "create pod vms/importer-prime-claim-uid",
            "annotate claim vms/disk populator.progress,populator.pvcPrime,preallocation.requested",
        ]
    );
    let pod = api.state().pods["vms/importer-prime-claim-uid"].clone();
    assert_eq!(pod.spec.as_ref().and_then(|s| s.node_name.as_deref()), Some("node-b"));
    assert_eq!(
        pod.metadata.annotations.expect("annotations")[populator::DATA_VOLUME_OF_POD],
        "vms/disk",
        "the pod watch reaches the claim"
    );

    let complete = r#"{"scratchSpaceRequired":false,"preallocationApplied":false,"message":"Import Complete"}"#;
    if let Some(pod) = api.state().pods.get_mut("vms/importer-prime-claim-uid") {
        pod.status = serde_json::from_value(json!({"phase": "Succeeded", "containerStatuses": [{
            "name": "importer", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": complete}}}]}))
        .ok();
    }
    let (next, writes) = pass(&api).await;
    assert_eq!(
        writes,
        [
            "annotate claim vms/prime-claim-uid condition.running,condition.running.message,condition.running.reason,import.importPodName,pod.phase,pod.restarts,pod.schedulable",
            "event PersistentVolumeClaim disk Normal ImportSucceeded",
            "delete pod vms/importer-prime-claim-uid",
            "annotate claim vms/disk condition.running,condition.running.message,condition.running.reason,pod.phase,pod.restarts,pod.schedulable,populator.progress",
            "rebind volume pv-1 to disk",
            "event PersistentVolumeClaim disk Normal importSucceeded",
        ],
        "no DataVolume status, and the user's VolumeImportSource stays"
    );
    assert_eq!(next, Next::LookAgain);

    // The volume controller binds the target and leaves the prime Lost: the prime goes.
    set_claim(&api, "disk", "claim-uid", "Bound", Some("pv-1"));
    set_claim(&api, "prime-claim-uid", "prime-uid", "Lost", Some("pv-1"));
    assert_eq!(
        pass(&api).await,
        (Next::LookAgain, vec!["delete claim vms/prime-claim-uid".to_owned()])
    );
    api.state().claims.remove("vms/prime-claim-uid");
    assert_eq!(pass(&api).await, (Next::Rest, Vec::new()), "done");
    assert!(api.state().population_sources.contains_key("vms/image"));
}

#[tokio::test]
async fn a_claim_that_cannot_be_populated_is_told_why_and_rests() {
    let api = api();
    api.state().population_sources.insert(
        "vms/image".to_owned(),
        import_source(&json!({"source": {"s3": {"url": "s3://bucket/disk"}}})),
    );
    assert_eq!(
        pass(&api).await,
        (
            Next::Rest,
            vec!["event PersistentVolumeClaim disk Warning ErrPopulationRefused".to_owned()]
        )
    );
    assert!(!api.state().claims.contains_key("vms/prime-claim-uid"));

    // A class of Kubernetes' own: refused too.
    api.state()
        .population_sources
        .insert("vms/image".to_owned(), import_source(&json!({"source": {"blank": {}}})));
    api.state().classes[0].provisioner = "kubernetes.io/no-provisioner".to_owned();
    assert_eq!(
        pass(&api).await.1,
        ["event PersistentVolumeClaim disk Warning ErrPopulationRefused"]
    );
    // A class not there (yet): it waits, saying nothing.
    api.state().classes.clear();
    assert_eq!(pass(&api).await, (Next::LookAgain, Vec::new()));
}

#[tokio::test]
async fn claims_of_data_volumes_and_of_other_sources_are_left_alone() {
    let api = api();
    api.state()
        .population_sources
        .insert("vms/image".to_owned(), import_source(&json!({"source": {"blank": {}}})));
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        claim.metadata.owner_references = serde_json::from_value(json!([{
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "name": "disk", "uid": "dv-uid",
            "controller": true}]))
        .ok();
    }
    assert_eq!(
        pass(&api).await,
        (Next::Rest, Vec::new()),
        "the DataVolume's pass fills it"
    );

    let mut other = user_claim();
    other.spec.as_mut().expect("spec").data_source_ref = serde_json::from_value(json!(
        {"apiGroup": "snapshot.storage.k8s.io", "kind": "VolumeSnapshot", "name": "snap"}))
    .ok();
    assert!(!names_population_source(&other));
    assert!(names_population_source(&user_claim()));
    api.state().claims.insert("vms/disk".to_owned(), other);
    assert_eq!(pass(&api).await, (Next::Rest, Vec::new()));
    api.state().claims.clear();
    assert_eq!(pass(&api).await, (Next::Rest, Vec::new()), "gone");
}

/// A claim naming a VolumeUploadSource, asking to bind at once: the prime at once, its upload
/// server (Service, certificate, pod), and the volume handed over once the upload is done.
#[tokio::test]
async fn a_users_claim_is_filled_by_an_upload_through_its_primes_server() {
    let api = api();
    if let Some(claim) = api.state().claims.get_mut("vms/disk") {
        let reference = claim
            .spec
            .as_mut()
            .and_then(|s| s.data_source_ref.as_mut())
            .expect("ref");
        reference.kind = "VolumeUploadSource".to_owned();
        claim.metadata.annotations = Some(std::collections::BTreeMap::from([(
            import_plan::IMMEDIATE_BINDING.to_owned(),
            String::new(),
        )]));
    }
    api.state().population_sources.insert(
        "vms/image".to_owned(),
        PopulationSource::Upload(Box::new(
            serde_json::from_value(json!({
                "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "VolumeUploadSource",
                "metadata": {"name": "image", "namespace": "vms"}, "spec": {}
            }))
            .expect("source"),
        )),
    );
    assert_eq!(
        pass(&api).await.1,
        [
            "create claim vms/prime-claim-uid",
            "event PersistentVolumeClaim disk Normal CreatedPVCPrimeSuccessfully"
        ]
    );
    set_claim(&api, "prime-claim-uid", "prime-uid", "Bound", Some("pv-1"));
    assert_eq!(
        pass(&api).await.1,
        [
            "create service vms/cdi-upload-prime-claim-uid",
            "put secret vms/cdi-upload-prime-claim-uid",
            "create pod vms/cdi-upload-prime-claim-uid",
            "annotate claim vms/disk populator.pvcPrime,preallocation.requested",
        ]
    );
    api.state().volumes = vec![
        serde_json::from_value(json!({
            "metadata": {"name": "pv-1", "resourceVersion": "3"},
            "spec": {"claimRef": {"namespace": "vms", "name": "prime-claim-uid", "uid": "prime-uid"}}
        }))
        .expect("volume"),
    ];
    if let Some(pod) = api.state().pods.get_mut("vms/cdi-upload-prime-claim-uid") {
        pod.status = serde_json::from_value(json!({"phase": "Succeeded", "containerStatuses": [{
            "name": "cdi-upload-server", "image": "u", "imageID": "", "ready": false, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "message": "Upload Complete"}}}]}))
        .ok();
    }
    let (next, writes) = pass(&api).await;
    for write in [
        "delete pod vms/cdi-upload-prime-claim-uid",
        "delete service vms/cdi-upload-prime-claim-uid",
        "delete secret vms/cdi-upload-prime-claim-uid",
        "rebind volume pv-1 to disk",
        "event PersistentVolumeClaim disk Normal UploadSucceeded",
    ] {
        assert!(writes.iter().any(|w| w == write), "{write} in {writes:?}");
    }
    assert!(
        !writes
            .iter()
            .any(|w| w.starts_with("status ") || w.contains("DataVolume")),
        "{writes:?}"
    );
    // The upload server's (upstream copies the prime's events to the claim) and the populator's
    // own ("Successfully uploaded into disk"), as upstream's both reach the claim.
    assert_eq!(
        writes.iter().filter(|w| w.contains("UploadSucceeded")).count(),
        2,
        "{writes:?}"
    );
    assert_eq!(next, Next::LookAgain);
}

/// A filled claim whose prime is kept (`retainAfterCompletion`), and a claim whose prime's pod
/// name is taken by a pod the prime does not control: both rest, so that nothing is polled or
/// said again until something changes.
#[tokio::test]
async fn a_kept_prime_and_a_pod_in_the_way_leave_the_claim_resting() {
    let api = api();
    api.state()
        .population_sources
        .insert("vms/image".to_owned(), import_source(&json!({"source": {"blank": {}}})));
    let prime = |phase: &str| -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "prime-claim-uid", "namespace": "vms", "uid": "prime-uid",
                         "annotations": {"cdi.kubevirt.io/storage.pod.retainAfterCompletion": "true",
                                         "volume.kubernetes.io/selected-node": "node-b"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk",
                                              "uid": "claim-uid", "controller": true}]},
            "spec": {"storageClassName": "hostpath-csi", "volumeName": "pv-1"},
            "status": {"phase": phase}
        }))
        .expect("prime")
    };
    api.state()
        .claims
        .insert("vms/prime-claim-uid".to_owned(), prime("Lost"));
    set_claim(&api, "disk", "claim-uid", "Bound", Some("pv-1"));
    assert_eq!(pass(&api).await, (Next::Rest, Vec::new()), "the kept prime stays, Lost");

    set_claim(&api, "disk", "claim-uid", "Pending", None);
    api.state()
        .claims
        .insert("vms/prime-claim-uid".to_owned(), prime("Bound"));
    api.state().pods.insert(
        "vms/importer-prime-claim-uid".to_owned(),
        serde_json::from_value(
            json!({"metadata": {"name": "importer-prime-claim-uid", "namespace": "vms",
                                                    "uid": "someone-elses"}}),
        )
        .expect("pod"),
    );
    assert_eq!(
        pass(&api).await,
        (
            Next::Rest,
            vec!["event PersistentVolumeClaim disk Warning ErrResourceExists".to_owned()]
        )
    );
}
