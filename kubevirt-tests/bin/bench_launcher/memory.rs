//! The launcher benchmark's memory figures: the launcher's and its daemon's private (anonymous)
//! memory, RSS and PSS at the marker, where the launcher's pages come from, and the smallest
//! `virt`-crate client as a floor.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};
use kubevirt_tests::process_memory::{Resident, RssBreakdown, resident, rss_breakdown};

use super::{median, mib};

/// Memory of one run, read while its guest runs.
pub struct MemoryAtMarker {
    launcher: Resident,
    launcher_pages: RssBreakdown,
    libvirtd: Resident,
    bare_client: Resident,
}

/// Reads the launcher's and its daemon's memory and runs the smallest client against its libvirtd.
/// A virtlogd under the launcher fails the run: none should run.
pub fn memory_at_marker(client: &Path, launcher: u32, scratch: &Path) -> anyhow::Result<MemoryAtMarker> {
    let daemons = children_named(launcher, &["libvirtd", "virtlogd"]);
    let [libvirtd] = daemons.as_slice() else {
        bail!("expected one libvirtd and no virtlogd under the launcher, found {daemons:?}");
    };
    Ok(MemoryAtMarker {
        launcher: resident(&launcher.to_string()),
        launcher_pages: rss_breakdown(launcher),
        libvirtd: resident(&libvirtd.to_string()),
        bare_client: bare_client(client, scratch)?,
    })
}

/// Runs `bench-libvirt-client` against the launcher's private libvirtd (its socket is under the
/// runtime directory) and returns the client's memory once it is connected.
fn bare_client(client: &Path, runtime_dir: &Path) -> anyhow::Result<Resident> {
    let sockets: Vec<PathBuf> = std::fs::read_dir(runtime_dir)?
        .filter_map(Result::ok)
        .map(|vmi| vmi.path().join("l/sock/libvirt-sock"))
        .filter(|socket| socket.exists())
        .collect();
    let [socket] = sockets.as_slice() else {
        bail!(
            "expected one libvirtd socket under {}, found {sockets:?}",
            runtime_dir.display()
        );
    };
    let out = Command::new(client)
        .arg(format!("qemu+unix:///system?socket={}", socket.display()))
        .output()
        .with_context(|| format!("cannot run {}", client.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let value =
        |name: &str| -> Option<u64> { text.split_whitespace().find_map(|w| w.strip_prefix(name)?.parse().ok()) };
    match (out.status.success(), value("rss="), value("pss="), value("anon=")) {
        (true, Some(rss_kib), Some(pss_kib), Some(anon_kib)) => Ok(Resident {
            rss_kib,
            pss_kib,
            anon_kib,
        }),
        _ => bail!(
            "bench-libvirt-client failed: {}{}",
            text,
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

fn children_named(parent: u32, names: &[&str]) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let Some(close) = stat.rfind(')') else { return false };
            let comm = stat.find('(').map(|o| &stat[o + 1..close]).unwrap_or_default();
            let ppid: u32 = stat[close + 2..]
                .split(' ')
                .nth(1)
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            ppid == parent && names.contains(&comm)
        })
        .collect()
}

/// One figure of a run's memory, in KiB.
type MemoryField = fn(&MemoryAtMarker) -> u64;

/// The memory rows: the goal's private memory (anonymous pages) of the launcher and libvirtd, each
/// process's part of it, PSS and RSS beside it, the launcher's RSS and where its pages come from,
/// and the same sums with the smallest `virt`-crate client in the launcher's place.
pub fn memory_rows(all: &[&MemoryAtMarker], row: &mut impl FnMut(&str, String, &str, Option<bool>)) {
    let mem = |f: MemoryField| median(all.iter().map(|m| mib(f(m))).collect());
    let launcher_rss = mem(|m| m.launcher.rss_kib);
    let rss_but_qemu = mem(|m| m.launcher.rss_kib + m.libvirtd.rss_kib);
    let pss_but_qemu = mem(|m| m.launcher.pss_kib + m.libvirtd.pss_kib);
    let bare_rss = mem(|m| m.bare_client.rss_kib);
    let bare_total_rss = mem(|m| m.bare_client.rss_kib + m.libvirtd.rss_kib);
    let private_but_qemu = mem(|m| m.launcher.anon_kib + m.libvirtd.anon_kib);
    row(
        "**per-VM infrastructure private memory**: launcher + libvirtd anonymous pages (every process but QEMU)",
        format!("{private_but_qemu:.1} MiB"),
        "≤ 25 MiB",
        Some(private_but_qemu <= 25.0),
    );
    row(
        "&nbsp;&nbsp;launcher / libvirtd / smallest `virt`-crate client private memory",
        format!(
            "{:.1} / {:.1} / {:.1} MiB",
            mem(|m| m.launcher.anon_kib),
            mem(|m| m.libvirtd.anon_kib),
            mem(|m| m.bare_client.anon_kib)
        ),
        "",
        None,
    );
    row(
        "per-VM infrastructure PSS: launcher + libvirtd",
        format!("{pss_but_qemu:.1} MiB"),
        "(mapped pages, shared split)",
        None,
    );
    row(
        "per-VM infrastructure RSS: launcher + libvirtd",
        format!("{rss_but_qemu:.1} MiB"),
        "(mapped pages, shared counted in full)",
        None,
    );
    row("launcher RSS", format!("{launcher_rss:.1} MiB"), "", None);
    let parts: [(&str, MemoryField); 4] = [
        ("libvirt.so and the libraries it loads", |m| {
            m.launcher_pages.other_libraries_kib
        }),
        ("the virt-launcher executable", |m| m.launcher_pages.executable_kib),
        ("libc, libm, libgcc_s and the loader", |m| {
            m.launcher_pages.c_runtime_kib
        }),
        ("heap, stacks: pages not mapped from a file", |m| {
            m.launcher_pages.anonymous_kib
        }),
    ];
    for (part, kib) in parts {
        row(
            &format!("&nbsp;&nbsp;of which {part}"),
            format!("{:.1} MiB", mem(kib)),
            "",
            None,
        );
    }
    row(
        "smallest `virt`-crate client: connect, list domains (`bench-libvirt-client`)",
        format!("{bare_rss:.1} MiB"),
        "(floor under the `virt` crate)",
        None,
    );
    row(
        "libvirtd RSS",
        format!("{:.1} MiB", mem(|m| m.libvirtd.rss_kib)),
        "",
        None,
    );
    row(
        "smallest client + libvirtd RSS",
        format!("{bare_total_rss:.1} MiB"),
        "(floor under the `virt` crate)",
        None,
    );
    row(
        "launcher PSS",
        format!("{:.1} MiB", mem(|m| m.launcher.pss_kib)),
        "(shared pages split)",
        None,
    );
}

/// Why the goal is on private memory, why RSS and PSS differ so much for these processes, and what
/// the floor rows mean.
pub const RSS_NOTE: &str = "\nThe goal is on what a VM adds to its node: the anonymous pages (heap, stacks, pages \
     copied on write) of the launcher and its libvirtd. Their file pages (the executables, libvirt.so and the \
     libraries it loads) come from the page cache, charged once to a pod's memory cgroup and shared by every \
     launcher pod on the node, which runs the same image layers. RSS counts every mapped page in full in every \
     process that maps it, and PSS splits shared pages between the processes that map them: both move when a \
     process drops or maps clean file pages, which the node's memory does not (measured on the test cluster: \
     docs/launcher-performance.md), so they are shown without a goal. The launcher talks to libvirt through the \
     `virt` crate, so it links libvirt.so, and the loader maps it with its TLS, crypto, SSH, XML, ICU and GLib \
     libraries (about 50 of them) in the launcher and in libvirtd. No virtlogd runs: QEMU's stdio and the serial \
     log are written without it. The floor rows measure `bench-libvirt-client`, a program that does nothing but \
     connect to the same libvirtd through the `virt` crate and list its domains: what linking libvirt.so costs a \
     process.\n";

/// Upstream's per-VM figure, a reference beside the measurements, not one of them.
pub const UPSTREAM_REFERENCE: &str = "\nUpstream reference (not measured here): about 228 MiB of per-VM \
     infrastructure RSS in an upstream KubeVirt launcher pod, a figure quoted by upstream, not reproduced here.\n";
