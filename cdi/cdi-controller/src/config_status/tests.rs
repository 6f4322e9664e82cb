//! The config status as upstream's config controller resolves it, and the pass over the fake API.

use std::collections::BTreeMap;

use cdi_api::cdi_config::{CDIConfigSpec, FilesystemOverhead, ImportProxy};
use k8s_openapi::api::core::v1::{LocalObjectReference, ResourceRequirements};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pretty_assertions::assert_eq;

use super::{decide, reconcile};
use crate::cluster_api::fake::FakeCdiApi;

fn class(name: &str, default: bool) -> StorageClass {
    StorageClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            annotations: default.then(|| {
                BTreeMap::from([(
                    "storageclass.kubernetes.io/is-default-class".to_owned(),
                    "true".to_owned(),
                )])
            }),
            ..ObjectMeta::default()
        },
        provisioner: "example.com/provisioner".to_owned(),
        ..StorageClass::default()
    }
}

fn classes() -> Vec<StorageClass> {
    vec![class("hostpath-csi", true), class("local", false), class("fast", false)]
}

#[test]
fn the_scratch_class_is_the_specs_when_it_exists() {
    // (spec's scratch class, classes) -> status: never the default class (current upstream's).
    let cases: Vec<(Option<&str>, Vec<StorageClass>, Option<&str>)> = vec![
        (Some("local"), classes(), Some("local")),
        (Some("gone"), classes(), None),
        (None, classes(), None),
        (Some("local"), vec![class("local", false)], Some("local")),
    ];
    for (wanted, classes, expected) in cases {
        let spec = CDIConfigSpec {
            scratch_space_storage_class: wanted.map(str::to_owned),
            ..CDIConfigSpec::default()
        };
        assert_eq!(
            decide(&spec, &classes).scratch_space_storage_class.as_deref(),
            expected,
            "{wanted:?}"
        );
    }
}

#[test]
fn every_class_gets_its_own_overhead_or_the_global_one() {
    let spec = CDIConfigSpec {
        filesystem_overhead: Some(FilesystemOverhead {
            global: Some("0.1".to_owned()),
            storage_class: BTreeMap::from([
                ("local".to_owned(), "0.02".to_owned()),
                ("fast".to_owned(), "1.5".to_owned()),
                ("gone".to_owned(), "0.3".to_owned()),
            ]),
        }),
        ..CDIConfigSpec::default()
    };
    let overhead = decide(&spec, &classes()).filesystem_overhead.expect("overheads");
    assert_eq!(overhead.global.as_deref(), Some("0.1"));
    assert_eq!(
        overhead.storage_class,
        BTreeMap::from([
            ("fast".to_owned(), "0.1".to_owned()),
            ("hostpath-csi".to_owned(), "0.1".to_owned()),
            ("local".to_owned(), "0.02".to_owned()),
        ]),
        "an invalid share takes the global one; a class that does not exist gets none"
    );

    let invalid_global = CDIConfigSpec {
        filesystem_overhead: Some(FilesystemOverhead {
            global: Some("2".to_owned()),
            storage_class: BTreeMap::new(),
        }),
        ..CDIConfigSpec::default()
    };
    let overhead = decide(&invalid_global, &[class("local", false)])
        .filesystem_overhead
        .expect("overheads");
    assert_eq!(overhead.global.as_deref(), Some("0.06"));
    assert_eq!(overhead.storage_class["local"], "0.06");
}

#[test]
fn the_other_settings_are_the_specs() {
    let resources = ResourceRequirements {
        limits: Some(BTreeMap::from([("memory".to_owned(), Quantity("1Gi".to_owned()))])),
        ..ResourceRequirements::default()
    };
    let spec = CDIConfigSpec {
        upload_proxy_url_override: Some("https://proxy.example.com".to_owned()),
        import_proxy: Some(ImportProxy {
            http_proxy: Some("http://proxy:3128".to_owned()),
            ..ImportProxy::default()
        }),
        pod_resource_requirements: Some(resources.clone()),
        preallocation: Some(true),
        image_pull_secrets: vec![LocalObjectReference {
            name: "pull".to_owned(),
        }],
        ..CDIConfigSpec::default()
    };
    let status = decide(&spec, &classes());
    assert_eq!(status.upload_proxy_url.as_deref(), Some("https://proxy.example.com"));
    assert_eq!(status.import_proxy, spec.import_proxy);
    assert_eq!(status.default_pod_resource_requirements, Some(resources));
    assert_eq!(status.preallocation, Some(true));
    assert_eq!(status.image_pull_secrets, spec.image_pull_secrets);

    let plain = decide(&CDIConfigSpec::default(), &[]);
    assert_eq!(
        (
            plain.upload_proxy_url,
            plain.preallocation,
            plain.default_pod_resource_requirements
        ),
        (None, Some(false), None)
    );
}

#[tokio::test]
async fn a_missing_config_is_made_then_its_status_written_once() {
    let api = FakeCdiApi::default();
    api.state().classes = classes();
    reconcile(&api).await.expect("a pass");
    assert_eq!(api.state().writes, ["create CDIConfig config"]);
    assert_eq!(
        api.state().config.as_ref().and_then(|c| c.metadata.name.as_deref()),
        Some("config")
    );

    reconcile(&api).await.expect("a pass");
    let status = api.state().config.clone().and_then(|c| c.status).expect("a status");
    assert_eq!(status.scratch_space_storage_class, None);
    assert_eq!(api.state().writes.len(), 2);

    // Nothing changed: nothing written.
    reconcile(&api).await.expect("a pass");
    assert_eq!(api.state().writes.len(), 2);

    // The spec changes: the status follows.
    if let Some(config) = api.state().config.as_mut() {
        config.spec.scratch_space_storage_class = Some("local".to_owned());
    }
    reconcile(&api).await.expect("a pass");
    let status = api.state().config.clone().and_then(|c| c.status).expect("a status");
    assert_eq!(status.scratch_space_storage_class.as_deref(), Some("local"));
}
