//! The API server adapter on the mock API server: a finalizer is set by a merge patch of the
//! whole list, conditional on the uid and resourceVersion read, and refused without them; a
//! delete of an object already gone is no error.

#[path = "../../kubevirt-tests/support/mock_api_server.rs"]
mod mock_api_server;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::ApiResource;
use operator_kit::objects::Objects;
use operator_kit::objects::kube::KubeObjects;
use pretty_assertions::assert_eq;
use serde_json::json;

fn meta(uid: Option<&str>, version: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some("cm".to_owned()),
        namespace: Some("ns".to_owned()),
        uid: uid.map(str::to_owned),
        resource_version: version.map(str::to_owned),
        finalizers: Some(vec!["other.io/keep".to_owned(), "ours.io/f".to_owned()]),
        ..ObjectMeta::default()
    }
}

#[tokio::test]
async fn a_finalizer_is_patched_with_its_preconditions_and_refused_without_them() {
    let (client, log) = mock_api_server::api_server(vec![
        (
            200,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
        ),
        (
            404,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404, "message": "gone"}),
        ),
    ]);
    let objects = KubeObjects::new(client, "test-operator");
    let resource = ApiResource::erase::<ConfigMap>(&());
    objects
        .set_finalizer(&resource, &meta(Some("u-1"), Some("7")), "ours.io/f", false)
        .await
        .expect("patched");
    let error = objects
        .set_finalizer(&resource, &meta(None, Some("7")), "ours.io/f", true)
        .await
        .expect_err("no uid");
    assert!(error.to_string().contains("no uid or resourceVersion"), "{error}");
    objects
        .delete(&resource, Some("ns"), "cm")
        .await
        .expect("gone is no error");
    let seen = log.lock().expect("log");
    assert_eq!(seen.len(), 2, "nothing is sent without the preconditions");
    assert_eq!(
        (
            seen[0].method.as_str(),
            seen[0].path.as_str(),
            seen[0].content_type.as_str()
        ),
        (
            "PATCH",
            "/api/v1/namespaces/ns/configmaps/cm?",
            "application/merge-patch+json"
        )
    );
    assert_eq!(
        seen[0].body,
        json!({"metadata": {"uid": "u-1", "resourceVersion": "7", "finalizers": ["other.io/keep"]}})
    );
    assert_eq!(seen[1].method, "DELETE");
}

#[tokio::test]
async fn a_replace_is_a_put_of_the_whole_object_at_the_version_read() {
    let (client, log) = mock_api_server::api_server(vec![(
        200,
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}}),
    )]);
    let objects = KubeObjects::new(client, "test-operator");
    let desired = operator_kit::objects::Desired::from_json::<ConfigMap>(json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns", "labels": {"a": "b"}},
        "data": {"k": "v"},
    }))
    .expect("desired");
    objects.replace(&desired, "42").await.expect("replaced");
    let seen = log.lock().expect("log");
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("PUT", "/api/v1/namespaces/ns/configmaps/cm?&fieldManager=test-operator")
    );
    assert_eq!(
        seen[0].body,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "ns", "labels": {"a": "b"}, "resourceVersion": "42"},
            "data": {"k": "v"},
        })
    );
}
