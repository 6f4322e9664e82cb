//! Schema helpers for fields whose content KubeVirt passes through without interpreting it.
//!
//! A structural CRD schema may not contain an unconstrained node, so free-form objects are declared
//! as objects that preserve unknown fields.

use schemars::Schema;
use schemars::SchemaGenerator;
use schemars::json_schema;

/// Schema for an arbitrary JSON object kept as-is (`x-kubernetes-preserve-unknown-fields`).
#[must_use]
pub fn preserve_unknown_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

/// Schema for a list of arbitrary JSON objects kept as-is.
#[must_use]
pub fn preserve_unknown_object_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
        },
    })
}
