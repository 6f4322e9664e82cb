//! Memory on the node: the resident memory of each kubevirt-rs component's process; one launcher
//! pod's cgroup memory less its QEMU's (the pod's own cost: launcher, libvirtd, the containerDisk
//! sidecars, pause); and the per-VM figures summed over a launcher pod's processes but QEMU: private
//! (anonymous) memory, next to its goal, with PSS and RSS beside it.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use kubevirt_tests::node_processes;
use kubevirt_tests::process_memory::{Resident, field_kib, resident};

/// The memory cgroups of a process's container and of its pod (the container's parent), as
/// cgroup v1 (the `memory` hierarchy) or v2 (unified) names them.
struct PodCgroup {
    /// The container's cgroup path, as `/proc/<pid>/cgroup` gives it.
    container: PathBuf,
    /// The pod's cgroup path.
    pod: PathBuf,
    /// The pod's directory under /sys/fs/cgroup.
    dir: PathBuf,
    unified: bool,
}

impl PodCgroup {
    /// The cgroups of the container and the pod `pid` runs in.
    fn of(pid: u32) -> anyhow::Result<Self> {
        let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).context("cgroup")?;
        let (container, unified) = memory_cgroup(&cgroups).context("no memory cgroup")?;
        let container = PathBuf::from(container);
        let pod = container.parent().context("no pod cgroup")?.to_owned();
        let base = if unified {
            "/sys/fs/cgroup"
        } else {
            "/sys/fs/cgroup/memory"
        };
        Ok(Self {
            dir: Path::new(base).join(pod.strip_prefix("/").unwrap_or(&pod)),
            container,
            pod,
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

/// The memory cgroup in a `/proc/<pid>/cgroup` text: its path, and whether it is cgroup v2's
/// unified hierarchy.
fn memory_cgroup(cgroups: &str) -> Option<(String, bool)> {
    cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        if controllers.split(',').any(|c| c == "memory") {
            Some((path.to_owned(), false))
        } else {
            (id == "0" && controllers.is_empty()).then(|| (path.to_owned(), true))
        }
    })
}

/// Private (anonymous) memory, PSS and RSS summed over a launcher pod's processes but its QEMU: those of its compute
/// container (the launcher and its libvirtd), and those of the whole pod (with pause and the
/// containerDisk sidecars), in KiB.
#[derive(Default)]
struct PodResident {
    compute: Resident,
    pod: Resident,
    compute_programs: Vec<String>,
}

fn pod_resident(qemu: u32) -> anyhow::Result<PodResident> {
    let cgroup = PodCgroup::of(qemu).context("QEMU's cgroup")?;
    let mut sums = PodResident::default();
    for process in node_processes::all() {
        let Some((path, _)) = memory_cgroup(&process.cgroups) else {
            continue;
        };
        // QEMU is not counted, nor is a zombie (no command line, no memory).
        if process.pid == qemu || process.cmdline.is_empty() || !Path::new(&path).starts_with(&cgroup.pod) {
            continue;
        }
        let resident = resident(&process.pid.to_string());
        if resident.rss_kib == 0 {
            anyhow::bail!("no memory figures for {} (pid {})", process.program, process.pid);
        }
        sums.pod.rss_kib += resident.rss_kib;
        sums.pod.pss_kib += resident.pss_kib;
        sums.pod.anon_kib += resident.anon_kib;
        if Path::new(&path) == cgroup.container {
            sums.compute.rss_kib += resident.rss_kib;
            sums.compute.pss_kib += resident.pss_kib;
            sums.compute.anon_kib += resident.anon_kib;
            sums.compute_programs.push(process.program);
        }
    }
    sums.compute_programs.sort();
    for program in ["virt-launcher", "libvirtd"] {
        if !sums.compute_programs.iter().any(|p| p == program) {
            anyhow::bail!(
                "no {program} beside QEMU {qemu} in its container: {:?}",
                sums.compute_programs
            );
        }
    }
    Ok(sums)
}

/// The median of `values` (the mean of the middle two for an even count); `None` for none.
fn median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    let middle = values.len() / 2;
    match values.len() {
        0 => None,
        n if n % 2 == 1 => values.get(middle).copied(),
        _ => Some((values.get(middle - 1)? + values.get(middle)?) / 2),
    }
}

/// The per-VM measure for the pods of `running`: private (anonymous) memory, PSS and RSS summed
/// over every process of a launcher pod but QEMU, the median over the pods. The goal is on the
/// private memory, what each VM adds to the node; RSS and PSS count mapped file pages, which the
/// pods share through the page cache, and are shown without one.
fn per_vm_rows(running: &[String], out: &mut String) -> anyhow::Result<()> {
    let mut pods = Vec::new();
    for name in running {
        let qemu = node_processes::qemu_of(name)
            .with_context(|| format!("no QEMU for {name}"))?
            .pid;
        pods.push(pod_resident(qemu)?);
    }
    let programs = pods.first().map(|p| p.compute_programs.join(", ")).unwrap_or_default();
    let median_of =
        |field: fn(&PodResident) -> u64| median(pods.iter().map(field).collect()).context("no launcher pod to measure");
    let private = median_of(|p| p.compute.anon_kib)?;
    let pss = median_of(|p| p.compute.pss_kib)?;
    let rss = median_of(|p| p.compute.rss_kib)?;
    let met = |kib: u64, goal_mib: u64| if kib <= goal_mib * 1024 { "yes" } else { "**no**" };
    let _ = writeln!(
        out,
        "**Per-VM infrastructure memory in a launcher pod** (uid 107, session-mode libvirtd; the median over the {} pods running at once, whose shared pages PSS splits between them)\n\n| what | measured | goal | met |\n|---|---|---|---|",
        pods.len()
    );
    let _ = writeln!(
        out,
        "| **private memory**: the anonymous pages of the compute container's processes but QEMU ({programs}) | {} | ≤ 25 MiB | {} |",
        mib(private),
        met(private, 25)
    );
    let _ = writeln!(
        out,
        "| PSS: the same processes (mapped pages, shared split) | {} |  |  |",
        mib(pss)
    );
    let _ = writeln!(
        out,
        "| RSS: the same processes (mapped pages, shared counted in full) | {} |  |  |",
        mib(rss)
    );
    let _ = writeln!(
        out,
        "| the whole pod but QEMU (with pause and the containerDisk sidecars): private / PSS / RSS | {} / {} / {} |  |  |\n",
        mib(median_of(|p| p.pod.anon_kib)?),
        mib(median_of(|p| p.pod.pss_kib)?),
        mib(median_of(|p| p.pod.rss_kib)?)
    );
    Ok(())
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
    let (usage, anon, cache) = PodCgroup::of(qemu)?.usage_anon_cache()?;
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
    per_vm_rows(running, &mut out)?;
    Ok(out)
}
