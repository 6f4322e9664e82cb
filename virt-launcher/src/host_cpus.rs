//! The host CPUs a dedicated VMI may use: the launcher's own CPU affinity (in a pod, the cpuset
//! the kubelet's static CPU manager gave the container; locally, what `taskset` or a cgroup
//! allows) and the host's NUMA cells and core siblings as sysfs lists them.

use std::path::{Path, PathBuf};

use kubevirt_api::v1::VirtualMachineInstance;

use crate::domain::convert::{HostCell, HostCpu, HostCpus, parse_cpu_list};

/// Why the host's CPUs could not be read.
#[derive(Debug, thiserror::Error)]
pub enum HostCpusError {
    /// The process's CPU affinity.
    #[error("cannot read the launcher's CPU affinity")]
    Affinity(#[source] nix::Error),
    /// A sysfs file.
    #[error("cannot read {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A sysfs CPU list that does not parse.
    #[error("{}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

fn read_list(path: &Path) -> Result<Vec<u32>, HostCpusError> {
    let text = std::fs::read_to_string(path).map_err(|source| HostCpusError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_cpu_list(&text).map_err(|message| HostCpusError::Parse {
        path: path.to_owned(),
        message,
    })
}

/// The CPUs this process may run on, ascending.
pub fn own_cpuset() -> Result<Vec<u32>, HostCpusError> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).map_err(HostCpusError::Affinity)?;
    Ok(crate::supervisor::startup_cpu::cpus(&set)
        .into_iter()
        .filter_map(|cpu| u32::try_from(cpu).ok())
        .collect())
}

/// The host's NUMA cells under `sysfs` (normally `/sys`), by node id; one cell of every online
/// CPU when the kernel reports no nodes.
pub fn host_cells(sysfs: &Path) -> Result<Vec<HostCell>, HostCpusError> {
    let nodes_dir = sysfs.join("devices/system/node");
    let mut nodes: Vec<(u32, PathBuf)> = std::fs::read_dir(&nodes_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| {
                    let id = e.file_name().to_str()?.strip_prefix("node")?.parse().ok()?;
                    Some((id, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    nodes.sort_unstable_by_key(|(id, _)| *id);
    let cpu_dir = sysfs.join("devices/system/cpu");
    let cell = |id: u32, cpus: Vec<u32>| -> Result<HostCell, HostCpusError> {
        let cpus = cpus
            .into_iter()
            .map(|cpu| {
                let siblings = cpu_dir.join(format!("cpu{cpu}/topology/thread_siblings_list"));
                Ok(HostCpu {
                    id: cpu,
                    siblings: if siblings.exists() {
                        read_list(&siblings)?
                    } else {
                        Vec::new()
                    },
                })
            })
            .collect::<Result<_, HostCpusError>>()?;
        Ok(HostCell { id, cpus })
    };
    if nodes.is_empty() {
        return Ok(vec![cell(0, read_list(&cpu_dir.join("online"))?)?]);
    }
    nodes
        .into_iter()
        .map(|(id, dir)| cell(id, read_list(&dir.join("cpulist"))?))
        .collect()
}

/// The launcher's cpuset and the host's layout.
pub fn discover(sysfs: &Path) -> Result<HostCpus, HostCpusError> {
    Ok(HostCpus {
        cpuset: own_cpuset()?,
        cells: host_cells(sysfs)?,
    })
}

/// What the conversion needs for `vmi`: the host's CPUs when it asks for dedicated CPUs, read
/// from `/sys`; nothing otherwise.
pub fn for_vmi(vmi: &VirtualMachineInstance) -> Result<Option<HostCpus>, HostCpusError> {
    if crate::domain::convert::is_dedicated(vmi) {
        discover(Path::new("/sys")).map(Some)
    } else {
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each CPU of a cell with its siblings.
    type CpuSiblings = Vec<(u32, Vec<u32>)>;

    fn write(root: &Path, file: &str, text: &str) {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn cells_and_siblings_come_from_sysfs_in_node_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        write(root, "devices/system/node/node1/cpulist", "2-3\n");
        write(root, "devices/system/node/node0/cpulist", "0-1\n");
        write(root, "devices/system/node/possible", "0-1\n");
        for (cpu, siblings) in [(0, "0,2"), (1, "1,3"), (2, "0,2"), (3, "1,3")] {
            write(
                root,
                &format!("devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"),
                siblings,
            );
        }
        let cells = host_cells(root).expect("cells");
        let summary: Vec<(u32, CpuSiblings)> = cells
            .into_iter()
            .map(|c| (c.id, c.cpus.into_iter().map(|cpu| (cpu.id, cpu.siblings)).collect()))
            .collect();
        assert_eq!(
            summary,
            [
                (0, vec![(0, vec![0, 2]), (1, vec![1, 3])]),
                (1, vec![(2, vec![0, 2]), (3, vec![1, 3])]),
            ]
        );
    }

    #[test]
    fn without_nodes_every_online_cpu_is_one_cell() {
        let dir = tempfile::tempdir().expect("tempdir");
        write(dir.path(), "devices/system/cpu/online", "0-2\n");
        let cells = host_cells(dir.path()).expect("cells");
        assert_eq!(cells.len(), 1);
        assert_eq!(cells[0].cpus.iter().map(|c| c.id).collect::<Vec<_>>(), [0, 1, 2]);
        assert!(cells[0].cpus.iter().all(|c| c.siblings.is_empty()));
        write(dir.path(), "devices/system/cpu/online", "zero\n");
        assert!(matches!(host_cells(dir.path()), Err(HostCpusError::Parse { .. })));
    }

    #[test]
    fn this_process_runs_on_some_cpus_of_this_host() {
        let host = discover(Path::new("/sys")).expect("host CPUs");
        assert!(!host.cpuset.is_empty());
        let known: Vec<u32> = host
            .cells
            .iter()
            .flat_map(|c| c.cpus.iter().map(|cpu| cpu.id))
            .collect();
        assert!(host.cpuset.iter().all(|cpu| known.contains(cpu)), "{host:?}");
    }
}
