//! The SubjectAccessReview of a token request, as upstream's `generateAccessReview` makes it:
//! the user, groups and extras the aggregation layer names in the headers the API server
//! configured (`X-Remote-User`, `X-Remote-Group` and `X-Remote-Extra-*` by default), asking
//! whether they may `create` `uploadtokenrequests` in the namespace. Pure.

use std::collections::BTreeMap;

use hyper::HeaderMap;
use serde_json::{Value, json};

use control_loop::aggregation::HeaderNames;

use crate::{GROUP, RESOURCE, VERSION};

/// `%XX` escapes decoded, as Go's `url.PathUnescape`; a malformed escape keeps the key as sent.
fn unescape(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
            match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                Some(byte) => {
                    out.push(byte);
                    i += 3;
                    continue;
                }
                None => return key.to_owned(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_owned())
}

/// The values of the first of `names` that `headers` has (upstream's `matchHeaders`).
fn first_of(headers: &HeaderMap, names: &[String]) -> Result<Vec<String>, String> {
    let text = |v: &hyper::header::HeaderValue| v.to_str().ok().map(str::to_owned);
    names
        .iter()
        .find(|name| headers.contains_key(name.as_str()))
        .map(|name| headers.get_all(name.as_str()).iter().filter_map(text).collect())
        .ok_or_else(|| format!("one of these headers required for authorization: [{}]", names.join(" ")))
}

/// The review's `spec` for a POST in `namespace` with `headers`, the user named in `names`.
///
/// # Errors
/// Upstream's reason when a header it needs is missing.
pub fn spec(namespace: &str, headers: &HeaderMap, names: &HeaderNames) -> Result<Value, String> {
    let users = first_of(headers, &names.user)?;
    let user = users.first().ok_or_else(|| "no user header found".to_owned())?;
    let groups = first_of(headers, &names.group)?;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let key = names
            .extra_prefix
            .iter()
            .find_map(|prefix| name.as_str().strip_prefix(prefix.as_str()));
        if let Some(key) = key
            && let Ok(value) = value.to_str()
        {
            extra.entry(unescape(key)).or_default().push(value.to_owned());
        }
    }
    Ok(json!({
        "user": user,
        "groups": groups,
        "extra": extra,
        "resourceAttributes": {
            "namespace": namespace,
            "verb": "create",
            "group": GROUP,
            "version": VERSION,
            "resource": RESOURCE,
        }
    }))
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                hyper::header::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                value.parse().expect("value"),
            );
        }
        headers
    }

    #[test]
    fn the_review_asks_for_create_on_uploadtokenrequests_for_the_named_user() {
        let spec = spec(
            "vms",
            &headers(&[
                ("X-Remote-User", "alice"),
                ("X-Remote-Group", "system:authenticated"),
                ("X-Remote-Group", "devs"),
                ("X-Remote-Extra-Scopes", "a"),
                ("X-Remote-Extra-Acme.com%2Fproject", "p1"),
            ]),
            &HeaderNames::default(),
        )
        .expect("spec");
        assert_eq!(
            spec,
            json!({
                "user": "alice",
                "groups": ["system:authenticated", "devs"],
                "extra": {"scopes": ["a"], "acme.com/project": ["p1"]},
                "resourceAttributes": {
                    "namespace": "vms", "verb": "create", "group": "upload.cdi.kubevirt.io",
                    "version": "v1beta1", "resource": "uploadtokenrequests"
                }
            })
        );
    }

    #[test]
    fn a_request_without_its_user_or_group_is_refused_with_upstreams_reason() {
        let names = HeaderNames::default();
        assert_eq!(
            spec("vms", &headers(&[("X-Remote-Group", "g")]), &names),
            Err("one of these headers required for authorization: [x-remote-user]".to_owned())
        );
        assert_eq!(
            spec("vms", &headers(&[("X-Remote-User", "alice")]), &names),
            Err("one of these headers required for authorization: [x-remote-group]".to_owned())
        );
        // A cluster that names the user in other headers: the usual ones name nobody.
        let own = HeaderNames {
            user: vec!["x-proxy-user".to_owned()],
            group: vec!["x-proxy-group".to_owned()],
            extra_prefix: vec!["x-proxy-extra-".to_owned()],
        };
        assert!(
            spec(
                "vms",
                &headers(&[("X-Remote-User", "mallory"), ("X-Remote-Group", "g")]),
                &own
            )
            .is_err()
        );
        let reviewed = spec(
            "vms",
            &headers(&[("X-Proxy-User", "alice"), ("X-Proxy-Group", "g")]),
            &own,
        )
        .expect("spec");
        assert_eq!(reviewed["user"], "alice");
        assert_eq!(unescape("bad%zz"), "bad%zz");
    }
}
