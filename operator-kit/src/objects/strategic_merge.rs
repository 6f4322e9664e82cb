//! Kubernetes' strategic merge patch, for the kinds operators patch on a user's behalf (workloads,
//! Services, webhook configurations, APIServices, Secrets): a JSON merge patch, except that a list
//! whose field has a merge key in Kubernetes' schema (containers by `name`, volume mounts by
//! `mountPath`, ...) is merged element by element, and the `$patch` directive (`replace` on an
//! object or list, `delete` on a list element or object) is honoured. Lists without a merge key
//! are replaced, as Kubernetes does; so are lists of strings, which Kubernetes merges for the few
//! fields whose strategy says so (`metadata.finalizers`). The other directives (`$retainKeys`,
//! `$setElementOrder`, `$deleteFromPrimitiveList`), and any directive inside a replaced value, are
//! refused by name.

use serde_json::{Map, Value};

/// Why a strategic merge patch cannot be applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StrategicMergeError {
    /// The patch is not a JSON object.
    #[error("a strategic merge patch is a JSON object, not {0}")]
    NotAnObject(&'static str),
    /// A directive this implementation does not carry out.
    #[error(
        "the strategic merge directive {0} is not supported here (only $patch: replace, delete or merge, where the patch merges)"
    )]
    UnsupportedDirective(String),
    /// `$patch` with another value than `replace`, `delete` or `merge`.
    #[error("$patch: {0:?} is not a strategic merge directive (replace, delete or merge)")]
    UnknownPatchValue(String),
    /// An element of a merged list lacks the list's merge key.
    #[error("an element of the list {field} has no merge key {key}")]
    NoMergeKey {
        /// The list's field.
        field: String,
        /// Its merge key.
        key: &'static str,
    },
}

/// The merge key of a list field in the Kubernetes schema of the kinds operators patch, by the
/// field's name (and, for `ports`, by what its elements hold: containers' by `containerPort`,
/// Services' by `port`). `None`: the list is replaced.
fn merge_key(field: &str, element: Option<&Value>) -> Option<&'static str> {
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "webhooks"
        | "resourceClaims" => "name",
        "volumeMounts" => "mountPath",
        "volumeDevices" => "devicePath",
        "hostAliases" => "ip",
        "topologySpreadConstraints" => "topologyKey",
        "ownerReferences" => "uid",
        "conditions" => "type",
        "ports" => {
            if element.and_then(|e| e.get("containerPort")).is_some() {
                "containerPort"
            } else {
                "port"
            }
        }
        _ => return None,
    })
}

/// `patch` applied to `target` by Kubernetes' strategic merge rules (see the module's text).
///
/// # Errors
/// [`StrategicMergeError`]: a patch that is not an object, an unsupported directive, or a merged
/// list element without its key.
pub fn apply(target: &Value, patch: &Value) -> Result<Value, StrategicMergeError> {
    let Value::Object(patch) = patch else {
        return Err(StrategicMergeError::NotAnObject(kind_of(patch)));
    };
    let base = match target {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    merge_object(base, patch).map(|merged| Value::Object(merged.unwrap_or_default()))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// The `$patch` directive of an object patch, checked.
fn directive(patch: &Map<String, Value>) -> Result<Option<&str>, StrategicMergeError> {
    if let Some(other) = patch.keys().find(|k| k.starts_with('$') && *k != "$patch") {
        return Err(StrategicMergeError::UnsupportedDirective(other.clone()));
    }
    match patch.get("$patch") {
        None => Ok(None),
        Some(Value::String(value)) if matches!(value.as_str(), "replace" | "delete" | "merge") => Ok(Some(value)),
        Some(other) => Err(StrategicMergeError::UnknownPatchValue(other.to_string())),
    }
}

/// `patch` over `base`; `None` when the patch deletes the object.
fn merge_object(
    mut base: Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<Option<Map<String, Value>>, StrategicMergeError> {
    let mut fields = patch.clone();
    fields.remove("$patch");
    match directive(patch)? {
        Some("delete") => return Ok(None),
        Some("replace") => return strip(fields).map(Some),
        _ => {}
    }
    for (field, value) in fields {
        match value {
            Value::Null => {
                base.remove(&field);
            }
            Value::Object(inner) => {
                let current = match base.remove(&field) {
                    Some(Value::Object(map)) => map,
                    _ => Map::new(),
                };
                if let Some(merged) = merge_object(current, &inner)? {
                    base.insert(field, Value::Object(merged));
                }
            }
            Value::Array(items) => {
                let current = base.remove(&field);
                base.insert(field.clone(), merge_list(&field, current, items)?);
            }
            scalar => {
                base.insert(field, scalar);
            }
        }
    }
    Ok(Some(base))
}

/// A patch's objects with their directives checked and removed, for a value that replaces.
fn strip(map: Map<String, Value>) -> Result<Map<String, Value>, StrategicMergeError> {
    let mut out = Map::new();
    for (key, value) in map {
        if key.starts_with('$') {
            return Err(StrategicMergeError::UnsupportedDirective(key));
        }
        out.insert(key, strip_value(value)?);
    }
    Ok(out)
}

fn strip_value(value: Value) -> Result<Value, StrategicMergeError> {
    Ok(match value {
        Value::Object(map) => Value::Object(strip(map)?),
        Value::Array(items) => Value::Array(items.into_iter().map(strip_value).collect::<Result<_, _>>()?),
        other => other,
    })
}

fn merge_list(field: &str, current: Option<Value>, items: Vec<Value>) -> Result<Value, StrategicMergeError> {
    let replaces = items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    let key = merge_key(field, items.iter().find(|i| i.is_object()));
    let (Some(key), false) = (key, replaces) else {
        let kept = items
            .into_iter()
            .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("replace"))
            .map(strip_value)
            .collect::<Result<_, _>>()?;
        return Ok(Value::Array(kept));
    };
    let mut merged = match current {
        Some(Value::Array(existing)) => existing,
        _ => Vec::new(),
    };
    for item in items {
        let Value::Object(element) = item else {
            merged.push(item);
            continue;
        };
        let id = element
            .get(key)
            .cloned()
            .ok_or_else(|| StrategicMergeError::NoMergeKey {
                field: field.to_owned(),
                key,
            })?;
        let at = merged.iter().position(|e| e.get(key) == Some(&id));
        match (
            at,
            merge_object(at.map_or_else(Map::new, |i| object_at(&merged, i)), &element)?,
        ) {
            (Some(i), Some(result)) => merged[i] = Value::Object(result),
            (Some(_), None) => merged.retain(|e| e.get(key) != Some(&id)),
            (None, Some(result)) => merged.push(Value::Object(result)),
            (None, None) => {}
        }
    }
    Ok(Value::Array(merged))
}

fn object_at(list: &[Value], at: usize) -> Map<String, Value> {
    match list.get(at) {
        Some(Value::Object(map)) => map.clone(),
        _ => Map::new(),
    }
}

#[cfg(test)]
#[path = "strategic_merge_tests.rs"]
mod tests;
