//! What a request to cdi-apiserver is for, and the discovery documents the aggregation layer and
//! kubectl read. Pure.

use serde_json::{Value, json};

use crate::{GROUP, KIND, RESOURCE, VERSION};

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/healthz`.
    Healthz,
    /// A discovery document (anyone may read it).
    Discovery(Value),
    /// A new upload token in `namespace`.
    CreateToken {
        /// The namespace.
        namespace: String,
    },
    /// An `AdmissionReview` of a DataVolume (the mutating webhook).
    MutateDataVolume,
    /// An `AdmissionReview` of the CDI resource (the validating webhook).
    ValidateCdi,
    /// Another method on the token path.
    MethodNotAllowed,
    /// Anything else.
    NotFound,
}

fn group() -> Value {
    let version = json!({"groupVersion": format!("{GROUP}/{VERSION}"), "version": VERSION});
    json!({"name": GROUP, "versions": [version], "preferredVersion": version})
}

/// A namespace name as upstream's route takes it (`[a-z0-9][a-z0-9-]*`).
fn namespace_name(name: &str) -> bool {
    name.bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// The route of `method` on `path`.
#[must_use]
pub fn route(method: &str, path: &str) -> Route {
    let group_path = format!("/apis/{GROUP}");
    let version_path = format!("{group_path}/{VERSION}");
    let read = matches!(method, "GET" | "HEAD");
    match path {
        "/healthz" if read => return Route::Healthz,
        "/" if read => {
            return Route::Discovery(json!({
                "paths": ["/apis", "/apis/", "/healthz", group_path, version_path]
            }));
        }
        "/apis" | "/apis/" if read => {
            return Route::Discovery(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group()]}));
        }
        _ => {}
    }
    if path == crate::clone_admission::PATH || path == crate::uninstall_admission::PATH {
        return match method {
            "POST" if path == crate::clone_admission::PATH => Route::MutateDataVolume,
            "POST" => Route::ValidateCdi,
            _ => Route::MethodNotAllowed,
        };
    }
    if read && path == group_path {
        let mut document = group();
        document["kind"] = json!("APIGroup");
        document["apiVersion"] = json!("v1");
        return Route::Discovery(document);
    }
    if read && path == version_path {
        return Route::Discovery(json!({
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": format!("{GROUP}/{VERSION}"),
            "resources": [{
                "name": RESOURCE,
                "singularName": "uploadtokenrequest",
                "namespaced": true,
                "kind": KIND,
                "verbs": ["create"],
            }],
        }));
    }
    let tail = path
        .strip_prefix(&version_path)
        .and_then(|rest| rest.strip_prefix("/namespaces/"));
    if let Some((namespace, resource)) = tail.and_then(|rest| rest.split_once('/'))
        && resource == RESOURCE
        && namespace_name(namespace)
    {
        return if method == "POST" {
            Route::CreateToken {
                namespace: namespace.to_owned(),
            }
        } else {
            Route::MethodNotAllowed
        };
    }
    Route::NotFound
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn discovery_names_the_group_version_and_its_one_resource() {
        let Route::Discovery(list) = route("GET", "/apis/upload.cdi.kubevirt.io/v1beta1") else {
            panic!("discovery")
        };
        assert_eq!(list["resources"][0]["name"], "uploadtokenrequests");
        assert_eq!(list["resources"][0]["verbs"], json!(["create"]));
        assert_eq!(list["resources"][0]["namespaced"], true);
        let Route::Discovery(group) = route("GET", "/apis/upload.cdi.kubevirt.io") else {
            panic!("discovery")
        };
        assert_eq!(group["kind"], "APIGroup");
        assert_eq!(
            group["preferredVersion"]["groupVersion"],
            "upload.cdi.kubevirt.io/v1beta1"
        );
        let Route::Discovery(groups) = route("GET", "/apis") else {
            panic!("discovery")
        };
        assert_eq!(groups["groups"][0]["name"], "upload.cdi.kubevirt.io");
        assert_eq!(route("GET", "/healthz"), Route::Healthz);
    }

    #[test]
    fn tokens_are_created_by_post_in_a_namespace_only() {
        let path = "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/vms/uploadtokenrequests";
        assert_eq!(
            route("POST", path),
            Route::CreateToken {
                namespace: "vms".to_owned()
            }
        );
        assert_eq!(route("GET", path), Route::MethodNotAllowed);
        assert_eq!(
            route(
                "POST",
                "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/Bad_NS/uploadtokenrequests"
            ),
            Route::NotFound
        );
        assert_eq!(
            route("POST", "/apis/upload.cdi.kubevirt.io/v1beta1/namespaces/vms/other"),
            Route::NotFound
        );
        assert_eq!(route("POST", "/apis/upload.cdi.kubevirt.io/v1beta1"), Route::NotFound);
        assert_eq!(route("DELETE", "/healthz"), Route::NotFound);
        assert_eq!(route("POST", "/datavolume-mutate"), Route::MutateDataVolume);
        assert_eq!(route("GET", "/datavolume-mutate"), Route::MethodNotAllowed);
    }
}
