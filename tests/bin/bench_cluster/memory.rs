//! Memory on the node: the resident memory of each kubevirt-rs component's process, and one
//! launcher pod's cgroup memory less its QEMU's (the pod's own cost: launcher, libvirtd,
//! virtlogd, the containerDisk sidecars, pause).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use kubevirt_tests::process_memory::{field_kib, resident};

/// Pids whose first argument's file name is `program`.
fn pids_of(program: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let first = cmdline.split(|b| *b == 0).next().unwrap_or_default();
            Path::new(&*String::from_utf8_lossy(first))
                .file_name()
                .is_some_and(|n| n == program)
        })
        .collect()
}

/// The QEMU of VMI `name`.
fn qemu_of(name: &str) -> Option<u32> {
    let needle = format!("guest=default_{name},");
    pids_of("qemu-system-x86_64").into_iter().find(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(&needle)
    })
}

/// The memory cgroup of the pod a process runs in (the parent of its container's cgroup).
fn pod_memory_cgroup(pid: u32) -> anyhow::Result<PathBuf> {
    let cgroups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).context("cgroup")?;
    let container = cgroups
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers.split(',').any(|c| c == "memory").then(|| path.to_owned())
        })
        .context("no memory cgroup")?;
    let pod = Path::new(&container).parent().context("no pod cgroup")?;
    Ok(Path::new("/sys/fs/cgroup/memory").join(pod.strip_prefix("/").unwrap_or(pod)))
}

fn mib(kib: u64) -> String {
    format!("{}.{} MiB", kib / 1024, kib % 1024 * 10 / 1024)
}

/// The memory part of the report, with the VMIs of `running` up.
pub fn report(running: &[String]) -> anyhow::Result<String> {
    let mut out = String::from("**Memory on the node**\n\n| what | resident |\n|---|---|\n");
    for component in ["virt-api", "virt-controller", "virt-handler"] {
        let pids = pids_of(component);
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
    let qemu = qemu_of(name).with_context(|| format!("no QEMU for {name}"))?;
    let qemu_rss = resident(&qemu.to_string()).rss_kib;
    let cgroup = pod_memory_cgroup(qemu)?;
    let usage = std::fs::read_to_string(cgroup.join("memory.usage_in_bytes"))
        .context("memory.usage_in_bytes")?
        .trim()
        .parse::<u64>()
        .context("usage")?
        / 1024;
    let stat = std::fs::read_to_string(cgroup.join("memory.stat")).context("memory.stat")?;
    let stat_kib = |key: &str| {
        stat.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
            / 1024
    };
    let anon = stat_kib("total_rss ");
    let cache = stat_kib("total_cache ");
    let qemu_anon = field_kib(
        &std::fs::read_to_string(format!("/proc/{qemu}/status")).unwrap_or_default(),
        "RssAnon:",
    )
    .unwrap_or(0);
    let _ = writeln!(
        out,
        "| one launcher pod's memory cgroup (memory.usage_in_bytes) | {} |",
        mib(usage)
    );
    let _ = writeln!(
        out,
        "| of which its QEMU (RSS; TCG, 256 MiB guest) | {} |",
        mib(qemu_rss)
    );
    let _ = writeln!(
        out,
        "| **the pod less its QEMU, anonymous memory** (cgroup total_rss {} less QEMU's RssAnon {}): launcher, libvirtd, virtlogd, sidecars, pause | **{}** |",
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
