use serde_json::json;

use super::{StrategicMergeError, apply};

fn deployment() -> serde_json::Value {
    json!({
        "metadata": {"name": "virt-controller", "labels": {"app": "x"}},
        "spec": {"replicas": 2, "template": {"spec": {
            "containers": [
                {"name": "virt-controller", "image": "a", "args": ["--port", "8443"],
                 "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                 "ports": [{"containerPort": 8443, "name": "metrics"}],
                 "volumeMounts": [{"mountPath": "/certs", "name": "certs"}]},
                {"name": "sidecar", "image": "s"}
            ],
            "tolerations": [{"key": "a", "operator": "Exists"}]
        }}}
    })
}

#[test]
fn patches_merge_by_kubernetes_merge_keys_and_directives() {
    let cases = [
        (
            "maps merge; null removes; scalars replace",
            json!({"metadata": {"labels": {"extra": "y", "app": null}}, "spec": {"replicas": 3}}),
            json!({"metadata": {"name": "virt-controller", "labels": {"extra": "y"}}}),
        ),
        (
            "a container merges by name; its env by name; a primitive list is replaced",
            json!({"spec": {"template": {"spec": {"containers": [
                {"name": "virt-controller", "args": ["--v", "4"], "env": [{"name": "B", "value": "9"}, {"name": "C", "value": "3"}]}
            ]}}}}),
            json!({"args": ["--v", "4"], "image": "a", "env": [
                {"name": "A", "value": "1"}, {"name": "B", "value": "9"}, {"name": "C", "value": "3"}
            ]}),
        ),
        (
            "a new container is added at the end",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "new", "image": "n"}]}}}}),
            json!({"names": ["virt-controller", "sidecar", "new"]}),
        ),
        (
            "$patch: delete removes a list element",
            json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}}),
            json!({"names": ["virt-controller"]}),
        ),
        (
            "$patch: replace replaces a merged list",
            json!({"spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}}}}),
            json!({"names": ["only"]}),
        ),
        (
            "a list without a merge key (tolerations) is replaced",
            json!({"spec": {"template": {"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}}}),
            json!({"tolerations": [{"key": "b", "operator": "Exists"}]}),
        ),
        (
            "$patch: replace on an object replaces it",
            json!({"metadata": {"labels": {"$patch": "replace", "only": "z"}}}),
            json!({"metadata": {"name": "virt-controller", "labels": {"only": "z"}}}),
        ),
    ];
    for (case, patch, expected) in cases {
        let patched = apply(&deployment(), &patch).expect(case);
        let containers = &patched["spec"]["template"]["spec"]["containers"];
        if let Some(names) = expected.get("names") {
            let got: Vec<&str> = containers
                .as_array()
                .expect("containers")
                .iter()
                .filter_map(|c| c["name"].as_str())
                .collect();
            assert_eq!(&serde_json::to_value(got).expect("json"), names, "{case}");
        }
        if let Some(metadata) = expected.get("metadata") {
            assert_eq!(&patched["metadata"], metadata, "{case}");
        }
        if let Some(args) = expected.get("args") {
            let first = &containers[0];
            assert_eq!(&first["args"], args, "{case}");
            assert_eq!(
                &first["image"], &expected["image"],
                "{case}: the rest of the container stays"
            );
            assert_eq!(&first["env"], &expected["env"], "{case}");
            assert_eq!(first["volumeMounts"][0]["mountPath"], "/certs", "{case}");
        }
        if let Some(tolerations) = expected.get("tolerations") {
            assert_eq!(
                &patched["spec"]["template"]["spec"]["tolerations"], tolerations,
                "{case}"
            );
        }
    }
    let replicas = apply(&deployment(), &json!({"spec": {"replicas": 3}})).expect("patch");
    assert_eq!(replicas["spec"]["replicas"], 3);
}

#[test]
fn service_ports_merge_by_port_and_container_ports_by_container_port() {
    let service = json!({"spec": {"ports": [{"port": 443, "targetPort": 8443}, {"port": 80}]}});
    let patched = apply(
        &service,
        &json!({"spec": {"ports": [{"port": 443, "targetPort": 9443}]}}),
    )
    .expect("patch");
    assert_eq!(
        patched["spec"]["ports"],
        json!([{"port": 443, "targetPort": 9443}, {"port": 80}])
    );
    let patched = apply(
        &deployment(),
        &json!({"spec": {"template": {"spec": {"containers": [
            {"name": "virt-controller", "ports": [{"containerPort": 8443, "name": "renamed"}]}
        ]}}}}),
    )
    .expect("patch");
    assert_eq!(
        patched["spec"]["template"]["spec"]["containers"][0]["ports"],
        json!([{"containerPort": 8443, "name": "renamed"}])
    );
}

#[test]
fn what_is_not_carried_out_is_refused_by_name() {
    let cases = [
        (json!([1]), StrategicMergeError::NotAnObject("a list")),
        (
            json!({"spec": {"$retainKeys": ["replicas"]}}),
            StrategicMergeError::UnsupportedDirective("$retainKeys".to_owned()),
        ),
        (
            json!({"$setElementOrder/containers": []}),
            StrategicMergeError::UnsupportedDirective("$setElementOrder/containers".to_owned()),
        ),
        (
            json!({"metadata": {"$patch": "explode"}}),
            StrategicMergeError::UnknownPatchValue("\"explode\"".to_owned()),
        ),
        (
            json!({"spec": {"template": {"spec": {"containers": [{"image": "no-name"}]}}}}),
            StrategicMergeError::NoMergeKey {
                field: "containers".to_owned(),
                key: "name",
            },
        ),
    ];
    for (patch, error) in cases {
        assert_eq!(apply(&deployment(), &patch), Err(error), "{patch}");
    }
}
