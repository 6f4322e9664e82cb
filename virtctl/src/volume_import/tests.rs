//! `--volume-import` values, restating upstream's "VM with specified imported volume" and
//! "Invalid parameters to VolumeImportFlag" tables for the types CDI here imports from.

use serde_json::json;

use super::*;

fn fixed() -> impl FnMut() -> String {
    || "abcde".to_owned()
}

fn parsed(text: &str) -> Import {
    parse_import(text, &mut fixed()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error(text: &str) -> String {
    parse_import(text, &mut fixed()).expect_err(text)
}

#[test]
fn each_type_makes_its_source() {
    let cases = [
        (
            "type:blank,size:256Mi",
            json!({"source": {"blank": {}}, "storage": {"resources": {"requests": {"storage": "256Mi"}}}}),
        ),
        (
            "type:http,size:1Gi,url:http://images/disk.qcow2,secretref:creds,certconfigmap:ca,extraheaders:A: 1;B: 2,secretextraheaders:s1;s2",
            json!({"source": {"http": {"url": "http://images/disk.qcow2", "secretRef": "creds", "certConfigMap": "ca",
                   "extraHeaders": ["A: 1", "B: 2"], "secretExtraHeaders": ["s1", "s2"]}},
                   "storage": {"resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "type:registry,size:1Gi,url:docker://registry:5000/disk,pullmethod:pod,secretref:s,certconfigmap:c",
            json!({"source": {"registry": {"url": "docker://registry:5000/disk", "pullMethod": "pod", "secretRef": "s",
                   "certConfigMap": "c"}}, "storage": {"resources": {"requests": {"storage": "1Gi"}}}}),
        ),
        (
            "type:pvc,src:images/debian",
            json!({"source": {"pvc": {"namespace": "images", "name": "debian"}}, "storage": {}}),
        ),
        (
            "type:ds,src:images/debian,size:2Gi",
            json!({"sourceRef": {"kind": "DataSource", "namespace": "images", "name": "debian"},
                   "storage": {"resources": {"requests": {"storage": "2Gi"}}}}),
        ),
        (
            "type:ds,src:debian",
            json!({"sourceRef": {"kind": "DataSource", "name": "debian"}, "storage": {}}),
        ),
    ];
    for (text, spec) in cases {
        let import = parsed(text);
        assert_eq!(import.template.spec, spec, "{text}");
        assert_eq!(import.name, "imported-volume-abcde", "{text}");
        assert_eq!(import.boot_order, None);
        assert!(import.template.api_version.is_none() && import.template.kind.is_none());
    }
    let named = parsed("type:blank,size:1Gi,name:scratch,bootorder:2");
    assert_eq!((named.name.as_str(), named.boot_order), ("scratch", Some(2)));
    assert_eq!(named.template.metadata.and_then(|m| m.name).as_deref(), Some("scratch"));
}

#[test]
fn bad_values_get_upstreams_messages() {
    let cases = [
        ("", "params may not be empty"),
        ("test=test", "params need to have at least one colon: test=test"),
        ("size:1Gi", "type must be specified"),
        (
            "type:madeup,size:1Gi",
            "invalid volume import type \"madeup\", see help for supported values",
        ),
        ("type:blank,size:1Gi,test:test", "unknown param(s): test:test"),
        ("type:blank,size:1Gi,storageclass:x", "unknown param(s): storageclass:x"),
        ("type:blank", "size must be specified"),
        ("type:http,size:1Gi", "url is required with http volume source"),
        (
            "type:registry,size:1Gi",
            "exactly one of url or imagestream must be defined",
        ),
        (
            "type:registry,size:1Gi,url:docker://x,imagestream:y",
            "exactly one of url or imagestream must be defined",
        ),
        (
            "type:registry,size:1Gi,url:docker://x,pullmethod:fast",
            "pullmethod must be set to pod or node",
        ),
        ("type:pvc", "src must be specified"),
        ("type:pvc,src:debian", "namespace of pvc \"debian\" must be specified"),
        ("type:pvc,src:/debian", "namespace of pvc \"debian\" must be specified"),
        (
            "type:pvc,src:a/b/c",
            "src invalid: invalid count 2 of slashes in prefix/name",
        ),
        ("type:ds,src:images/", "src invalid: name cannot be empty"),
        ("type:blank,size:1Gi,bootorder:0", "bootorder must be greater than 0"),
        (
            "type:blank,size:1Gi,name:name.with.dot",
            "invalid name \"name.with.dot\": must not contain dots",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(error(text), message, "{text}");
    }
    assert!(error("type:blank,size:10Gu").starts_with("failed to parse param \"size\": "));
    assert!(error("type:blank,size:1Gi,bootorder:-1").starts_with("failed to parse param \"bootorder\": "));
    assert!(
        error("type:blank,size:1Gi,name:NOTALLOWED")
            .starts_with("invalid name \"NOTALLOWED\": a lowercase RFC 1123 label")
    );
    let long = "a".repeat(64);
    assert_eq!(
        error(&format!("type:blank,size:1Gi,name:{long}")),
        format!("invalid name \"{long}\": must be no more than 63 characters")
    );
}

#[test]
fn the_types_cdi_here_does_not_import_from_are_refused_by_name() {
    for kind in ["gcs", "s3", "imageio", "vddk", "snapshot"] {
        assert_eq!(
            error(&format!("type:{kind},size:1Gi,url:x")),
            format!(
                "volume import type \"{kind}\" is not supported by kubevirt-rs (its CDI imports from http, registry, pvc, blank and ds)"
            )
        );
    }
}
