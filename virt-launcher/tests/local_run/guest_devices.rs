//! The guest-facing devices of #17 on real QEMU: an SSD-emulated SCSI disk, an emulated TPM, panic
//! devices and the reboot policy, each seen from inside the test guest or in how the run ends.

use std::time::Duration;

use super::BOOT_TIMEOUT;
use super::harness::{Launcher, require_test_guest, serial, testguest_variant};
use super::{boot, daemons, stop_gracefully};

const DEVICES: &str = "      autoattachPodInterface: false\n";

#[test]
fn an_ssd_disk_a_tpm_and_a_panic_device_reach_the_guest() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        text.replace(
            DEVICES,
            &format!("{DEVICES}      tpm: {{}}\n      panicDevices: [{{model: isa}}]\n"),
        )
        .replace(
            "  volumes:\n",
            "        - name: ssd\n          disk: {bus: scsi, solidState: true}\n  volumes:\n    - name: ssd\n      emptyDisk: {capacity: 16Mi}\n",
        )
    });
    let launcher = boot(&manifest);
    let console = launcher.stdout();
    assert!(
        console.contains("KUBEVIRT-RS-GUEST-ROTATIONAL sda 0"),
        "the SCSI disk is not a solid-state drive in the guest:\n{console}"
    );
    assert!(
        console.contains("KUBEVIRT-RS-GUEST-TPM tpm0"),
        "the guest has no TPM:\n{console}"
    );
    stop_gracefully(launcher);
}

#[test]
fn a_guest_that_reboots_under_reboot_policy_terminate_ends_the_run() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        text.replace(
            "kernelArgs: console=ttyS0",
            "kernelArgs: kubevirt_rs.reboot console=ttyS0",
        )
        .replace("    devices:\n", "    rebootPolicy: Terminate\n    devices:\n")
    });
    let mut launcher = boot(&manifest);
    let daemons = daemons(&launcher);
    let status = launcher.wait_exit(Duration::from_secs(30));
    assert!(launcher.stdout().contains("KUBEVIRT-RS-GUEST-REBOOT"));
    assert_eq!(status.code(), Some(0), "{}", launcher.stderr());
    assert!(launcher.stderr().contains("phase=Succeeded"), "{}", launcher.stderr());
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn a_guest_that_panics_with_a_panic_device_ends_the_run_failed() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        text.replace(
            "kernelArgs: console=ttyS0 quiet panic=-1",
            "kernelArgs: kubevirt_rs.panic console=ttyS0 quiet",
        )
        .replace(DEVICES, &format!("{DEVICES}      panicDevices: [{{model: isa}}]\n"))
    });
    let mut launcher = boot(&manifest);
    let daemons = daemons(&launcher);
    let status = launcher.wait_exit(Duration::from_secs(30));
    assert!(launcher.stdout().contains("KUBEVIRT-RS-GUEST-PANIC"));
    assert_eq!(status.code(), Some(1), "{}", launcher.stderr());
    assert!(launcher.stderr().contains("phase=Failed"), "{}", launcher.stderr());
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn a_vm_with_an_instance_type_and_a_preference_boots_with_them() {
    let _serial = serial();
    require_test_guest();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples/instancetypes");
    let (it, pref) = (
        dir.join("instancetype-testguest.yaml"),
        dir.join("preference-testguest.yaml"),
    );
    let mut launcher = Launcher::spawn_with(&dir.join("vm-testguest.yaml"), &[&it, &pref]);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-READY", BOOT_TIMEOUT);
    assert!(
        launcher.stdout().contains("KUBEVIRT-RS-GUEST-DISK vda"),
        "the preference's virtio bus:\n{}",
        launcher.stdout()
    );
    stop_gracefully(launcher);
}
