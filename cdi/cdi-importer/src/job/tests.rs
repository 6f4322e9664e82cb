use pretty_assertions::assert_eq;

use super::*;

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn http(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let mut all = vars(&[
        (env::SOURCE, "http"),
        (env::ENDPOINT, "http://images.example/disk.qcow2"),
        (env::CONTENT_TYPE, "kubevirt"),
        (env::IMAGE_SIZE, "10Gi"),
        (env::FILESYSTEM_OVERHEAD, "0.055"),
        (env::PREALLOCATION, "false"),
    ]);
    all.extend(vars(extra));
    all
}

#[test]
fn an_http_import_reads_every_variable() {
    let job = from_env(&http(&[
        ("IMPORTER_FINAL_CHECKPOINT", "false"),
        (env::ACCESS_KEY_ID, "user"),
        (env::SECRET_KEY, "secret"),
        (env::CERT_DIR, "/certs"),
        ("IMPORTER_EXTRA_HEADER_0", "X-Token: abc"),
        ("IMPORTER_EXTRA_HEADER_1", "X-Other: d"),
        (env::CHECKSUM, "md5:d41d8cd98f00b204e9800998ecf8427e"),
        (env::OWNER_UID, "dv-uid"),
    ]))
    .expect("job");
    assert_eq!(
        job,
        Job {
            source: Source::Http(HttpSource {
                url: "http://images.example/disk.qcow2".to_owned(),
                basic_auth: Some(("user".to_owned(), "secret".to_owned())),
                extra_headers: vec!["X-Token: abc".to_owned(), "X-Other: d".to_owned()],
                extra_roots_pem: Vec::new(),
                skip_tls_verify: false,
                no_redirects: false,
            }),
            cert_dir: Some(PathBuf::from("/certs")),
            image_size: Some(10 << 30),
            filesystem_overhead: "0.055".to_owned(),
            preallocation: false,
            checksum: Some(Checksum {
                algorithm: "md5".to_owned(),
                hash: "d41d8cd98f00b204e9800998ecf8427e".to_owned(),
            }),
            owner_uid: Some("dv-uid".to_owned()),
        }
    );
}

#[test]
fn a_registry_import_reads_its_credentials_platform_and_insecure_flag() {
    let job = from_env(&http(&[
        (env::SOURCE, "registry"),
        (env::ENDPOINT, "docker://registry.cdi:5000/disks/testguest:v1"),
        (env::ACCESS_KEY_ID, "user"),
        (env::SECRET_KEY, "secret"),
        (env::INSECURE_TLS, "true"),
        (env::REGISTRY_IMAGE_ARCHITECTURE, "arm64"),
        (env::CERT_DIR, "/certs"),
    ]))
    .expect("job");
    assert_eq!(
        job.source,
        Source::Registry(RegistrySource {
            url: "docker://registry.cdi:5000/disks/testguest:v1".to_owned(),
            credentials: Some(("user".to_owned(), "secret".to_owned())),
            extra_roots_pem: Vec::new(),
            insecure: true,
            architecture: Some("arm64".to_owned()),
        })
    );
    assert_eq!(job.cert_dir, Some(PathBuf::from("/certs")));
    let plain = from_env(&http(&[
        (env::SOURCE, "registry"),
        (env::ENDPOINT, "docker://quay.io/containerdisks/fedora"),
        (env::INSECURE_TLS, "false"),
    ]))
    .expect("job");
    assert_eq!(
        plain.source,
        Source::Registry(RegistrySource {
            url: "docker://quay.io/containerdisks/fedora".to_owned(),
            ..RegistrySource::default()
        })
    );
}

#[test]
fn a_blank_disk_needs_a_size_and_defaults_stand_in_for_the_rest() {
    let job = from_env(&vars(&[
        (env::SOURCE, "none"),
        (env::IMAGE_SIZE, "1Gi"),
        (env::PREALLOCATION, "true"),
    ]))
    .expect("job");
    assert_eq!(job.source, Source::Blank);
    assert_eq!(job.filesystem_overhead, "0");
    assert!(job.preallocation);
    assert_eq!(
        from_env(&vars(&[(env::SOURCE, "none")])),
        Err(JobError::Missing(env::IMAGE_SIZE))
    );
}

#[test]
fn each_bad_or_unsupported_variable_is_named() {
    let cases: Vec<(BTreeMap<String, String>, &str)> = vec![
        (vars(&[]), "IMPORTER_SOURCE is not set"),
        (http(&[(env::ENDPOINT, "")]), "IMPORTER_ENDPOINT is not set"),
        (
            http(&[(env::SOURCE, "s3")]),
            "IMPORTER_SOURCE=\"s3\" is not supported by this importer yet",
        ),
        (
            http(&[(env::SOURCE, "registry"), (env::ENDPOINT, "oci-archive:/disk.tar")]),
            "IMPORTER_ENDPOINT=\"oci-archive:/disk.tar\": Invalid image name",
        ),
        (
            http(&[
                (env::SOURCE, "registry"),
                (env::ENDPOINT, "docker://quay.io/a"),
                (env::SECRET_KEY, "secret"),
            ]),
            "IMPORTER_ACCESS_KEY_ID is not set",
        ),
        (
            http(&[(env::REGISTRY_IMAGE_ARCHITECTURE, "arm64")]),
            "IMPORTER_REGISTRY_IMAGE_ARCHITECTURE=\"arm64\": only the registry source has a platform",
        ),
        (
            http(&[(env::CONTENT_TYPE, "archive")]),
            "IMPORTER_CONTENTTYPE=\"archive\" is not supported by this importer yet",
        ),
        (
            http(&[(env::PREALLOCATION, "yes")]),
            "PREALLOCATION=\"yes\": should be \"true\" or \"false\"",
        ),
        (
            http(&[(env::INSECURE_TLS, "true")]),
            "INSECURE_TLS=\"true\" is not supported by this importer yet",
        ),
        (http(&[(env::IMAGE_SIZE, "ten")]), "IMPORTER_IMAGE_SIZE=\"ten\""),
        (
            http(&[(env::FILESYSTEM_OVERHEAD, "1.5")]),
            "FILESYSTEM_OVERHEAD=\"1.5\"",
        ),
        (
            http(&[(env::CHECKSUM, "crc32:abc")]),
            "IMPORTER_CHECKSUM: unsupported hash algorithm 'crc32'",
        ),
        (http(&[(env::ACCESS_KEY_ID, "user")]), "IMPORTER_SECRET_KEY is not set"),
        (
            http(&[("IMPORTER_EXTRA_HEADER_0", "no colon")]),
            "IMPORTER_EXTRA_HEADER_0: a header is `Name: value`",
        ),
        (
            http(&[("IMPORTER_EXTRA_HEADER_X", "A: b")]),
            "IMPORTER_EXTRA_HEADER_X: extra headers are numbered",
        ),
        (
            http(&[("IMPORTER_THUMBPRINT", "ab:cd")]),
            "IMPORTER_THUMBPRINT=\"ab:cd\" is not supported by this importer yet",
        ),
        (
            http(&[("https_proxy", "http://proxy:3128")]),
            "https_proxy=\"http://proxy:3128\" is not supported by this importer yet",
        ),
        (
            http(&[("IMPORTER_FINAL_CHECKPOINT", "true")]),
            "IMPORTER_FINAL_CHECKPOINT=\"true\" is not supported by this importer yet",
        ),
        (
            vars(&[
                (env::SOURCE, "none"),
                (env::IMAGE_SIZE, "1Gi"),
                (env::CHECKSUM, "md5:d41d8cd98f00b204e9800998ecf8427e"),
            ]),
            "IMPORTER_CHECKSUM=\"md5:d41d8cd98f00b204e9800998ecf8427e\": only an http source's download is checked",
        ),
    ];
    for (env, expected) in cases {
        let error = from_env(&env).expect_err(expected).to_string();
        assert!(error.starts_with(expected), "{error:?} should start with {expected:?}");
    }
}
