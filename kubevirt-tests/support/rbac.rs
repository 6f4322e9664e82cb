//! Whether a component's service account may make an API request under the RBAC rules of
//! `manifests/install`. The mock-API scenarios of virt-handler, virt-controller and virt-api
//! include this file and answer every request the rules do not allow with 403, as the API server
//! would: the RBAC is checked against every call the components make, not against a hand-written
//! list.

#![allow(dead_code)]

use std::sync::OnceLock;

use serde_json::Value;

/// One request, as RBAC sees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// API group, `""` for core.
    pub group: String,
    /// Resource, with `/subresource` when there is one.
    pub resource: String,
    /// Namespace, when namespaced.
    pub namespace: Option<String>,
    /// Object name, when there is one.
    pub name: Option<String>,
}

/// Reads a request's RBAC attributes from its method and URI.
pub fn attributes(method: &str, uri: &http::Uri) -> Result<Attributes, String> {
    let parts: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return Err(format!("not a resource path: {uri}")),
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        rest => (None, rest),
    };
    let (resource, name, sub) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some((*name).to_owned()), None),
        [resource, name, sub] => (*resource, Some((*name).to_owned()), Some(*sub)),
        _ => return Err(format!("not a resource path: {uri}")),
    };
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match (method, name.is_some()) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        (other, _) => return Err(format!("unknown method {other}")),
    };
    Ok(Attributes {
        verb: verb.to_owned(),
        group: group.to_owned(),
        resource: sub.map_or_else(|| resource.to_owned(), |s| format!("{resource}/{s}")),
        namespace,
        name,
    })
}

fn documents() -> &'static Vec<Value> {
    static DOCUMENTS: OnceLock<Vec<Value>> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|d| d.join("manifests/install").is_dir())
            .expect("the repository root")
            .join("manifests/install");
        let mut documents = Vec::new();
        for entry in std::fs::read_dir(&dir).expect("manifests/install") {
            let path = entry.expect("entry").path();
            if !path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("rbac-"))
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("read");
            for doc in text.split("\n---\n") {
                let value: Value = serde_saphyr::from_str(doc).expect("RBAC YAML");
                documents.push(value);
            }
        }
        // Roles every cluster has, which the manifests bind to.
        documents.push(
            serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "system:auth-delegator"}, "rules": [
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]}),
        );
        documents.push(serde_json::json!({"kind": "Role",
            "metadata": {"name": "extension-apiserver-authentication-reader", "namespace": "kube-system"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
                       "resourceNames": ["extension-apiserver-authentication"]}]}));
        documents
    })
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

fn rule_allows(rule: &Value, request: &Attributes) -> bool {
    let has = |key: &str, want: &str| strings(&rule[key]).iter().any(|v| *v == "*" || *v == want);
    let names = strings(&rule["resourceNames"]);
    has("apiGroups", &request.group)
        && has("resources", &request.resource)
        && has("verbs", &request.verb)
        && (names.is_empty() || request.name.as_deref().is_some_and(|n| names.contains(&n)))
}

/// Whether the service account `account` (in namespace `kubevirt`) may make `request`.
pub fn allowed(account: &str, request: &Attributes) -> bool {
    let docs = documents();
    let bound = |binding: &Value| {
        binding["subjects"].as_array().is_some_and(|s| {
            s.iter()
                .any(|s| s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == "kubevirt")
        })
    };
    let role = |kind: &str, name: &str, namespace: Option<&str>| {
        docs.iter().find(|d| {
            d["kind"] == kind
                && d["metadata"]["name"] == name
                && namespace.is_none_or(|ns| d["metadata"]["namespace"] == ns)
        })
    };
    docs.iter().filter(|d| bound(d)).any(|binding| {
        let role_name = binding["roleRef"]["name"].as_str().unwrap_or_default();
        match binding["kind"].as_str() {
            Some("ClusterRoleBinding") => role("ClusterRole", role_name, None),
            Some("RoleBinding") => {
                let ns = binding["metadata"]["namespace"].as_str().unwrap_or_default();
                if request.namespace.as_deref() != Some(ns) {
                    return false;
                }
                role(
                    binding["roleRef"]["kind"].as_str().unwrap_or_default(),
                    role_name,
                    Some(ns),
                )
            }
            _ => None,
        }
        .is_some_and(|role| {
            role["rules"]
                .as_array()
                .is_some_and(|rules| rules.iter().any(|r| rule_allows(r, request)))
        })
    })
}

/// The 403 body, or `None` when `account` may make the request.
pub fn forbidden(account: &str, method: &str, uri: &http::Uri) -> Option<Value> {
    let refusal = |message: String| {
        Some(
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "Forbidden", "code": 403, "message": message}),
        )
    };
    match attributes(method, uri) {
        Ok(request) if allowed(account, &request) => None,
        Ok(request) => refusal(format!("RBAC of manifests/install forbids {account}: {request:?}")),
        Err(e) => refusal(e),
    }
}
