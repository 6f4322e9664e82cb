//! Cloud-init seeds on real QEMU, read back by the test guest: a NoCloud seed (`cidata`, JSON
//! meta-data with the firmware UUID) and a ConfigDrive (`config-2`, made once the domain is
//! defined), each with upstream's files.

use super::harness::{require_test_guest, serial, testguest_variant};
use super::{boot, stop_gracefully};

#[test]
fn nocloud_and_configdrive_seeds_reach_the_guest_with_upstreams_layout() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        text.replace(
            "  terminationGracePeriodSeconds: 30\n",
            "  terminationGracePeriodSeconds: 30\n  hostname: seeded.example\n",
        )
        .replace(
            "  volumes:\n",
            "        - name: nocloud\n          disk: {bus: virtio}\n        - name: configdrive\n          disk: {bus: virtio}\n  volumes:\n    - name: nocloud\n      cloudInitNoCloud:\n        userData: \"#cloud-config from nocloud\"\n        networkDataBase64: dmVyc2lvbjogMgo=\n    - name: configdrive\n      cloudInitConfigDrive:\n        userData: \"#cloud-config from configdrive\"\n",
        )
    });
    let launcher = boot(&manifest);
    let console = launcher.stdout();
    let lines: Vec<&str> = console
        .lines()
        .filter(|l| l.contains("KUBEVIRT-RS-GUEST-ISO"))
        .map(str::trim)
        .collect();
    let has = |wanted: &str| lines.iter().any(|l| l.starts_with(wanted));
    for wanted in [
        "KUBEVIRT-RS-GUEST-ISO vdb cidata",
        "KUBEVIRT-RS-GUEST-ISOFILE vdb user-data #cloud-config from nocloud",
        "KUBEVIRT-RS-GUEST-ISOFILE vdb network-config version: 2",
        "KUBEVIRT-RS-GUEST-ISOFILE vdb meta-data {\"instance-id\":",
        "KUBEVIRT-RS-GUEST-ISO vdc config-2",
        "KUBEVIRT-RS-GUEST-ISOFILE vdc openstack/latest/user_data #cloud-config from configdrive",
        "KUBEVIRT-RS-GUEST-ISOFILE vdc openstack/latest/meta_data.json {\"instance_id\":\"testguest.default\",\"hostname\":\"seeded.example\",\"uuid\":",
    ] {
        assert!(has(wanted), "expected {wanted:?} among {lines:#?}");
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("\"local-hostname\":\"seeded.example\"")),
        "{lines:#?}"
    );
    stop_gracefully(launcher);
}
