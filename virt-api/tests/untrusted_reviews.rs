//! Any bytes sent to a webhook get an answer, never a panic: the stable-toolchain companion of the
//! `decode_admission_review` fuzz target, over random bytes and over valid reviews with random
//! values spliced into the object.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use proptest::prelude::*;
use serde_json::{Value, json};
use virt_api::admission::lookup::NoCluster;
use virt_api::admission::{AdmissionContext, Webhook, admit};

fn context() -> AdmissionContext {
    AdmissionContext {
        config: kubevirt_api::v1::ClusterConfig::default(),
        install_namespace: "kubevirt".to_owned(),
    }
}

fn answer_all(body: &[u8]) {
    for hook in Webhook::ALL {
        let answer = futures::executor::block_on(admit(
            hook,
            body,
            &context(),
            Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            &|| "u".to_owned(),
            &NoCluster("none in this test".to_owned()),
        ));
        let code = answer.response.status.as_ref().map(|s| s.code);
        assert!(
            answer.response.allowed || matches!(code, Some(400 | 422)),
            "{hook:?}: {:?}",
            answer.response
        );
    }
}

fn review(object: &Value, resource: &str) -> Vec<u8> {
    serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "userInfo": {"username": "a"},
        "resource": {"group": "kubevirt.io", "version": "v1", "resource": resource},
        "object": object}}),
    )
    .expect("encode")
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
        Just(json!([])),
        Just(json!({})),
    ]
}

const PATHS: [&str; 10] = [
    "/spec/domain/resources/requests/memory",
    "/spec/domain/cpu",
    "/spec/domain/cpu/cores",
    "/spec/domain/memory/guest",
    "/spec/domain/devices/disks/0",
    "/spec/domain/devices/disks/0/name",
    "/spec/volumes/0/containerDisk/image",
    "/spec/networks",
    "/spec/domain/features/hyperv",
    "/metadata/labels",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_bytes_are_answered(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        answer_all(&bytes);
    }

    #[test]
    fn reviews_with_random_values_are_answered(path in 0..PATHS.len(), value in json_leaf(), vm in any::<bool>()) {
        let mut object = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "x"},
            "spec": {"domain": {"resources": {"requests": {"memory": "64Mi"}}, "cpu": {"cores": 1}, "memory": {},
                                "features": {}, "devices": {"disks": [{"name": "d"}]}},
                     "volumes": [{"name": "d", "containerDisk": {"image": "i"}}]}});
        if let Some(slot) = object.pointer_mut(PATHS[path]) {
            *slot = value;
        }
        if vm {
            let template = object["spec"].clone();
            object = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "v"},
                "spec": {"runStrategy": "Always", "template": {"spec": template}}});
            answer_all(&review(&object, "virtualmachines"));
        } else {
            answer_all(&review(&object, "virtualmachineinstances"));
        }
    }
}
