use pretty_assertions::assert_eq;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

const WHOLE: [(&str, &str); 6] = [
    ("CLIENT_KEY", "KEY"),
    ("CLIENT_CERT", "CERT"),
    ("SERVER_CA_CERT", "CA"),
    ("UPLOAD_URL", "https://cdi-upload-copy.dst.svc/v1beta1/upload"),
    ("VOLUME_MODE", "filesystem"),
    ("MOUNT_POINT", "/var/run/cdi/clone/source"),
];

#[test]
fn upstreams_environment_is_read() {
    let config = from_env(&vars(&WHOLE)).expect("config");
    assert_eq!(
        config.source,
        Source::Filesystem(PathBuf::from("/var/run/cdi/clone/source"))
    );
    assert_eq!(
        config.source.disk(),
        PathBuf::from("/var/run/cdi/clone/source/disk.img")
    );
    assert_eq!(config.upload_url, "https://cdi-upload-copy.dst.svc/v1beta1/upload");
    let mut block = WHOLE;
    block[4] = ("VOLUME_MODE", "block");
    block[5] = ("MOUNT_POINT", "/dev/cdi-block-volume");
    let config = from_env(&vars(&block)).expect("config");
    assert_eq!(config.source.disk(), PathBuf::from("/dev/cdi-block-volume"));
    assert!(!format!("{config:?}").contains("KEY"), "the key is not logged");
}

#[test]
fn a_missing_or_bad_variable_is_named() {
    for (index, (name, _)) in WHOLE.iter().enumerate() {
        let mut without = WHOLE.to_vec();
        without.remove(index);
        let error = from_env(&vars(&without)).expect_err("refused").to_string();
        assert_eq!(error, format!("{name} is not set"));
    }
    for (name, value) in [
        ("VOLUME_MODE", "tape"),
        ("MOUNT_POINT", "relative/path"),
        ("UPLOAD_URL", "http://plain/v1beta1/upload"),
    ] {
        let mut bad = WHOLE.to_vec();
        bad.retain(|(n, _)| *n != name);
        bad.push((name, value));
        let error = from_env(&vars(&bad)).expect_err("refused").to_string();
        assert!(error.starts_with(&format!("{name}=\"{value}\"")), "{error}");
    }
}
