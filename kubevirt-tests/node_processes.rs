//! The test cluster node's processes, as the host sees them through /proc (the node's PID
//! namespace is inside the host's): for the end-to-end tests and the cluster benchmark.

use std::path::Path;

/// A process.
#[derive(Clone, Debug)]
pub struct Process {
    /// Its pid, as the host sees it.
    pub pid: u32,
    /// Its command line, arguments joined by spaces.
    pub cmdline: String,
    /// The file name of its first argument.
    pub program: String,
    /// Its cgroups, as in /proc/<pid>/cgroup.
    pub cgroups: String,
}

/// Every process the host sees.
#[must_use]
pub fn all() -> Vec<Process> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let first = raw.split(|b| *b == 0).next().unwrap_or_default();
            let program = Path::new(&*String::from_utf8_lossy(first))
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            Some(Process {
                pid,
                cmdline: String::from_utf8_lossy(&raw).replace('\0', " "),
                program,
                cgroups: std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default(),
            })
        })
        .collect()
}

/// The processes whose command line contains `needle`.
#[must_use]
pub fn matching(needle: &str) -> Vec<Process> {
    all().into_iter().filter(|p| p.cmdline.contains(needle)).collect()
}

/// The processes of `program` (the file name of their first argument).
#[must_use]
pub fn of_program(program: &str) -> Vec<Process> {
    all().into_iter().filter(|p| p.program == program).collect()
}

/// The QEMU of VMI `name` in the default namespace (its `-name guest=default_<name>`).
#[must_use]
pub fn qemu_of(name: &str) -> Option<Process> {
    let needle = format!("guest=default_{name},");
    of_program("qemu-system-x86_64")
        .into_iter()
        .find(|p| p.cmdline.contains(&needle))
}
