//! Upstream's "reference VM": where a path finds nothing on the VM (a field not set), it is
//! looked up again on a VM whose `spec.template.spec.domain` has every field there is, each
//! with its zero value (0, "", false, empty maps, arrays of 64 elements: 16 ports, 8 NTP servers),
//! so that a cores rule reads an unset `cpu` as 0 cores, while a path no VM can have stays an
//! error. The fields and their types come from the VirtualMachine CRD's schema, which the types
//! generate. Pure.

use std::sync::OnceLock;

use serde_json::{Map, Value, json};

/// How deep the schema is followed: deeper than any field of a domain.
const MAX_DEPTH: usize = 32;

/// The reference VM: `{"spec": {"template": {"spec": {"domain": …}}}}`.
#[must_use]
pub fn reference_vm() -> &'static Value {
    static REFERENCE: OnceLock<Value> = OnceLock::new();
    REFERENCE.get_or_init(|| {
        let crd = serde_json::to_value(
            <kubevirt_api::v1::VirtualMachine as kube::CustomResourceExt>::crd(),
        )
        .unwrap_or_default();
        let domain = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            ["template"]["properties"]["spec"]["properties"]["domain"];
        json!({"spec": {"template": {"spec": {"domain": zero(domain, "domain", 0)}}}})
    })
}

/// How many elements a reference array has (upstream's sizes).
fn array_length(field: &str) -> usize {
    match field {
        "ports" => 16,
        "ntpServers" => 8,
        _ => 64,
    }
}

/// The zero value of a structural schema; `field` is the name it has in its parent.
fn zero(schema: &Value, field: &str, depth: usize) -> Value {
    if depth > MAX_DEPTH {
        return Value::Null;
    }
    if schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true) {
        // A quantity: its zero reads as 0.
        return json!(0);
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("integer" | "number") => json!(0),
        Some("string") => json!(""),
        Some("boolean") => json!(false),
        Some("array") => {
            let item = zero(&schema["items"], field, depth + 1);
            Value::Array(vec![item; array_length(field)])
        }
        Some("object") => {
            let mut fields = Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    fields.insert(name.clone(), zero(property, name, depth + 1));
                }
            }
            Value::Object(fields)
        }
        _ => Value::Null,
    }
}
