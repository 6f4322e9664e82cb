//! The import controller's kube adapter against a mock API server (tower-test): every request
//! is asserted (method, path, content type, body), and the answers a pass must survive (404 on
//! reads and deletes, 409 on creates) count as what they mean.

use std::collections::BTreeMap;

use cdi_api::DataVolumePhase;
use cdi_api::data_volume::DataVolumeStatus;
use cdi_controller::cluster_api::kube::KubeCdiApi;
use cdi_controller::cluster_api::{CdiApi as _, EventSubject};
use cdi_controller::import_plan::populator::{PopulationSource, SourceKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

#[path = "../../../kubevirt-tests/support/mock_api_server.rs"]
mod mock_api_server;

use mock_api_server::{Log, Seen, seen};

/// The adapter on a mock API server answering `answers` in order, and the log of what it got.
fn api_server(answers: Vec<(u16, Value)>) -> (KubeCdiApi, Log) {
    let (client, log) = mock_api_server::api_server(answers);
    (KubeCdiApi::new(client), log)
}

fn status(code: u16, reason: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "code": code, "message": reason}),
    )
}

fn requests(log: &Log) -> Vec<Seen> {
    std::mem::take(&mut *log.lock().expect("log"))
}

#[tokio::test]
async fn reads_that_find_nothing_are_none() {
    let (api, log) = api_server(vec![
        status(404, "NotFound"),
        status(404, "NotFound"),
        status(404, "NotFound"),
    ]);
    assert_eq!(api.claim("vms", "disk").await.expect("claim"), None);
    assert_eq!(api.pod("vms", "importer-disk").await.expect("pod"), None);
    assert_eq!(api.cdi_config().await.expect("config"), None);
    let paths: Vec<String> = requests(&log)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        paths,
        [
            "GET /api/v1/namespaces/vms/persistentvolumeclaims/disk",
            "GET /api/v1/namespaces/vms/pods/importer-disk",
            "GET /apis/cdi.kubevirt.io/v1beta1/cdiconfigs/config",
        ]
    );
}

#[tokio::test]
async fn a_population_source_is_read_by_its_kind_from_the_claims_namespace() {
    let (api, log) = api_server(vec![
        (
            200,
            json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "VolumeImportSource",
                   "metadata": {"name": "image", "namespace": "vms"},
                   "spec": {"source": {"http": {"url": "http://server/disk.qcow2"}}}}),
        ),
        status(404, "NotFound"),
        (
            200,
            json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "VolumeUploadSource",
                   "metadata": {"name": "upload", "namespace": "vms"},
                   "spec": {"contentType": "kubevirt"}}),
        ),
    ]);
    let Some(PopulationSource::Import(found)) = api
        .population_source(SourceKind::Import, "vms", "image")
        .await
        .expect("read")
    else {
        panic!("a VolumeImportSource")
    };
    let url = found.spec.source.and_then(|s| s.http).map(|h| h.url);
    assert_eq!(url.as_deref(), Some("http://server/disk.qcow2"));
    assert_eq!(
        api.population_source(SourceKind::Import, "vms", "gone")
            .await
            .expect("read"),
        None
    );
    let Some(PopulationSource::Upload(upload)) = api
        .population_source(SourceKind::Upload, "vms", "upload")
        .await
        .expect("read")
    else {
        panic!("a VolumeUploadSource")
    };
    assert_eq!(upload.spec.content_type.as_deref(), Some("kubevirt"));
    let paths: Vec<String> = requests(&log)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(
        paths,
        [
            "GET /apis/cdi.kubevirt.io/v1beta1/namespaces/vms/volumeimportsources/image",
            "GET /apis/cdi.kubevirt.io/v1beta1/namespaces/vms/volumeimportsources/gone",
            "GET /apis/cdi.kubevirt.io/v1beta1/namespaces/vms/volumeuploadsources/upload",
        ]
    );
}

#[tokio::test]
async fn a_secret_is_looked_for_by_its_metadata_alone() {
    let (api, log) = api_server(vec![
        status(404, "NotFound"),
        (
            200,
            json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                   "metadata": {"name": "claim-uid-source-pod", "namespace": "golden"}}),
        ),
        status(403, "Forbidden"),
    ]);
    assert!(
        !api.secret_exists("golden", "claim-uid-source-pod")
            .await
            .expect("absent")
    );
    assert!(
        api.secret_exists("golden", "claim-uid-source-pod")
            .await
            .expect("present")
    );
    let refused = api
        .secret_exists("golden", "claim-uid-source-pod")
        .await
        .expect_err("a refusal is an error, not an absence");
    assert!(
        refused.to_string().contains("get secret golden/claim-uid-source-pod"),
        "{refused}"
    );
    let paths: Vec<String> = requests(&log)
        .into_iter()
        .map(|r| format!("{} {}", r.method, r.path))
        .collect();
    assert_eq!(paths, ["GET /api/v1/namespaces/golden/secrets/claim-uid-source-pod"; 3]);
}

#[tokio::test]
async fn creates_of_a_taken_name_and_deletes_of_a_gone_pod_succeed() {
    let (api, log) = api_server(vec![status(409, "AlreadyExists"), status(404, "NotFound")]);
    let claim =
        serde_json::from_value(json!({"metadata": {"name": "disk", "namespace": "vms"}, "spec": {}})).expect("claim");
    api.create_claim(&claim)
        .await
        .expect("a taken name is our own earlier create");
    api.delete_pod("vms", "importer-disk")
        .await
        .expect("a gone pod is deleted");
    let seen = requests(&log);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/api/v1/namespaces/vms/persistentvolumeclaims?")
    );
    assert_eq!(seen[0].body["metadata"]["name"], "disk");
    assert_eq!(
        (seen[1].method.as_str(), seen[1].path.as_str()),
        ("DELETE", "/api/v1/namespaces/vms/pods/importer-disk?")
    );
}

#[tokio::test]
async fn annotations_and_status_are_merge_patches() {
    let claim = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "disk"}, "spec": {}});
    let data_volume = json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "metadata": {"name": "disk"}, "spec": {}});
    let (api, log) = api_server(vec![(200, claim.clone()), (200, claim), (200, data_volume)]);
    let annotations = BTreeMap::from([("cdi.kubevirt.io/storage.pod.phase".to_owned(), "Running".to_owned())]);
    api.annotate_claim("vms", "disk", &annotations)
        .await
        .expect("annotated");
    let labels = BTreeMap::from([(
        "instancetype.kubevirt.io/default-instancetype".to_owned(),
        "u1.medium".to_owned(),
    )]);
    api.label_claim("vms", "disk", &labels).await.expect("labelled");
    let status = DataVolumeStatus {
        phase: DataVolumePhase::ImportInProgress,
        ..DataVolumeStatus::default()
    };
    api.write_status("vms", "disk", &status).await.expect("written");
    assert_eq!(
        requests(&log),
        [
            seen(
                "PATCH",
                "/api/v1/namespaces/vms/persistentvolumeclaims/disk?",
                "application/merge-patch+json",
                json!({"metadata": {"annotations": {"cdi.kubevirt.io/storage.pod.phase": "Running"}}}),
            ),
            seen(
                "PATCH",
                "/api/v1/namespaces/vms/persistentvolumeclaims/disk?",
                "application/merge-patch+json",
                json!({"metadata": {"labels": {"instancetype.kubevirt.io/default-instancetype": "u1.medium"}}}),
            ),
            seen(
                "PATCH",
                "/apis/cdi.kubevirt.io/v1beta1/namespaces/vms/datavolumes/disk/status?",
                "application/merge-patch+json",
                json!({"status": {"phase": "ImportInProgress"}}),
            ),
        ]
    );
}

#[tokio::test]
async fn events_name_their_object_with_its_api_version_and_failures_name_the_operation() {
    let (api, log) = api_server(vec![(201, json!({})), status(500, "InternalError")]);
    let meta = ObjectMeta {
        name: Some("disk".to_owned()),
        namespace: Some("vms".to_owned()),
        uid: Some("dv-uid".to_owned()),
        ..ObjectMeta::default()
    };
    let subject = EventSubject {
        api_version: "cdi.kubevirt.io/v1beta1",
        kind: "DataVolume",
        meta: &meta,
    };
    api.record_event(subject, "Normal", "ImportScheduled", "Import into disk scheduled")
        .await
        .expect("event");
    let event = &requests(&log)[0];
    assert_eq!(
        (event.method.as_str(), event.path.as_str()),
        ("POST", "/api/v1/namespaces/vms/events?")
    );
    assert_eq!(
        event.body["involvedObject"],
        json!({"apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume", "name": "disk", "namespace": "vms", "uid": "dv-uid"})
    );
    assert_eq!(event.body["reason"], "ImportScheduled");
    let error = api.pod("vms", "importer-disk").await.expect_err("500");
    assert!(
        error.to_string().starts_with("get pod vms/importer-disk failed"),
        "{error}"
    );
}

#[tokio::test]
async fn an_upload_servers_service_is_created_and_deleted_and_its_secret_replaced() {
    let owner = json!([{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "name": "disk", "uid": "claim-uid",
        "controller": true}]);
    let meta = json!({"name": "cdi-upload-disk", "namespace": "vms", "resourceVersion": "7", "ownerReferences": owner});
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta});
    let ours = json!({"apiVersion": "v1", "kind": "Service", "metadata": meta});
    let theirs = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "cdi-upload-disk",
        "namespace": "vms", "ownerReferences": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "name": "disk", "uid": "an-earlier-claim", "controller": true}]}});
    let (api, log) = api_server(vec![
        status(409, "AlreadyExists"),
        (200, ours),
        status(409, "AlreadyExists"),
        (200, theirs),
        status(404, "NotFound"),
        status(409, "AlreadyExists"),
        (200, secret.clone()),
        (200, secret),
    ]);
    let mine = json!({"name": "cdi-upload-disk", "namespace": "vms", "ownerReferences": owner});
    let service = serde_json::from_value(json!({"metadata": mine})).expect("service");
    api.create_service(&service).await.expect("a taken name is ours");
    let taken = api.create_service(&service).await.expect_err("another claim's");
    assert_eq!(
        taken.to_string(),
        "service vms/cdi-upload-disk exists and belongs to another owner"
    );
    api.delete_service("vms", "cdi-upload-disk")
        .await
        .expect("a gone service is deleted");
    let new_secret =
        serde_json::from_value(json!({"metadata": mine, "data": {"tls.crt": "Q0VSVA=="}})).expect("secret");
    api.put_secret(&new_secret).await.expect("replaced");
    let requests = requests(&log);
    assert_eq!(
        requests[7].body["metadata"]["resourceVersion"], "7",
        "replaced at the version read"
    );
    assert_eq!(requests[7].body["data"]["tls.crt"], "Q0VSVA==");
    let seen: Vec<(String, String)> = requests.into_iter().map(|r| (r.method, r.path)).collect();
    let expected = [
        ("POST", "/api/v1/namespaces/vms/services?"),
        ("GET", "/api/v1/namespaces/vms/services/cdi-upload-disk"),
        ("POST", "/api/v1/namespaces/vms/services?"),
        ("GET", "/api/v1/namespaces/vms/services/cdi-upload-disk"),
        ("DELETE", "/api/v1/namespaces/vms/services/cdi-upload-disk?"),
        ("POST", "/api/v1/namespaces/vms/secrets?"),
        ("GET", "/api/v1/namespaces/vms/secrets/cdi-upload-disk"),
        ("PUT", "/api/v1/namespaces/vms/secrets/cdi-upload-disk?"),
    ]
    .map(|(m, p)| (m.to_owned(), p.to_owned()));
    assert_eq!(seen, expected);
}

#[tokio::test]
async fn the_config_is_created_and_its_status_replaced_at_its_version() {
    let config: cdi_api::CDIConfig = serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "CDIConfig",
        "metadata": {"name": "config", "resourceVersion": "42"},
        "spec": {},
        "status": {"scratchSpaceStorageClass": "hostpath-csi", "preallocation": false},
    }))
    .expect("config");
    let (api, log) = api_server(vec![
        status(409, "AlreadyExists"),
        (200, serde_json::to_value(&config).expect("json")),
    ]);
    api.create_cdi_config(&config)
        .await
        .expect("a config already there counts as made");
    api.replace_cdi_config_status(&config).await.expect("status written");
    let seen = requests(&log);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/apis/cdi.kubevirt.io/v1beta1/cdiconfigs?")
    );
    assert_eq!(
        (seen[1].method.as_str(), seen[1].path.as_str()),
        ("PUT", "/apis/cdi.kubevirt.io/v1beta1/cdiconfigs/config/status?")
    );
    assert_eq!(seen[1].body["metadata"]["resourceVersion"], "42", "the version read");
    assert_eq!(seen[1].body["status"]["scratchSpaceStorageClass"], "hostpath-csi");
}

#[tokio::test]
async fn a_scratch_gate_is_lifted_alone_and_a_gone_pod_has_none() {
    let gate = "cdi.kubevirt.io/scratch-claim";
    let (api, log) = api_server(vec![
        (
            200,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cdi-upload-disk", "namespace": "vms"},
                   "spec": {"containers": [{"name": "server"}], "schedulingGates": [{"name": "other.example/wait"}]}}),
        ),
        status(404, "NotFound"),
    ]);
    api.ungate_pod("vms", "cdi-upload-disk", gate).await.expect("lifted");
    api.ungate_pod("vms", "cdi-upload-disk", gate)
        .await
        .expect("gone: nothing to lift");
    let patch = seen(
        "PATCH",
        "/api/v1/namespaces/vms/pods/cdi-upload-disk?",
        "application/strategic-merge-patch+json",
        // The list merges by name: only this entry goes, the pod's others stay.
        json!({"spec": {"schedulingGates": [{"name": gate, "$patch": "delete"}]}}),
    );
    assert_eq!(
        requests(&log),
        [
            patch,
            seen(
                "PATCH",
                "/api/v1/namespaces/vms/pods/cdi-upload-disk?",
                "application/strategic-merge-patch+json",
                json!({"spec": {"schedulingGates": [{"name": gate, "$patch": "delete"}]}}),
            ),
        ]
    );
}
