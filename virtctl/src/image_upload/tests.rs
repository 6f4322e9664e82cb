use clap::Parser as _;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::objects::{self, Wanted};
use super::*;
use crate::cli::{Cli, Command};

fn args(line: &str) -> ImageUploadArgs {
    let words = std::iter::once("virtctl")
        .chain(std::iter::once("image-upload"))
        .chain(line.split_whitespace());
    match Cli::try_parse_from(words).expect("parses").command {
        Command::ImageUpload(args) => *args,
        other => panic!("{other:?}"),
    }
}

fn refused(line: &str) -> String {
    validate(&args(line)).expect_err(line)
}

#[test]
fn bad_flags_get_upstreams_messages_in_upstreams_order() {
    let cases = [
        (
            "dv disk --size 1Gi --pvc-size 2Gi --image-path x",
            "--pvc-size and --size can not be specified at the same time",
        ),
        (
            "dv disk --pvc-name other --image-path x",
            "cannot use --pvc-name and args",
        ),
        (
            "dv disk --volume-mode filesystem --block-volume --image-path x",
            "incompatible --volume-mode 'filesystem' and --block-volume",
        ),
        (
            "dv disk --volume-mode Block --image-path x",
            "Invalid volume mode 'Block'. Valid values are 'block' and 'filesystem'.",
        ),
        ("dv disk", "either image-path or archive-path must be provided"),
        ("", "either image-path or archive-path must be provided"),
        (
            "dv disk --image-path x --archive-path y",
            "cannot handle both image-path and archive-path, provide only one",
        ),
        (
            "dv disk --archive-path y --volume-mode block",
            "In archive upload the volume mode should always be filesystem",
        ),
        ("dv --image-path x", "expecting two args"),
        ("vm disk --image-path x", "invalid resource type vm"),
        (
            "dv disk --image-path x --default-instancetype-kind k",
            "--default-instancetype must be provided with --default-instancetype-kind",
        ),
        (
            "dv disk --image-path x --default-preference-kind k",
            "--default-preference must be provided with --default-preference-kind",
        ),
        (
            "dv disk --image-path x --default-preference p --no-create",
            "--default-instancetype and --default-preference cannot be used with --no-create",
        ),
    ];
    for (line, message) in cases {
        assert_eq!(refused(line), message, "{line}");
    }
}

#[test]
fn good_flags_name_the_target_and_what_it_is_made_with() {
    let upload = validate(&args(
        "DV disk --image-path /tmp/disk.img --size 2Gi --block-volume --default-instancetype u1.small",
    ))
    .expect("valid");
    assert_eq!(upload.kind, TargetKind::DataVolume);
    assert_eq!(upload.name, "disk");
    assert_eq!(upload.volume_mode.as_deref(), Some("block"));
    assert_eq!(upload.size.as_deref(), Some("2Gi"));
    assert_eq!(
        upload.labels,
        BTreeMap::from([(
            "instancetype.kubevirt.io/default-instancetype".to_owned(),
            "u1.small".to_owned()
        )])
    );
    assert_eq!(
        deprecation_warnings(&args("--pvc-name old --pvc-size 1Gi --block-volume")),
        [
            "Flag --pvc-name has been deprecated, specify the name as the second argument instead.",
            "Flag --pvc-size has been deprecated, use --size instead.",
            "Flag --block-volume has been deprecated, specify volume mode (filesystem/block) with --volume-mode instead.",
        ]
    );
}

use std::collections::BTreeMap;

#[test]
fn the_data_volume_and_claim_are_upstreams() {
    let upload = validate(&args("dv disk --image-path x --size 2Gi --volume-mode filesystem")).expect("valid");
    let wanted = Wanted {
        size: "2Gi",
        storage_class: Some("local"),
        access_mode: None,
        force_bind: true,
    };
    assert_eq!(
        objects::data_volume(&upload, "vms", wanted),
        json!({
            "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataVolume",
            "metadata": {"name": "disk", "namespace": "vms",
                "annotations": {"cdi.kubevirt.io/storage.bind.immediate.requested": ""}, "labels": {}},
            "spec": {"source": {"upload": {}}, "contentType": "kubevirt",
                "storage": {"resources": {"requests": {"storage": "2Gi"}}, "storageClassName": "local",
                    "volumeMode": "Filesystem"}}
        })
    );
    let claim = objects::claim(
        &upload,
        "vms",
        Wanted {
            force_bind: false,
            ..wanted
        },
    );
    assert_eq!(claim["spec"]["accessModes"], json!(["ReadWriteOnce"]));
    assert_eq!(
        claim["metadata"]["annotations"],
        json!({"cdi.kubevirt.io/storage.upload.target": "", "cdi.kubevirt.io/storage.contentType": "kubevirt"})
    );
    assert_eq!(
        claim["metadata"]["labels"],
        json!({"cdi.kubevirt.io/applyStorageProfile": "true"})
    );
}

#[test]
fn sizes_access_modes_existing_claims_and_urls_are_checked_as_upstream() {
    let mut upload = validate(&args("dv disk --image-path x")).expect("valid");
    assert_eq!(
        objects::size(&upload),
        Err("when creating a resource, the size must be specified".to_owned())
    );
    upload.size = Some("500Zb".to_owned());
    assert_eq!(
        objects::size(&upload),
        Err("validation failed for size=500Zb: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".to_owned())
    );
    assert!(objects::access_mode(Some("ReadOnlyMany")).is_err());
    assert_eq!(objects::access_mode(Some("ReadWriteMany")), Ok(()));
    let annotations = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    assert_eq!(
        objects::existing_claim(
            &upload,
            "disk",
            &annotations(&[(objects::POD_PHASE, "Succeeded")]),
            false
        ),
        Err("PVC disk already successfully imported/cloned/updated".to_owned())
    );
    assert_eq!(
        objects::existing_claim(&upload, "disk", &annotations(&[]), false),
        Err("PVC disk not available for upload".to_owned())
    );
    assert_eq!(
        objects::existing_claim(&upload, "disk", &annotations(&[]), true),
        Ok(true),
        "marked with --no-create"
    );
    assert_eq!(
        objects::existing_claim(&upload, "disk", &annotations(&[(objects::UPLOAD_TARGET, "")]), false),
        Ok(false)
    );
    upload.archive = true;
    assert_eq!(
        objects::existing_claim(&upload, "disk", &annotations(&[(objects::UPLOAD_TARGET, "")]), false),
        Err("PVC disk doesn't have archive contentType annotation".to_owned())
    );
    assert_eq!(
        objects::data_volume_missing("vms", "disk", &annotations(&[])),
        "No DataVolume is associated with the existing PVC vms/disk"
    );
    assert_eq!(
        objects::data_volume_ready("WaitForFirstConsumer", false),
        Err("cannot upload to DataVolume in WaitForFirstConsumer phase, make sure the PVC is Bound, or use force-bind flag".to_owned())
    );
    assert_eq!(objects::data_volume_ready("WaitForFirstConsumer", true), Ok(false));
    assert_eq!(objects::data_volume_ready("UploadReady", false), Ok(true));
    assert!(
        objects::data_volume_ready("Failed", true).is_err(),
        "a failed DataVolume ends the wait"
    );
    assert_eq!(
        objects::proxy_base("10.0.0.1:31001").as_deref(),
        Ok("https://10.0.0.1:31001")
    );
    assert_eq!(objects::proxy_base("http://proxy").as_deref(), Ok("http://proxy"));
    assert!(objects::proxy_base("ftp://proxy").is_err());
    for base in [
        "http://localhost:12345",
        "http://localhost:12345/",
        "http://localhost:12345/v1beta1/upload",
    ] {
        assert_eq!(
            objects::proxy_url(base, "/v1beta1/upload"),
            "http://localhost:12345/v1beta1/upload",
            "{base}"
        );
    }
}
