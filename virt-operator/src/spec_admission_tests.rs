use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::uninstall::tests::{FakeCluster, cr};

fn update(old_spec: Value, new_spec: Value) -> Value {
    let object = |spec: Value| {
        json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
            "spec": spec,
        })
    };
    json!({"uid": "u", "operation": "UPDATE", "object": object(new_spec), "oldObject": object(old_spec)})
}

fn self_signed(config: &Value) -> Value {
    json!({"certificateRotateStrategy": {"selfSigned": config}})
}

#[test]
fn lifetimes_that_can_be_kept_are_admitted() {
    for config in [
        json!({}),
        json!({"server": {"duration": "6m", "renewBefore": "4m"}}),
        json!({"ca": {"duration": "48h", "renewBefore": "24h"}, "server": {"duration": "24h", "renewBefore": "12h"}}),
        json!({"caRotateInterval": "48h", "certRotateInterval": "24h", "caOverlapInterval": "12h"}),
    ] {
        assert_eq!(
            admit_update(&update(json!({}), self_signed(&config))),
            Ok(()),
            "{config}"
        );
    }
}

#[test]
fn each_refusal_gives_every_reason_as_a_cause() {
    let conflict = "caRotateInterval, certRotateInterval and caOverlapInterval are deprecated and conflict with CertConfig defined rotation parameters";
    let cert_renew = "Cert RenewBefore cannot exceed Duration (spec.certificateRotationStrategy.selfSigned.server.duration < spec.certificateRotationStrategy.selfSigned.server.renewBefore)";
    let refusal = admit_update(&update(
        json!({}),
        self_signed(&json!({"caRotateInterval": "48h", "server": {"duration": "1h", "renewBefore": "2h"}})),
    ))
    .expect_err("refused");
    assert_eq!(refusal.causes, [conflict, cert_renew]);
    assert_eq!(refusal.message, format!("{conflict}, {cert_renew}"));
    let bad =
        admit_update(&update(json!({}), self_signed(&json!({"ca": {"duration": "a week"}})))).expect_err("refused");
    assert_eq!(
        bad.message,
        "spec.certificateRotateStrategy.selfSigned.ca.duration: \"a week\" is not a duration such as 48h, 1h30m or 90s"
    );
}

#[test]
fn workload_update_strategies_that_cannot_be_followed_are_refused_beside_the_lifetimes() {
    let followed = json!({"workloadUpdateStrategy": {"workloadUpdateMethods": ["LiveMigrate", "Evict"], "batchEvictionSize": 5, "batchEvictionInterval": "2s"}});
    assert_eq!(admit_update(&update(json!({}), followed)), Ok(()));
    let mut spec = self_signed(&json!({"server": {"duration": "1h", "renewBefore": "2h"}}));
    spec["workloadUpdateStrategy"] = json!({"batchEvictionInterval": "every minute"});
    let refusal = admit_update(&update(json!({}), spec)).expect_err("refused");
    assert_eq!(refusal.causes.len(), 2, "{refusal:?}");
    assert_eq!(
        refusal.causes[1],
        "spec.workloadUpdateStrategy.batchEvictionInterval: \"every minute\" is not a duration such as 48h, 1h30m or 90s"
    );
}

#[test]
fn an_update_that_keeps_the_spec_is_admitted_whatever_it_holds() {
    let unkept = self_signed(&json!({"server": {"duration": "1h", "renewBefore": "2h"}}));
    assert_eq!(admit_update(&update(unkept.clone(), unkept.clone())), Ok(()));
    assert!(admit_update(&update(json!({}), unkept)).is_err());
}

#[test]
fn a_request_without_a_kubevirt_cr_is_refused() {
    let refusal = admit_update(&json!({"uid": "u"})).expect_err("refused");
    assert_eq!(refusal.message, "the AdmissionReview's request has no object");
    let refusal =
        admit_update(&json!({"uid": "u", "object": {"spec": {"uninstallStrategy": 3}}})).expect_err("refused");
    assert!(refusal.message.starts_with("the KubeVirt CR: "), "{}", refusal.message);
}

#[test]
fn more_than_ten_reasons_are_counted_in_the_message() {
    let causes: Vec<String> = (0..12).map(|i| format!("r{i}")).collect();
    let refusal = Refusal::of(causes.clone());
    assert_eq!(
        refusal.message,
        "r0, r1, r2, r3, r4, r5, r6, r7, r8, r9, and 2 more validation errors"
    );
    assert_eq!(refusal.causes, causes);
}

#[tokio::test]
async fn a_second_kubevirt_cr_is_refused() {
    let request = json!({"uid": "u", "object": {"apiVersion": "kubevirt.io/v1", "kind": "KubeVirt", "metadata": {"name": "second", "namespace": "other"}, "spec": {}}});
    let empty = FakeCluster::default();
    assert_eq!(admit_create(&empty, &request).await, Ok(()));
    let one = FakeCluster {
        crs: vec![cr(None, Some("Deployed"))],
        ..FakeCluster::default()
    };
    assert_eq!(
        admit_create(&one, &request).await,
        Err(Refusal {
            message: ALREADY_CREATED.to_owned(),
            causes: Vec::new()
        })
    );
    assert_eq!(*one.reads.lock().expect("reads"), ["any kubevirts"]);
}
