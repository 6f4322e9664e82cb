use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::uninstall::tests::{FakeCluster, cr};
use crate::uninstall::{self, BLOCK, Workload};

fn review(name: &str) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "operation": "DELETE",
            "namespace": "kubevirt",
            "name": name,
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": "kubevirts"},
        },
    })
}

#[tokio::test]
async fn a_refusal_carries_the_uid_the_message_and_code_400() {
    let cluster = FakeCluster {
        crs: vec![cr(Some(BLOCK), Some("Deployed"))],
        present: vec![Workload::Vms],
        ..FakeCluster::default()
    };
    let answer = answer(&cluster, uninstall::PATH, &review("kubevirt"))
        .await
        .expect("an answer");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 400);
    assert_eq!(
        answer["response"]["status"]["message"],
        crate::uninstall::refusal(Workload::Vms)
    );
}

#[tokio::test]
async fn an_admission_carries_the_uid_only() {
    let cluster = FakeCluster {
        crs: vec![cr(None, Some("Deployed"))],
        present: vec![Workload::Vms],
        ..FakeCluster::default()
    };
    let answer = answer(&cluster, uninstall::PATH, &review("kubevirt"))
        .await
        .expect("an answer");
    assert_eq!(answer["response"], json!({"uid": "u-1", "allowed": true}));
}

#[tokio::test]
async fn a_review_without_request_or_uid_is_a_bad_request() {
    let cluster = FakeCluster::default();
    assert_eq!(
        answer(&cluster, uninstall::PATH, &json!({})).await,
        Err("the AdmissionReview has no request".to_owned())
    );
    assert_eq!(
        answer(&cluster, uninstall::PATH, &json!({"request": {"name": "kubevirt"}})).await,
        Err("the AdmissionReview's request has no uid".to_owned())
    );
}

#[tokio::test]
async fn an_update_refusal_is_invalid_with_each_reason_as_a_cause() {
    let spec =
        json!({"certificateRotateStrategy": {"selfSigned": {"server": {"duration": "1h", "renewBefore": "2h"}}}});
    let review = json!({"request": {
        "uid": "u-2",
        "operation": "UPDATE",
        "namespace": "kubevirt",
        "name": "kubevirt",
        "object": {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kubevirt"}, "spec": spec},
        "oldObject": {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "kubevirt"}, "spec": {}},
    }});
    let answer = answer(&FakeCluster::default(), crate::spec_admission::UPDATE_PATH, &review)
        .await
        .expect("an answer");
    let message = "Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)";
    assert_eq!(
        answer["response"],
        json!({"uid": "u-2", "allowed": false, "status": {
            "code": 422,
            "reason": "Invalid",
            "message": message,
            "details": {"causes": [{"type": "FieldValueInvalid", "message": message}]},
        }})
    );
}
