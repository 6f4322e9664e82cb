//! Per-vCPU counters from QEMU's vCPU threads, as libvirt's bulk statistics report them
//! (`vcpu.<n>.time`, `vcpu.<n>.delay`): QEMU names each thread `CPU <n>/KVM` (or `/TCG`), and the
//! kernel's schedstat gives the time it ran and the time it waited for a host CPU.

use std::path::Path;

use cmd_protocol::stats::VcpuStats;

/// The vCPU index of a thread named `CPU <n>/<accel>`.
fn vcpu_index(comm: &str) -> Option<u32> {
    let rest = comm.trim().strip_prefix("CPU ")?;
    let (index, _accel) = rest.split_once('/')?;
    index.parse().ok()
}

/// `<run ns> <wait ns> <slices>` of `/proc/<pid>/task/<tid>/schedstat`.
fn schedstat(text: &str) -> Option<(u64, u64)> {
    let mut fields = text.split_whitespace();
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// Reads the vCPU threads of the process `pid` under `proc` (normally `/proc`), sorted by index.
/// Threads that vanish while being read are skipped.
#[must_use]
pub fn read(proc: &Path, pid: u32) -> Vec<VcpuStats> {
    let Ok(tasks) = std::fs::read_dir(proc.join(pid.to_string()).join("task")) else {
        return Vec::new();
    };
    let mut vcpus: Vec<VcpuStats> = tasks
        .filter_map(Result::ok)
        .filter_map(|task| {
            let id = vcpu_index(&std::fs::read_to_string(task.path().join("comm")).ok()?)?;
            let (time_ns, delay_ns) = schedstat(&std::fs::read_to_string(task.path().join("schedstat")).ok()?)?;
            Some(VcpuStats { id, time_ns, delay_ns })
        })
        .collect();
    vcpus.sort_by_key(|v| v.id);
    vcpus
}

/// Reads the vCPU threads of the QEMU whose pid libvirt wrote to `pid_file`
/// ([`crate::supervisor::daemons::DaemonPaths::qemu_pid_file`]).
#[must_use]
pub fn read_domain(pid_file: &Path) -> Vec<VcpuStats> {
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .map(|pid| read(Path::new("/proc"), pid))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thread(proc: &Path, tid: u32, comm: &str, schedstat: &str) {
        let dir = proc.join("42/task").join(tid.to_string());
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("comm"), format!("{comm}\n")).expect("comm");
        std::fs::write(dir.join("schedstat"), format!("{schedstat}\n")).expect("schedstat");
    }

    #[test]
    fn vcpu_threads_are_found_by_name_and_read_from_schedstat() {
        let proc = tempfile::tempdir().expect("tempdir");
        thread(proc.path(), 42, "qemu-system-x86", "900 10 5");
        thread(proc.path(), 44, "CPU 1/TCG", "2000000 300 7");
        thread(proc.path(), 43, "CPU 0/KVM", "1000000 200 6");
        thread(proc.path(), 45, "IO mon_iothread", "5 5 5");
        assert_eq!(
            read(proc.path(), 42),
            vec![
                VcpuStats {
                    id: 0,
                    time_ns: 1_000_000,
                    delay_ns: 200
                },
                VcpuStats {
                    id: 1,
                    time_ns: 2_000_000,
                    delay_ns: 300
                },
            ]
        );
        assert!(read(proc.path(), 7).is_empty(), "no such process");
    }

    #[test]
    fn this_process_is_readable_and_has_no_vcpus() {
        assert!(read(Path::new("/proc"), std::process::id()).is_empty());
        assert_eq!(vcpu_index("CPU 12/KVM"), Some(12));
        assert_eq!(vcpu_index("CPU x/KVM"), None);
        assert_eq!(schedstat("1 2 3"), Some((1, 2)));
        assert_eq!(schedstat("garbage"), None);
    }
}
