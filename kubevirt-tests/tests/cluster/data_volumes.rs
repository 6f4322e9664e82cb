//! A VM's `dataVolumeTemplates` on the real cluster, with the test playing CDI (no CDI controller
//! exists yet): the VM creates its DataVolume, owned by it, and waits with printableStatus
//! `Provisioning`; a failed DataVolume shows as `DataVolumeError`; once the DataVolume's claim is
//! there and the DataVolume says Succeeded, the VMI starts with the claim as its disk and the VM
//! shows `DataVolumesReady`; deleting the VM takes the DataVolume and its claim with it through
//! the garbage collector.

use std::path::PathBuf;
use std::time::Duration;

use super::support::{
    Cleanup, console_until, example, field, get, kubectl_ok, kubectl_stdin, wait_for, wait_for_phase,
};

const NAME: &str = "e2e-dv";

fn printable_status() -> String {
    get("vm", NAME, "default").map_or_else(String::new, |vm| field(&vm, "status.printableStatus"))
}

fn wait_for_status(status: &str) {
    wait_for(&format!("VM {NAME} to be {status}"), Duration::from_secs(120), || {
        (printable_status() == status).then_some(())
    });
}

/// Plays CDI: writes the DataVolume's status.
fn set_data_volume_status(status: &serde_json::Value) {
    let patch = serde_json::json!({ "status": status }).to_string();
    kubectl_ok(&[
        "patch",
        "dv",
        &format!("{NAME}-root"),
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ]);
}

/// The directory behind the claim, removed when dropped.
struct NodeDir(PathBuf);

impl Drop for NodeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        let _ = std::fs::remove_dir(self.0.parent().unwrap_or(&self.0));
    }
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_creates_its_data_volume_waits_for_it_and_takes_it_along_when_deleted() {
    let pid = std::process::id();
    let dir = NodeDir(PathBuf::from(format!("/var/lib/kubevirt-rs-e2e/{NAME}-{pid}")));
    std::fs::create_dir_all(&dir.0).expect("the volume's directory");
    let mut cleanup = Cleanup::new();
    let manifest = example("vm-testguest.yaml", NAME)
        .replacen(
            "spec:\n  runStrategy: Always\n",
            &format!(
                "spec:\n  runStrategy: Always\n  dataVolumeTemplates:\n    - metadata:\n        name: {NAME}-root\n      \
                 spec:\n        source:\n          blank: {{}}\n        storage:\n          \
                 resources:\n            requests:\n              storage: 64Mi\n"
            ),
            1,
        )
        .replacen(
            "          disks:\n",
            "          disks:\n            - name: root\n              disk:\n                bus: virtio\n",
            1,
        )
        .replacen(
            "      volumes:\n",
            &format!("      volumes:\n        - name: root\n          dataVolume:\n            name: {NAME}-root\n"),
            1,
        );
    assert!(
        manifest.contains("dataVolumeTemplates:") && manifest.contains("dataVolume:\n            name: e2e-dv-root")
    );
    cleanup.track("pv", &format!("{NAME}-{pid}"));
    cleanup.apply("vm", NAME, &manifest);

    let dv = wait_for("the VM's DataVolume", Duration::from_secs(60), || {
        get("dv", &format!("{NAME}-root"), "default")
    });
    let vm_uid = field(&get("vm", NAME, "default").expect("the VM"), "metadata.uid");
    assert_eq!(field(&dv, "metadata.ownerReferences.0.uid"), vm_uid);
    assert_eq!(field(&dv, "metadata.ownerReferences.0.controller"), "true");
    assert_eq!(dv["metadata"]["labels"]["kubevirt.io/created-by"], vm_uid.as_str());
    wait_for_status("Provisioning");
    assert!(
        get("vmi", NAME, "default").is_none(),
        "no VMI while the DataVolume fills"
    );
    let events = kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.name={NAME},reason=SuccessfulDataVolumeCreate"),
        "-o",
        "jsonpath={.items[*].message}",
    ]);
    assert!(events.contains(&format!("Created DataVolume {NAME}-root")), "{events}");

    set_data_volume_status(&serde_json::json!({"phase": "Failed"}));
    wait_for_status("DataVolumeError");
    assert!(get("vmi", NAME, "default").is_none());

    // CDI's part: the claim, owned by the DataVolume, on a hostPath volume; then Succeeded.
    let dv_uid = field(&dv, "metadata.uid");
    let volume = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {NAME}-{pid}\nspec:\n  capacity: {{storage: 128Mi}}\n  \
         accessModes: [ReadWriteOnce]\n  volumeMode: Filesystem\n  storageClassName: \"\"\n  \
         persistentVolumeReclaimPolicy: Retain\n  claimRef: {{namespace: default, name: {NAME}-root}}\n  \
         hostPath: {{path: {}, type: DirectoryOrCreate}}\n---\n\
         apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: {NAME}-root\n  namespace: default\n  \
         ownerReferences:\n    - {{apiVersion: cdi.kubevirt.io/v1beta1, kind: DataVolume, name: {NAME}-root, uid: {dv_uid}, \
         controller: true, blockOwnerDeletion: true}}\nspec:\n  accessModes: [ReadWriteOnce]\n  volumeMode: Filesystem\n  \
         storageClassName: \"\"\n  volumeName: {NAME}-{pid}\n  resources: {{requests: {{storage: 64Mi}}}}\n",
        dir.0.display()
    );
    let created = kubectl_stdin(&["create", "-f", "-"], &volume);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    set_data_volume_status(&serde_json::json!({
        "phase": "Succeeded",
        "progress": "100.0%",
        "conditions": [{"type": "Ready", "status": "True", "reason": "Completed"}]
    }));
    wait_for_phase(NAME, "Running", Duration::from_secs(240));
    wait_for_status("Running");
    let ready = kubectl_ok(&[
        "get",
        "vm",
        NAME,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"DataVolumesReady\")].status}",
    ]);
    assert_eq!(ready, "True", "the VM copies the VMI's DataVolumesReady");
    // The guest sees the 64 MiB claim (in 512-byte sectors).
    console_until(
        NAME,
        "\necho sizes $(cat /sys/block/vd*/size | grep -c '^131072$') end",
        "sizes 1 end",
        Duration::from_secs(60),
    );

    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    wait_for(
        "the DataVolume and its claim to go with the VM",
        Duration::from_secs(120),
        || {
            (get("dv", &format!("{NAME}-root"), "default").is_none()
                && get("pvc", &format!("{NAME}-root"), "default").is_none())
            .then_some(())
        },
    );
    drop(cleanup);
}
