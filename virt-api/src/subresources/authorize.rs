//! Who may call a subresource (upstream's `rest/authorizer.go`). The API server's aggregation
//! layer forwards requests with a client certificate signed by its request-header CA and names
//! the user in `X-Remote-User`, `X-Remote-Group` and `X-Remote-Extra-*`; virt-api asks the API
//! server with a SubjectAccessReview whether that user may use the subresource. Discovery and
//! health paths need no authorization.

use std::collections::BTreeMap;

use http::{HeaderMap, Method};
use serde_json::{Value, json};

/// How virt-api authenticates subresource requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Authentication {
    /// Only requests from the aggregation layer, whose user a SubjectAccessReview then checks.
    FrontProxy,
    /// Every request is allowed (local use, `--disable-authorization`).
    Disabled,
}

/// Whether the TLS client presented a certificate the request-header CA signed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCertificate(pub bool);

const USER: &str = "x-remote-user";
const GROUP: &str = "x-remote-group";
const EXTRA: &str = "x-remote-extra-";

/// Paths anyone may read: discovery, version and health.
#[must_use]
pub fn needs_no_authorization(path: &str) -> bool {
    let group = "/apis/subresources.kubevirt.io";
    if matches!(
        path,
        "/" | "/apis" | "/healthz" | "/version" | "/openapi/v2" | "/openapi/v3"
    ) || path == group
    {
        return true;
    }
    path.strip_prefix(group)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|rest| {
            let mut parts = rest.split('/');
            let version = parts.next().unwrap_or_default();
            let tail: Vec<&str> = parts.collect();
            ["v1", "v1alpha3"].contains(&version)
                && (tail.is_empty() || matches!(tail.as_slice(), ["version" | "healthz"]))
        })
}

fn verb(method: &Method) -> Option<&'static str> {
    match *method {
        Method::POST => Some("create"),
        Method::GET | Method::HEAD => Some("get"),
        Method::PUT => Some("update"),
        Method::PATCH => Some("patch"),
        Method::DELETE => Some("delete"),
        _ => None,
    }
}

/// The `spec` of the SubjectAccessReview for a request, or why the request cannot be reviewed.
pub fn review_spec(method: &Method, path: &str, headers: &HeaderMap) -> Result<Value, String> {
    let text = |v: &http::HeaderValue| v.to_str().ok().map(str::to_owned);
    let user = headers
        .get(USER)
        .and_then(text)
        .ok_or("a valid user header is required for authorization")?;
    let groups: Vec<String> = headers.get_all(GROUP).iter().filter_map(text).collect();
    if groups.is_empty() {
        return Err("a valid group header is required for authorization".to_owned());
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA)
            && let Some(value) = text(value)
        {
            extra.entry(key.to_owned()).or_default().push(value);
        }
    }
    let verb = verb(method).ok_or_else(|| format!("unknown http verb in request: {method}"))?;
    let parts: Vec<&str> = path.split('/').collect();
    // /apis/<group>/<version>/namespaces/<ns>/expand-vm-spec: a namespaced resource of its own.
    if let [_, "apis", group, version, "namespaces", namespace, "expand-vm-spec"] = parts.as_slice() {
        return Ok(json!({
            "user": user,
            "groups": groups,
            "extra": extra,
            "resourceAttributes": {
                "namespace": namespace, "verb": verb, "group": group, "version": version,
                "resource": "expand-vm-spec"
            }
        }));
    }
    // /apis/<group>/<version>/namespaces/<ns>/<resource>/<name>/<subresource>
    let [
        _,
        "apis",
        group,
        version,
        "namespaces",
        namespace,
        resource,
        name,
        subresource,
    ] = parts.as_slice()
    else {
        return Err(format!("unknown api endpoint: {path}"));
    };
    if !matches!(*resource, "virtualmachines" | "virtualmachineinstances") {
        return Err(format!("unknown resource type {resource}"));
    }
    Ok(json!({
        "user": user,
        "groups": groups,
        "extra": extra,
        "resourceAttributes": {
            "namespace": namespace, "verb": verb, "group": group, "version": version,
            "resource": resource, "subresource": subresource, "name": name
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_and_health_need_no_authorization() {
        for path in [
            "/",
            "/apis",
            "/healthz",
            "/apis/subresources.kubevirt.io",
            "/apis/subresources.kubevirt.io/v1",
            "/apis/subresources.kubevirt.io/v1alpha3/healthz",
        ] {
            assert!(needs_no_authorization(path), "{path}");
        }
        assert!(!needs_no_authorization(
            "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm/start"
        ));
        assert!(!needs_no_authorization("/apis/subresources.kubevirt.io/v2"));
    }

    #[test]
    fn a_review_names_the_user_and_the_subresource() {
        let mut headers = HeaderMap::new();
        headers.insert("X-Remote-User", "alice".parse().expect("header"));
        headers.append("X-Remote-Group", "devs".parse().expect("header"));
        headers.append("X-Remote-Group", "system:authenticated".parse().expect("header"));
        headers.insert("X-Remote-Extra-Scopes", "vm".parse().expect("header"));
        let spec = review_spec(
            &Method::PUT,
            "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start",
            &headers,
        )
        .expect("spec");
        assert_eq!(
            spec,
            json!({
                "user": "alice", "groups": ["devs", "system:authenticated"], "extra": {"scopes": ["vm"]},
                "resourceAttributes": {"namespace": "ns", "verb": "update", "group": "subresources.kubevirt.io",
                    "version": "v1", "resource": "virtualmachines", "subresource": "start", "name": "vm"}
            })
        );
        assert_eq!(
            review_spec(
                &Method::PUT,
                "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start",
                &HeaderMap::new()
            ),
            Err("a valid user header is required for authorization".to_owned())
        );
    }
}
