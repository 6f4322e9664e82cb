//! The webhook's AdmissionReview: the request read, a VM judged by its own rules, and the answer
//! in upstream's shape for each verdict.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::eval::Cause;
use crate::review::{Request, Verdict, judge, request, response};

fn review(resource: &str, object: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "req-1", "operation": "CREATE",
        "resource": {"group": "kubevirt.io", "version": "v1", "resource": resource},
        "object": object}})
}

fn vm(rules: &str, cores: u64) -> Value {
    json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
           "metadata": {"name": "vm", "namespace": "default", "annotations": {"vm.kubevirt.io/validations": rules}},
           "spec": {"template": {"spec": {"domain": {"cpu": {"cores": cores}}}}}})
}

const CORES: &str = r#"[{"name": "core-limits", "rule": "integer", "path": "jsonpath::.spec.domain.cpu.cores",
                         "message": "Core amount not within range", "min": 1, "max": 4}]"#;

#[test]
fn a_review_of_a_virtual_machine_is_read_and_others_are_refused_by_name() {
    let object = vm(CORES, 2);
    assert_eq!(
        request(&review("virtualmachines", &object)),
        Ok(Request {
            uid: "req-1".to_owned(),
            vm: object.clone()
        })
    );
    assert_eq!(
        request(&review("virtualmachineinstances", &object)),
        Err((
            "req-1".to_owned(),
            "expect resource kubevirt.io/v1, Resource=virtualmachineinstances to be 'virtualmachines'".to_owned()
        ))
    );
    assert!(request(&json!({"kind": "AdmissionReview"})).is_err());
}

#[test]
fn a_vm_breaking_a_rule_is_refused_with_422_and_its_cause() {
    let verdict = judge(&vm(CORES, 5), CORES);
    let cause = Cause {
        field: ".spec.domain.cpu.cores".to_owned(),
        message: "Core amount not within range: value 5 is higher than maximum [4]".to_owned(),
    };
    assert_eq!(verdict, Verdict::Refused(vec![cause]));
    assert_eq!(
        response("req-1", &verdict),
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {
            "uid": "req-1", "allowed": false, "status": {
                "code": 422, "reason": "Invalid",
                "message": "Core amount not within range: value 5 is higher than maximum [4]",
                "details": {"causes": [{"type": "FieldValueInvalid", "field": ".spec.domain.cpu.cores",
                                        "message": "Core amount not within range: value 5 is higher than maximum [4]"}]}}}})
    );
    assert_eq!(judge(&vm(CORES, 3), CORES), Verdict::Allowed(Vec::new()));
    assert_eq!(
        response("req-2", &Verdict::Allowed(Vec::new()))["response"],
        json!({"uid": "req-2", "allowed": true})
    );
}

#[test]
fn unreadable_rules_are_refused_with_400_and_a_vm_on_its_way_out_is_not_judged() {
    let verdict = judge(&vm("[{\"path\": \"spec\"}]", 2), "[{\"path\": \"spec\"}]");
    let Verdict::Error(text) = &verdict else {
        panic!("an error: {verdict:?}")
    };
    assert_eq!(text, "rule 0: key \"path\": invalid JSONPath");
    assert_eq!(
        response("req-1", &verdict)["response"]["status"],
        json!({"code": 400, "message": "rule 0: key \"path\": invalid JSONPath"})
    );
    let mut leaving = vm(CORES, 9);
    leaving["metadata"]["deletionTimestamp"] = json!("2026-12-02T00:00:00Z");
    assert_eq!(judge(&leaving, CORES), Verdict::Allowed(Vec::new()));
    assert_eq!(judge(&vm("", 9), ""), Verdict::Allowed(Vec::new()), "no rules");
}
