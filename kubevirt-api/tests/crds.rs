//! The committed CRDs are exactly what the types generate, and they are valid structural schemas
//! with upstream's names, short names and printer columns.
//!
//! Set `KUBEVIRT_RS_UPDATE_GOLDEN=1` to rewrite `manifests/crds/` from the types.

use std::path::{Path, PathBuf};

#[path = "../../kubevirt-tests/support/generated.rs"]
mod generated;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kubevirt_api::crd;
use serde_json::Value;

fn crd_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/crds")
}

#[test]
fn committed_crds_match_the_types() {
    let files = crd::render_all()
        .expect("CRDs render")
        .into_iter()
        .map(|c| (c.file_name, c.yaml));
    generated::assert_committed(&crd_dir(), files, "cargo run -p kubevirt-api --bin crdgen");
}

#[test]
fn committed_crds_parse_as_custom_resource_definitions() {
    for rendered in crd::render_all().expect("CRDs render") {
        let text = std::fs::read_to_string(crd_dir().join(&rendered.file_name)).expect("read CRD");
        let parsed: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("valid CRD YAML");
        assert!(
            ["kubevirt.io", "instancetype.kubevirt.io", "migrations.kubevirt.io"].contains(&parsed.spec.group.as_str()),
            "{}",
            rendered.file_name
        );
    }
}

fn crd_named(plural: &str) -> CustomResourceDefinition {
    crd::all()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .unwrap_or_else(|| panic!("no CRD for {plural}"))
}

fn columns(plural: &str) -> Vec<(String, String)> {
    let crd = crd_named(plural);
    crd.spec.versions[0]
        .additional_printer_columns
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|c| (c.name, c.json_path))
        .collect()
}

#[test]
fn vmi_crd_has_upstream_names_columns_and_status_subresource() {
    let crd = crd_named("virtualmachineinstances");
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["vmi".to_owned(), "vmis".to_owned()])
    );
    assert_eq!(crd.spec.scope, "Namespaced");
    let version = &crd.spec.versions[0];
    assert!(version.served && version.storage);
    assert!(version.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
    let names: Vec<_> = columns("virtualmachineinstances").into_iter().take(5).collect();
    assert_eq!(
        names,
        [
            ("Age", ".metadata.creationTimestamp"),
            ("Phase", ".status.phase"),
            ("IP", ".status.interfaces[0].ipAddress"),
            ("NodeName", ".status.nodeName"),
            ("Ready", ".status.conditions[?(@.type=='Ready')].status"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

#[test]
fn vm_crd_has_upstream_names_columns_and_status_subresource() {
    let crd = crd_named("virtualmachines");
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["vm".to_owned(), "vms".to_owned()])
    );
    assert!(
        crd.spec.versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
    assert_eq!(
        columns("virtualmachines"),
        [
            ("Age", ".metadata.creationTimestamp"),
            ("Status", ".status.printableStatus"),
            ("Ready", ".status.conditions[?(@.type=='Ready')].status"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
}

/// Checks the rules of a structural schema that the API server enforces: every node states its
/// type (or is int-or-string, or preserves unknown fields), and nothing is left to `$ref`.
fn assert_structural(node: &Value, path: &str) {
    let Value::Object(map) = node else {
        panic!("{path}: schema node is not an object")
    };
    assert!(!map.contains_key("$ref"), "{path}: $ref is not allowed");
    for forbidden in ["anyOf", "oneOf", "allOf", "not"] {
        if let Some(Value::Array(branches)) = map.get(forbidden) {
            for branch in branches {
                assert!(branch.get("type").is_none(), "{path}.{forbidden}: may not set type");
            }
        }
    }
    let typed = map.contains_key("type")
        || map.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        || map.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    assert!(typed, "{path}: no type");
    if let Some(Value::Object(props)) = map.get("properties") {
        for (name, child) in props {
            assert_structural(child, &format!("{path}.{name}"));
        }
    }
    if let Some(items) = map.get("items") {
        assert_structural(items, &format!("{path}[]"));
    }
    if let Some(Value::Object(_)) = map.get("additionalProperties") {
        assert_structural(&map["additionalProperties"], &format!("{path}{{}}"));
    }
}

#[test]
fn every_crd_schema_is_structural() {
    for crd in crd::all() {
        for version in &crd.spec.versions {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .expect("schema");
            let value = serde_json::to_value(schema).expect("schema as JSON");
            assert_structural(&value, &crd.spec.names.kind);
        }
    }
}

/// The fields `schema` requires that `object` lacks, by path: what the API server refuses with
/// "Required value" (found on a real cluster, where the status of every VMI was refused).
fn missing_required(schema: &Value, object: &Value, path: &str, missing: &mut Vec<String>) {
    match object {
        Value::Object(fields) => {
            if let Some(Value::Array(required)) = schema.get("required") {
                for name in required.iter().filter_map(Value::as_str) {
                    if !fields.contains_key(name) {
                        missing.push(format!("{path}.{name}"));
                    }
                }
            }
            if let Some(Value::Object(properties)) = schema.get("properties") {
                for (name, value) in fields {
                    if let Some(child) = properties.get(name) {
                        missing_required(child, value, &format!("{path}.{name}"), missing);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (index, item) in items.iter().enumerate() {
                    missing_required(item_schema, item, &format!("{path}[{index}]"), missing);
                }
            }
        }
        _ => {}
    }
}

fn schema_of(plural: &str) -> Value {
    let crd = crd_named(plural);
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    serde_json::to_value(schema).expect("schema as JSON")
}

#[test]
fn examples_and_the_statuses_the_components_write_carry_every_required_field() {
    let mut objects: Vec<(String, Value)> = Vec::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    for dir in [examples.clone(), examples.join("instancetypes")] {
        for entry in std::fs::read_dir(&dir).expect("examples") {
            let path = entry.expect("entry").path();
            if path.is_file() {
                paths.push(path);
            }
        }
    }
    for path in paths {
        let text = std::fs::read_to_string(&path).expect("read example");
        let object: Value = serde_saphyr::from_str(&text).expect("example YAML");
        objects.push((path.display().to_string(), object));
    }
    // The first status writes: virt-controller's phase on a VMI and printable status on a VM.
    objects.push((
        "VMI with the controller's first status".to_owned(),
        serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "a"},
            "spec": {"domain": {"devices": {}}},
            "status": {"phase": "Scheduling", "volumeStatus": [{"name": "d", "target": ""}]}
        }),
    ));
    objects.push((
        "VM with a template without metadata and the controller's first status".to_owned(),
        serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "metadata": {"name": "a"},
            "spec": {
                "runStrategy": "Halted",
                "template": {"spec": {"domain": {"devices": {}}}},
                "dataVolumeTemplates": [{"spec": {"source": {"blank": {}}}}]
            },
            "status": {"printableStatus": "Stopped"}
        }),
    ));
    let mut missing = Vec::new();
    for (name, object) in &objects {
        let plural = match object["kind"].as_str() {
            Some("VirtualMachine") => "virtualmachines",
            Some("VirtualMachineInstance") => "virtualmachineinstances",
            Some("VirtualMachineClusterInstancetype") => "virtualmachineclusterinstancetypes",
            Some("VirtualMachineClusterPreference") => "virtualmachineclusterpreferences",
            other => panic!("{name}: unexpected kind {other:?}"),
        };
        missing_required(&schema_of(plural), object, name, &mut missing);
    }
    assert!(missing.is_empty(), "required by the CRDs but absent: {missing:#?}");
    assert!(objects.len() > 10, "the examples were read");
}

#[test]
fn instancetype_crds_have_upstreams_names_scopes_and_short_names() {
    let expect = [
        (
            "virtualmachineinstancetypes",
            "Namespaced",
            vec!["vminstancetype", "vminstancetypes", "vmf", "vmfs"],
            Some(vec!["all"]),
        ),
        (
            "virtualmachineclusterinstancetypes",
            "Cluster",
            vec!["vmclusterinstancetype", "vmclusterinstancetypes", "vmcf", "vmcfs"],
            None,
        ),
        (
            "virtualmachinepreferences",
            "Namespaced",
            vec!["vmpref", "vmprefs", "vmp", "vmps"],
            Some(vec!["all"]),
        ),
        (
            "virtualmachineclusterpreferences",
            "Cluster",
            vec!["vmcp", "vmcps"],
            None,
        ),
    ];
    for (plural, scope, short, categories) in expect {
        let crd = crd_named(plural);
        assert_eq!(crd.spec.group, "instancetype.kubevirt.io");
        assert_eq!(crd.spec.scope, scope, "{plural}");
        let owned = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect::<Vec<_>>();
        assert_eq!(crd.spec.names.short_names, Some(owned(short)), "{plural}");
        assert_eq!(crd.spec.names.categories, categories.map(owned), "{plural}");
        let version = &crd.spec.versions[0];
        assert_eq!(
            (version.name.as_str(), version.served, version.storage),
            ("v1beta1", true, true)
        );
        assert!(version.additional_printer_columns.is_none() && version.subresources.is_none());
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema");
        assert_eq!(schema.required, Some(vec!["spec".to_owned()]));
    }
}

fn spec_has(schema: &Value, path: &str) -> bool {
    schema
        .pointer(&format!("/openAPIV3Schema/properties/spec/properties/{path}"))
        .is_some()
}

#[test]
fn the_kubevirt_crd_refuses_what_virt_operator_does_not_do() {
    let crd = crd_named("kubevirts");
    let schema = serde_json::to_value(&crd.spec.versions[0].schema).expect("JSON");
    let rules = schema
        .pointer("/openAPIV3Schema/properties/spec/x-kubernetes-validations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let messages: Vec<String> = rules
        .iter()
        .filter_map(|r| r["message"].as_str().map(str::to_owned))
        .collect();
    assert!(
        !messages.iter().any(|m| m.starts_with("spec.uninstallStrategy")),
        "both strategies are served: {messages:?}"
    );
    assert_eq!(
        schema.pointer("/openAPIV3Schema/properties/spec/properties/uninstallStrategy/enum"),
        Some(&serde_json::json!([
            "",
            "RemoveWorkloads",
            "BlockUninstallIfWorkloadsExist"
        ]))
    );
    assert!(
        !messages.iter().any(|m| m.starts_with("spec.workloadUpdateStrategy")),
        "workload updates are carried out: {messages:?}"
    );
    assert_eq!(
        schema.pointer("/openAPIV3Schema/properties/spec/properties/workloadUpdateStrategy/properties/workloadUpdateMethods/items/enum"),
        Some(&serde_json::json!(["LiveMigrate", "Evict"]))
    );
    assert!(
        !messages.iter().any(|m| m.starts_with("spec.certificateRotateStrategy")),
        "selfSigned lifetimes are kept: {messages:?}"
    );
    assert!(
        spec_has(
            &schema,
            "certificateRotateStrategy/properties/selfSigned/properties/server/properties/renewBefore"
        ),
        "the lifetimes are typed"
    );
    assert!(
        !messages.iter().any(|m| m.starts_with("spec.customizeComponents")),
        "customizeComponents is carried out: {messages:?}"
    );
    let spec = schema
        .pointer("/openAPIV3Schema/properties/spec/properties")
        .expect("spec properties");
    for typed in ["infra", "workloads", "uninstallStrategy", "workloadUpdateStrategy"] {
        assert!(spec.get(typed).is_some(), "{typed}");
    }
    // A patch names its object, its kind, itself and its type, as upstream's schema requires.
    assert_eq!(
        spec.pointer("/customizeComponents/properties/patches/items/required"),
        Some(&serde_json::json!(["patch", "resourceName", "resourceType", "type"]))
    );
}
