//! A VM's `dataVolumeTemplates` on the real cluster, filled by CDI's import controller and
//! importer (cdi-controller, cdi-importer): the VM creates its DataVolume, owned by it; the
//! controller makes the claim (bound here to a static hostPath volume), runs the importer pod,
//! and the DataVolume ends Succeeded; the VMI starts with the claim as its disk and the VM shows
//! `DataVolumesReady`; deleting the VM takes the DataVolume and its claim with it. An import that
//! fails shows on the DataVolume, and the VM waiting for it is `DataVolumeError`. A guest keeps
//! what it wrote to an imported disk across a restart.

use std::path::PathBuf;
use std::time::Duration;

use super::support::{
    Cleanup, console_until, example, field, get, kubectl_ok, kubectl_stdin, virtctl_ok, vmi_phase, vmi_uid, wait_for,
    wait_for_phase,
};

/// The directory behind a claim, removed when dropped.
pub(super) struct NodeDir(pub(super) PathBuf);

impl Drop for NodeDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The directory of a static hostPath volume for the claim `claim`, given to the importer's
/// user (107) as a provisioner gives a volume to its pod. Made before the [`Cleanup`] that
/// deletes the volume, so that it is removed after it.
pub(super) fn node_dir(claim: &str) -> NodeDir {
    let dir = NodeDir(PathBuf::from(format!(
        "/var/lib/kubevirt-rs-e2e/{claim}-{}",
        std::process::id()
    )));
    std::fs::create_dir_all(&dir.0).expect("the volume's directory");
    let owner = Some(nix::unistd::Uid::from_raw(107));
    nix::unistd::chown(&dir.0, owner, Some(nix::unistd::Gid::from_raw(107))).expect("the directory's owner");
    dir
}

/// A static hostPath volume on `dir` for the claim `claim`, whose DataVolume names the class `""`
/// (no class: the cluster's default, hostpath-csi, would otherwise provision it).
pub(super) fn volume_for(cleanup: &mut Cleanup, claim: &str, dir: &NodeDir) {
    volume_for_in(cleanup, "default", claim, dir);
}

/// [`volume_for`] a claim in `namespace`.
pub(super) fn volume_for_in(cleanup: &mut Cleanup, namespace: &str, claim: &str, dir: &NodeDir) {
    let name = format!("{claim}-{}", std::process::id());
    let volume = format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata:\n  name: {name}\nspec:\n  capacity: {{storage: 128Mi}}\n  \
         accessModes: [ReadWriteOnce]\n  volumeMode: Filesystem\n  storageClassName: \"\"\n  \
         persistentVolumeReclaimPolicy: Retain\n  claimRef: {{namespace: {namespace}, name: {claim}}}\n  \
         hostPath: {{path: {}, type: Directory}}\n",
        dir.0.display()
    );
    cleanup.track("pv", &name);
    let created = kubectl_stdin(&["create", "-f", "-"], &volume);
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
}

/// The test guest's VM with a DataVolume template of `source` as its disk `root`.
pub(super) fn vm_with_template(name: &str, source: &str) -> String {
    let manifest = example("vm-testguest.yaml", name)
        .replacen(
            "spec:\n  runStrategy: Always\n",
            &format!(
                "spec:\n  runStrategy: Always\n  dataVolumeTemplates:\n    - metadata:\n        name: {name}-root\n      \
                 spec:\n        source:\n          {source}\n        storage:\n          accessModes: [ReadWriteOnce]\n          \
                 volumeMode: Filesystem\n          storageClassName: \"\"\n          resources:\n            requests:\n              \
                 storage: 64Mi\n"
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
            &format!("      volumes:\n        - name: root\n          dataVolume:\n            name: {name}-root\n"),
            1,
        );
    assert!(manifest.contains("dataVolumeTemplates:") && manifest.contains(&format!("name: {name}-root")));
    manifest
}

fn printable_status(name: &str) -> String {
    get("vm", name, "default").map_or_else(String::new, |vm| field(&vm, "status.printableStatus"))
}

fn condition(object: &serde_json::Value, kind: &str) -> serde_json::Value {
    object["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .cloned()
        .unwrap_or_default()
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_boots_from_the_data_volume_cdi_filled_and_takes_it_along_when_deleted() {
    const NAME: &str = "e2e-dv";
    let dir = node_dir(&format!("{NAME}-root"));
    let mut cleanup = Cleanup::new();
    volume_for(&mut cleanup, &format!("{NAME}-root"), &dir);
    cleanup.apply("vm", NAME, &vm_with_template(NAME, "blank: {}"));

    let dv = wait_for("the VM's DataVolume", Duration::from_secs(60), || {
        get("dv", &format!("{NAME}-root"), "default")
    });
    let vm_uid = field(&get("vm", NAME, "default").expect("the VM"), "metadata.uid");
    assert_eq!(field(&dv, "metadata.ownerReferences.0.uid"), vm_uid);
    assert_eq!(field(&dv, "metadata.ownerReferences.0.controller"), "true");
    assert_eq!(dv["metadata"]["labels"]["kubevirt.io/created-by"], vm_uid.as_str());

    // CDI's part: the claim, owned by the DataVolume; the importer writes the blank disk.
    let done = wait_for("the DataVolume to be Succeeded", Duration::from_secs(240), || {
        get("dv", &format!("{NAME}-root"), "default").filter(|dv| field(dv, "status.phase") == "Succeeded")
    });
    assert_eq!(field(&done, "status.progress"), "100.0%");
    assert_eq!(field(&done, "status.claimName"), format!("{NAME}-root"));
    assert_eq!(condition(&done, "Ready")["status"], "True");
    assert_eq!(condition(&done, "Bound")["message"], format!("PVC {NAME}-root Bound"));
    let claim = get("pvc", &format!("{NAME}-root"), "default").expect("the claim");
    assert_eq!(
        field(&claim, "metadata.ownerReferences.0.uid"),
        field(&done, "metadata.uid")
    );
    assert_eq!(
        claim["metadata"]["annotations"]["cdi.kubevirt.io/storage.pod.phase"],
        "Succeeded"
    );
    assert_eq!(
        claim["metadata"]["annotations"]["cdi.kubevirt.io/storage.condition.running.message"],
        "Import Complete"
    );
    wait_for("the importer pod to be removed", Duration::from_secs(60), || {
        get("pod", &format!("importer-{NAME}-root"), "default")
            .is_none()
            .then_some(())
    });
    let image = dir.0.join("disk.img");
    let written = std::fs::metadata(&image).ok();
    assert_eq!(
        written.as_ref().map(std::fs::Metadata::len),
        Some(64 << 20),
        "{}",
        image.display()
    );
    assert_eq!(
        written.map(|m| std::os::unix::fs::MetadataExt::uid(&m)),
        Some(107),
        "written by the importer's user"
    );
    wait_for("the ImportSucceeded event", Duration::from_secs(60), || {
        let events = kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={NAME}-root,reason=ImportSucceeded"),
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        events
            .contains(&format!("Successfully imported into PVC {NAME}-root"))
            .then_some(())
    });

    wait_for_phase(NAME, "Running", Duration::from_secs(240));
    wait_for("the VM to be Running", Duration::from_secs(120), || {
        (printable_status(NAME) == "Running").then_some(())
    });
    let ready = kubectl_ok(&[
        "get",
        "vm",
        NAME,
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"DataVolumesReady\")].status}",
    ]);
    assert_eq!(ready, "True", "the VM copies the VMI's DataVolumesReady");
    // The guest sees the 64 MiB disk (in 512-byte sectors).
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
    drop(dir);
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_failed_import_shows_on_the_data_volume_and_the_vm_is_data_volume_error() {
    const NAME: &str = "e2e-dv-bad";
    let dir = node_dir(&format!("{NAME}-root"));
    let mut cleanup = Cleanup::new();
    volume_for(&mut cleanup, &format!("{NAME}-root"), &dir);
    // Nothing listens on the discard port of the pod's own loopback.
    cleanup.apply(
        "vm",
        NAME,
        &vm_with_template(NAME, "http:\n            url: http://127.0.0.1:9/disk.img"),
    );

    let failing = wait_for(
        "the import's failure on the DataVolume",
        Duration::from_secs(240),
        || get("dv", &format!("{NAME}-root"), "default").filter(|dv| condition(dv, "Running")["reason"] == "Error"),
    );
    let message = condition(&failing, "Running")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message.starts_with("Unable to process data: connecting to 127.0.0.1:9"),
        "{message}"
    );
    wait_for("the VM to be DataVolumeError", Duration::from_secs(120), || {
        (printable_status(NAME) == "DataVolumeError").then_some(())
    });
    assert!(
        get("vmi", NAME, "default").is_none(),
        "no VMI for a disk that is not there"
    );
    wait_for("the importer to be restarted", Duration::from_secs(240), || {
        get("dv", &format!("{NAME}-root"), "default")
            .filter(|dv| dv["status"]["restartCount"].as_i64().is_some_and(|n| n >= 1))
    });
    wait_for("the ErrImportFailed event", Duration::from_secs(60), || {
        let events = kubectl_ok(&[
            "get",
            "events",
            "--field-selector",
            &format!("involvedObject.name={NAME}-root,reason=ErrImportFailed"),
            "-o",
            "jsonpath={.items[*].message}",
        ]);
        events.contains("Unable to process data").then_some(())
    });
    // Deleting the VM takes the DataVolume, its claim and the failing importer pod (which the
    // claim, protected while a pod uses it, would otherwise wait for forever).
    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    wait_for("the claim and the importer pod to go", Duration::from_secs(120), || {
        (get("pvc", &format!("{NAME}-root"), "default").is_none()
            && get("pod", &format!("importer-{NAME}-root"), "default").is_none())
        .then_some(())
    });
    drop(cleanup);
    drop(dir);
}

/// The test guest's VM whose only disk is the DataVolume template of `source`: the disk's label
/// then proves what the guest reads.
pub(super) fn vm_booting_from_template(name: &str, source: &str) -> String {
    let manifest = vm_with_template(name, source)
        .replacen("            - name: containerdisk\n              disk:\n                bus: virtio\n", "", 1)
        .replacen(
            "        - name: containerdisk\n          containerDisk:\n            image: localhost/kubevirt-rs/testguest:latest\n            imagePullPolicy: IfNotPresent\n",
            "",
            1,
        );
    assert!(!manifest.contains("name: containerdisk"), "{manifest}");
    manifest
}

/// Waits for the DataVolume `claim` to be Succeeded (failing at once if it fails); gives it.
pub(super) fn import_succeeds(claim: &str) -> serde_json::Value {
    wait_for("the import to succeed", Duration::from_secs(300), || {
        let dv = get("dv", claim, "default")?;
        assert_ne!(field(&dv, "status.phase"), "Failed", "{dv}");
        (field(&dv, "status.phase") == "Succeeded").then_some(dv)
    })
}

/// Waits for VM `name` to run, then has its guest read the label at the start of its only disk,
/// the imported one, and the disk's size (the claim's 64 MiB).
pub(super) fn boots_and_reads_the_label(name: &str) {
    wait_for_phase(name, "Running", Duration::from_secs(240));
    console_until(
        name,
        "\necho label $(head -c 26 /dev/vda) sizes $(cat /sys/block/vda/size) end",
        "label KUBEVIRT-RS-TESTGUEST-DISK sizes 131072 end",
        Duration::from_secs(120),
    );
}

/// The test guest's disk (a qcow2 whose first line is its label), where `make guest` puts it.
const GUEST_DISK_DIR: &str = "/var/lib/kubevirt-rs/images/localhost/kubevirt-rs/testguest/latest/disk";

/// A web server pod (busybox httpd) serving the test guest's disk, and its Service.
pub(super) fn serve_guest_disk(cleanup: &mut Cleanup, name: &str) {
    assert!(
        std::path::Path::new(GUEST_DISK_DIR).join("testguest.qcow2").is_file(),
        "the test guest's disk is missing: run make guest"
    );
    let pod = format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{app: {name}}}\nspec:\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n    - name: httpd\n      \
         image: localhost/kubevirt-rs/testclient:latest\n      imagePullPolicy: IfNotPresent\n      \
         args: [httpd, -f, -p, \"8080\", -h, /srv]\n      volumeMounts: [{{name: disk, mountPath: /srv, readOnly: true}}]\n  \
         volumes: [{{name: disk, hostPath: {{path: {GUEST_DISK_DIR}, type: Directory}}}}]\n"
    );
    cleanup.apply("pod", name, &pod);
    cleanup.apply(
        "service",
        name,
        &format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  \
             selector: {{app: {name}}}\n  ports: [{{port: 8080, targetPort: 8080}}]\n"
        ),
    );
    wait_for("the image server to run", Duration::from_secs(120), || {
        get("pod", name, "default").filter(|pod| field(pod, "status.phase") == "Running")
    });
}

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_vm_boots_with_the_guests_qcow2_imported_over_http_by_service_name() {
    const NAME: &str = "e2e-dv-http";
    let claim = format!("{NAME}-root");
    let dir = node_dir(&claim);
    let mut cleanup = Cleanup::new();
    volume_for(&mut cleanup, &claim, &dir);
    // CDIConfig's status (the test cluster's spec names hostpath-csi as the scratch class;
    // cdi-controller writes the status).
    wait_for(
        "CDIConfig's status to name the scratch class",
        Duration::from_secs(60),
        || {
            get("cdiconfig", "config", "default").filter(|config| {
                field(config, "status.scratchSpaceStorageClass") == "hostpath-csi"
                    && field(config, "status.filesystemOverhead.storageClass.hostpath-csi") == "0.06"
            })
        },
    );
    serve_guest_disk(&mut cleanup, "e2e-images");
    let manifest = vm_booting_from_template(
        NAME,
        "http:\n            url: http://e2e-images.default.svc.cluster.local:8080/testguest.qcow2",
    );
    cleanup.apply("vm", NAME, &manifest);

    let done = import_succeeds(&claim);
    assert_eq!(field(&done, "status.progress"), "100.0%");
    let imported = get("pvc", &claim, "default").expect("the claim");
    // The guest's qcow2 (as qemu-img writes it) streamed into the claim: its first importer pod
    // needed no scratch space.
    assert_eq!(
        imported["metadata"]["annotations"]["cdi.kubevirt.io/storage.import.requiresScratch"],
        serde_json::Value::Null,
        "the qcow2 streamed without scratch space"
    );
    assert!(
        get("pvc", &format!("{claim}-scratch"), "default").is_none(),
        "no scratch claim"
    );
    let image = dir.0.join("disk.img");
    assert_eq!(
        std::fs::metadata(&image).map(|m| m.len()).ok(),
        Some(64 << 20),
        "grown to the claim's size"
    );

    boots_and_reads_the_label(NAME);

    // It keeps what it wrote: the guest writes a note 1 MiB into its disk (past the label, in
    // space the image left empty) and flushes it; after a restart, a new VMI reads it back.
    let note = format!("KEPT-{}", std::process::id());
    console_until(
        NAME,
        &format!(
            "\nprintf {note} | dd of=/dev/vda bs=512 seek=2048 conv=notrunc,fsync 2>/dev/null && sync && echo wrote-$((40+2))"
        ),
        "wrote-42",
        Duration::from_secs(120),
    );
    let first = vmi_uid(NAME);
    assert_eq!(
        virtctl_ok(&["restart", NAME]).trim(),
        format!("VM {NAME} was scheduled to restart")
    );
    wait_for("a new VMI after the restart", Duration::from_secs(240), || {
        let uid = vmi_uid(NAME);
        (!uid.is_empty() && uid != first && vmi_phase(NAME) == "Running").then_some(())
    });
    console_until(
        NAME,
        &format!(
            "\necho read $(dd if=/dev/vda bs=512 skip=2048 count=1 2>/dev/null | head -c {}) end",
            note.len()
        ),
        &format!("read {note} end"),
        Duration::from_secs(120),
    );
    kubectl_ok(&["delete", "vm", NAME, "--timeout=120s"]);
    drop(cleanup);
    drop(dir);
}
