//! The `SSP` CRD generated from [`crate::api`]: `v1beta3` (stored) and `v1beta2` (served,
//! deprecated, with upstream's warning), converted by the API server with strategy `None` as
//! upstream's are, with the rules that refuse what this operator does not do. Its committed YAML
//! form is in `manifests/ssp/crds/` (a test fails when it is stale, and rewrites it with
//! `KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p ssp-operator --test crds`).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use serde_json::{Map, Value, json};

use crate::api::SSP;

/// Why the CRD could not be made or rendered.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The generated schema is not where a rule or field goes.
    #[error("the SSP schema has no {0}")]
    Schema(&'static str),
    /// The CRD does not convert to JSON and back.
    #[error("converting the SSP CRD: {0}")]
    Json(#[from] serde_json::Error),
    /// The CRD does not serialize as YAML.
    #[error("cannot render the SSP CRD as YAML: {0}")]
    Yaml(#[from] serde_saphyr::ser::Error),
}

/// Upstream's warning for `v1beta2`.
pub const V1BETA2_WARNING: &str = "SSP v1beta2 is deprecated and will not be updated with new functionality. It will stop being served in the next version.";

/// Each refusal of both versions, as the API server words it: (where the rule sits, the CEL rule,
/// the message).
const RULES: &[(&str, &str, &str)] = &[
    (
        "/properties/spec",
        "!has(self.tlsSecurityProfile)",
        "spec.tlsSecurityProfile: a TLS security profile is not supported; the template validator serves TLS 1.2 and 1.3",
    ),
    (
        "/properties/spec",
        "!has(self.tokenGenerationService) || !has(self.tokenGenerationService.enabled) || !self.tokenGenerationService.enabled",
        "spec.tokenGenerationService.enabled: the VM console proxy's token service is not supported",
    ),
    (
        "/properties/spec/properties/commonTemplates",
        "!has(self.dataImportCronTemplates) || size(self.dataImportCronTemplates) == 0",
        "spec.commonTemplates.dataImportCronTemplates: DataImportCron templates are not supported",
    ),
];

/// Refusals of `v1beta3` only.
const V1BETA3_RULES: &[(&str, &str, &str)] = &[
    (
        "/properties/spec",
        "!has(self.enableMultipleArchitectures) || !self.enableMultipleArchitectures",
        "spec.enableMultipleArchitectures: templates and boot sources for several architectures are not supported",
    ),
    (
        "/properties/spec",
        "!has(self.cluster)",
        "spec.cluster: the cluster's architectures are not supported",
    ),
];

/// `v1beta2`'s deprecated fields, which upstream ignores and this operator refuses.
const V1BETA2_DEPRECATED: &[&str] = &["featureGates", "commonInstancetypes", "tektonPipelines", "tektonTasks"];

/// Fields with a free shape: kept as the user gives them, for their rules to refuse.
const FREE_FIELDS: &[&str] = &[
    "/properties/spec/properties/cluster",
    "/properties/spec/properties/tlsSecurityProfile",
    "/properties/spec/properties/commonTemplates/properties/dataImportCronTemplates/items",
];

fn object_at<'a>(root: &'a mut Value, at: &'static str) -> Result<&'a mut Map<String, Value>, CrdError> {
    root.pointer_mut(at)
        .and_then(Value::as_object_mut)
        .ok_or(CrdError::Schema(at))
}

fn add_rules(
    root: &mut Value,
    rules: impl IntoIterator<Item = (&'static str, String, String)>,
) -> Result<(), CrdError> {
    for (at, rule, message) in rules {
        let node = object_at(root, at)?;
        let list = node
            .entry("x-kubernetes-validations")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            list.push(json!({ "rule": rule, "message": message }));
        }
    }
    Ok(())
}

fn owned(rules: &[(&'static str, &str, &str)]) -> impl Iterator<Item = (&'static str, String, String)> {
    rules
        .iter()
        .map(|(at, rule, message)| (*at, (*rule).to_owned(), (*message).to_owned()))
}

/// The CRD, both versions.
///
/// # Errors
/// [`CrdError`] when the generated schema lacks a place a rule goes.
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let mut crd = serde_json::to_value(SSP::crd())?;
    let mut v1beta3 = crd
        .pointer("/spec/versions/0")
        .cloned()
        .ok_or(CrdError::Schema("versions"))?;
    {
        let root = v1beta3
            .pointer_mut("/schema/openAPIV3Schema")
            .ok_or(CrdError::Schema("openAPIV3Schema"))?;
        for at in FREE_FIELDS {
            let node = object_at(root, at)?;
            node.clear();
            node.insert("type".to_owned(), json!("object"));
            node.insert("x-kubernetes-preserve-unknown-fields".to_owned(), json!(true));
        }
        object_at(
            root,
            "/properties/spec/properties/templateValidator/properties/replicas",
        )?
        .insert("default".to_owned(), json!(2));
        add_rules(root, owned(RULES))?;
    }
    let mut v1beta2 = v1beta3.clone();
    {
        let root = v1beta3
            .pointer_mut("/schema/openAPIV3Schema")
            .ok_or(CrdError::Schema("openAPIV3Schema"))?;
        add_rules(root, owned(V1BETA3_RULES))?;
    }
    let map = v1beta2.as_object_mut().ok_or(CrdError::Schema("versions"))?;
    map.insert("name".to_owned(), json!("v1beta2"));
    map.insert("storage".to_owned(), json!(false));
    map.insert("deprecated".to_owned(), json!(true));
    map.insert("deprecationWarning".to_owned(), json!(V1BETA2_WARNING));
    {
        let root = v1beta2
            .pointer_mut("/schema/openAPIV3Schema")
            .ok_or(CrdError::Schema("openAPIV3Schema"))?;
        let spec = object_at(root, "/properties/spec/properties")?;
        spec.remove("enableMultipleArchitectures");
        spec.remove("cluster");
        for field in V1BETA2_DEPRECATED {
            spec.insert(
                (*field).to_owned(),
                json!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true }),
            );
        }
        let deprecated = V1BETA2_DEPRECATED.iter().map(|field| {
            (
                "/properties/spec",
                format!("!has(self.{field})"),
                format!("spec.{field}: deprecated and ignored upstream; not supported here, remove it"),
            )
        });
        add_rules(root, deprecated)?;
    }
    let versions = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
        .ok_or(CrdError::Schema("versions"))?;
    *versions = vec![v1beta2, v1beta3];
    if let Some(spec) = crd.pointer_mut("/spec").and_then(Value::as_object_mut) {
        spec.insert("conversion".to_owned(), json!({ "strategy": "None" }));
    }
    Ok(serde_json::from_value(crd)?)
}

/// The CRD's file name under `manifests/ssp/crds/` and its YAML.
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
            "# Generated by `KUBEVIRT_RS_UPDATE_GOLDEN=1 cargo test -p ssp-operator --test crds`. Do not edit.\n{body}"
        ),
    ))
}
