//! libvirtd starts on one fixed CPU, so that the QEMU capabilities cache stays valid.
//!
//! When libvirt's QEMU driver starts it reads the host's CPUID from whichever CPU its thread runs
//! on, and it trusts a cached `qemu/capabilities/*.xml` only when that CPUID data equals the data
//! stored in the file. Some leaves hold the running CPU's own APIC ID (leaf 1's EBX, leaf 0xB's
//! EDX), so a daemon that starts on another CPU than the one that wrote the cache throws the cache
//! away as "host cpuid changed" and probes QEMU again: on a 2-CPU host, half the warm starts paid
//! for a full probe.
//!
//! So the launcher starts libvirtd pinned to the lowest CPU it may itself use, and once the daemon
//! accepts connections (its driver is up and has read the CPUID) gives every one of its threads the
//! launcher's whole CPU set back, before any QEMU is started: QEMU inherits the whole set, as it
//! would have without the pin.

use std::os::unix::process::CommandExt as _;
use std::process::Command;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;

/// The launcher's CPU set and the single CPU libvirtd starts on.
#[derive(Clone, Copy)]
pub struct StartupCpu {
    all: CpuSet,
    first: CpuSet,
}

impl std::fmt::Debug for StartupCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartupCpu")
            .field("all", &cpus(&self.all))
            .field("first", &cpus(&self.first))
            .finish()
    }
}

/// The CPUs in `set`, in order.
#[must_use]
pub fn cpus(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
        .collect()
}

impl StartupCpu {
    /// From the calling thread's affinity. `None` when it cannot be read or is empty: the daemon
    /// then starts unpinned (and may re-probe QEMU, nothing worse).
    #[must_use]
    pub fn of_this_process() -> Option<Self> {
        Self::from_set(sched_getaffinity(Pid::from_raw(0)).ok()?)
    }

    /// The lowest CPU of `all`, or `None` when `all` is empty.
    #[must_use]
    pub fn from_set(all: CpuSet) -> Option<Self> {
        let lowest = *cpus(&all).first()?;
        let mut first = CpuSet::new();
        first.set(lowest).ok()?;
        Some(Self { all, first })
    }

    /// The CPU the daemon starts on.
    #[must_use]
    pub fn first(&self) -> usize {
        cpus(&self.first).first().copied().unwrap_or(0)
    }

    /// Makes `command` start on [`Self::first`] only.
    #[allow(unsafe_code)]
    pub fn pin(&self, command: &mut Command) {
        let first = self.first;
        // SAFETY: the closure runs in the child between fork and exec and makes one
        // sched_setaffinity syscall on a set built before the fork; it allocates nothing and
        // touches no memory shared with the parent.
        unsafe {
            command.pre_exec(move || sched_setaffinity(Pid::from_raw(0), &first).map_err(std::io::Error::from));
        }
    }

    /// Gives every thread of process `pid` the launcher's whole CPU set back. A thread that exits
    /// meanwhile is skipped; any other failure is returned with the thread.
    pub fn release(&self, pid: u32) -> Result<usize, ReleaseError> {
        let tasks = format!("/proc/{pid}/task");
        let entries = std::fs::read_dir(&tasks).map_err(|source| ReleaseError::Threads { pid, source })?;
        let mut released = 0;
        for entry in entries.filter_map(Result::ok) {
            let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            match sched_setaffinity(Pid::from_raw(tid), &self.all) {
                Ok(()) => released += 1,
                Err(nix::errno::Errno::ESRCH) => {}
                Err(source) => return Err(ReleaseError::Affinity { tid, source }),
            }
        }
        Ok(released)
    }
}

/// Why a daemon's threads could not be given their CPU set back.
#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
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
        let pin = StartupCpu::from_set(set(&[3, 5, 9])).expect("non-empty");
        assert_eq!(pin.first(), 3);
        assert_eq!(cpus(&pin.all), [3, 5, 9]);
        assert!(StartupCpu::from_set(CpuSet::new()).is_none());
    }

    fn allowed(pid: u32) -> String {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list")
            .trim()
            .to_owned()
    }

    fn list(cpus: &[usize]) -> String {
        // /proc writes ranges; compare as sets by expanding them.
        cpus.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
    }

    fn expand(text: &str) -> String {
        let mut all = Vec::new();
        for part in text.split(',') {
            match part.split_once('-') {
                Some((a, b)) => all.extend(a.parse::<usize>().expect("cpu")..=b.parse::<usize>().expect("cpu")),
                None => all.push(part.parse::<usize>().expect("cpu")),
            }
        }
        list(&all)
    }

    #[test]
    fn a_pinned_child_starts_on_one_cpu_and_gets_the_whole_set_back() {
        let pin = StartupCpu::of_this_process().expect("this process has an affinity");
        let mut command = Command::new("sleep");
        command.arg("30");
        pin.pin(&mut command);
        let mut child = command.spawn().expect("spawn sleep");
        let pid = child.id();
        let pinned = allowed(pid);
        let released = pin.release(pid);
        let after = allowed(pid);
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(expand(&pinned), pin.first().to_string(), "pinned at exec");
        assert_eq!(released.expect("release"), 1, "sleep has one thread");
        assert_eq!(expand(&after), list(&cpus(&pin.all)), "the launcher's whole set again");
    }
}
