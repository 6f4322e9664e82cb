use std::collections::BTreeMap;

use kubevirt_api::instancetype::{VirtualMachineInstancetypeSpec, VirtualMachinePreferenceSpec};
use kubevirt_api::v1::{KubeVirtConfiguration, KubeVirtSpec};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;
use crate::render::tests::kubevirt;

fn by_kind(kind: &str) -> Vec<DynamicObject> {
    bundle()
        .expect("the bundles read")
        .into_iter()
        .filter(|(resource, _)| resource.kind == kind)
        .map(|(_, object)| object)
        .collect()
}

fn named<'a>(objects: &'a [DynamicObject], name: &str) -> &'a DynamicObject {
    objects
        .iter()
        .find(|o| o.name_any() == name)
        .unwrap_or_else(|| panic!("{name} is in the bundle"))
}

#[test]
fn the_bundles_hold_upstreams_series_and_preferences() {
    let instancetypes = by_kind("VirtualMachineClusterInstancetype");
    let preferences = by_kind("VirtualMachineClusterPreference");
    assert_eq!(
        (instancetypes.len(), preferences.len()),
        (65, 54),
        "upstream's v1.7.0 counts"
    );
    let mut series = BTreeMap::<String, usize>::new();
    for object in &instancetypes {
        let name = object.name_any();
        let prefix = name.split('.').next().unwrap_or_default().to_owned();
        *series.entry(prefix).or_default() += 1;
    }
    assert_eq!(
        series.keys().map(String::as_str).collect::<Vec<_>>(),
        ["cx1", "d1", "m1", "n1", "o1", "rt1", "u1"]
    );
    assert_eq!(series["u1"], 10, "nano to 8xlarge");
    let small = named(&instancetypes, "u1.small");
    assert_eq!(small.data["spec"]["cpu"]["guest"], 1);
    assert_eq!(small.data["spec"]["memory"]["guest"], "2Gi");
    let labels = small.labels();
    for (key, value) in [
        ("instancetype.kubevirt.io/vendor", "kubevirt.io"),
        ("instancetype.kubevirt.io/class", "general.purpose"),
        ("instancetype.kubevirt.io/size", "small"),
        ("instancetype.kubevirt.io/cpu", "1"),
        ("instancetype.kubevirt.io/memory", "2Gi"),
        (VERSION_LABEL, VERSION),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}");
    }
    for name in [
        "alpine",
        "cirros",
        "fedora",
        "centos.stream9",
        "rhel.9",
        "ubuntu",
        "windows.11",
    ] {
        named(&preferences, name);
    }
    assert!(
        preferences
            .iter()
            .chain(&instancetypes)
            .all(|o| o.labels().get(VERSION_LABEL).map(String::as_str) == Some(VERSION)),
        "every object carries the release"
    );
}

/// Every spec of `kind` reads as `S` and writes back the same.
fn survives<S: serde::de::DeserializeOwned + serde::Serialize>(kind: &str) {
    for object in by_kind(kind) {
        let spec = object.data["spec"].clone();
        let typed: S = serde_json::from_value(spec.clone()).unwrap_or_else(|e| panic!("{}: {e}", object.name_any()));
        assert_eq!(
            serde_json::to_value(&typed).expect("json"),
            spec,
            "{}",
            object.name_any()
        );
    }
}

/// Every spec reads as our types and writes back the same: no field of upstream's is dropped
/// (the CRDs are generated from the same types, so the API server keeps them too).
#[test]
fn every_spec_survives_our_types_whole() {
    survives::<VirtualMachineInstancetypeSpec>("VirtualMachineClusterInstancetype");
    survives::<VirtualMachinePreferenceSpec>("VirtualMachineClusterPreference");
}

#[test]
fn the_committed_version_is_the_one_the_script_recorded() {
    let recorded = include_str!("../data/common-instancetypes/version");
    assert_eq!(recorded.trim(), VERSION);
}

#[test]
fn deployment_is_on_unless_turned_off() {
    let with = |enabled: Option<bool>, section: bool| {
        kubevirt(KubeVirtSpec {
            configuration: Some(KubeVirtConfiguration {
                common_instancetypes_deployment: section
                    .then_some(kubevirt_api::v1::CommonInstancetypesDeployment { enabled }),
                ..KubeVirtConfiguration::default()
            }),
            ..KubeVirtSpec::default()
        })
    };
    assert!(enabled(&kubevirt(KubeVirtSpec::default())));
    assert!(enabled(&with(None, false)));
    assert!(enabled(&with(None, true)));
    assert!(enabled(&with(Some(true), true)));
    assert!(!enabled(&with(Some(false), true)));
}

fn resource(kind: &str) -> ApiResource {
    resources().into_iter().find(|r| r.kind == kind).expect("a bundle kind")
}

const IT: &str = "VirtualMachineClusterInstancetype";
const PREF: &str = "VirtualMachineClusterPreference";

fn object(kind: &str, name: &str, labels: Value, spec: Value, version: &str) -> DynamicObject {
    let mut value = json!({
        "apiVersion": "instancetype.kubevirt.io/v1beta1",
        "kind": kind,
        "metadata": {"name": name, "annotations": {"a": "1"}, "resourceVersion": version},
    });
    value["metadata"]["labels"] = labels;
    value["spec"] = spec;
    serde_json::from_value(value).expect("an object")
}

fn ours() -> Value {
    json!({MANAGED_BY.0: MANAGED_BY.1, COMPONENT.0: COMPONENT.1})
}

fn wanted(kind: &str, name: &str, spec: Value) -> Desired {
    let object = object(kind, name, ours(), spec, "");
    let mut object = object;
    object.metadata.resource_version = None;
    Desired {
        resource: resource(kind),
        namespace: None,
        name: name.to_owned(),
        object,
    }
}

fn shown(plan: &Plan<'_>) -> (Vec<String>, Vec<String>) {
    let writes = plan
        .write
        .iter()
        .map(|w| match w {
            Write::Create(d) => format!("create {}", d.name),
            Write::Replace(d, version) => format!("replace {}@{version}", d.name),
        })
        .collect();
    let deletes = plan
        .delete
        .iter()
        .map(|(r, name)| format!("{} {name}", r.kind))
        .collect();
    (writes, deletes)
}

#[test]
fn the_plan_creates_puts_back_takes_over_and_deletes_only_its_own() {
    let spec = json!({"cpu": {"guest": 1}, "memory": {"guest": "2Gi"}});
    let wanted = vec![
        wanted(IT, "missing", spec.clone()),
        wanted(IT, "same", spec.clone()),
        wanted(IT, "edited-spec", spec.clone()),
        wanted(IT, "edited-labels", spec.clone()),
        wanted(IT, "someone-elses", spec.clone()),
        wanted(PREF, "same", json!({})),
    ];
    let mut extra_label = ours();
    extra_label["user"] = json!("x");
    let live = vec![
        (resource(IT), object(IT, "same", ours(), spec.clone(), "1")),
        (
            resource(IT),
            object(
                IT,
                "edited-spec",
                ours(),
                json!({"cpu": {"guest": 2}, "memory": {"guest": "2Gi"}}),
                "2",
            ),
        ),
        (
            resource(IT),
            object(IT, "edited-labels", extra_label, spec.clone(), "3"),
        ),
        (
            resource(IT),
            object(IT, "someone-elses", json!({"user": "x"}), spec.clone(), "4"),
        ),
        (resource(PREF), object(PREF, "same", ours(), json!({}), "5")),
        (resource(IT), object(IT, "stale", ours(), spec.clone(), "6")),
        (
            resource(IT),
            object(IT, "a-users", json!({"user": "x"}), spec.clone(), "7"),
        ),
        (
            resource(IT),
            object(IT, "managed-elsewhere", json!({MANAGED_BY.0: MANAGED_BY.1}), spec, "8"),
        ),
        // The same name as a wanted instance type, in the other kind.
        (resource(PREF), object(PREF, "missing", ours(), json!({}), "9")),
    ];
    assert_eq!(
        shown(&plan(&wanted, &live, true)),
        (
            vec![
                "create missing".to_owned(),
                "replace edited-spec@2".to_owned(),
                "replace edited-labels@3".to_owned(),
                "replace someone-elses@4".to_owned(),
            ],
            vec![
                "VirtualMachineClusterInstancetype stale".to_owned(),
                "VirtualMachineClusterPreference missing".to_owned(),
            ]
        )
    );
    assert_eq!(
        shown(&plan(&wanted, &live, false)),
        (
            vec![],
            vec![
                "VirtualMachineClusterInstancetype same".to_owned(),
                "VirtualMachineClusterInstancetype edited-spec".to_owned(),
                "VirtualMachineClusterInstancetype edited-labels".to_owned(),
                "VirtualMachineClusterPreference same".to_owned(),
                "VirtualMachineClusterInstancetype stale".to_owned(),
                "VirtualMachineClusterPreference missing".to_owned(),
            ]
        ),
        "turned off: every one it labelled, whatever its name, and no one else's"
    );
    assert_eq!(shown(&plan(&wanted, &[], false)), (vec![], vec![]));
}

#[test]
fn an_annotation_changed_by_hand_is_put_back() {
    let wanted = vec![wanted(IT, "u", json!({}))];
    let mut live = object(IT, "u", ours(), json!({}), "1");
    assert_eq!(
        shown(&plan(&wanted, &[(resource(IT), live.clone())], true)).0,
        Vec::<String>::new()
    );
    live.annotations_mut().insert("a".to_owned(), "2".to_owned());
    assert_eq!(shown(&plan(&wanted, &[(resource(IT), live)], true)).0, ["replace u@1"]);
}
