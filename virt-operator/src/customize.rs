//! `spec.customizeComponents` carried out on what virt-operator renders, as upstream's operator
//! does: the user's patches (shortest first, ties in the CR's order), then one strategic patch per
//! component whose `flags` are given (its container's `command` becomes the binary and the flags;
//! its `args` stay), then the annotation `kubevirt.io/customizer-identifier` on every object of a
//! kind patches can reach. A patch that does not apply fails the render, which the CR's status
//! reports (`DeploymentFailed`), as upstream's.

use std::collections::BTreeMap;

use kubevirt_api::v1::{CustomizeComponents, CustomizeComponentsPatch};
use operator_kit::objects::Desired;
use operator_kit::objects::strategic_merge;
use serde_json::Value;

/// The annotation that says which customizations an object was rendered with.
pub const CUSTOMIZER_ANNOTATION: &str = "kubevirt.io/customizer-identifier";

/// The kinds patches reach (upstream's, but the certificate Secrets, which virt-api makes here).
pub const PATCHED_KINDS: [&str; 6] = [
    "Deployment",
    "DaemonSet",
    "Service",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "APIService",
];

/// Why the customizations do not apply.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum CustomizeError {
    /// The patch is not JSON, or not the JSON its type needs.
    #[error("spec.customizeComponents.patches: the {patch_type} patch {patch:?} is not valid: {message}")]
    Invalid {
        /// `json`, `merge` or `strategic`.
        patch_type: String,
        /// The patch.
        patch: String,
        /// Why.
        message: String,
    },
    /// A type other than `json`, `merge` or `strategic` (upstream's message).
    #[error("spec.customizeComponents.patches: type {0:?}: PatchType is not supported")]
    UnsupportedType(String),
    /// The patch does not apply to the object.
    #[error(
        "spec.customizeComponents.patches: the {patch_type} patch {patch:?} does not apply to {kind} {name}: {message}"
    )]
    Apply {
        /// `json`, `merge` or `strategic`.
        patch_type: String,
        /// The patch.
        patch: String,
        /// The object's kind.
        kind: String,
        /// Its name.
        name: String,
        /// Why.
        message: String,
    },
}

/// The patches in the order they are applied: the user's, shortest first (upstream sorts them by
/// length, keeping the CR's order for equal lengths), then the flags' (api, controller, handler).
#[must_use]
pub fn patches(customize: &CustomizeComponents) -> Vec<CustomizeComponentsPatch> {
    let mut ordered = customize.patches.clone();
    ordered.sort_by_key(|p| p.patch.len());
    if let Some(flags) = &customize.flags {
        for (component, kind, flags) in [
            ("virt-api", "Deployment", &flags.api),
            ("virt-controller", "Deployment", &flags.controller),
            ("virt-handler", "DaemonSet", &flags.handler),
        ] {
            if let Some(flags) = flags.as_ref().filter(|f| !f.is_empty()) {
                ordered.push(flag_patch(component, kind, flags));
            }
        }
    }
    ordered
}

/// `flags` as command-line arguments, as upstream renders them: sorted by name, names and values
/// lowercased; an empty value is `--name`, `true` or `false` is `--name=true|false`, any other
/// value is `--name` then the value.
#[must_use]
pub fn flag_args(flags: &BTreeMap<String, String>) -> Vec<String> {
    let mut lowered: Vec<(String, String)> = flags
        .iter()
        .map(|(name, value)| (name.to_lowercase(), value.to_lowercase()))
        .collect();
    lowered.sort();
    let mut args = Vec::new();
    for (name, value) in lowered {
        match value.as_str() {
            "" => args.push(format!("--{name}")),
            "true" | "false" => args.push(format!("--{name}={value}")),
            _ => {
                args.push(format!("--{name}"));
                args.push(value);
            }
        }
    }
    args
}

/// The strategic patch that makes `component`'s command the binary and `flags`.
fn flag_patch(component: &str, kind: &str, flags: &BTreeMap<String, String>) -> CustomizeComponentsPatch {
    let mut command = vec![component.to_owned()];
    command.extend(flag_args(flags));
    let patch = serde_json::json!({"spec": {"template": {"spec": {"containers": [
        {"name": component, "command": command}
    ]}}}});
    CustomizeComponentsPatch {
        resource_name: component.to_owned(),
        resource_type: kind.to_owned(),
        patch: patch.to_string(),
        patch_type: "strategic".to_owned(),
    }
}

/// A digest of the customizations (the annotation's value): the same for the same patches in
/// any order and the same flags.
#[must_use]
pub fn identifier(customize: Option<&CustomizeComponents>) -> String {
    let mut normalized = customize.cloned().unwrap_or_default();
    normalized.patches.sort_by(|a, b| {
        (
            a.patch.len(),
            &a.patch,
            &a.resource_type,
            &a.resource_name,
            &a.patch_type,
        )
            .cmp(&(
                b.patch.len(),
                &b.patch,
                &b.resource_type,
                &b.resource_name,
                &b.patch_type,
            ))
    });
    let text = serde_json::to_string(&normalized).unwrap_or_default();
    crate::labels::digest(&text)
}

/// Whether `selector` (a patch's type or name) picks `value`: `*`, or equal ignoring case.
#[must_use]
pub fn matches(selector: &str, value: &str) -> bool {
    selector == "*" || selector.eq_ignore_ascii_case(value)
}

/// Applies `patches` (in [`patches`]' order) to `desired` when its kind is one they reach, and
/// stamps the identifier on it.
///
/// # Errors
/// [`CustomizeError`]: a patch that is not valid, of an unknown type, that does not apply, or that
/// renames the object or changes its kind.
pub fn apply(
    desired: &mut Desired,
    patches: &[CustomizeComponentsPatch],
    identifier: &str,
) -> Result<(), CustomizeError> {
    let kind = desired.resource.kind.clone();
    if !PATCHED_KINDS.contains(&kind.as_str()) {
        return Ok(());
    }
    let mut customized = desired.object.clone();
    for patch in patches
        .iter()
        .filter(|p| matches(&p.resource_type, &kind) && matches(&p.resource_name, &desired.name))
    {
        let object = serde_json::to_value(&customized).map_err(|e| apply_error(patch, desired, &e.to_string()))?;
        let after = apply_one(&object, patch).map_err(|e| match e {
            Failure::Refused(refused) => refused,
            Failure::Apply(message) => apply_error(patch, desired, &message),
        })?;
        if identity(&after) != identity(&object) {
            return Err(apply_error(
                patch,
                desired,
                "a patch may not change the apiVersion, kind, name or namespace",
            ));
        }
        customized = serde_json::from_value(after).map_err(|e| apply_error(patch, desired, &e.to_string()))?;
    }
    customized
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(CUSTOMIZER_ANNOTATION.to_owned(), identifier.to_owned());
    desired.object = customized;
    Ok(())
}

/// What names an object: its apiVersion, kind, name and namespace.
fn identity(object: &Value) -> [Option<&Value>; 4] {
    [
        object.get("apiVersion"),
        object.get("kind"),
        object.pointer("/metadata/name"),
        object.pointer("/metadata/namespace"),
    ]
}

fn apply_error(patch: &CustomizeComponentsPatch, desired: &Desired, message: &str) -> CustomizeError {
    CustomizeError::Apply {
        patch_type: patch.patch_type.clone(),
        patch: patch.patch.clone(),
        kind: desired.resource.kind.clone(),
        name: desired.name.clone(),
        message: message.to_owned(),
    }
}

/// How one patch failed: refused as given, or not applicable to the object.
enum Failure {
    Refused(CustomizeError),
    Apply(String),
}

fn apply_one(object: &Value, patch: &CustomizeComponentsPatch) -> Result<Value, Failure> {
    let invalid = |message: String| {
        Failure::Refused(CustomizeError::Invalid {
            patch_type: patch.patch_type.clone(),
            patch: patch.patch.clone(),
            message,
        })
    };
    let mut patched = object.clone();
    match patch.patch_type.as_str() {
        "json" => {
            let operations: json_patch::Patch =
                serde_json::from_str(&patch.patch).map_err(|e| invalid(e.to_string()))?;
            json_patch::patch(&mut patched, &operations).map_err(|e| Failure::Apply(e.to_string()))?;
        }
        "merge" => {
            let merge: Value = serde_json::from_str(&patch.patch).map_err(|e| invalid(e.to_string()))?;
            json_patch::merge(&mut patched, &merge);
        }
        "strategic" => {
            let strategic: Value = serde_json::from_str(&patch.patch).map_err(|e| invalid(e.to_string()))?;
            patched = strategic_merge::apply(object, &strategic).map_err(|e| Failure::Apply(e.to_string()))?;
        }
        other => return Err(Failure::Refused(CustomizeError::UnsupportedType(other.to_owned()))),
    }
    Ok(patched)
}

#[cfg(test)]
#[path = "customize_tests.rs"]
mod tests;
