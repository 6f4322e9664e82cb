use pretty_assertions::assert_eq;

use super::*;

fn review(operation: &str, object: &Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "req-1",
            "operation": operation,
            "namespace": "dst",
            "userInfo": {"username": "alice", "uid": "u-1", "groups": ["devs", "system:authenticated"]},
            "object": object,
        }
    })
}

fn clone_of(namespace: Option<&str>) -> Value {
    let mut pvc = json!({"name": "golden"});
    if let Some(namespace) = namespace {
        pvc["namespace"] = json!(namespace);
    }
    json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1",
        "kind": "DataVolume",
        "metadata": {"name": "copy", "namespace": "dst"},
        "spec": {"source": {"pvc": pvc}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}},
    })
}

#[test]
fn a_clone_is_checked_in_the_source_namespace_for_its_creator() {
    let (uid, admission) = read(&review("CREATE", &clone_of(Some("src")))).expect("read");
    assert_eq!(uid, "req-1");
    let Admission::Clone(clone) = admission else {
        panic!("a clone")
    };
    assert_eq!(
        (clone.source_namespace.as_str(), clone.source.as_str()),
        ("src", "golden")
    );
    assert_eq!(
        (clone.target_namespace.as_str(), clone.target.as_str()),
        ("dst", "copy")
    );
    let [first, second] = reviews(&clone);
    assert_eq!(first["user"], "alice");
    assert_eq!(first["groups"], json!(["devs", "system:authenticated"]));
    assert_eq!(
        first["resourceAttributes"],
        json!({"namespace": "src", "verb": "create", "group": "cdi.kubevirt.io", "resource": "datavolumes", "subresource": "source"})
    );
    assert_eq!(
        second["resourceAttributes"],
        json!({"namespace": "src", "verb": "create", "group": "", "resource": "pods"})
    );
}

#[test]
fn a_source_without_a_namespace_is_in_the_targets() {
    let (_, admission) = read(&review("CREATE", &clone_of(None))).expect("read");
    let Admission::Clone(clone) = admission else {
        panic!("a clone")
    };
    assert_eq!(clone.source_namespace, "dst");
}

#[test]
fn other_sources_and_updates_are_admitted_as_they_are() {
    let import = json!({"metadata": {"name": "a"}, "spec": {"source": {"http": {"url": "http://x"}}}});
    assert_eq!(read(&review("CREATE", &import)).expect("read").1, Admission::Admit);
    assert_eq!(
        read(&review("UPDATE", &clone_of(Some("src")))).expect("read").1,
        Admission::Admit
    );
    assert!(read(&json!({"kind": "AdmissionReview"})).is_err());
}

#[test]
fn the_token_is_patched_in_and_a_denial_names_upstreams_reason() {
    let (_, Admission::Clone(mut clone)) = read(&review("CREATE", &clone_of(Some("src")))).expect("read") else {
        panic!("a clone")
    };
    assert_eq!(
        token_patch(&clone, "T"),
        json!([{"op": "add", "path": "/metadata/annotations", "value": {"cdi.kubevirt.io/storage.clone.token": "T"}}])
    );
    clone.has_annotations = true;
    assert_eq!(
        token_patch(&clone, "T"),
        json!([{"op": "add", "path": "/metadata/annotations/cdi.kubevirt.io~1storage.clone.token", "value": "T"}])
    );
    let allowed = answer("req-1", Ok(Some(json!([]))));
    assert_eq!(allowed["response"]["allowed"], true);
    assert_eq!(allowed["response"]["patchType"], "JSONPatch");
    assert_eq!(allowed["response"]["patch"], "W10=");
    let denied = answer("req-1", Err(DENIED.to_owned()));
    assert_eq!(denied["response"]["allowed"], false);
    assert_eq!(denied["response"]["status"]["message"], DENIED);
    assert_eq!(denied["response"]["uid"], "req-1");
}

#[test]
fn a_clone_without_its_names_is_refused_by_field() {
    let mut unnamed = clone_of(Some("src"));
    unnamed["metadata"]["name"] = Value::Null;
    let (_, Admission::Refuse(why)) = read(&review("CREATE", &unnamed)).expect("read") else {
        panic!("refused")
    };
    assert!(why.starts_with("metadata.name"), "{why}");
    let mut no_source = clone_of(Some("src"));
    no_source["spec"]["source"]["pvc"]["name"] = json!("");
    let (_, Admission::Refuse(why)) = read(&review("CREATE", &no_source)).expect("read") else {
        panic!("refused")
    };
    assert_eq!(why, "spec.source.pvc.name is required");
}

#[test]
fn a_source_ref_is_read_for_resolving_and_other_sources_pass() {
    let with_spec = |spec: Value, name: &str| {
        json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1",
            "kind": "DataVolume",
            "metadata": {"name": name, "namespace": "dst"},
            "spec": spec,
        })
    };
    let by_ref = json!({"sourceRef": {"kind": "DataSource", "name": "golden"}});
    let (_, admission) = read(&review("CREATE", &with_spec(by_ref.clone(), "copy"))).expect("read");
    let Admission::SourceRef(request) = admission else {
        panic!("a sourceRef: {admission:?}")
    };
    assert_eq!(
        (
            request.reference.name.as_str(),
            request.reference.namespace.as_deref(),
            request.target_namespace.as_str()
        ),
        ("golden", None, "dst")
    );
    let clone = request.clone_of("images".to_owned(), "disk".to_owned());
    assert_eq!(
        (clone.source_namespace.as_str(), clone.target.as_str()),
        ("images", "copy")
    );

    let (_, unnamed) = read(&review("CREATE", &with_spec(by_ref, ""))).expect("read");
    assert_eq!(unnamed, Admission::Refuse(UNNAMED.to_owned()));

    let bad = json!({"sourceRef": {"kind": "DataSource"}});
    let (_, refused) = read(&review("CREATE", &with_spec(bad, "copy"))).expect("read");
    assert!(
        matches!(refused, Admission::Refuse(ref why) if why.starts_with("spec.sourceRef")),
        "{refused:?}"
    );

    let import = json!({"source": {"http": {"url": "http://server/disk.img"}}});
    assert_eq!(
        read(&review("CREATE", &with_spec(import, "copy"))).expect("read").1,
        Admission::Admit
    );
}
