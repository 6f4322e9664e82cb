//! `virt-launcher run` on real libvirt and QEMU (TCG) with the test guest: boot, graceful stop,
//! grace expiry, QEMU killed, libvirtd killed, bad manifests, and nothing left behind.
//!
//! Needs root, the packages `make deps` installs and the guest `make guest` builds.

mod cloud_init;
mod console_log;
mod dedicated_cpus;
mod guest_devices;
mod harness;
mod network;
mod startup;

use std::time::Duration;

use harness::{Launcher, example, require_test_guest, serial, testguest_replacing, testguest_variant};
use nix::sys::signal::Signal;

/// Generous: the first boot on a fresh machine waits out libvirt's ~8 s capability probe.
pub(crate) const BOOT_TIMEOUT: Duration = Duration::from_secs(90);

pub(crate) fn boot(manifest: &std::path::Path) -> Launcher {
    let mut launcher = Launcher::spawn(manifest);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-READY", BOOT_TIMEOUT);
    launcher
}

/// SIGTERM: the guest powers off (exit 0), and nothing the run started is left.
pub(crate) fn stop_gracefully(mut launcher: Launcher) {
    let daemons = daemons(&launcher);
    assert_eq!(
        launcher.stop_with(Signal::SIGTERM).code(),
        Some(0),
        "{}",
        launcher.stderr()
    );
    launcher.assert_nothing_left(&daemons);
}

/// The launcher's daemons: one libvirtd, and no virtlogd (QEMU's stdio and the serial log are
/// written without it).
pub(crate) fn daemons(launcher: &Launcher) -> Vec<u32> {
    let pids = launcher.children_named("libvirtd");
    assert_eq!(pids.len(), 1, "expected one libvirtd under the launcher");
    assert!(
        launcher.children_named("virtlogd").is_empty(),
        "no virtlogd runs under the launcher"
    );
    pids
}

/// The private libvirtd serves one client and one VM: its RPC pools start one thread each and the
/// main pool grows to four at most (libvirt's defaults start five in each, up to twenty, and each
/// thread costs a stack and a malloc arena).
fn assert_worker_pools_sized_for_one_vm(libvirtd: u32) {
    let mut names = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{libvirtd}/task")).expect("libvirtd's threads") {
        let comm = task.expect("a thread").path().join("comm");
        names.push(std::fs::read_to_string(comm).unwrap_or_default().trim().to_owned());
    }
    let count = |pool: &str| names.iter().filter(|name| name.as_str() == pool).count();
    assert!(
        (1..=4).contains(&count("rpc-libvirtd")),
        "libvirtd's threads: {names:?}"
    );
    assert_eq!(count("prio-rpc-libvir"), 1, "libvirtd's threads: {names:?}");
    assert_eq!(count("rpc-admin"), 1, "libvirtd's threads: {names:?}");
}

#[test]
fn the_test_guest_boots_to_its_marker_and_sigterm_shuts_it_down_gracefully() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = boot(&example("vmi-testguest.yaml"));
    assert!(
        launcher
            .stdout()
            .contains("KUBEVIRT-RS-GUEST-DISK vda KUBEVIRT-RS-TESTGUEST-DISK"),
        "{}",
        launcher.stdout()
    );
    let daemons = daemons(&launcher);
    assert!(launcher.qemu_pid().is_some(), "no QEMU found");
    assert_worker_pools_sized_for_one_vm(launcher.children_named("libvirtd")[0]);
    let status = launcher.stop_with(Signal::SIGTERM);
    assert_eq!(
        status.code(),
        Some(0),
        "graceful stop is Succeeded\n{}",
        launcher.stderr()
    );
    assert!(
        launcher.stdout().contains("KUBEVIRT-RS-GUEST-POWEROFF"),
        "the guest saw the power button"
    );
    assert!(launcher.stderr().contains("phase=Succeeded"), "{}", launcher.stderr());
    launcher.assert_nothing_left(&daemons);
}

/// Regression (#31): `poweroff` typed at the guest's shell used to do nothing, since busybox asks
/// PID 1 to power off with a signal that the test guest's init did not handle.
#[test]
fn poweroff_typed_at_the_guest_shell_ends_the_run_succeeded() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = boot(&example("vmi-testguest.yaml"));
    let daemons = daemons(&launcher);
    // The shell answers on the console once it reads it: typed again until it does, since the
    // console may still be starting when the guest says it is ready.
    let asked = std::time::Instant::now();
    while !launcher.stdout().contains("KUBEVIRT-RS-SHELL-42") {
        assert!(
            asked.elapsed() < BOOT_TIMEOUT,
            "the shell never answered\n{}",
            launcher.stdout()
        );
        launcher.type_line("echo KUBEVIRT-RS-SHELL-$((6 * 7))");
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    launcher.type_line("poweroff");
    let status = launcher.wait_exit(BOOT_TIMEOUT);
    assert_eq!(
        status.code(),
        Some(0),
        "a guest that powers off is Succeeded\n{}",
        launcher.stderr()
    );
    assert!(
        launcher.stdout().contains("KUBEVIRT-RS-GUEST-POWEROFF"),
        "{}",
        launcher.stdout()
    );
    assert!(launcher.stderr().contains("phase=Succeeded"), "{}", launcher.stderr());
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn a_guest_that_ignores_acpi_is_destroyed_when_the_grace_period_ends() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        text.replace("terminationGracePeriodSeconds: 30", "terminationGracePeriodSeconds: 3")
            .replace(
                "kernelArgs: console=ttyS0",
                "kernelArgs: kubevirt_rs.ignore_acpi console=ttyS0",
            )
    });
    let mut launcher = boot(&manifest);
    let daemons = daemons(&launcher);
    let asked = std::time::Instant::now();
    let status = launcher.stop_with(Signal::SIGTERM);
    let took = asked.elapsed();
    assert_eq!(
        status.code(),
        Some(1),
        "a guest killed after its grace period is Failed\n{}",
        launcher.stderr()
    );
    assert!(
        took >= Duration::from_secs(3),
        "destroyed before the grace period ended ({took:?})"
    );
    assert!(took < Duration::from_secs(6), "destroy came late ({took:?})");
    assert!(
        launcher.stderr().contains("destroying the domain"),
        "{}",
        launcher.stderr()
    );
    assert!(!launcher.stdout().contains("KUBEVIRT-RS-GUEST-POWEROFF"));
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn killing_qemu_makes_the_vm_failed_within_a_second() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = boot(&example("vmi-testguest.yaml"));
    let daemons = daemons(&launcher);
    let qemu = launcher.qemu_pid().expect("QEMU");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(qemu).expect("pid")),
        Signal::SIGKILL,
    )
    .expect("kill -9 QEMU");
    let noticed = launcher.wait_for_log("phase=Failed", Duration::from_secs(5));
    assert!(noticed < Duration::from_secs(1), "Failed only after {noticed:?}");
    let status = launcher.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(1), "{}", launcher.stderr());
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn a_killed_libvirtd_is_restarted_and_still_manages_the_running_domain() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = boot(&example("vmi-testguest.yaml"));
    let first = launcher.children_named("libvirtd");
    assert_eq!(first.len(), 1);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(first[0]).expect("pid")),
        Signal::SIGKILL,
    )
    .expect("kill -9 libvirtd");
    launcher.wait_for_log("restarted daemon=\"libvirtd\"", Duration::from_secs(10));
    let second = launcher.children_named("libvirtd");
    assert_eq!(second.len(), 1, "one libvirtd after the restart");
    assert_ne!(second, first);
    assert!(launcher.qemu_pid().is_some(), "the guest kept running");
    // The restarted daemon still manages the domain: a graceful stop goes through it.
    std::thread::sleep(Duration::from_millis(500));
    let daemons = daemons(&launcher);
    let status = launcher.stop_with(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0), "{}", launcher.stderr());
    assert!(
        launcher.stdout().contains("KUBEVIRT-RS-GUEST-POWEROFF"),
        "the guest got the power button through the new daemon"
    );
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn a_guest_that_powers_off_by_itself_ends_the_run_with_success() {
    let _serial = serial();
    require_test_guest();
    let (_dir, manifest) = testguest_replacing(
        "kernelArgs: console=ttyS0",
        "kernelArgs: kubevirt_rs.poweroff console=ttyS0",
    );
    let mut launcher = boot(&manifest);
    let daemons = daemons(&launcher);
    let status = launcher.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(0), "{}", launcher.stderr());
    assert!(launcher.stderr().contains("reason=Shutdown"), "{}", launcher.stderr());
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn ctrl_c_stops_a_vm_manifest_gracefully() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = boot(&example("vm-testguest.yaml"));
    let daemons = daemons(&launcher);
    let status = launcher.stop_with(Signal::SIGINT);
    assert_eq!(status.code(), Some(0), "{}", launcher.stderr());
    assert!(launcher.stdout().contains("KUBEVIRT-RS-GUEST-POWEROFF"));
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn a_bad_manifest_is_refused_with_its_field_and_starts_nothing() {
    let _serial = serial();
    let (_dir, manifest) = testguest_replacing("bus: virtio", "bus: floppy");
    let mut launcher = Launcher::spawn(&manifest);
    let status = launcher.wait_exit(Duration::from_secs(10));
    assert_eq!(status.code(), Some(2));
    assert!(
        launcher.stderr().contains("spec.domain.devices.disks[0].disk.bus"),
        "{}",
        launcher.stderr()
    );
    assert!(launcher.stdout().is_empty());
    launcher.assert_nothing_left(&[]);
}

#[test]
fn a_missing_image_is_refused_by_field_and_leaves_nothing() {
    let _serial = serial();
    let dir = tempfile::tempdir().expect("tempdir");
    // Only the containerDisk (the last image reference) points nowhere.
    let manifest = testguest_variant(dir.path(), |text| {
        let at = text
            .rfind("image: localhost/kubevirt-rs/testguest:latest")
            .expect("image line");
        format!(
            "{}image: localhost/no/such-image:1{}",
            &text[..at],
            &text[at + "image: localhost/kubevirt-rs/testguest:latest".len()..]
        )
    });
    let mut launcher = Launcher::spawn(&manifest);
    let status = launcher.wait_exit(Duration::from_secs(30));
    assert_eq!(status.code(), Some(2), "{}", launcher.stderr());
    assert!(
        launcher.stderr().contains("spec.volumes[0].containerDisk"),
        "{}",
        launcher.stderr()
    );
    launcher.assert_nothing_left(&[]);
}

#[test]
fn volumes_of_every_local_kind_reach_the_guest() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let host_disk = dir.path().join("host.img");
    let extra_disks = r"        - name: scratch
          disk:
            bus: virtio
        - name: host
          disk:
            bus: virtio
        - name: cloudinit
          disk:
            bus: virtio
";
    let extra_volumes = format!(
        r"    - name: scratch
      emptyDisk:
        capacity: 64Mi
    - name: host
      hostDisk:
        path: {}
        type: DiskOrCreate
        capacity: 32Mi
    - name: cloudinit
      cloudInitNoCloud:
        userData: '#cloud-config'
",
        host_disk.display()
    );
    let manifest = testguest_variant(dir.path(), |text| {
        let text = text.replace("  volumes:\n", &format!("  volumes:\n{extra_volumes}"));
        let last_disk = "            bus: virtio\n  volumes:";
        text.replacen(
            last_disk,
            &format!("            bus: virtio\n{extra_disks}  volumes:"),
            1,
        )
    });
    let mut launcher = boot(&manifest);
    let console = launcher.stdout();
    for disk in ["vda KUBEVIRT-RS-TESTGUEST-DISK", "vdb", "vdc", "vdd"] {
        assert!(
            console.contains(&format!("KUBEVIRT-RS-GUEST-DISK {disk}")),
            "guest lacks {disk}:\n{console}"
        );
    }
    assert_eq!(std::fs::metadata(&host_disk).expect("hostDisk created").len(), 32 << 20);
    let daemons = daemons(&launcher);
    assert_eq!(
        launcher.stop_with(Signal::SIGTERM).code(),
        Some(0),
        "{}",
        launcher.stderr()
    );
    assert!(host_disk.exists(), "a hostDisk belongs to the user and stays");
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn start_strategy_paused_starts_the_domain_paused() {
    let _serial = serial();
    require_test_guest();
    let (_dir, manifest) = testguest_replacing(
        "spec:\n  terminationGracePeriodSeconds: 30",
        "spec:\n  startStrategy: Paused\n  terminationGracePeriodSeconds: 2",
    );
    let mut launcher = Launcher::spawn(&manifest);
    launcher.wait_for_log("domain started paused=true", BOOT_TIMEOUT);
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        !launcher.stdout().contains("KUBEVIRT-RS-GUEST-READY"),
        "a paused guest does not boot"
    );
    let daemons = daemons(&launcher);
    let status = launcher.stop_with(Signal::SIGTERM);
    assert_eq!(
        status.code(),
        Some(1),
        "a paused guest cannot power off, so it is destroyed: {}",
        launcher.stderr()
    );
    launcher.assert_nothing_left(&daemons);
}

#[test]
fn the_guest_sees_a_virtio_nic_with_the_mac_address_from_the_spec() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |text| {
        text.replace("      autoattachPodInterface: false\n", "      interfaces:\n        - name: default\n          masquerade: {}\n          macAddress: \"02:00:00:aa:bb:cc\"\n")
            .replace("  volumes:\n", "  networks:\n    - name: default\n      pod: {}\n  volumes:\n")
    });
    let mut launcher = boot(&manifest);
    assert!(
        launcher
            .stdout()
            .contains("KUBEVIRT-RS-GUEST-NIC eth0 02:00:00:aa:bb:cc"),
        "no NIC in the guest:\n{}",
        launcher.stdout()
    );
    // The DHCP server answers that MAC, and only that one.
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-IP eth0 10.0.2.2/24 gateway 10.0.2.1", BOOT_TIMEOUT);
    stop_gracefully(launcher);
}

/// Regression: a launcher that dies without cleaning up (here kill -9) must not leave its libvirt
/// daemons running; they get SIGTERM from the kernel when their parent dies.
#[test]
fn a_launcher_killed_with_sigkill_takes_its_daemons_with_it() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = boot(&example("vmi-testguest.yaml"));
    let daemons = daemons(&launcher);
    let qemu = launcher.qemu_pid().expect("QEMU");
    launcher.signal(Signal::SIGKILL);
    launcher.wait_exit(Duration::from_secs(10));
    let begin = std::time::Instant::now();
    while harness::processes()
        .iter()
        .any(|p| daemons.contains(&p.pid) && !p.is_zombie)
    {
        assert!(
            begin.elapsed() < Duration::from_secs(10),
            "daemons outlived their launcher"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // QEMU is libvirt's child, not ours: it survives a killed launcher, so this test ends it.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(qemu).expect("pid")),
        Signal::SIGKILL,
    );
}
