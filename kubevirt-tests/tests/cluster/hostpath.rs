//! The hostpath provisioner on the real cluster: a VM's DataVolume in the StorageClass
//! `hostpath-csi` (WaitForFirstConsumer, asked to bind for the import at once) is provisioned by
//! external-provisioner and the driver on the importer's node, as a directory in that node's pool;
//! the import fills it, the VM boots from it on that node, and deleting the VM removes the
//! DataVolume, the claim, the volume and the directory.

use std::path::PathBuf;
use std::time::Duration;

use super::data_volumes::{boots_and_reads_the_label, import_succeeds, serve_guest_disk, vm_booting_from_template};
use super::support::{Cleanup, cluster_dir, field, get, kubectl_ok, wait_for};

const NAME: &str = "e2e-hostpath";

/// The directory of volume `volume` in the pool `local` of `node`, as the host sees it.
fn volume_dir(node: &str, volume: &str) -> PathBuf {
    cluster_dir()
        .join("nodes")
        .join(node)
        .join("hpvolumes/csi")
        .join(volume)
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_data_volume_on_hostpath_csi_is_a_directory_on_its_node_until_the_vm_goes() {
    let claim = format!("{NAME}-root");
    let mut cleanup = Cleanup::new();
    serve_guest_disk(&mut cleanup, "e2e-hostpath-images");
    let manifest = vm_booting_from_template(
        NAME,
        "http:\n            url: http://e2e-hostpath-images.default.svc.cluster.local:8080/testguest.qcow2",
    )
    .replacen("storageClassName: \"\"", "storageClassName: hostpath-csi", 1)
    .replacen(
        &format!("        name: {claim}\n      spec:\n"),
        &format!(
            "        name: {claim}\n        annotations:\n          cdi.kubevirt.io/storage.bind.immediate.requested: \"true\"\n      spec:\n"
        ),
        1,
    );
    assert!(manifest.contains("storageClassName: hostpath-csi") && manifest.contains("immediate.requested"));
    cleanup.apply("vm", NAME, &manifest);

    import_succeeds(&claim);
    let bound = get("pvc", &claim, "default").expect("the claim");
    assert_eq!(field(&bound, "spec.storageClassName"), "hostpath-csi");
    let volume = field(&bound, "spec.volumeName");
    let pv = get("pv", &volume, "default").expect("the volume");
    assert_eq!(field(&pv, "spec.csi.driver"), "kubevirt.io.hostpath-provisioner");
    let node = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0]
        .as_str()
        .unwrap_or_else(|| panic!("the volume is pinned to its node: {pv}"))
        .to_owned();
    let dir = volume_dir(&node, &volume);
    let image = dir.join("disk.img");
    assert!(image.is_file(), "the disk is in {}'s pool: {}", node, dir.display());

    boots_and_reads_the_label(NAME);
    let vmi = get("vmi", NAME, "default").expect("the VMI");
    assert_eq!(field(&vmi, "status.nodeName"), node, "the VM runs where its volume is");

    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    wait_for(
        "the DataVolume, claim, volume and directory to go",
        Duration::from_secs(180),
        || {
            (get("dv", &claim, "default").is_none()
                && get("pvc", &claim, "default").is_none()
                && get("pv", &volume, "default").is_none()
                && !dir.exists())
            .then_some(())
        },
    );
    drop(cleanup);
}
