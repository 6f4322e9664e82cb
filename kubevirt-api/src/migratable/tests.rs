//! Each check with upstream's reason and message, their order, and the migration method.

use super::*;

fn vmi(spec: &serde_json::Value) -> VirtualMachineInstance {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "v", "namespace": "default"},
        "spec": spec
    }))
    .expect("vmi")
}

fn with_status(mut vmi: VirtualMachineInstance, status: serde_json::Value) -> VirtualMachineInstance {
    vmi.status = Some(serde_json::from_value(status).expect("status"));
    vmi
}

fn reason(vmi: &VirtualMachineInstance) -> Option<&'static str> {
    live_migratable(vmi).err().map(|e| e.reason)
}

const CONTAINER_DISK: &str = "quay.io/containerdisks/fedora:latest";

#[test]
fn a_container_disk_vmi_with_masquerade_migrates_by_copying_its_disks() {
    let vmi = vmi(&serde_json::json!({
        "domain": {"devices": {
            "disks": [{"name": "root", "disk": {}}, {"name": "seed", "disk": {}}],
            "interfaces": [{"name": "default", "masquerade": {}}]}},
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": "root", "containerDisk": {"image": CONTAINER_DISK}},
                    {"name": "seed", "cloudInitNoCloud": {"userData": "#cloud-config"}}]
    }));
    assert_eq!(live_migratable(&vmi), Ok(()));
    assert_eq!(migration_method(&vmi), MigrationMethod::BlockMigration);
    assert_eq!(migration_method(&vmi).as_str(), "BlockMigration");
}

#[test]
fn a_bridge_on_the_pod_network_needs_the_annotation() {
    let spec = serde_json::json!({
        "domain": {"devices": {"interfaces": [{"name": "default", "bridge": {}}]}},
        "networks": [{"name": "default", "pod": {}}]
    });
    let bridged = vmi(&spec);
    let error = live_migratable(&bridged).expect_err("bridge");
    assert_eq!(error.reason, "InterfaceNotLiveMigratable");
    assert_eq!(
        error.message,
        "cannot migrate VMI which does not use masquerade, bridge with kubevirt.io/allow-pod-bridge-network-live-migration VM annotation or a migratable plugin to connect to the pod network"
    );
    let mut allowed = vmi(&spec);
    allowed.metadata.annotations = Some([(ALLOW_POD_BRIDGE_MIGRATION.to_owned(), String::new())].into());
    assert_eq!(live_migratable(&allowed), Ok(()));
    // A bridge on a secondary network is not the pod network's.
    let secondary = vmi(&serde_json::json!({
        "domain": {"devices": {"interfaces": [{"name": "blue", "bridge": {}}]}},
        "networks": [{"name": "blue", "multus": {"networkName": "blue"}}]
    }));
    assert_eq!(live_migratable(&secondary), Ok(()));
}

#[test]
fn claims_must_be_read_write_many_and_known() {
    let spec = serde_json::json!({
        "domain": {"devices": {"disks": [{"name": "data", "disk": {}}]}},
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "pvc-a"}}]
    });
    let unknown = live_migratable(&vmi(&spec)).expect_err("no claim info");
    assert_eq!(unknown.reason, "DisksNotLiveMigratable");
    assert_eq!(
        unknown.message,
        "cannot migrate VMI: Unable to determine if PVC pvc-a is shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"
    );
    let status = |mode: &str| {
        serde_json::json!({"volumeStatus": [{"name": "data", "target": "vda",
            "persistentVolumeClaimInfo": {"claimName": "pvc-a", "accessModes": [mode]}}]})
    };
    let rwo = with_status(vmi(&spec), status("ReadWriteOnce"));
    assert_eq!(
        live_migratable(&rwo).expect_err("RWO").message,
        "cannot migrate VMI: PVC pvc-a is not shared, live migration requires that all PVCs must be shared (using ReadWriteMany access mode)"
    );
    let rwx = with_status(vmi(&spec), status("ReadWriteMany"));
    assert_eq!(live_migratable(&rwx), Ok(()));
    assert_eq!(migration_method(&rwx), MigrationMethod::LiveMigration);
}

#[test]
fn a_host_disk_must_be_shared() {
    let disk = |shared: bool| {
        vmi(&serde_json::json!({
            "domain": {"devices": {"disks": [{"name": "h", "disk": {}}]}},
            "volumes": [{"name": "h", "hostDisk": {"path": "/data/h.img", "type": "Disk", "shared": shared}}]
        }))
    };
    assert_eq!(
        live_migratable(&disk(false)).expect_err("local").message,
        "cannot migrate VMI with non-shared HostDisk"
    );
    assert_eq!(live_migratable(&disk(true)), Ok(()));
}

#[test]
fn devices_and_features_that_pin_a_vmi_to_its_node() {
    let cases = [
        (
            serde_json::json!({"devices": {"hostDevices": [{"name": "d", "deviceName": "x/y"}]}}),
            "HostDeviceNotLiveMigratable",
        ),
        (
            serde_json::json!({"devices": {"gpus": [{"name": "g", "deviceName": "x/y"}]}}),
            "HostDeviceNotLiveMigratable",
        ),
        (
            serde_json::json!({"devices": {}, "launchSecurity": {"sev": {}}}),
            "SEVNotLiveMigratable",
        ),
        (
            serde_json::json!({"devices": {"disks": [{"name": "l", "lun": {"reservation": true}}]}}),
            "PersistentReservationNotLiveMigratable",
        ),
        (
            serde_json::json!({"devices": {}, "features": {"hyperv": {"reenlightenment": {}}}}),
            "NoTSCFrequencyNotLiveMigratable",
        ),
        (
            serde_json::json!({"devices": {}, "features": {"hypervPassthrough": {"enabled": true}}}),
            "HypervPassthroughNotLiveMigratable",
        ),
    ];
    for (domain, expected) in cases {
        assert_eq!(
            reason(&vmi(&serde_json::json!({"domain": domain}))),
            Some(expected),
            "{expected}"
        );
    }
    let with_tsc = with_status(
        vmi(&serde_json::json!({"domain": {"devices": {}, "features": {"hyperv": {"reenlightenment": {}}}}})),
        serde_json::json!({"topologyHints": {"tscFrequency": 2_400_000_000_i64}}),
    );
    assert_eq!(live_migratable(&with_tsc), Ok(()));
}

#[test]
fn the_first_failing_check_wins() {
    let both = vmi(&serde_json::json!({
        "domain": {"devices": {
            "hostDevices": [{"name": "d", "deviceName": "x/y"}],
            "interfaces": [{"name": "default", "bridge": {}}]}},
        "networks": [{"name": "default", "pod": {}}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    }));
    assert_eq!(reason(&both), Some("InterfaceNotLiveMigratable"));
}

#[test]
fn read_only_cdroms_and_filesystems_are_not_copied() {
    let vmi = vmi(&serde_json::json!({
        "domain": {"devices": {"disks": [{"name": "iso", "cdrom": {}}]}},
        "volumes": [{"name": "iso", "containerDisk": {"image": CONTAINER_DISK}}]
    }));
    assert_eq!(migration_method(&vmi), MigrationMethod::LiveMigration);
}

#[test]
fn persistent_state_does_not_stop_a_migration() {
    // The state claim is not a volume of the spec: virt-controller gives the target a claim of its
    // own and hands the state over.
    let persistent = vmi(&serde_json::json!({
        "domain": {"devices": {"tpm": {"persistent": true}},
                   "firmware": {"bootloader": {"efi": {"persistent": true}}}}
    }));
    assert_eq!(live_migratable(&persistent), Ok(()));
}
