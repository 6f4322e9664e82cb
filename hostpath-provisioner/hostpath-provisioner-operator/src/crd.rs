//! The `HostPathProvisioner` CRD generated from [`crate::api`], with the rules that refuse what
//! this operator does not do, and its committed YAML form in `manifests/hostpath-provisioner/crds/`
//! (a test fails when it is stale, and rewrites it with
//! `KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p hostpath-provisioner-operator --test crds`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Value, json};

use crate::api::HostPathProvisioner;

/// Why the CRD could not be made or rendered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The generated schema is not where the rules go.
    #[error("the HostPathProvisioner schema has no {0}")]
    Schema(&'static str),
    /// The CRD does not convert to JSON and back.
    #[error("converting the HostPathProvisioner CRD: {0}")]
    Json(#[from] serde_json::Error),
    /// The CRD does not serialize as YAML.
    #[error("cannot render the HostPathProvisioner CRD as YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
}

/// The most storage pools a CR lists (it bounds the cost of the uniqueness rules).
pub const MAX_POOLS: u32 = 32;

/// The most feature gates a CR lists.
pub const MAX_FEATURE_GATES: u32 = 16;

/// Each refusal, as the API server words it: (where the rule sits, the CEL rule, the message).
const RULES: &[(&str, &str, &str)] = &[
    (
        "/properties/spec",
        "!has(self.pathConfig)",
        "spec.pathConfig: upstream's legacy provisioner is not supported; list the directory in spec.storagePools",
    ),
    (
        "/properties/spec",
        "has(self.storagePools) && size(self.storagePools) > 0",
        "spec.storagePools: at least one storage pool is required",
    ),
    (
        "/properties/spec",
        "!has(self.featureGates) || !self.featureGates.exists(g, g == 'Snapshotting')",
        "spec.featureGates: Snapshotting is not supported (the CSI driver makes no snapshots)",
    ),
    (
        "/properties/spec/properties/storagePools",
        "self.all(p, self.exists_one(q, q.name == p.name))",
        "spec.storagePools: each pool's name must be unique",
    ),
    (
        "/properties/spec/properties/storagePools",
        "self.all(p, self.exists_one(q, q.path == p.path))",
        "spec.storagePools: each pool's path must be unique",
    ),
    (
        "/properties/spec/properties/storagePools/items",
        "self.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
        "spec.storagePools[].name: a pool's name must be a DNS label (lower-case letters, digits and '-'), since it names the pool's volume",
    ),
    (
        "/properties/spec/properties/storagePools/items",
        "!has(self.pvcTemplate)",
        "spec.storagePools[].pvcTemplate: pools on a claim per node are not supported; give a path",
    ),
    (
        "/properties/spec/properties/storagePools/items",
        "!has(self.snapshotProvider)",
        "spec.storagePools[].snapshotProvider: snapshots are not supported",
    ),
    (
        "/properties/spec/properties/storagePools/items",
        "!has(self.overlayClassName)",
        "spec.storagePools[].overlayClassName: overlay classes are not supported",
    ),
];

/// The CRD, with [`RULES`] and at most [`MAX_POOLS`] pools.
///
/// # Errors
/// [`CrdError`] when the generated schema lacks a place a rule goes.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let mut crd = serde_json::to_value(HostPathProvisioner::crd())?;
    let root = crd
        .pointer_mut("/spec/versions/0/schema/openAPIV3Schema")
        .ok_or(CrdError::Schema("openAPIV3Schema"))?;
    for (at, rule, message) in RULES {
        let node = root.pointer_mut(at).ok_or(CrdError::Schema(at))?;
        let rules = node
            .as_object_mut()
            .ok_or(CrdError::Schema(at))?
            .entry("x-kubernetes-validations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(rules) = rules {
            rules.push(json!({ "rule": rule, "message": message }));
        }
    }
    let pools = root
        .pointer_mut("/properties/spec/properties/storagePools")
        .and_then(Value::as_object_mut)
        .ok_or(CrdError::Schema("storagePools"))?;
    pools.insert("maxItems".to_owned(), json!(MAX_POOLS));
    // Bounds for the cost of the feature gate rule.
    let gates = root
        .pointer_mut("/properties/spec/properties/featureGates")
        .and_then(Value::as_object_mut)
        .ok_or(CrdError::Schema("featureGates"))?;
    gates.insert("maxItems".to_owned(), json!(MAX_FEATURE_GATES));
    if let Some(items) = gates.get_mut("items").and_then(Value::as_object_mut) {
        items.insert("maxLength".to_owned(), json!(63));
    }
    Ok(serde_json::from_value(crd)?)
}

/// The CRD's file name under `manifests/hostpath-provisioner/crds/` and its YAML.
///
/// # Errors
/// [`CrdError`].
pub fn render() -> Result<(String, String), CrdError> {
    let crd = crd()?;
    let name = crd.metadata.name.clone().unwrap_or_default();
    let body = serde_saphyr::to_string(&crd)?;
    Ok((
        format!("{name}.yaml"),
        format!(
            "# Generated by `KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p hostpath-provisioner-operator --test crds`. Do not edit.\n{body}"
        ),
    ))
}
