//! libvirtd starts on one fixed CPU, so that the QEMU capabilities cache stays valid.
//!
//! While libvirt's QEMU driver initialises it reads the host's CPUID on whichever CPU its thread
//! runs, and it trusts a cached `qemu/capabilities/*.xml` only when that CPUID data equals the data
//! stored in the file. Some leaves hold the running CPU's own APIC ID (leaf 1's EBX, leaf 0xB's
//! EDX), so a daemon that starts on another CPU than the one that wrote the cache throws the cache
//! away as "host cpuid changed" and probes QEMU again: on a 2-CPU host, half the warm starts paid
//! for a full probe.
//!
//! So the launcher starts libvirtd pinned to the lowest CPU it may itself use ([`pin_to_lowest_cpu`])
//! and, once the daemon has answered a connection (its drivers are initialised only then), gives
//! every one of its threads the launcher's whole CPU set back ([`release`]), before any QEMU starts.
//! (libvirt sets QEMU's own affinity when it starts it.)

use std::os::unix::process::CommandExt as _;
use std::process::Command;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The CPUs in `set`, in order.
#[must_use]
pub fn cpus(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect()
}

/// The launcher's CPU set: the calling thread's affinity, read now (a pod's cpuset can change).
pub fn launcher_cpus() -> Result<CpuSet, nix::Error> {
    sched_getaffinity(Pid::from_raw(0))
}

/// The lowest CPU of `set` alone, or `None` when `set` is empty.
#[must_use]
pub fn lowest_alone(set: &CpuSet) -> Option<(usize, CpuSet)> {
    let lowest = *cpus(set).first()?;
    let mut alone = CpuSet::new();
    alone.set(lowest).ok()?;
    Some((lowest, alone))
}

/// Makes `command` start on the lowest CPU the launcher may use, and returns that CPU. `None`, and
/// no pin, when the launcher's CPU set cannot be read; a pin the kernel refuses (the CPU left the
/// cpuset meanwhile) is skipped in the child, which then starts unpinned. Either way the daemon
/// starts: the pin only spares it a probe.
#[allow(unsafe_code)]
pub fn pin_to_lowest_cpu(command: &mut Command) -> Option<usize> {
    let set = match launcher_cpus() {
        Ok(set) => set,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the launcher's CPU set; libvirtd starts unpinned");
            return None;
        }
    };
    let (lowest, alone) = lowest_alone(&set)?;
    // SAFETY: the closure runs in the child between fork and exec and makes one
    // sched_setaffinity syscall on a set built before the fork; it allocates nothing and
    // touches no memory shared with the parent.
    unsafe {
        command.pre_exec(move || {
            let _ = sched_setaffinity(Pid::from_raw(0), &alone);
            Ok(())
        });
    }
    Some(lowest)
}

/// Gives every thread of process `pid` the launcher's CPU set (read now). A thread may start more
/// threads meanwhile, which inherit its old set, so the thread list is read again until a pass
/// finds no thread it has not set. A thread that exits meanwhile is skipped. Returns how many
/// threads were set.
pub fn release(pid: u32) -> Result<usize, ReleaseError> {
    if pid == 0 {
        return Err(ReleaseError::NoProcess);
    }
    let all = launcher_cpus().map_err(ReleaseError::LauncherCpus)?;
    let tasks = format!("/proc/{pid}/task");
    let mut done = std::collections::BTreeSet::new();
    loop {
        let entries = std::fs::read_dir(&tasks).map_err(|source| ReleaseError::Threads { pid, source })?;
        let mut new = 0;
        for entry in entries {
            let entry = entry.map_err(|source| ReleaseError::Threads { pid, source })?;
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            if !done.insert(tid) {
                continue;
            }
            new += 1;
            match sched_setaffinity(Pid::from_raw(tid), &all) {
                Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
                Err(source) => return Err(ReleaseError::Affinity { tid, source }),
            }
        }
        if new == 0 {
            return Ok(done.len());
        }
    }
}

/// Why a daemon's threads could not be given their CPU set back.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    /// There is no daemon process (it failed to start again).
    #[error("no daemon process to release")]
    NoProcess,
    /// The launcher's own CPU set.
    #[error("cannot read the launcher's CPU set")]
    LauncherCpus(#[source] nix::Error),
    /// The process's thread list.
    #[error("cannot list the threads of process {pid}")]
    Threads {
        /// The process.
        pid: u32,
        /// Why.
        source: std::io::Error,
    },
    /// One thread's affinity.
    #[error("cannot set the CPU affinity of thread {tid}")]
    Affinity {
        /// The thread.
        tid: i32,
        /// Why.
        source: nix::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(list: &[usize]) -> CpuSet {
        let mut set = CpuSet::new();
        for &cpu in list {
            set.set(cpu).expect("cpu in range");
        }
        set
    }

    #[test]
    fn the_daemon_starts_on_the_lowest_cpu_of_the_launchers_set() {
        let (lowest, alone) = lowest_alone(&set(&[3, 5, 9])).expect("non-empty");
        assert_eq!(lowest, 3);
        assert_eq!(cpus(&alone), [3]);
        assert!(lowest_alone(&CpuSet::new()).is_none());
        assert!(matches!(release(0), Err(ReleaseError::NoProcess)));
    }

    fn allowed(pid: u32) -> Vec<usize> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list");
        crate::domain::convert::parse_cpu_list(list.trim())
            .expect("a CPU list")
            .into_iter()
            .map(|cpu| usize::try_from(cpu).expect("cpu"))
            .collect()
    }

    #[test]
    fn a_pinned_child_starts_on_one_cpu_and_gets_the_whole_set_back() {
        let own = cpus(&launcher_cpus().expect("this process has an affinity"));
        let mut command = Command::new("sleep");
        command.arg("30");
        let lowest = pin_to_lowest_cpu(&mut command).expect("pinned");
        let mut child = command.spawn().expect("spawn sleep");
        let pid = child.id();
        let pinned = allowed(pid);
        let released = release(pid);
        let after = allowed(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(lowest, own[0]);
        assert_eq!(pinned, [lowest], "pinned at exec");
        assert_eq!(released.expect("release"), 1, "sleep has one thread");
        assert_eq!(after, own, "the launcher's whole set again");
    }
}
