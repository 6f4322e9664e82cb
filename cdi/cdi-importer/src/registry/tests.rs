use pretty_assertions::assert_eq;

use super::auth::{challenge, percent_encode};
use super::disk::{DiskPath, disk_path};
use super::*;

#[test]
fn challenges_give_their_scheme_and_parameters() {
    let (scheme, params) = challenge(
        r#"Bearer realm="https://auth.docker.io/token",service="registry.docker.io",scope="repository:a/b:pull,push""#,
    );
    assert_eq!(scheme, "bearer");
    assert_eq!(
        params,
        [
            ("realm".to_owned(), "https://auth.docker.io/token".to_owned()),
            ("service".to_owned(), "registry.docker.io".to_owned()),
            ("scope".to_owned(), "repository:a/b:pull,push".to_owned()),
        ]
    );
    let (scheme, params) = challenge(r#"Basic realm="basic-realm""#);
    assert_eq!(
        (scheme.as_str(), params),
        ("basic", vec![("realm".to_owned(), "basic-realm".to_owned())])
    );
    let (scheme, params) = challenge("Bearer realm=https://t.example/token, service=reg");
    assert_eq!(scheme, "bearer");
    assert_eq!(
        params,
        [
            ("realm".to_owned(), "https://t.example/token".to_owned()),
            ("service".to_owned(), "reg".to_owned()),
        ]
    );
}

#[test]
fn query_values_are_percent_encoded() {
    assert_eq!(percent_encode("repository:a/b:pull"), "repository%3Aa%2Fb%3Apull");
    assert_eq!(percent_encode("registry.docker.io"), "registry.docker.io");
}

#[test]
fn the_registry_s_own_error_messages_are_kept() {
    let body = br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown","detail":{"Tag":"x"}},{"code":"DENIED"}]}"#;
    assert_eq!(registry_errors(body), ": manifest unknown; DENIED");
    assert_eq!(registry_errors(b"<html>404</html>"), "");
    assert_eq!(registry_errors(br#"{"errors":[]}"#), "");
}

#[test]
fn the_disk_is_a_file_right_under_disk_and_no_whiteout() {
    for path in ["disk/testguest.qcow2", "./disk/a.img"] {
        assert_eq!(disk_path(path), DiskPath::Disk, "{path}");
    }
    for path in ["disk/sub/x.img", "./disk/a/b"] {
        assert_eq!(disk_path(path), DiskPath::Nested, "{path}");
    }
    for path in [
        "boot/vmlinuz",
        "disk",
        "disk/",
        "diskette/a.img",
        "disk/.wh.old.img",
        "./boot/disk/a.img",
    ] {
        assert_eq!(disk_path(path), DiskPath::Elsewhere, "{path}");
    }
}
