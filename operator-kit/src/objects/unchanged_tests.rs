use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::objects::fake::FakeObjects;

#[test]
fn the_live_object_holds_what_it_has_with_the_same_values() {
    let desired = json!({
        "metadata": {"name": "a", "labels": {"x": "1"}, "annotations": null},
        "spec": {"replicas": 2, "template": {"containers": [{"name": "c", "image": "i:1"}]}},
    });
    let live = json!({
        "metadata": {"name": "a", "labels": {"x": "1", "other": "y"}, "uid": "u", "resourceVersion": "7"},
        "spec": {"replicas": 2, "template": {"containers": [{"name": "c", "image": "i:1", "imagePullPolicy": "IfNotPresent"}]}},
        "status": {"readyReplicas": 2},
    });
    assert!(holds(&live, &desired), "extra fields, defaults and status do not count");
    for (path, value) in [
        ("/spec/replicas", json!(3)),
        ("/metadata/labels/x", json!("2")),
        ("/spec/template/containers/0/image", json!("i:2")),
    ] {
        let mut changed = live.clone();
        *changed.pointer_mut(path).expect("the field") = value;
        assert!(!holds(&changed, &desired), "{path} changed");
    }
    let mut missing = live.clone();
    missing["metadata"]["labels"]
        .as_object_mut()
        .expect("labels")
        .remove("x");
    assert!(!holds(&missing, &desired), "a label removed");
    let mut longer = live;
    longer["spec"]["template"]["containers"]
        .as_array_mut()
        .expect("containers")
        .push(json!({"name": "sidecar"}));
    assert!(!holds(&longer, &desired), "a list of another length");
    assert!(
        !holds(&json!({"a": {}}), &json!({"a": {"b": []}})),
        "an empty list the server dropped"
    );
    assert!(
        holds(&json!({"minimum": 0}), &json!({"minimum": 0.0})),
        "numbers as numbers"
    );
    assert!(!holds(&json!({"minimum": 1}), &json!({"minimum": 0.0})));
}

fn config_map(data: &serde_json::Value) -> Desired {
    Desired::from_json::<k8s_openapi::api::core::v1::ConfigMap>(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns"},
        "data": data,
    }))
    .expect("a ConfigMap")
}

#[tokio::test]
async fn only_a_missing_or_changed_object_is_applied() {
    let fake = FakeObjects::default();
    let both = config_map(&json!({"a": "1", "b": "2"}));
    assert!(apply_if_changed(&fake, &both).await.expect("created"));
    assert!(!apply_if_changed(&fake, &both).await.expect("held"));
    assert!(
        apply_if_changed(&fake, &config_map(&json!({"a": "1", "b": "3"})))
            .await
            .expect("changed")
    );
    assert!(
        apply_if_changed(&fake, &config_map(&json!({"a": "1"})))
            .await
            .expect("a key no longer wanted"),
        "the live object still holds what is wanted, but the digest tells the removal"
    );
    assert_eq!(
        fake.state().writes,
        [
            "apply ConfigMap ns/cm",
            "apply ConfigMap ns/cm",
            "apply ConfigMap ns/cm"
        ],
        "the pass at rest wrote nothing"
    );
    let stored = fake.state().objects["ConfigMap ns/cm"].clone();
    assert_eq!(
        stored.metadata.annotations.as_ref().map(|a| a[DIGEST_ANNOTATION].len()),
        Some(64)
    );
}
