//! An upload on the real cluster, as a user makes one: `virtctl image-upload dv` creates the
//! DataVolume, waits for cdi-controller's upload server, gets a token from cdi-apiserver through
//! the aggregation layer, and sends the test guest's qcow2 to cdi-uploadproxy on its NodePort
//! (the URL from CDIConfig's override, as cluster/cdi sets it); the server converts it through
//! scratch space, the DataVolume ends Succeeded, and a VM boots from it and reads its label. The
//! claim and its scratch space are in the cluster's default StorageClass, `hostpath-csi`
//! (WaitForFirstConsumer: without `--force-bind` virtctl refuses, as upstream's), a CSI class, so
//! that CDI's upload populator fills a prime claim and hands its volume over. The proxy refuses
//! requests without a valid token.

use std::process::Command;
use std::time::Duration;

use super::data_volumes::{boots_and_reads_the_label, vm_booting_from_template};
use super::support::{Cleanup, field, get, kubectl_ok, virtctl, wait_for};

/// The test guest's disk, as `make guest` leaves it.
pub(super) const GUEST_QCOW2: &str =
    "/var/lib/kubevirt-rs/images/localhost/kubevirt-rs/testguest/latest/disk/testguest.qcow2";

/// The upload proxy's address on the host: the NodePort on node 1, from CDIConfig.
pub(super) fn proxy_url() -> String {
    let config: serde_json::Value =
        serde_json::from_str(&kubectl_ok(&["get", "cdiconfig", "config", "-o", "json"])).expect("CDIConfig");
    let url = field(&config, "spec.uploadProxyURLOverride");
    assert!(url.starts_with("https://"), "CDIConfig names the proxy: {config}");
    url
}

/// `curl -k` of a POST to `url` with `headers`; the HTTP status.
fn post_status(url: &str, headers: &[&str]) -> String {
    let mut command = Command::new("curl");
    command.args([
        "-sS",
        "-k",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code}",
        "-X",
        "POST",
        "--data-binary",
        "x",
    ]);
    for header in headers {
        command.args(["-H", header]);
    }
    let output = command.arg(url).output().expect("curl (make deps installs it)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `virtctl image-upload dv CLAIM --force-bind` of the test guest's qcow2 in `default`, creating
/// the DataVolume in the default StorageClass; its output.
fn upload_with_virtctl(claim: &str) -> String {
    upload_with_virtctl_in("default", claim)
}

/// [`upload_with_virtctl`] in `namespace`.
pub(super) fn upload_with_virtctl_in(namespace: &str, claim: &str) -> String {
    let output = virtctl(&[
        "image-upload",
        "dv",
        claim,
        "--size",
        "64Mi",
        "--access-mode",
        "ReadWriteOnce",
        "--volume-mode",
        "filesystem",
        "--image-path",
        GUEST_QCOW2,
        "--insecure",
        "--force-bind",
        "--wait-secs",
        "240",
        "-n",
        namespace,
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "virtctl image-upload failed: {stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The test guest's VM whose only disk is the existing DataVolume `NAME-root`.
pub(super) fn vm_on_data_volume(name: &str) -> String {
    let with_template = vm_booting_from_template(name, "upload: {}");
    let start = with_template.find("  dataVolumeTemplates:\n").expect("templates");
    let end = with_template.find("  template:\n").expect("template");
    let manifest = format!("{}{}", &with_template[..start], &with_template[end..]);
    assert!(
        manifest.contains(&format!("dataVolume:\n            name: {name}-root")),
        "{manifest}"
    );
    manifest
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn virtctl_image_upload_fills_a_data_volume_that_a_vm_boots_from() {
    const NAME: &str = "e2e-upload";
    let claim = format!("{NAME}-root");
    assert!(
        std::path::Path::new(GUEST_QCOW2).is_file(),
        "the test guest's disk is missing: run make guest"
    );
    let mut cleanup = Cleanup::new();
    cleanup.track("dv", &claim);

    let proxy = proxy_url();
    assert_eq!(post_status(&format!("{proxy}/v1beta1/upload"), &[]), "400", "no token");
    assert_eq!(
        post_status(
            &format!("{proxy}/v1beta1/upload"),
            &["Authorization: Bearer forged.token.value"]
        ),
        "401",
        "a token not signed by cdi-apiserver"
    );

    let stdout = upload_with_virtctl(&claim);
    for line in [
        format!("PVC default/{claim} not found"),
        format!("DataVolume default/{claim} created"),
        format!("Waiting for PVC {claim} upload pod to be ready..."),
        format!("Uploading data to {proxy}"),
        "Uploading data completed successfully, waiting for processing to complete".to_owned(),
        "Processing completed successfully".to_owned(),
        format!("Uploading {GUEST_QCOW2} completed successfully"),
    ] {
        assert!(stdout.contains(&line), "{line:?} missing from: {stdout}");
    }
    // virtctl ends once the upload server is done; the DataVolume's Succeeded and the claim's
    // binding to the prime's volume follow within a pass or two.
    let dv = wait_for("the DataVolume to succeed", Duration::from_secs(60), || {
        get("dv", &claim, "default").filter(|dv| field(dv, "status.phase") == "Succeeded")
    });
    assert_eq!(field(&dv, "spec.source.upload"), "{}");
    let pvc = wait_for("the claim to bind", Duration::from_secs(60), || {
        get("pvc", &claim, "default").filter(|pvc| field(pvc, "status.phase") == "Bound")
    });
    assert_eq!(
        field(&pvc, "spec.storageClassName"),
        "hostpath-csi",
        "the default class"
    );
    // A CSI class: CDI's upload populator filled a prime claim, whose volume went to this one.
    assert_eq!(field(&pvc, "spec.dataSourceRef.kind"), "VolumeUploadSource");
    assert_eq!(
        pvc["metadata"]["annotations"]["cdi.kubevirt.io/storage.pod.phase"],
        "Succeeded"
    );
    let prime = format!("prime-{}", field(&pvc, "metadata.uid"));
    let source = format!("volume-upload-source-{}", field(&dv, "metadata.uid"));
    wait_for(
        "the prime claim, the VolumeUploadSource, the upload server, its Service and its key to go",
        Duration::from_secs(60),
        || {
            (["pod", "service", "secret"]
                .iter()
                .all(|kind| get(kind, &format!("cdi-upload-{prime}"), "default").is_none())
                && get("pvc", &prime, "default").is_none()
                && get("volumeuploadsource", &source, "default").is_none())
            .then_some(())
        },
    );
    // Once done, the proxy turns further uploads away.
    let again = virtctl(&[
        "image-upload",
        "dv",
        &claim,
        "--image-path",
        GUEST_QCOW2,
        "--insecure",
        "-n",
        "default",
    ]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr)
            .contains(&format!("PVC {claim} already successfully imported/cloned/updated")),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // A VM whose disk is the uploaded DataVolume.
    cleanup.apply("vm", NAME, &vm_on_data_volume(NAME));
    boots_and_reads_the_label(NAME);
    drop(cleanup);
}
