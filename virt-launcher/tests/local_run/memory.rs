//! libvirtd lets go of its start-up pages once the domain runs: the launcher preloads
//! `libvirtd-pages.so` into it and asks it after the start; the daemon then keeps serving.

use super::harness::{Launcher, example, require_test_guest, serial};
use super::{BOOT_TIMEOUT, stop_gracefully};

/// The kibibytes resident in `pid`'s clean read-only file mappings (its code and read-only data).
fn clean_resident_kib(pid: u32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).expect("libvirtd's smaps");
    virt_launcher::resident_pages::clean_file_mappings(&smaps)
        .iter()
        .map(|m| m.resident_kib)
        .sum()
}

#[test]
fn libvirtd_releases_its_start_up_pages_and_keeps_serving() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = Launcher::spawn(&example("vmi-testguest.yaml"));
    launcher.wait_for_log("libvirtd-pages: start-up pages released:", BOOT_TIMEOUT);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-READY", BOOT_TIMEOUT);
    let report = launcher
        .stderr()
        .lines()
        .find_map(|l| l.split("start-up pages released:").nth(1).map(str::to_owned))
        .expect("the report");
    let ranges: u64 = report
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no range count in {report:?}"));
    assert!(ranges > 0, "libvirtd dropped nothing: {report}");

    let libvirtd = launcher.children_named("libvirtd");
    assert_eq!(libvirtd.len(), 1, "one libvirtd");
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", libvirtd[0])).expect("maps");
    assert!(maps.contains("/libvirtd-pages.so"), "libvirtd preloads the library");
    // Its only driver module is QEMU's: no network, storage, node-device, interface, nwfilter or
    // secret driver.
    let drivers: std::collections::BTreeSet<&str> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|path| path.contains("/libvirt/connection-driver/"))
        .filter_map(|path| path.rsplit('/').next())
        .collect();
    assert_eq!(
        drivers.into_iter().collect::<Vec<_>>(),
        ["libvirt_driver_qemu.so"],
        "libvirtd's driver modules"
    );
    // One malloc arena: it serves one client and one VM.
    let daemon_environment = std::fs::read(format!("/proc/{}/environ", libvirtd[0])).expect("libvirtd's environment");
    assert!(
        String::from_utf8_lossy(&daemon_environment)
            .split('\0')
            .any(|v| v == "MALLOC_ARENA_MAX=1"),
        "libvirtd runs with one malloc arena"
    );
    // Without the release, libvirtd's code and read-only data are about 20 MiB resident here at
    // this point (libvirt.so, its QEMU driver, GLib, GnuTLS, libcrypto, libxml2, ICU); with it,
    // what the daemon touches again while the guest boots comes back, about 8 MiB.
    let resident = clean_resident_kib(libvirtd[0]);
    assert!(
        resident < 12 * 1024,
        "libvirtd still holds {resident} KiB of clean code and read-only data"
    );
    // Nothing libvirtd starts inherits the library: libvirt passes LD_PRELOAD on to QEMU.
    let qemu = launcher.qemu_pid().expect("the run's QEMU");
    let environment = std::fs::read(format!("/proc/{qemu}/environ")).expect("QEMU's environment");
    let environment = String::from_utf8_lossy(&environment);
    for variable in ["LD_PRELOAD=", "KUBEVIRT_RS_PAGE_RELEASE_FD="] {
        assert!(
            !environment.split('\0').any(|v| v.starts_with(variable)),
            "QEMU inherited {variable}: {environment:?}"
        );
    }
    // The daemon still serves: the graceful stop goes through it.
    stop_gracefully(launcher);
}
