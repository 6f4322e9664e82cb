//! An import into a block claim on the real cluster: a DataVolume template asking for
//! `volumeMode: Block` binds a static local volume on a loop device (on node1); the importer gets
//! it as `/dev/cdi-block-volume` (owned by its user, as the node's runtime gives devices to the
//! pod's security context) and converts the test guest's qcow2 onto it through a filesystem
//! scratch claim; the VM boots with the device as its disk, and its guest reads the label at the
//! device's full size.

use std::path::PathBuf;
use std::time::Duration;

use super::claims::LoopDevice;
use super::data_volumes::{boots_and_reads_the_label, import_succeeds, serve_guest_disk, vm_booting_from_template};
use super::support::{Cleanup, field, get, kubectl_ok, kubectl_stdin, wait_for};

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_boots_from_a_qcow2_imported_onto_a_block_claim() {
    const NAME: &str = "e2e-dv-block";
    let claim = format!("{NAME}-root");
    let pid = std::process::id();
    let device = LoopDevice::new(PathBuf::from(format!("/var/lib/kubevirt-rs-e2e/{NAME}-{pid}.img")));
    let mut cleanup = Cleanup::new();
    let volume = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {claim}-{pid}\nspec:\n  capacity: {{storage: 64Mi}}\n  \
         accessModes: [ReadWriteOnce]\n  volumeMode: Block\n  storageClassName: \"\"\n  \
         persistentVolumeReclaimPolicy: Retain\n  claimRef: {{namespace: default, name: {claim}}}\n  \
         local: {{path: {}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      \
         - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [node1]}}]\n",
        device.device
    );
    cleanup.track("pv", &format!("{claim}-{pid}"));
    let created = kubectl_stdin(&["create", "-f", "-"], &volume);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    serve_guest_disk(&mut cleanup, "e2e-images-block");

    let manifest = vm_booting_from_template(
        NAME,
        "http:\n            url: http://e2e-images-block.default.svc.cluster.local:8080/testguest.qcow2",
    )
    .replacen("          volumeMode: Filesystem\n", "          volumeMode: Block\n", 1);
    assert!(manifest.contains("volumeMode: Block"), "{manifest}");
    cleanup.apply("vm", NAME, &manifest);
    let done = import_succeeds(&claim);
    assert_eq!(field(&done, "status.progress"), "100.0%");
    let imported = get("pvc", &claim, "default").expect("the claim");
    assert_eq!(field(&imported, "spec.volumeMode"), "Block");

    boots_and_reads_the_label(NAME);
    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    wait_for("the claim to go with the VM", Duration::from_secs(120), || {
        get("pvc", &claim, "default").is_none().then_some(())
    });
    drop(cleanup);
    drop(device);
}
