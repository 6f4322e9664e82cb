//! Objects an operator ships as YAML (its operands' templates, embedded in its binary): read into
//! dynamic objects, each with the resource it is written through.

use ::kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::Value;

/// Why a template does not read.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{file}: {message}")]
pub struct TemplateError {
    /// The file the template came from.
    pub file: &'static str,
    /// Why.
    pub message: String,
}

/// Every object of a multi-document YAML `text` (from `file`), empty documents left out.
///
/// # Errors
/// [`TemplateError`] naming `file` when it is not YAML or a document is not an object.
pub fn documents(file: &'static str, text: &str) -> Result<Vec<DynamicObject>, TemplateError> {
    let values: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| TemplateError {
        file,
        message: e.to_string(),
    })?;
    values
        .into_iter()
        .filter(|v| !v.is_null())
        .map(|v| {
            serde_json::from_value(v).map_err(|e| TemplateError {
                file,
                message: e.to_string(),
            })
        })
        .collect()
}

/// The resource an object is written through, from its `apiVersion` and `kind`; `None` when it
/// has neither.
#[must_use]
pub fn resource_of(object: &DynamicObject) -> Option<ApiResource> {
    let types = object.types.as_ref()?;
    let (group, version) = types
        .api_version
        .split_once('/')
        .unwrap_or(("", types.api_version.as_str()));
    let gvk = GroupVersionKind::gvk(group, version, &types.kind);
    Some(ApiResource::from_gvk_with_plural(&gvk, &plural(&types.kind)))
}

/// The plural of a kind as the API server names resources: `PriorityClass` is `priorityclasses`,
/// `NetworkPolicy` `networkpolicies`, `Deployment` `deployments`.
#[must_use]
pub fn plural(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') || lower.ends_with('x') || lower.ends_with("ch") || lower.ends_with("sh") {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'o', 'u'])) {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plurals_are_the_api_servers() {
        for (kind, plural_name) in [
            ("Deployment", "deployments"),
            ("PriorityClass", "priorityclasses"),
            ("NetworkPolicy", "networkpolicies"),
            ("APIService", "apiservices"),
            ("ValidatingWebhookConfiguration", "validatingwebhookconfigurations"),
            ("Gateway", "gateways"),
            ("ClusterRoleBinding", "clusterrolebindings"),
        ] {
            assert_eq!(plural(kind), plural_name, "{kind}");
        }
    }

    #[test]
    fn documents_read_each_object_and_skip_empty_ones() {
        let text = "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: a\n---\n---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata:\n  name: b\nvalue: 1\n";
        let objects = documents("t.yaml", text).expect("reads");
        assert_eq!(objects.len(), 2);
        let resource = resource_of(&objects[1]).expect("typed");
        assert_eq!(
            (
                resource.group.as_str(),
                resource.version.as_str(),
                resource.plural.as_str()
            ),
            ("scheduling.k8s.io", "v1", "priorityclasses")
        );
        assert_eq!(objects[1].data["value"], 1);
    }

    #[test]
    fn a_document_that_is_not_an_object_names_its_file() {
        let error = documents("broken.yaml", "- a\n- b\n").expect_err("a list is no object");
        assert_eq!(error.file, "broken.yaml");
        assert!(error.to_string().starts_with("broken.yaml: "), "{error}");
    }
}
