//! PersistentVolumeClaims as upstream's launcher pods use them: a VMI whose claim is missing waits
//! (`FailedPvcNotFound`) and starts once the claim appears; a filesystem claim gets its `disk.img`
//! made by virt-handler at the claim's request, and a block claim (a static local PV on a loop
//! device) reaches QEMU as `/dev/<volume>`; the guest sees both disks.

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use super::support::{Cleanup, console_until, example, field, kubectl_ok, wait_for, wait_for_phase};

const NAME: &str = "e2e-claims";

/// A 64 MiB file behind a loop device, detached and removed when dropped (after the cleanup of
/// the Kubernetes objects, which is declared later and so dropped first), with its directory
/// once that is empty.
pub(super) struct LoopDevice {
    pub(super) device: String,
    file: PathBuf,
}

impl LoopDevice {
    pub(super) fn new(file: PathBuf) -> Self {
        // The loop driver may be a module on a fresh machine.
        let _ = Command::new("modprobe").arg("loop").status();
        // The shared directory may not be there yet on a fresh machine, and another test's
        // cleanup may remove it once empty between the two steps: once more then.
        let create = || {
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&file, b"")
        };
        create().or_else(|_| create()).expect("the backing file");
        std::fs::File::options()
            .write(true)
            .open(&file)
            .and_then(|f| f.set_len(64 << 20))
            .expect("sized");
        let output = Command::new("losetup")
            .args(["--find", "--show"])
            .arg(&file)
            .output()
            .expect("losetup");
        assert!(
            output.status.success(),
            "losetup: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let device = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        Self { device, file }
    }
}

impl Drop for LoopDevice {
    fn drop(&mut self) {
        let _ = Command::new("losetup").args(["-d", &self.device]).status();
        let _ = std::fs::remove_file(&self.file);
        // The shared directory goes once empty, as on a machine that never had it.
        if let Some(parent) = self.file.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// A directory on the node, removed when dropped.
struct NodeDir(PathBuf);

impl Drop for NodeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The e2e tests' common directory on the node, removed once empty (after the loop device's
/// backing file and the volume's directory, which are declared later and so dropped first).
struct E2eRoot(PathBuf);

impl Drop for E2eRoot {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.0);
    }
}

fn volumes(pid: u32, dir: &std::path::Path, device: &str) -> (String, String, String) {
    let filesystem_pv = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {NAME}-fs-{pid}\nspec:\n  capacity: {{storage: 128Mi}}\n  \
         accessModes: [ReadWriteOnce]\n  volumeMode: Filesystem\n  storageClassName: \"\"\n  \
         persistentVolumeReclaimPolicy: Retain\n  claimRef: {{namespace: default, name: {NAME}-fs}}\n  \
         hostPath: {{path: {}, type: DirectoryOrCreate}}\n",
        dir.display()
    );
    let block_pv = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {NAME}-block-{pid}\nspec:\n  capacity: {{storage: 64Mi}}\n  \
         accessModes: [ReadWriteOnce]\n  volumeMode: Block\n  storageClassName: \"\"\n  \
         persistentVolumeReclaimPolicy: Retain\n  claimRef: {{namespace: default, name: {NAME}-block}}\n  \
         local: {{path: {device}}}\n  nodeAffinity:\n    required:\n      nodeSelectorTerms:\n      \
         - matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [node1]}}]\n"
    );
    let claims = |name: &str, mode: &str, pv: &str| {
        format!(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  \
             accessModes: [ReadWriteOnce]\n  volumeMode: {mode}\n  storageClassName: \"\"\n  volumeName: {pv}\n  \
             resources: {{requests: {{storage: 64Mi}}}}\n"
        )
    };
    let both_claims = format!(
        "{}---\n{}",
        claims(&format!("{NAME}-fs"), "Filesystem", &format!("{NAME}-fs-{pid}")),
        claims(&format!("{NAME}-block"), "Block", &format!("{NAME}-block-{pid}"))
    );
    (filesystem_pv, block_pv, both_claims)
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vmi_waits_for_its_claims_then_gets_a_filesystem_image_and_a_block_device() {
    let pid = std::process::id();
    let _root = E2eRoot(PathBuf::from("/var/lib/kubevirt-rs-e2e"));
    let dir = NodeDir(PathBuf::from(format!("/var/lib/kubevirt-rs-e2e/{NAME}-{pid}")));
    std::fs::create_dir_all(&dir.0).expect("the volume's directory");
    let loop_device = LoopDevice::new(PathBuf::from(format!("/var/lib/kubevirt-rs-e2e/{NAME}-{pid}.img")));
    let (filesystem_pv, block_pv, claims) = volumes(pid, &dir.0, &loop_device.device);
    let mut cleanup = Cleanup::new();
    cleanup.apply("pv", &format!("{NAME}-fs-{pid}"), &filesystem_pv);
    cleanup.apply("pv", &format!("{NAME}-block-{pid}"), &block_pv);
    cleanup.track("pvc", &format!("{NAME}-fs"));
    cleanup.track("pvc", &format!("{NAME}-block"));
    let manifest = example("vmi-testguest.yaml", NAME)
        .replacen(
            "      disks:\n",
            "      disks:\n        - name: data\n          disk:\n            bus: virtio\n        \
             - name: fast\n          disk:\n            bus: virtio\n",
            1,
        )
        .replacen(
            "  volumes:\n",
            &format!(
                "  volumes:\n    - name: data\n      persistentVolumeClaim:\n        claimName: {NAME}-fs\n    \
                 - name: fast\n      persistentVolumeClaim:\n        claimName: {NAME}-block\n"
            ),
            1,
        );
    assert!(manifest.contains("claimName: e2e-claims-block") && manifest.contains("- name: fast\n          disk:"));
    cleanup.apply("vmi", NAME, &manifest);

    // No claim yet: the VMI waits, as upstream's does.
    let waiting = wait_for("the VMI waiting for its claims", Duration::from_secs(60), || {
        let vmi: serde_json::Value = serde_json::from_str(&kubectl_ok(&["get", "vmi", NAME, "-o", "json"])).ok()?;
        let conditions = vmi["status"]["conditions"].as_array()?;
        conditions
            .iter()
            .any(|c| c["type"] == "Synchronized" && c["reason"] == "FailedPvcNotFound")
            .then_some(vmi)
    });
    assert_eq!(field(&waiting, "status.phase"), "Pending");
    let events = kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={NAME},reason=FailedPvcNotFound"),
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(
        events.contains(&format!(
            "PVC default/{NAME}-fs does not exist, waiting for it to appear"
        )),
        "{events}"
    );

    let created = super::support::kubectl_stdin(&["create", "-f", "-"], &claims);
    assert!(
        created.status.success(),
        "the claims: {}",
        String::from_utf8_lossy(&created.stderr)
    );
    let vmi = wait_for_phase(NAME, "Running", Duration::from_secs(240));
    assert_eq!(field(&vmi, "status.nodeName"), "node1", "where the block volume is");
    let described = kubectl_ok(&[
        "get",
        "vmi",
        NAME,
        "-o",
        "jsonpath={range .status.volumeStatus[*]}{.name}={.persistentVolumeClaimInfo.volumeMode}/{.persistentVolumeClaimInfo.filesystemOverhead} {end}",
    ]);
    assert!(
        described.contains("data=Filesystem/0.055") && described.contains("fast=Block/0.055"),
        "{described}"
    );

    // virt-handler made the filesystem claim's image at its request (64 Mi of a 128 Mi volume),
    // for the launcher's user.
    let meta = std::fs::metadata(dir.0.join("disk.img")).expect("disk.img on the volume");
    assert_eq!(meta.len(), 64 << 20);
    assert_eq!((meta.uid(), meta.gid()), (107, 107));
    // The guest sees both 64 MiB disks (sizes in 512-byte sectors), besides its containerDisk.
    console_until(
        NAME,
        "\necho sizes $(cat /sys/block/vd*/size | grep -c '^131072$') end",
        "sizes 2 end",
        Duration::from_secs(60),
    );
    drop(cleanup);
}
