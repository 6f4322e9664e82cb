//! Dedicated CPUs on real libvirt and QEMU (TCG): the launcher is started with a CPU affinity, as
//! a pod's cpuset gives it one, and QEMU's vCPU threads must end up pinned to those CPUs, the
//! emulator threads to their own CPU when isolated, and realtime vCPUs scheduled FIFO on guest
//! NUMA cells backed by hugepages.

use std::path::Path;

use super::BOOT_TIMEOUT;
use super::harness::{Launcher, require_test_guest, serial, testguest_variant};
use super::stop_gracefully;

/// One thread of a process: its name, the CPUs it may run on, its scheduling policy and priority.
#[derive(Debug)]
struct Thread {
    name: String,
    cpus: String,
    policy: u32,
    priority: u32,
}

fn threads(pid: u32) -> Vec<Thread> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("QEMU's threads") {
        let dir = task.expect("task").path();
        let (Ok(name), Ok(status), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue; // the thread ended while being read
        };
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim()
            .to_owned();
        // Fields after the command name: state is field 3, rt_priority 40 and policy 41.
        let fields: Vec<&str> = stat.rsplit_once(')').expect("stat").1.split_whitespace().collect();
        threads.push(Thread {
            name: name.trim().to_owned(),
            cpus,
            priority: fields[37].parse().expect("rt_priority"),
            policy: fields[38].parse().expect("policy"),
        });
    }
    threads
}

fn vcpu_threads(all: &[Thread]) -> Vec<&Thread> {
    all.iter().filter(|t| t.name.starts_with("CPU ")).collect()
}

/// The test guest with `cpu` and `memory` sections, and `guest` MiB of memory requested.
fn dedicated_variant(dir: &Path, cpu: &str, memory: &str, guest: u32) -> std::path::PathBuf {
    testguest_variant(dir, |text| {
        let edited = text
            .replace("    cpu:\n      cores: 1\n", cpu)
            .replace("    memory:\n      guest: 256Mi\n", memory)
            .replace("        memory: 256Mi\n", &format!("        memory: {guest}Mi\n"));
        assert!(
            edited.contains("dedicatedCpuPlacement"),
            "the test guest changed; update this test"
        );
        edited
    })
}

fn boot_on(manifest: &Path, cpus: &str) -> Launcher {
    let mut launcher = Launcher::spawn_on_cpus(manifest, cpus);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-READY", BOOT_TIMEOUT);
    launcher
}

/// Boots the test guest with one dedicated vCPU (and these further `cpu:` lines) and 256 MiB on
/// CPUs 0 and 1; the manifest's directory, the launcher and QEMU's threads once the guest is up.
fn boot_one_vcpu_on_two_cpus(more_cpu: &str) -> (tempfile::TempDir, Launcher, Vec<Thread>) {
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dedicated_variant(
        dir.path(),
        &format!("    cpu:\n      cores: 1\n      dedicatedCpuPlacement: true\n{more_cpu}"),
        "    memory:\n      guest: 256Mi\n",
        256,
    );
    let launcher = boot_on(&manifest, "0,1");
    let qemu = launcher.qemu_pid().expect("QEMU runs");
    let all = threads(qemu);
    (dir, launcher, all)
}

#[test]
fn a_dedicated_vcpu_is_pinned_to_the_first_cpu_the_launcher_was_given() {
    let _serial = serial();
    let (_dir, launcher, all) = boot_one_vcpu_on_two_cpus("");
    let vcpus = vcpu_threads(&all);
    assert_eq!(vcpus.len(), 1, "one vCPU thread: {all:?}");
    assert_eq!(
        vcpus[0].cpus, "0",
        "the vCPU is pinned to one CPU of the launcher's: {all:?}"
    );
    assert!(
        all.iter().any(|t| !t.name.starts_with("CPU ") && t.cpus == "0-1"),
        "without an isolated emulator the other threads keep the launcher's CPUs: {all:?}"
    );
    stop_gracefully(launcher);
}

#[test]
fn an_isolated_emulator_thread_gets_a_cpu_of_its_own() {
    let _serial = serial();
    let (_dir, launcher, all) = boot_one_vcpu_on_two_cpus("      isolateEmulatorThread: true\n");
    let vcpus = vcpu_threads(&all);
    assert_eq!(vcpus.len(), 1, "{all:?}");
    assert_eq!(vcpus[0].cpus, "0", "the vCPU takes the first CPU: {all:?}");
    let others: Vec<&Thread> = all.iter().filter(|t| !t.name.starts_with("CPU ")).collect();
    assert!(!others.is_empty());
    assert!(
        others.iter().all(|t| t.cpus == "1"),
        "every other QEMU thread runs on the emulator's CPU: {all:?}"
    );
    stop_gracefully(launcher);
}

/// Reserves 2 MiB hugepages for a test and gives the old count back when dropped.
struct Hugepages {
    before: u64,
}

/// The kernel's `SCHED_FIFO` policy number.
const SCHED_FIFO: u32 = 1;

const NR_HUGEPAGES: &str = "/proc/sys/vm/nr_hugepages";

impl Hugepages {
    fn reserve(pages: u64) -> Self {
        let read = || -> u64 {
            std::fs::read_to_string(NR_HUGEPAGES)
                .expect("nr_hugepages")
                .trim()
                .parse()
                .expect("a number")
        };
        let before = read();
        std::fs::write(NR_HUGEPAGES, (before + pages).to_string()).expect("reserve hugepages");
        assert!(
            read() >= before + pages,
            "the kernel could not reserve {pages} hugepages"
        );
        Self { before }
    }

    fn free() -> u64 {
        let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
        meminfo
            .lines()
            .find_map(|l| l.strip_prefix("HugePages_Free:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("HugePages_Free")
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        let _ = std::fs::write(NR_HUGEPAGES, self.before.to_string());
    }
}

#[test]
fn realtime_vcpus_run_fifo_on_a_guest_numa_cell_of_hugepages() {
    let _serial = serial();
    require_test_guest();
    let pages = Hugepages::reserve(64);
    let free_before = Hugepages::free();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = dedicated_variant(
        dir.path(),
        "    cpu:\n      cores: 1\n      dedicatedCpuPlacement: true\n      numa:\n        guestMappingPassthrough: {}\n      realtime: {}\n",
        "    memory:\n      guest: 128Mi\n      hugepages:\n        pageSize: 2Mi\n",
        128,
    );
    let launcher = boot_on(&manifest, "1");
    let qemu = launcher.qemu_pid().expect("QEMU runs");
    let all = threads(qemu);
    let vcpus = vcpu_threads(&all);
    assert_eq!(vcpus.len(), 1, "{all:?}");
    assert_eq!(
        (vcpus[0].cpus.as_str(), vcpus[0].policy, vcpus[0].priority),
        ("1", SCHED_FIFO, 1),
        "the realtime vCPU: {all:?}"
    );
    assert!(
        all.iter()
            .filter(|t| !t.name.starts_with("CPU "))
            .all(|t| t.policy == 0),
        "only vCPUs are realtime: {all:?}"
    );
    assert_eq!(
        free_before - Hugepages::free(),
        64,
        "the guest's 128 MiB come from hugepages, allocated at once"
    );
    let cmdline = std::fs::read_to_string(format!("/proc/{qemu}/cmdline"))
        .expect("cmdline")
        .replace('\0', " ");
    assert!(
        cmdline.contains("\"hugetlb\":true")
            && cmdline.contains("\"host-nodes\":[0]")
            && cmdline.contains("\"policy\":\"bind\""),
        "the guest cell is bound to host node 0 with hugepages: {cmdline}"
    );
    stop_gracefully(launcher);
    drop(pages);
}
