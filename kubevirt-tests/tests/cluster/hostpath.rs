//! The hostpath provisioner on the real cluster: a VM's DataVolume in the StorageClass
//! `hostpath-csi` (WaitForFirstConsumer, asked to bind for the import at once) is provisioned by
//! external-provisioner and the driver on the importer's node, as a directory in that node's pool;
//! the import fills it, the VM boots from it on that node, and deleting the VM removes the
//! DataVolume, the claim, the volume and the directory. The driver is installed by
//! hostpath-provisioner-operator from the HostPathProvisioner CR `hostpath-provisioner`, which
//! reports upstream's conditions, refuses what the operator does not do, and puts back an object
//! of its own that was deleted.

use std::path::PathBuf;
use std::time::Duration;

use super::data_volumes::{boots_and_reads_the_label, import_succeeds, serve_guest_disk, vm_booting_from_template};
use super::support::{Cleanup, cluster_dir, condition, controlled_by, field, get, kubectl_ok, kubectl_stdin, wait_for};

const NAME: &str = "e2e-hostpath";

/// The directory of volume `volume` in the pool `local` of `node`, as the host sees it.
pub(super) fn volume_dir(node: &str, volume: &str) -> PathBuf {
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
    // Filled through CDI's populator: the DataVolume says Succeeded once the filled volume is
    // handed to its claim, which the volume controller then binds.
    let bound = wait_for("the claim to bind", Duration::from_secs(120), || {
        get("pvc", &claim, "default").filter(|pvc| field(pvc, "status.phase") == "Bound")
    });
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

/// Waits for the populated claim `claim` to bind, then checks that it was filled through the
/// prime claim `prime` on `node`, whose volume it now has; gives the volume.
pub(super) fn bound_through_the_prime(claim: &str, node: &str, prime: &str) -> serde_json::Value {
    let bound = wait_for("the claim to be filled and bound", Duration::from_secs(300), || {
        get("pvc", claim, "default").filter(|pvc| field(pvc, "status.phase") == "Bound")
    });
    assert_eq!(
        field(&bound, "metadata.annotations.volume\\.kubernetes\\.io/selected-node"),
        node,
        "the scheduler chose the VM's node for the claim"
    );
    let annotation = |key: &str| field(&bound, &format!("metadata.annotations.cdi\\.kubevirt\\.io/{key}"));
    assert_eq!(annotation("storage\\.populator\\.pvcPrime"), prime);
    assert_eq!(annotation("storage\\.populator\\.progress"), "100.0%");
    assert_eq!(annotation("storage\\.pod\\.phase"), "Succeeded");
    let volume = get("pv", &field(&bound, "spec.volumeName"), "default").expect("the volume");
    assert_eq!(field(&volume, "spec.claimRef.name"), claim, "rebound from the prime");
    assert_eq!(field(&volume, "spec.csi.driver"), "kubevirt.io.hostpath-provisioner");
    assert_eq!(
        volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0],
        node
    );
    volume
}

/// A DataVolume on `hostpath-csi` (WaitForFirstConsumer) without the immediate-binding annotation
/// takes CDI's populator flow, the class being a CSI driver's: its claim names a
/// VolumeImportSource, and it shows `PendingPopulation` with no prime claim until a consumer is
/// placed. A VM held to node 2 that uses it is scheduled at once, which chooses the node; the
/// import fills a prime claim there, whose volume is then rebound to the DataVolume's claim; the
/// prime and the VolumeImportSource go, no temporary pod was needed, and the VM boots on node 2.
#[test]
#[ignore = "needs the test cluster: make cluster"]
fn a_data_volume_pending_population_is_filled_where_its_vm_is_placed() {
    const VM: &str = "e2e-wffc";
    let claim = format!("{VM}-root");
    let node = "node2";
    let mut cleanup = Cleanup::new();
    serve_guest_disk(&mut cleanup, "e2e-wffc-images");
    cleanup.apply(
        "dv",
        &claim,
        &format!(
            "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: {claim}\n  namespace: default\n\
             spec:\n  source:\n    http:\n      url: http://e2e-wffc-images.default.svc.cluster.local:8080/testguest.qcow2\n  \
             storage:\n    accessModes: [ReadWriteOnce]\n    volumeMode: Filesystem\n    storageClassName: hostpath-csi\n    \
             resources:\n      requests:\n        storage: 64Mi\n"
        ),
    );
    let dv = wait_for(
        "the DataVolume to be PendingPopulation",
        Duration::from_secs(120),
        || get("dv", &claim, "default").filter(|dv| field(dv, "status.phase") == "PendingPopulation"),
    );
    let pending = get("pvc", &claim, "default").expect("the claim");
    assert_eq!(field(&pending, "status.phase"), "Pending");
    assert_eq!(field(&pending, "spec.dataSourceRef.kind"), "VolumeImportSource");
    let source = format!("volume-import-source-{}", field(&dv, "metadata.uid"));
    assert_eq!(field(&pending, "spec.dataSourceRef.name"), source);
    assert!(
        get("volumeimportsource", &source, "default").is_some(),
        "the VolumeImportSource"
    );
    let prime = format!("prime-{}", field(&pending, "metadata.uid"));
    assert!(
        get("pvc", &prime, "default").is_none(),
        "no prime before a node is chosen"
    );

    let manifest = super::upload::vm_on_data_volume(VM).replacen(
        "    spec:\n      terminationGracePeriodSeconds: 30\n",
        &format!("    spec:\n      nodeSelector:\n        kubernetes.io/hostname: {node}\n      terminationGracePeriodSeconds: 30\n"),
        1,
    );
    assert!(manifest.contains("kubernetes.io/hostname: node2"), "{manifest}");
    cleanup.apply("vm", VM, &manifest);
    import_succeeds(&claim);
    bound_through_the_prime(&claim, node, &prime);
    boots_and_reads_the_label(VM);
    assert_eq!(
        field(&get("vmi", VM, "default").expect("the VMI"), "status.nodeName"),
        node
    );
    wait_for(
        "the prime claim and the VolumeImportSource to go",
        Duration::from_secs(60),
        || {
            (get("pvc", &prime, "default").is_none() && get("volumeimportsource", &source, "default").is_none())
                .then_some(())
        },
    );
    let created = kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("involvedObject.kind=VirtualMachineInstance,involvedObject.name={VM},reason=SuccessfulCreate"),
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ]);
    assert!(!created.contains("temporary pod"), "no temporary pod: {created}");
    drop(cleanup);
}

const NAMESPACE: &str = "hostpath-provisioner";
const CR: &str = "hostpath-provisioner";

#[test]
#[ignore = "needs the test cluster: make cluster"]
fn the_operator_installs_the_driver_from_its_cr_and_keeps_it() {
    // The CR serves (an earlier test's pods may have just been rolled).
    let cr = wait_for(
        "the HostPathProvisioner to be Available",
        Duration::from_secs(120),
        || {
            get("hostpathprovisioner", CR, "default")
                .filter(|cr| condition(cr, "Available") == ("True".to_owned(), "Complete".to_owned()))
        },
    );
    assert_eq!(condition(&cr, "Progressing").0, "False");
    assert_eq!(condition(&cr, "Degraded").0, "False");
    assert!(!field(&cr, "status.observedVersion").is_empty(), "{cr}");
    assert_eq!(field(&cr, "status.storagePoolStatuses.0.name"), "local");
    assert_eq!(field(&cr, "status.storagePoolStatuses.0.phase"), "Ready");

    // What it made, each controlled by the CR (deleting the CR lets the garbage collector take them).
    let uid = field(&cr, "metadata.uid");
    let made = [
        ("daemonset", "hostpath-provisioner-csi", NAMESPACE),
        ("serviceaccount", "hostpath-provisioner-admin-csi", NAMESPACE),
        ("rolebinding", "hostpath-provisioner-admin-csi", NAMESPACE),
        ("clusterrolebinding", "hostpath-provisioner-admin-csi", "default"),
        ("csidriver", "kubevirt.io.hostpath-provisioner", "default"),
    ];
    for (kind, name, namespace) in made {
        let object = get(kind, name, namespace).unwrap_or_else(|| panic!("{kind} {name}"));
        assert!(
            controlled_by(&object, "HostPathProvisioner", &uid),
            "{kind} {name}: {object}"
        );
    }
    let daemon_set = get("daemonset", "hostpath-provisioner-csi", NAMESPACE).expect("the DaemonSet");
    let env = daemon_set["spec"]["template"]["spec"]["containers"][0]["env"].to_string();
    assert!(
        env.contains(r#"[{\"name\":\"local\",\"path\":\"local-data-dir/csi\",\"shared\":false}]"#),
        "{env}"
    );
    assert_eq!(
        daemon_set["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/os"], "linux",
        "the CR's workload placement"
    );

    // A binding deleted by hand is put back.
    let binding = get("rolebinding", "hostpath-provisioner-admin-csi", NAMESPACE).expect("the binding");
    kubectl_ok(&[
        "-n",
        NAMESPACE,
        "delete",
        "rolebinding",
        "hostpath-provisioner-admin-csi",
    ]);
    wait_for(
        "the operator to put the RoleBinding back",
        Duration::from_secs(60),
        || {
            get("rolebinding", "hostpath-provisioner-admin-csi", NAMESPACE).filter(|b| {
                field(b, "metadata.uid") != field(&binding, "metadata.uid")
                    && controlled_by(b, "HostPathProvisioner", &uid)
            })
        },
    );

    // What the operator does not do is refused by the API server, naming the field; nothing is made.
    let refused = [
        ("pathConfig:\n    path: /var/legacy", "spec.pathConfig"),
        (
            "storagePools:\n    - name: a\n      path: /var/a\n      pvcTemplate:\n        resources: {}",
            "spec.storagePools[].pvcTemplate",
        ),
        (
            "storagePools:\n    - name: a\n      path: /var/a\n    - name: a\n      path: /var/b",
            "each pool's name must be unique",
        ),
        (
            "featureGates: [Snapshotting]\n  storagePools:\n    - name: a\n      path: /var/a",
            "Snapshotting",
        ),
        (
            "storagePools:\n    - name: My_Pool\n      path: /var/a",
            "must be a DNS label",
        ),
    ];
    for (spec, message) in refused {
        let manifest = format!(
            "apiVersion: hostpathprovisioner.kubevirt.io/v1beta1\nkind: HostPathProvisioner\nmetadata:\n  name: e2e-refused\nspec:\n  {spec}\n"
        );
        let output = kubectl_stdin(&["apply", "-f", "-"], &manifest);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && stderr.contains(message),
            "{message}: {stderr}"
        );
        assert!(get("hostpathprovisioner", "e2e-refused", "default").is_none());
    }
}
