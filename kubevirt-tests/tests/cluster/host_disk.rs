//! A `DiskOrCreate` hostDisk in an unprivileged launcher pod (docs/security.md): virt-handler
//! creates the image on the node, sparse at its capacity, and gives it to the launcher's user
//! before the first Sync, so that QEMU (uid 107) opens it read-write and the guest sees the disk.

use std::os::unix::fs::MetadataExt as _;
use std::path::PathBuf;
use std::time::Duration;

use super::support::{
    Cleanup, console_until, example, field, kubectl_ok, kubectl_stdin, patch_kubevirt, wait_for, wait_for_phase,
};

const NAME: &str = "e2e-host-disk";

/// Turns the `HostDisk` feature gate on in the KubeVirt CR, and puts the gates back as they were
/// when dropped.
struct HostDiskGate {
    previous: String,
}

impl HostDiskGate {
    fn enable() -> Self {
        let previous = kubectl_ok(&[
            "-n",
            "kubevirt",
            "get",
            "kubevirt",
            "kubevirt",
            "-o",
            "jsonpath={.spec.configuration.developerConfiguration.featureGates}",
        ]);
        let previous = if previous.trim().is_empty() {
            "[]".to_owned()
        } else {
            previous
        };
        let mut gates: Vec<String> = serde_json::from_str(&previous).expect("the feature gates");
        gates.push("HostDisk".to_owned());
        let output = patch_gates(&gates);
        assert!(
            output.status.success(),
            "turning the HostDisk gate on: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Self { previous }
    }
}

/// Sets the KubeVirt CR's feature gates to `gates`, whatever the outcome.
fn patch_gates(gates: &[String]) -> std::process::Output {
    patch_kubevirt(&serde_json::json!({"spec": {"configuration": {"developerConfiguration": {"featureGates": gates}}}}))
}

impl Drop for HostDiskGate {
    fn drop(&mut self) {
        // No panic here: this may run while the test is already panicking.
        let gates: Vec<String> = serde_json::from_str(&self.previous).unwrap_or_default();
        let output = patch_gates(&gates);
        if !output.status.success() {
            eprintln!(
                "could not put the feature gates back to {}: {}",
                self.previous,
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }
}

/// The image's directory on the node, removed when dropped (after the VMI is gone).
struct NodeDir(PathBuf);

impl Drop for NodeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The common parent, once no test uses it.
        if let Some(parent) = self.0.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_disk_or_create_host_disk_is_made_for_the_unprivileged_launcher_and_the_guest_sees_it() {
    let dir = NodeDir(PathBuf::from(format!(
        "/var/lib/kubevirt-rs-e2e/{NAME}-{}",
        std::process::id()
    )));
    let image = dir.0.join("disk.img");
    let _gate = HostDiskGate::enable();
    let mut cleanup = Cleanup::new();
    // What an aborted earlier run may have left.
    kubectl_ok(&["delete", "vmi", NAME, "--ignore-not-found", "--timeout=120s"]);
    cleanup.track("vmi", NAME);
    let manifest = example("vmi-testguest.yaml", NAME)
        .replacen(
            "      disks:\n",
            "      disks:\n        - name: hostdisk\n          disk:\n            bus: virtio\n",
            1,
        )
        .replacen(
            "  volumes:\n",
            &format!(
                "  volumes:\n    - name: hostdisk\n      hostDisk:\n        path: {}\n        type: DiskOrCreate\n        capacity: 64Mi\n",
                image.display()
            ),
            1,
        );
    assert!(manifest.contains("hostDisk:") && manifest.contains("- name: hostdisk\n          disk:"));
    // virt-api honours the gate once it has seen the patched KubeVirt CR.
    wait_for("virt-api admitting the hostDisk VMI", Duration::from_secs(60), || {
        kubectl_stdin(&["create", "-f", "-"], &manifest)
            .status
            .success()
            .then_some(())
    });
    let vmi = wait_for_phase(NAME, "Running", Duration::from_secs(180));
    assert_eq!(field(&vmi, "status.runtimeUser"), "107", "an unprivileged launcher");

    let meta = std::fs::metadata(&image).expect("the image on the node");
    assert_eq!(
        (meta.uid(), meta.gid()),
        (107, 107),
        "the image is the launcher's user's"
    );
    assert_eq!(meta.len(), 64 << 20, "the image is as long as its capacity");
    assert!(meta.blocks() < 1024, "the image is sparse: {} blocks", meta.blocks());
    // The guest sees a 64 MiB disk besides its containerDisk (sizes in 512-byte sectors).
    console_until(NAME, "\ncat /sys/block/vd*/size", "131072", Duration::from_secs(60));
}
