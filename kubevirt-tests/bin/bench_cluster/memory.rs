//! Memory on the node: the resident memory of each kubevirt-rs component's process, and one
//! launcher pod's cgroup memory less its QEMU's (the pod's own cost: launcher, libvirtd,
//! the containerDisk sidecars, pause).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use kubevirt_tests::node_processes;
use kubevirt_tests::process_memory::{field_kib, resident};

/// A pod's memory cgroup, as cgroup v1 (the `memory` hierarchy) or v2 (unified) names its files.
struct PodMemory {
    dir: PathBuf,
    unified: bool,
}

impl PodMemory {
    /// The memory cgroup of the pod a process runs in (the parent of its container's cgroup).
    fn of(pid: u32) -> anyhow::Result<Self> {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).context("cgroup")?;
        let (container, unified) = cgroups
            .lines()
            .find_map(|l| {
                let mut parts = l.splitn(3, ':');
                let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
                if controllers.split(',').any(|c| c == "memory") {
                    Some((path.to_owned(), false))
                } else {
                    (id == "0" && controllers.is_empty()).then(|| (path.to_owned(), true))
                }
            })
            .context("no memory cgroup")?;
        let pod = Path::new(&container).parent().context("no pod cgroup")?;
        let base = if unified {
            "/sys/fs/cgroup"
        } else {
            "/sys/fs/cgroup/memory"
        };
        Ok(Self {
            dir: Path::new(base).join(pod.strip_prefix("/").unwrap_or(pod)),
            unified,
        })
    }

    fn read(&self, file: &str) -> anyhow::Result<String> {
        std::fs::read_to_string(self.dir.join(file)).with_context(|| format!("{}/{file}", self.dir.display()))
    }

    /// Charged memory, anonymous memory and page cache, in KiB.
    fn usage_anon_cache(&self) -> anyhow::Result<(u64, u64, u64)> {
        let (usage_file, anon_key, cache_key) = if self.unified {
            ("memory.current", "anon ", "file ")
        } else {
            ("memory.usage_in_bytes", "total_rss ", "total_cache ")
        };
        let usage = self.read(usage_file)?.trim().parse::<u64>().context("usage")? / 1024;
        let stat = self.read("memory.stat")?;
        let kib = |key: &str| {
            stat.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
                .unwrap_or(0)
                / 1024
        };
        Ok((usage, kib(anon_key), kib(cache_key)))
    }
}

fn mib(kib: u64) -> String {
    format!("{}.{} MiB", kib / 1024, kib % 1024 * 10 / 1024)
}

/// The memory part of the report, with the VMIs of `running` up.
pub fn report(running: &[String]) -> anyhow::Result<String> {
    let mut out = String::from("**Memory on the node**\n\n| what | resident |\n|---|---|\n");
    for component in ["virt-api", "virt-controller", "virt-handler"] {
        let pids: Vec<u32> = node_processes::of_program(component).iter().map(|p| p.pid).collect();
        let rss: Vec<String> = pids.iter().map(|p| mib(resident(&p.to_string()).rss_kib)).collect();
        let _ = writeln!(
            out,
            "| {component} ({} process{}) | {} |",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" },
            rss.join(", ")
        );
    }
    let name = running.first().context("no VMI running")?;
    let qemu = node_processes::qemu_of(name)
        .with_context(|| format!("no QEMU for {name}"))?
        .pid;
    let qemu_rss = resident(&qemu.to_string()).rss_kib;
    let (usage, anon, cache) = PodMemory::of(qemu)?.usage_anon_cache()?;
    let qemu_anon = field_kib(
        &std::fs::read_to_string(format!("/proc/{qemu}/status")).unwrap_or_default(),
        "RssAnon:",
    )
    .unwrap_or(0);
    let _ = writeln!(
        out,
        "| one launcher pod's memory cgroup (all it is charged) | {} |",
        mib(usage)
    );
    let _ = writeln!(
        out,
        "| of which its QEMU (RSS; TCG, 256 MiB guest) | {} |",
        mib(qemu_rss)
    );
    let _ = writeln!(
        out,
        "| **the pod less its QEMU, anonymous memory** (the cgroup's {} less QEMU's RssAnon {}): launcher, libvirtd, sidecars, pause | **{}** |",
        mib(anon),
        mib(qemu_anon),
        mib(anon.saturating_sub(qemu_anon))
    );
    let _ = writeln!(
        out,
        "| the pod less its QEMU, all charged memory (usage less QEMU's RSS; the page cache of {} is in the usage, and QEMU's shared file pages are charged to whoever read them first) | {} |\n",
        mib(cache),
        mib(usage.saturating_sub(qemu_rss))
    );
    Ok(out)
}
