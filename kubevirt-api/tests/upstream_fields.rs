//! Every field of upstream's VMI and VM, as `upstream/fields.tsv` lists them, is in the generated
//! CRD schemas with the same kind, parses from a manifest, and is either honoured or refused as the
//! list says. A new upstream field added to the list fails here until the types have it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use kubevirt_api::Manifest;
use kubevirt_api::support;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};
use serde_json::{Map, Value, json};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Object {
    Vmi,
    Vm,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Support {
    Honoured,
    Refused,
    Values(Vec<String>),
    Status,
    Parent,
}

#[derive(Clone, Debug)]
struct Field {
    object: Object,
    path: String,
    kind: String,
    support: Support,
}

fn fields() -> Vec<Field> {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/upstream/fields.tsv")).expect("fields.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|line| {
            let columns: Vec<&str> = line.split('\t').collect();
            assert!(columns.len() >= 4, "fields.tsv: too few columns in {line:?}");
            let object = match columns[0] {
                "vmi" => Object::Vmi,
                "vm" => Object::Vm,
                other => panic!("fields.tsv: unknown object {other:?}"),
            };
            let support = match columns[3] {
                "honoured" => Support::Honoured,
                "refused" => Support::Refused,
                "status" => Support::Status,
                "-" => Support::Parent,
                other => match other.strip_prefix("values:") {
                    Some(values) => Support::Values(values.split('|').map(str::to_owned).collect()),
                    None => panic!("fields.tsv: unknown support {other:?} in {line:?}"),
                },
            };
            Field {
                object,
                path: columns[1].to_owned(),
                kind: columns[2].to_owned(),
                support,
            }
        })
        .collect()
}

fn schema(plural: &str) -> Value {
    let crd = kubevirt_api::crd::all()
        .into_iter()
        .find(|c| c.spec.names.plural == plural)
        .expect("CRD");
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .expect("schema");
    serde_json::to_value(schema).expect("schema as JSON")
}

/// One step of a field path.
#[derive(Clone, Debug, PartialEq)]
enum Step {
    Key(String),
    Element,
    MapValue,
}

fn steps(path: &str) -> Vec<Step> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let mut name = part;
        let mut suffixes = Vec::new();
        loop {
            if let Some(rest) = name.strip_suffix("[]") {
                suffixes.push(Step::Element);
                name = rest;
            } else if let Some(rest) = name.strip_suffix("{}") {
                suffixes.push(Step::MapValue);
                name = rest;
            } else {
                break;
            }
        }
        out.push(Step::Key(name.to_owned()));
        out.extend(suffixes.into_iter().rev());
    }
    out
}

fn child<'a>(node: &'a Value, step: &Step) -> Option<&'a Value> {
    match step {
        Step::Key(key) => node.get("properties")?.get(key),
        Step::Element => node.get("items"),
        Step::MapValue => node.get("additionalProperties").filter(|v| v.is_object()),
    }
}

fn node_at<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    steps(path).iter().try_fold(root, |node, step| child(node, step))
}

/// Every path in a schema, stopping below `stops`.
fn schema_paths(node: &Value, path: &str, stops: &dyn Fn(&str) -> bool, out: &mut BTreeMap<String, Value>) {
    if !path.is_empty() {
        out.insert(path.to_owned(), node.clone());
        if stops(path) {
            return;
        }
    }
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (key, value) in properties {
            if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            let next = if path.is_empty() {
                key.clone()
            } else {
                format!("{path}.{key}")
            };
            schema_paths(value, &next, stops, out);
        }
    }
    if let Some(items) = node.get("items") {
        schema_paths(items, &format!("{path}[]"), stops, out);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        schema_paths(values, &format!("{path}{{}}"), stops, out);
    }
}

fn is_opaque(kind: &str) -> bool {
    kind.starts_with("k8s:") || kind.starts_with("cdi:") || kind.starts_with("->")
}

fn kind_matches(kind: &str, node: &Value) -> bool {
    let ty = node.get("type").and_then(Value::as_str);
    let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let map = node.get("additionalProperties").is_some_and(Value::is_object);
    match kind {
        "string" => ty == Some("string"),
        "bool" => ty == Some("boolean"),
        "integer" => ty == Some("integer"),
        "quantity" => int_or_string,
        "list" => ty == Some("array"),
        "map" | "k8s:ResourceList" => ty == Some("object") && map,
        "object" => ty == Some("object") && !map,
        "k8s:Time" => ty == Some("string") && node.get("format").and_then(Value::as_str) == Some("date-time"),
        other if other.starts_with("->") => true,
        _ => ty == Some("object") || node.get("x-kubernetes-preserve-unknown-fields").is_some(),
    }
}

fn objects() -> [(Object, &'static str); 2] {
    [
        (Object::Vmi, "virtualmachineinstances"),
        (Object::Vm, "virtualmachines"),
    ]
}

#[test]
fn every_upstream_field_is_in_the_schema_with_its_kind_and_nothing_else_is() {
    let all = fields();
    let mut problems = Vec::new();
    for (object, plural) in objects() {
        let listed: BTreeMap<&str, &Field> = all
            .iter()
            .filter(|f| f.object == object)
            .map(|f| (f.path.as_str(), f))
            .collect();
        let stops = |path: &str| listed.get(path).is_some_and(|f| is_opaque(&f.kind));
        let mut ours = BTreeMap::new();
        schema_paths(&schema(plural), "", &stops, &mut ours);
        for (path, field) in &listed {
            match ours.get(*path) {
                None => problems.push(format!("{plural}: {path} is upstream's but not in the schema")),
                Some(node) if !kind_matches(&field.kind, node) => {
                    problems.push(format!("{plural}: {path} should be {} but is {node}", field.kind));
                }
                Some(_) => {}
            }
        }
        let below_opaque = |path: &str| {
            listed
                .iter()
                .any(|(p, f)| is_opaque(&f.kind) && path.starts_with(p) && path.len() > p.len())
        };
        for path in ours.keys().filter(|p| !matches!(p.as_str(), "spec" | "status")) {
            if !listed.contains_key(path.as_str()) && !below_opaque(path) {
                problems.push(format!("{plural}: {path} is in the schema but not upstream's"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn a_vms_template_spec_has_exactly_the_fields_of_a_vmi_spec() {
    let vmi_spec = schema("virtualmachineinstances")["properties"]["spec"].clone();
    let vm_template_spec = node_at(&schema("virtualmachines"), "spec.template.spec")
        .expect("template spec")
        .clone();
    let (mut a, mut b) = (BTreeMap::new(), BTreeMap::new());
    schema_paths(&vmi_spec, "", &|_| false, &mut a);
    schema_paths(&vm_template_spec, "", &|_| false, &mut b);
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
}

/// The smallest value a schema node accepts: required fields filled in, recursively.
fn minimal(node: &Value) -> Value {
    if node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        return json!("1");
    }
    match node.get("type").and_then(Value::as_str) {
        Some("string") => match node.get("enum").and_then(Value::as_array) {
            Some(values) => values
                .iter()
                .find(|v| v.as_str().is_some_and(|s| !s.is_empty()))
                .cloned()
                .unwrap_or(json!("")),
            None if node.get("format").and_then(Value::as_str) == Some("date-time") => {
                json!("2024-01-01T00:00:00Z")
            }
            None => json!("probe"),
        },
        Some("integer" | "number") => json!(1),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        _ => {
            let mut object = Map::new();
            for key in node.get("required").and_then(Value::as_array).into_iter().flatten() {
                let key = key.as_str().expect("required key");
                let value = node["properties"].get(key).map_or(json!({}), minimal);
                object.insert(key.to_owned(), value);
            }
            Value::Object(object)
        }
    }
}

/// Sets the field at `path` to `leaf`, creating its parents with their required fields.
fn set(root: &mut Value, schema: &Value, path: &str, leaf: Value) {
    let steps = steps(path);
    let mut node = schema;
    let mut here = root;
    for (i, step) in steps.iter().enumerate() {
        let next_schema = child(node, step).unwrap_or_else(|| panic!("{path}: no schema at {step:?}"));
        let last = i + 1 == steps.len();
        let key = match step {
            Step::Key(key) => key.clone(),
            Step::MapValue => "probe".to_owned(),
            Step::Element => {
                let elements = here.as_array_mut().expect("list");
                if elements.is_empty() {
                    elements.push(minimal(next_schema));
                }
                if last {
                    elements[0] = leaf;
                    return;
                }
                here = &mut elements[0];
                node = next_schema;
                continue;
            }
        };
        let object = here.as_object_mut().expect("object");
        if last {
            object.insert(key, leaf);
            return;
        }
        here = object.entry(key).or_insert_with(|| minimal(next_schema));
        node = next_schema;
    }
}

fn probe_value(field: &Field, schema: &Value) -> Value {
    let node = node_at(schema, &field.path).unwrap_or_else(|| panic!("{}: not in the schema", field.path));
    match field.kind.as_str() {
        "bool" => json!(true),
        "string" if node.get("enum").is_none() => json!("probe"),
        "integer" => json!(1),
        "quantity" => json!("1"),
        _ => minimal(node),
    }
}

fn is_leaf(field: &Field) -> bool {
    !matches!(field.support, Support::Parent) && !field.kind.starts_with("->")
}

fn empty_object(object: Object) -> Value {
    match object {
        Object::Vmi => json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "probe"}, "spec": {"domain": {"devices": {}}}
        }),
        Object::Vm => json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "probe"}, "spec": {"template": {"spec": {"domain": {"devices": {}}}}}
        }),
    }
}

#[test]
fn a_manifest_setting_every_upstream_field_parses_without_unknown_fields() {
    let all = fields();
    for (object, plural) in objects() {
        let schema = schema(plural);
        let mut manifest = empty_object(object);
        for field in all.iter().filter(|f| f.object == object && is_leaf(f)) {
            set(&mut manifest, &schema, &field.path, probe_value(field, &schema));
        }
        let text = serde_json::to_string(&manifest).expect("JSON");
        if let Err(e) = Manifest::parse(&text, Path::new(plural)) {
            panic!("{e}");
        }
    }
}

/// The refused fields, with list indices written `[]`.
fn refusals(object: Object, manifest: Value) -> Vec<String> {
    refusals_with_features(object, manifest)
        .into_iter()
        .map(|(path, _)| path)
        .collect()
}

/// The refused fields with list indices written `[]`, each with what it asks for.
fn refusals_with_features(object: Object, manifest: Value) -> Vec<(String, String)> {
    let found = match object {
        Object::Vmi => {
            let vmi: VirtualMachineInstance = serde_json::from_value(manifest).expect("VMI");
            support::vmi_spec(&vmi.spec, "spec")
        }
        Object::Vm => {
            let vm: VirtualMachine = serde_json::from_value(manifest).expect("VM");
            support::vm(&vm)
        }
    };
    found
        .into_iter()
        .map(|u| {
            let mut normalised = String::new();
            let mut in_index = false;
            for c in u.field.chars() {
                match c {
                    '[' => {
                        in_index = true;
                        normalised.push_str("[]");
                    }
                    ']' => in_index = false,
                    _ if in_index => {}
                    _ => normalised.push(c),
                }
            }
            (normalised, u.feature)
        })
        .collect()
}

fn is_refused(path: &str, refused: &[String]) -> bool {
    refused
        .iter()
        .any(|r| path == r || [".", "[", "{"].iter().any(|sep| path.starts_with(&format!("{r}{sep}"))))
}

#[test]
fn each_spec_field_is_refused_exactly_when_the_list_says_so() {
    let all = fields();
    let mut problems = Vec::new();
    for (object, plural) in objects() {
        let schema = schema(plural);
        for field in all.iter().filter(|f| f.object == object && is_leaf(f)) {
            let refused_with = |value: Value| {
                let mut manifest = empty_object(object);
                set(&mut manifest, &schema, &field.path, value);
                is_refused(&field.path, &refusals(object, manifest))
            };
            let path = &field.path;
            match &field.support {
                Support::Honoured if refused_with(probe_value(field, &schema)) => {
                    problems.push(format!("{plural}: {path} is refused but listed as honoured"));
                }
                Support::Refused if !refused_with(probe_value(field, &schema)) => {
                    problems.push(format!("{plural}: {path} is not refused but listed as refused"));
                }
                Support::Values(values) => {
                    if refused_with(probe_value(field, &schema)) {
                        problems.push(format!("{plural}: {path} refuses values it should honour"));
                    }
                    for value in values.iter().filter(|v| !refused_with(json!(v))) {
                        problems.push(format!("{plural}: {path}: {value} is not refused"));
                    }
                }
                _ => {}
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} problems:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_list_covers_status_and_spec_of_both_objects() {
    let all = fields();
    for object in [Object::Vmi, Object::Vm] {
        for root in ["spec.", "status."] {
            assert!(
                all.iter()
                    .filter(|f| f.object == object && f.path.starts_with(root))
                    .count()
                    > 10,
                "{object:?} {root}"
            );
        }
    }
    assert!(all.iter().filter(|f| f.support == Support::Refused).count() > 50);
}

/// The refused fields' page, from the list and `kubevirt_api::support`'s own words.
fn refused_fields_page() -> String {
    let all = fields();
    let mut page = String::from(
        "# Fields kubevirt-rs refuses\n\n\
         <!-- Generated by kubevirt-api/tests/upstream_fields.rs from kubevirt-api/upstream/fields.tsv and\n\
         kubevirt_api::support; KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p kubevirt-api --test upstream_fields\n\
         rewrites it, and the test fails when it is stale. -->\n\n\
         Setting one of these fields (or, where values are named, one of those values) is refused, never\n\
         ignored: the validating webhooks answer `<field>: <what> is not supported by kubevirt-rs`, and\n\
         `virt-launcher render` and `run` stop with the same message before anything starts. A VM's\n\
         template is held to the VMI rows, at `spec.template.spec`.\n\n\
         | object | field | refused | what it asks for |\n|---|---|---|---|\n",
    );
    for (object, plural) in objects() {
        let schema = schema(plural);
        for field in all.iter().filter(|f| f.object == object && is_leaf(f)) {
            let (refused, probe) = match &field.support {
                Support::Refused => ("any value".to_owned(), probe_value(field, &schema)),
                Support::Values(values) => (
                    values.iter().map(|v| format!("`{v}`")).collect::<Vec<_>>().join(", "),
                    json!(values[0]),
                ),
                _ => continue,
            };
            let mut manifest = empty_object(object);
            set(&mut manifest, &schema, &field.path, probe);
            let found = refusals_with_features(object, manifest);
            let feature = found
                .iter()
                .find(|(path, _)| is_refused(&field.path, std::slice::from_ref(path)))
                .map_or_else(|| panic!("{plural}: {} is not refused", field.path), |(_, f)| f.clone());
            let kind = match object {
                Object::Vmi => "VMI",
                Object::Vm => "VM",
            };
            let _ = writeln!(page, "| {kind} | `{}` | {refused} | {feature} |", field.path);
        }
    }
    page
}

#[test]
fn the_refused_fields_page_is_generated_from_the_list() {
    let path = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/refused-fields.md"));
    let page = refused_fields_page();
    if std::env::var_os("KUBEVIRT_RS_UPDATE_GOLDEN").is_some() {
        std::fs::write(path, &page).expect("write docs/refused-fields.md");
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == page,
        "docs/refused-fields.md is stale: KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p kubevirt-api --test upstream_fields"
    );
}
