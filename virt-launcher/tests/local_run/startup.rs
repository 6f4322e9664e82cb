//! libvirtd's start: libvirt keeps trusting its QEMU capabilities cache from one start to the
//! next, whichever CPU the daemon's thread would have landed on (it compares the host's CPUID,
//! which holds the running CPU's APIC ID), and libvirtd still runs on every CPU the launcher may
//! use once it serves.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::harness::{Launcher, example, require_test_guest, serial};
use super::{BOOT_TIMEOUT, stop_gracefully};

/// The cached capabilities files: path, modification time, contents.
fn capabilities(cache: &Path) -> Vec<(PathBuf, SystemTime, String)> {
    let dir = cache.join("qemu/capabilities");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| {
            let path = entry.expect("an entry").path();
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime");
            let text = std::fs::read_to_string(&path).expect("a capabilities file");
            (path, modified, text)
        })
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files
}

/// Every thread of `pid` with the CPUs it may run on (a thread that exits meanwhile is skipped).
fn thread_cpus(pid: u32) -> Vec<(String, String)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("threads") {
        let Ok(status) = std::fs::read_to_string(task.expect("a thread").path().join("status")) else {
            continue;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|v| v.trim().to_owned())
                .unwrap_or_default()
        };
        threads.push((field("Name:"), field("Cpus_allowed_list:")));
    }
    threads
}

fn boot_with_cache(manifest: &Path, cache: &Path) -> Launcher {
    let mut launcher = Launcher::spawn_with_cache(manifest, cache);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-READY", BOOT_TIMEOUT);
    launcher
}

#[test]
fn warm_starts_keep_the_capabilities_cache_and_libvirtd_keeps_every_cpu() {
    let _serial = serial();
    require_test_guest();
    let own = thread_cpus(std::process::id())[0].1.clone();
    assert!(
        own.contains(',') || own.contains('-'),
        "this test needs at least two CPUs (it has {own}): on one, libvirtd cannot start on another"
    );
    let cache = tempfile::tempdir().expect("cache dir");
    let manifest = example("vmi-testguest.yaml");
    // The first start finds the cache empty: libvirt probes QEMU and writes it.
    stop_gracefully(boot_with_cache(&manifest, cache.path()));
    let written = capabilities(cache.path());
    assert!(!written.is_empty(), "the first start wrote no capabilities");
    // Three more: on two CPUs, a daemon left to start anywhere threw the cache away about every
    // second time.
    for start in 1..=3 {
        let launcher = boot_with_cache(&manifest, cache.path());
        let libvirtd = launcher.children_named("libvirtd");
        assert_eq!(libvirtd.len(), 1, "one libvirtd");
        for (thread, cpus) in thread_cpus(libvirtd[0]) {
            assert_eq!(
                cpus, own,
                "libvirtd thread {thread} may run on {cpus}, the launcher on {own}"
            );
        }
        stop_gracefully(launcher);
        assert!(
            capabilities(cache.path()) == written,
            "warm start {start}: libvirt probed QEMU again and rewrote its capabilities cache"
        );
    }
}
