//! A clone through the fake API server: its token checked, the source pod made across
//! namespaces with its certificate Secret, and a Secret write that was lost given again.

use cdi_api::DataVolume;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::tests::{api, now, settings};
use super::*;
use crate::cdi_pki::FixedCertificates;
use crate::import_progress::FakeMetrics;

#[tokio::test]
#[allow(
    clippy::too_many_lines,
    reason = "one clone's passes in order, to its source pod and a Secret write that was lost"
)]
async fn a_clone_checks_its_token_then_makes_the_source_pod_and_its_certificate_across_namespaces() {
    let key = cdi_token::generate_key().expect("key");
    let issuer = cdi_token::Issuer::new(&key, cdi_token::UPLOAD_ISSUER, 300).expect("issuer");
    let settings = ImporterSettings {
        cloner_image: "cdi-cloner:latest".to_owned(),
        clone_tokens: Some(cdi_token::Validator::new(
            &issuer.public_key(),
            cdi_token::UPLOAD_ISSUER,
            0,
        )),
        ..settings()
    };
    let api = api();
    let token = issuer.issue(&cdi_token::Payload::clone_of("golden", "base", "vms", "copy"), 100);
    let clone: DataVolume = serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
        "metadata": {"name": "copy", "namespace": "vms", "uid": "dv-uid",
                     "annotations": {"cdi.kubevirt.io/storage.clone.token": token}},
        "spec": {"source": {"pvc": {"namespace": "golden", "name": "base"}},
                 "storage": {"resources": {"requests": {"storage": "1Gi"}}}}
    }))
    .expect("data volume");
    api.state().data_volumes.insert("vms/copy".to_owned(), clone);
    let (metrics, time) = (FakeMetrics::default(), now());
    let run = || reconcile(&api, &metrics, &FixedCertificates, "vms", "copy", &settings, &time);
    // No source yet: held back, nothing made.
    run().await.expect("pass");
    let writes = api.take_writes();
    assert!(!writes.iter().any(|w| w.starts_with("create claim")), "{writes:?}");
    api.state().claims.insert(
        "golden/base".to_owned(),
        serde_json::from_value(json!({
            "metadata": {"name": "base", "namespace": "golden", "uid": "source-uid"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}
        }))
        .expect("source"),
    );
    run().await.expect("pass");
    assert!(api.take_writes().contains(&"create claim vms/copy".to_owned()));
    if let Some(claim) = api.state().claims.get_mut("vms/copy") {
        claim.metadata.uid = Some("claim-uid".to_owned());
        claim.status = Some(serde_json::from_value(json!({"phase": "Bound"})).expect("status"));
    }
    run().await.expect("pass");
    let writes = api.take_writes();
    assert!(
        writes.contains(&"create pod vms/cdi-upload-copy".to_owned()),
        "{writes:?}"
    );
    // The server is ready: the source pod comes, with its certificate for the clone's name.
    if let Some(pod) = api.state().pods.get_mut("vms/cdi-upload-copy") {
        *pod = serde_json::from_value(json!({
            "metadata": pod.metadata,
            "status": {"phase": "Running", "containerStatuses": [{"name": "cdi-upload-server", "image": "", "imageID": "",
                "ready": true, "restartCount": 0, "state": {"running": {}}}]}
        }))
        .expect("pod");
    }
    run().await.expect("pass");
    let writes = api.take_writes();
    let created = writes
        .iter()
        .position(|w| w == "create pod golden/claim-uid-source-pod");
    let secret = writes
        .iter()
        .position(|w| w == "put secret golden/claim-uid-source-pod");
    assert!(
        created.is_some() && secret > created,
        "the pod, then its Secret: {writes:?}"
    );
    let certificate = api.state().secrets["golden/claim-uid-source-pod"]
        .data
        .as_ref()
        .expect("data")["tls.crt"]
        .clone();
    assert_eq!(
        String::from_utf8_lossy(&certificate.0),
        "CLIENT CERT for golden/base-vms/copy"
    );
    // A Secret write that never landed (the pass ended after the pod): the next pass gives the
    // waiting pod its Secret, and keeps the pod.
    api.state().secrets.remove("golden/claim-uid-source-pod");
    run().await.expect("pass");
    let writes = api.take_writes();
    assert!(
        writes.contains(&"put secret golden/claim-uid-source-pod".to_owned()),
        "{writes:?}"
    );
    assert!(
        !writes.iter().any(|w| w.contains("pod golden/")),
        "the pod stays: {writes:?}"
    );
    let given = api.state().secrets["golden/claim-uid-source-pod"].clone();
    assert_eq!(
        given
            .data
            .as_ref()
            .map(|d| String::from_utf8_lossy(&d["tls.crt"].0).into_owned()),
        Some("CLIENT CERT for golden/base-vms/copy".to_owned())
    );
    assert_eq!(
        given.metadata.owner_references.as_ref().map(|o| o[0].name.clone()),
        Some("claim-uid-source-pod".to_owned()),
        "owned by the pod"
    );
    run().await.expect("pass");
    let writes = api.take_writes();
    assert!(
        !writes.iter().any(|w| w.contains("secret")),
        "once is enough: {writes:?}"
    );
    // A finished source pod, or a pod of that name not made for this clone, gets none.
    api.state().secrets.remove("golden/claim-uid-source-pod");
    let made = api.state().pods["golden/claim-uid-source-pod"].clone();
    let mut finished = made.clone();
    finished.status = serde_json::from_value(json!({"phase": "Failed"})).ok();
    let mut foreign = made;
    foreign.metadata.labels = None;
    foreign.metadata.annotations = None;
    for pod in [finished, foreign] {
        api.state().pods.insert("golden/claim-uid-source-pod".to_owned(), pod);
        run().await.expect("pass");
        let writes = api.take_writes();
        assert!(!writes.iter().any(|w| w.contains("secret")), "{writes:?}");
    }
}
