//! The SubjectAccessReview of a token request, as upstream's `generateAccessReview` makes it:
//! the user, groups and extras the aggregation layer names in `X-Remote-User`, `X-Remote-Group`
//! and `X-Remote-Extra-*`, asking whether they may `create` `uploadtokenrequests` in the
//! namespace. Pure.

use std::collections::BTreeMap;

use hyper::HeaderMap;
use serde_json::{Value, json};

use crate::{GROUP, RESOURCE, VERSION};

const USER: &str = "x-remote-user";
const GROUP_HEADER: &str = "x-remote-group";
const EXTRA: &str = "x-remote-extra-";

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

/// The review's `spec` for a POST in `namespace` with `headers`.
///
/// # Errors
/// Upstream's reason when a header it needs is missing.
pub fn spec(namespace: &str, headers: &HeaderMap) -> Result<Value, String> {
    let text = |v: &hyper::header::HeaderValue| v.to_str().ok().map(str::to_owned);
    let users: Vec<String> = headers.get_all(USER).iter().filter_map(text).collect();
    let user = users
        .first()
        .ok_or_else(|| "one of these headers required for authorization: [X-Remote-User]".to_owned())?;
    let groups: Vec<String> = headers.get_all(GROUP_HEADER).iter().filter_map(text).collect();
    if !headers.contains_key(GROUP_HEADER) {
        return Err("one of these headers required for authorization: [X-Remote-Group]".to_owned());
    }
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        if let Some(key) = name.as_str().strip_prefix(EXTRA)
            && let Some(value) = text(value)
        {
            extra.entry(unescape(key)).or_default().push(value);
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
        assert_eq!(
            spec("vms", &headers(&[("X-Remote-Group", "g")])),
            Err("one of these headers required for authorization: [X-Remote-User]".to_owned())
        );
        assert_eq!(
            spec("vms", &headers(&[("X-Remote-User", "alice")])),
            Err("one of these headers required for authorization: [X-Remote-Group]".to_owned())
        );
        assert_eq!(unescape("bad%zz"), "bad%zz");
    }
}
