//! Discovery documents of the `subresources.kubevirt.io` group: what `kubectl get --raw` and the
//! API aggregator read to learn which subresources virt-api serves.

use serde_json::{Value, json};

/// The API group.
pub const GROUP: &str = "subresources.kubevirt.io";
/// The versions served; `v1alpha3` is upstream's older alias of the same API.
pub const VERSIONS: [&str; 2] = ["v1", "v1alpha3"];

/// The subresources served: (resource/subresource, kind, verbs).
pub const RESOURCES: [(&str, &str, &str); 9] = [
    ("expand-vm-spec", "VirtualMachine", "update"),
    ("virtualmachines/expand-spec", "VirtualMachine", "get"),
    ("virtualmachines/start", "VirtualMachine", "update"),
    ("virtualmachines/stop", "VirtualMachine", "update"),
    ("virtualmachines/restart", "VirtualMachine", "update"),
    ("virtualmachines/migrate", "VirtualMachine", "update"),
    ("virtualmachineinstances/pause", "VirtualMachineInstance", "update"),
    ("virtualmachineinstances/unpause", "VirtualMachineInstance", "update"),
    ("virtualmachineinstances/console", "VirtualMachineInstance", "get"),
];

fn group_versions() -> Vec<Value> {
    VERSIONS
        .iter()
        .map(|v| json!({"groupVersion": format!("{GROUP}/{v}"), "version": v}))
        .collect()
}

fn group() -> Value {
    json!({
        "name": GROUP,
        "versions": group_versions(),
        "preferredVersion": {"groupVersion": format!("{GROUP}/v1"), "version": "v1"},
    })
}

/// `GET /apis/subresources.kubevirt.io/{version}`.
#[must_use]
pub fn resource_list(version: &str) -> Value {
    let resources: Vec<Value> = RESOURCES
        .iter()
        .map(|(name, kind, verb)| {
            json!({"name": name, "singularName": "", "namespaced": true, "kind": kind, "verbs": [verb]})
        })
        .collect();
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": format!("{GROUP}/{version}"),
        "resources": resources,
    })
}

/// `GET /apis/subresources.kubevirt.io`.
#[must_use]
pub fn api_group() -> Value {
    let mut g = group();
    g["kind"] = json!("APIGroup");
    g["apiVersion"] = json!("v1");
    g
}

/// `GET /apis`.
#[must_use]
pub fn api_group_list() -> Value {
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]})
}

/// `GET /`.
#[must_use]
pub fn root_paths() -> Value {
    let mut paths = vec![
        "/apis".to_owned(),
        format!("/apis/{GROUP}"),
        "/healthz".to_owned(),
        "/version".to_owned(),
    ];
    paths.extend(VERSIONS.iter().map(|v| format!("/apis/{GROUP}/{v}")));
    json!({"paths": paths})
}
