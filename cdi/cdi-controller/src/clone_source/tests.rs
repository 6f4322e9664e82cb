use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn args(block: bool) -> CloneSourceArgs {
    CloneSourceArgs {
        target_namespace: "dst".to_owned(),
        target: "copy".to_owned(),
        target_uid: "target-uid".to_owned(),
        source_namespace: "src".to_owned(),
        source: "disk".to_owned(),
        source_uid: "source-uid".to_owned(),
        source_block: block,
        source_read_write_once: true,
        owner_uid: "dv-uid".to_owned(),
        pod: crate::importer_pod::PodSettings {
            image: "localhost/kubevirt-rs/cdi-cloner:latest".to_owned(),
            pull_policy: "IfNotPresent".to_owned(),
            ..crate::importer_pod::PodSettings::default()
        },
    }
}

#[test]
fn the_source_pod_has_upstreams_name_environment_and_read_only_source() {
    let source = render(&args(false), "SERVER CA");
    assert_eq!(source.client_name, "src/disk-dst/copy");
    let pod = serde_json::to_value(&source.pod).expect("json");
    assert_eq!(pod["metadata"]["name"], "target-uid-source-pod");
    assert_eq!(pod["metadata"]["namespace"], "src");
    assert_eq!(
        pod["metadata"]["annotations"]["cdi.kubevirt.io/storage.ownerRef"],
        "dst/copy"
    );
    assert_eq!(
        pod["metadata"]["labels"]["cdi.kubevirt.io/storage.clone.cloneUniqeId"],
        "target-uid-source-pod"
    );
    assert!(
        pod["metadata"].get("ownerReferences").is_none(),
        "no owner across namespaces"
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(container["name"], "cdi-clone-source");
    let env: Vec<(String, serde_json::Value)> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|v| (v["name"].as_str().unwrap_or_default().to_owned(), v["value"].clone()))
        .collect();
    let get = |name: &str| env.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    assert_eq!(
        get("UPLOAD_URL"),
        Some(json!("https://cdi-upload-copy.dst.svc:8443/v1beta1/upload"))
    );
    assert_eq!(get("SERVER_CA_CERT"), Some(json!("SERVER CA")));
    assert_eq!(get("OWNER_UID"), Some(json!("dv-uid")));
    assert_eq!(get("VOLUME_MODE"), Some(json!("filesystem")));
    assert_eq!(get("MOUNT_POINT"), Some(json!("/var/run/cdi/clone/source")));
    assert_eq!(
        container["env"][0]["valueFrom"]["secretKeyRef"],
        json!({"name": "target-uid-source-pod", "key": "tls.key"})
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "cdi-data-vol", "mountPath": "/var/run/cdi/clone/source", "readOnly": true}])
    );
    assert_eq!(
        pod["spec"]["volumes"],
        json!([{"name": "cdi-data-vol", "persistentVolumeClaim": {"claimName": "disk", "readOnly": true}}])
    );
    assert_eq!(pod["spec"]["restartPolicy"], "OnFailure");
    let required = &pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0];
    assert_eq!(
        required["labelSelector"]["matchExpressions"][0]["values"],
        json!(["source-uid"])
    );
    assert_eq!(required["namespaces"], json!(["src"]));
}

#[test]
fn a_block_source_is_its_device() {
    let pod = serde_json::to_value(render(&args(true), "CA").pod).expect("json");
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["volumeDevices"],
        json!([{"name": "cdi-data-vol", "devicePath": "/dev/cdi-block-volume"}])
    );
    assert!(container.get("volumeMounts").is_none());
    assert_eq!(pod["spec"]["volumes"][0]["persistentVolumeClaim"]["readOnly"], true);
}

#[test]
fn the_secret_is_owned_by_the_pod() {
    let mut pod = render(&args(false), "CA").pod;
    pod.metadata.uid = Some("pod-uid".to_owned());
    let secret = serde_json::to_value(certificate_secret(&pod, "CERT", "KEY")).expect("json");
    assert_eq!(secret["metadata"]["name"], "target-uid-source-pod");
    assert_eq!(secret["metadata"]["namespace"], "src");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "pod-uid");
    assert_eq!(secret["data"]["tls.crt"], json!("Q0VSVA=="));
}

#[test]
fn the_workload_placement_keeps_its_affinity_beside_the_source_pods_own() {
    use k8s_openapi::api::core::v1::{NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
    let node_affinity = NodeAffinity {
        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "disk".to_owned(),
                    operator: "In".to_owned(),
                    values: Some(vec!["fast".to_owned()]),
                }]),
                match_fields: None,
            }],
        }),
        preferred_during_scheduling_ignored_during_execution: None,
    };
    let mut placed = args(false);
    placed.pod.placement = cdi_api::cdi::NodePlacement {
        node_selector: [("kubernetes.io/os".to_owned(), "linux".to_owned())].into(),
        affinity: Some(Affinity {
            node_affinity: Some(node_affinity.clone()),
            ..Affinity::default()
        }),
        ..cdi_api::cdi::NodePlacement::default()
    };
    let spec = render(&placed, "SERVER CA").pod.spec.expect("spec");
    let affinity = spec.affinity.expect("affinity");
    assert_eq!(affinity.node_affinity, Some(node_affinity), "the workload's");
    let pod_affinity = affinity.pod_affinity.expect("the source pod's own");
    assert_eq!(
        pod_affinity
            .required_during_scheduling_ignored_during_execution
            .map(|t| t.len()),
        Some(1),
        "with the pods using a ReadWriteOnce source"
    );
    assert_eq!(
        pod_affinity
            .preferred_during_scheduling_ignored_during_execution
            .map(|t| t.len()),
        Some(1),
        "near the upload server"
    );
    assert_eq!(
        spec.node_selector
            .and_then(|s| s.get("kubernetes.io/os").cloned())
            .as_deref(),
        Some("linux")
    );
}
