use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::uninstall::tests::{FakeCluster, cr};
use crate::uninstall::{BLOCK, Workload};

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
    let answer = answer(&cluster, &review("kubevirt")).await.expect("an answer");
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
    let answer = answer(&cluster, &review("kubevirt")).await.expect("an answer");
    assert_eq!(answer["response"], json!({"uid": "u-1", "allowed": true}));
}

#[tokio::test]
async fn a_review_without_request_or_uid_is_a_bad_request() {
    let cluster = FakeCluster::default();
    assert_eq!(
        answer(&cluster, &json!({})).await,
        Err("the AdmissionReview has no request".to_owned())
    );
    assert_eq!(
        answer(&cluster, &json!({"request": {"name": "kubevirt"}})).await,
        Err("the AdmissionReview's request has no uid".to_owned())
    );
}
