//! CDI's import populator on a claim a user makes, with no DataVolume: a claim in `hostpath-csi`
//! (WaitForFirstConsumer) whose `dataSourceRef` names a VolumeImportSource stays Pending with no
//! prime claim until a pod that uses it is placed; then a prime claim on that node is filled from
//! the source's URL (a server reached by its service name), its volume is rebound to the claim,
//! the prime goes, the claim says so in upstream's events, and a VM whose disk is the claim
//! boots from it there. The VolumeImportSource is the user's and stays. A claim naming a
//! VolumeUploadSource is filled the same way by an upload through cdi-uploadproxy.

use std::time::Duration;

use std::process::Command;

use super::data_volumes::serve_guest_disk;
use super::support::{Cleanup, console_until, field, get, kubectl_ok, kubectl_stdin, wait_for, wait_for_phase};
use super::upload::{GUEST_QCOW2, proxy_url};

const VM: &str = "e2e-populated";
const CLAIM: &str = "e2e-populated-root";
const SOURCE: &str = "e2e-populated-image";
const SERVER: &str = "e2e-populated-images";
const NODE: &str = "node1";

/// The events on the claim `claim`, a line each: reason, then message.
fn event_reasons(claim: &str) -> String {
    kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind=PersistentVolumeClaim,involvedObject.name={claim}"),
        "-o",
        "jsonpath={range .items[*]}{.reason} {.message}{\"\\n\"}{end}",
    ])
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_users_claim_naming_a_volume_import_source_is_filled_where_its_vm_is_placed() {
    let mut cleanup = Cleanup::new();
    serve_guest_disk(&mut cleanup, SERVER);
    cleanup.apply(
        "volumeimportsource",
        SOURCE,
        &format!(
            "apiVersion: cdi.kubevirt.io/v1beta1\nkind: VolumeImportSource\nmetadata:\n  name: {SOURCE}\n  namespace: default\n\
             spec:\n  source:\n    http:\n      url: http://{SERVER}.default.svc.cluster.local:8080/testguest.qcow2\n"
        ),
    );
    cleanup.apply(
        "pvc",
        CLAIM,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {CLAIM}\n  namespace: default\n\
             spec:\n  accessModes: [ReadWriteOnce]\n  volumeMode: Filesystem\n  storageClassName: hostpath-csi\n  \
             resources:\n    requests:\n      storage: 128Mi\n  \
             dataSourceRef:\n    apiGroup: cdi.kubevirt.io\n    kind: VolumeImportSource\n    name: {SOURCE}\n"
        ),
    );
    let pending = get("pvc", CLAIM, "default").expect("the claim");
    assert_eq!(field(&pending, "status.phase"), "Pending");
    // The prime is made only once a node is chosen, and on that node: the volume's node below.
    let prime = format!("prime-{}", field(&pending, "metadata.uid"));

    let manifest = super::upload::vm_on_data_volume(VM)
        .replacen(
            &format!("dataVolume:\n            name: {VM}-root"),
            &format!("persistentVolumeClaim:\n            claimName: {CLAIM}"),
            1,
        )
        .replacen(
            "    spec:\n      terminationGracePeriodSeconds: 30\n",
            &format!(
                "    spec:\n      nodeSelector:\n        kubernetes.io/hostname: {NODE}\n      terminationGracePeriodSeconds: 30\n"
            ),
            1,
        );
    assert!(
        manifest.contains(&format!("claimName: {CLAIM}")) && manifest.contains("kubernetes.io/hostname: node1"),
        "{manifest}"
    );
    cleanup.apply("vm", VM, &manifest);

    super::hostpath::bound_through_the_prime(CLAIM, NODE, &prime);

    wait_for_phase(VM, "Running", Duration::from_secs(240));
    console_until(
        VM,
        "\necho label $(head -c 26 /dev/vda) end",
        "label KUBEVIRT-RS-TESTGUEST-DISK end",
        Duration::from_secs(120),
    );
    assert_eq!(
        field(&get("vmi", VM, "default").expect("the VMI"), "status.nodeName"),
        NODE
    );
    wait_for("the prime claim to go", Duration::from_secs(60), || {
        get("pvc", &prime, "default").is_none().then_some(())
    });
    let reasons = wait_for("upstream's events on the claim", Duration::from_secs(30), || {
        let reasons = event_reasons(CLAIM);
        (reasons.contains("CreatedPVCPrimeSuccessfully") && reasons.contains("importSucceeded")).then_some(reasons)
    });
    assert!(!reasons.contains("ErrPopulationRefused"), "{reasons}");
    assert!(
        get("volumeimportsource", SOURCE, "default").is_some(),
        "the user's VolumeImportSource stays"
    );
    drop(cleanup);
}

/// A VolumeImportSource this CDI cannot import (an S3 bucket) is refused on the claim by name,
/// and nothing is made for it.
#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_claim_naming_a_source_this_cdi_cannot_import_is_told_why() {
    const REFUSED_CLAIM: &str = "e2e-populated-s3";
    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "volumeimportsource",
        REFUSED_CLAIM,
        &format!(
            "apiVersion: cdi.kubevirt.io/v1beta1\nkind: VolumeImportSource\nmetadata:\n  name: {REFUSED_CLAIM}\n  namespace: default\n\
             spec:\n  source:\n    s3:\n      url: http://bucket.example/disk.img\n"
        ),
    );
    cleanup.apply(
        "pvc",
        REFUSED_CLAIM,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {REFUSED_CLAIM}\n  namespace: default\n\
             spec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: hostpath-csi\n  \
             resources:\n    requests:\n      storage: 64Mi\n  \
             dataSourceRef:\n    apiGroup: cdi.kubevirt.io\n    kind: VolumeImportSource\n    name: {REFUSED_CLAIM}\n"
        ),
    );
    let message = wait_for("the refusal on the claim", Duration::from_secs(60), || {
        let messages = kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            &format!(
                "involvedObject.kind=PersistentVolumeClaim,involvedObject.name={REFUSED_CLAIM},reason=ErrPopulationRefused"
            ),
            "-o",
            "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
        ]);
        (!messages.trim().is_empty()).then_some(messages)
    });
    assert!(message.contains("the s3 source is not supported"), "{message}");
    let claim = get("pvc", REFUSED_CLAIM, "default").expect("the claim");
    assert_eq!(field(&claim, "status.phase"), "Pending");
    let prime = format!("prime-{}", field(&claim, "metadata.uid"));
    assert!(get("pvc", &prime, "default").is_none(), "no prime for a refused claim");
    drop(cleanup);
}

/// A claim naming a VolumeUploadSource (asking to bind at once, so that no consumer is needed):
/// its prime's upload server comes up, the claim shows it ready, an upload through
/// cdi-uploadproxy with a token for the claim fills the prime, and the claim gets its volume,
/// whose disk on the node starts with the test guest's label.
#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_users_claim_naming_a_volume_upload_source_is_filled_by_an_upload() {
    const UPLOAD_CLAIM: &str = "e2e-populated-upload";
    let mut cleanup = Cleanup::new();
    cleanup.apply(
        "volumeuploadsource",
        UPLOAD_CLAIM,
        &format!(
            "apiVersion: cdi.kubevirt.io/v1beta1\nkind: VolumeUploadSource\nmetadata:\n  name: {UPLOAD_CLAIM}\n  namespace: default\n\
             spec:\n  contentType: kubevirt\n"
        ),
    );
    cleanup.apply(
        "pvc",
        UPLOAD_CLAIM,
        &format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {UPLOAD_CLAIM}\n  namespace: default\n  \
             annotations:\n    cdi.kubevirt.io/storage.bind.immediate.requested: \"true\"\n\
             spec:\n  accessModes: [ReadWriteOnce]\n  storageClassName: hostpath-csi\n  \
             resources:\n    requests:\n      storage: 128Mi\n  \
             dataSourceRef:\n    apiGroup: cdi.kubevirt.io\n    kind: VolumeUploadSource\n    name: {UPLOAD_CLAIM}\n"
        ),
    );
    wait_for(
        "the claim to show its upload server ready",
        Duration::from_secs(180),
        || {
            get("pvc", UPLOAD_CLAIM, "default")
                .filter(|pvc| field(pvc, "metadata.annotations.cdi\\.kubevirt\\.io/storage\\.pod\\.ready") == "true")
        },
    );
    let request = format!(
        "apiVersion: upload.cdi.kubevirt.io/v1beta1\nkind: UploadTokenRequest\nmetadata:\n  name: {UPLOAD_CLAIM}\n  namespace: default\n\
         spec:\n  pvcName: {UPLOAD_CLAIM}\n"
    );
    let output = kubectl_stdin(&["create", "-f", "-", "-o", "jsonpath={.status.token}"], &request);
    let token = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success() && !token.is_empty(), "a token: {output:?}");
    let upload = Command::new("curl")
        .args(["-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["--data-binary", &format!("@{GUEST_QCOW2}")])
        .args(["-H", &format!("Authorization: Bearer {token}")])
        .arg(format!("{}/v1beta1/upload", proxy_url()))
        .output()
        .expect("curl (make deps installs it)");
    assert_eq!(String::from_utf8_lossy(&upload.stdout), "200", "the upload: {upload:?}");

    let bound = wait_for("the claim to get the uploaded volume", Duration::from_secs(180), || {
        get("pvc", UPLOAD_CLAIM, "default").filter(|pvc| field(pvc, "status.phase") == "Bound")
    });
    let volume_name = field(&bound, "spec.volumeName");
    let volume = get("pv", &volume_name, "default").expect("the volume");
    assert_eq!(
        field(&volume, "spec.claimRef.name"),
        UPLOAD_CLAIM,
        "rebound from the prime"
    );
    let node = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
        .as_str()
        .unwrap_or_else(|| panic!("the volume is pinned to its node: {volume}"))
        .to_owned();
    let disk = super::hostpath::volume_dir(&node, &volume_name).join("disk.img");
    let mut label = [0_u8; 26];
    std::fs::File::open(&disk)
        .and_then(|mut file| std::io::Read::read_exact(&mut file, &mut label))
        .unwrap_or_else(|e| panic!("reading {}: {e}", disk.display()));
    assert_eq!(&label, b"KUBEVIRT-RS-TESTGUEST-DISK", "the guest's disk, converted");
    let reasons = wait_for("the populator's event on the claim", Duration::from_secs(30), || {
        let said = event_reasons(UPLOAD_CLAIM);
        said.contains("Successfully uploaded into e2e-populated-upload")
            .then_some(said)
    });
    assert!(reasons.contains("CreatedPVCPrimeSuccessfully"), "{reasons}");
    drop(cleanup);
}
