//! What the benchmarks read of a process's memory from `/proc/<pid>/smaps_rollup` and
//! `/proc/<pid>/smaps`, in KiB.

use std::path::Path;

/// `Rss`, `Pss` and `Anonymous` of a process (`pid` is a number or `self`). RSS counts every
/// shared-library page in full in every process that maps it; PSS splits shared pages between
/// those processes. Anonymous pages (heap, stacks, pages copied on write) are the process's own:
/// what it adds to the node, where its file pages are shared through the page cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resident {
    /// Resident set size.
    pub rss_kib: u64,
    /// Proportional set size.
    pub pss_kib: u64,
    /// Resident pages mapped from no file.
    pub anon_kib: u64,
}

/// Reads [`Resident`] for `pid`; zeros where /proc cannot tell (the process is gone).
#[must_use]
pub fn resident(pid: &str) -> Resident {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
    Resident {
        rss_kib: field_kib(&text, "Rss:").unwrap_or(0),
        pss_kib: field_kib(&text, "Pss:").unwrap_or(0),
        anon_kib: field_kib(&text, "Anonymous:").unwrap_or(0),
    }
}

/// The value of a `Name:   123 kB` line of a smaps file.
#[must_use]
pub fn field_kib(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
}

/// A process's RSS split by where the pages are mapped from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RssBreakdown {
    /// The program's own executable file.
    pub executable_kib: u64,
    /// The C runtime every program maps: the dynamic loader, libc, libm, libgcc_s.
    pub c_runtime_kib: u64,
    /// Every other shared library (for the launcher: libvirt.so and what it loads).
    pub other_libraries_kib: u64,
    /// Everything not mapped from a file: heap, stacks, anonymous mappings, the vDSO.
    pub anonymous_kib: u64,
}

/// Libraries any dynamically linked Rust program maps, with or without libvirt.
const C_RUNTIME: [&str; 4] = ["ld-linux-x86-64.so", "libc.so", "libm.so", "libgcc_s.so"];

/// Splits `pid`'s RSS by mapping, reading `/proc/<pid>/smaps`; zeros when it is gone.
#[must_use]
pub fn rss_breakdown(pid: u32) -> RssBreakdown {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let executable = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
    breakdown_of(&smaps, &executable)
}

fn breakdown_of(smaps: &str, executable: &Path) -> RssBreakdown {
    let mut breakdown = RssBreakdown::default();
    let mut mapped_from = "";
    for line in smaps.lines() {
        if let Some(rss) = line.strip_prefix("Rss:") {
            let kib: u64 = rss.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            let bucket = if mapped_from.is_empty() || mapped_from.starts_with('[') {
                &mut breakdown.anonymous_kib
            } else if Path::new(mapped_from) == executable {
                &mut breakdown.executable_kib
            } else if C_RUNTIME.iter().any(|lib| file_name(mapped_from).starts_with(lib)) {
                &mut breakdown.c_runtime_kib
            } else {
                &mut breakdown.other_libraries_kib
            };
            *bucket += kib;
        } else if is_mapping_header(line) {
            // `start-end perms offset dev inode [path]`: the path is the sixth field, if any.
            mapped_from = line.split_whitespace().nth(5).unwrap_or("");
        }
    }
    breakdown
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A mapping's first line starts with its address range, `0123abcd-0123beef`.
fn is_mapping_header(line: &str) -> bool {
    line.split_whitespace()
        .next()
        .and_then(|range| range.split_once('-'))
        .is_some_and(|(start, end)| {
            !start.is_empty() && start.bytes().chain(end.bytes()).all(|b| b.is_ascii_hexdigit())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55b880413000-55b880590000 r--p 00000000 fe:00 6496731    /opt/bin/virt-launcher
Size:               1524 kB
Rss:                 692 kB
Anonymous:             0 kB
55b880d3a000-55b880d3e000 rw-p 00924000 fe:00 6496731    /opt/bin/virt-launcher
Rss:                  16 kB
55b8812a0000-55b8813a0000 rw-p 00000000 00:00 0          [heap]
Rss:                 648 kB
7f8a89e00000-7f8a89ec5000 r--p 00000000 fe:00 326305     /usr/lib/x86_64-linux-gnu/libcrypto.so.3
Rss:                 788 kB
7f8a8b800000-7f8a8b88f000 r--p 00000000 fe:00 15696111   /usr/lib/x86_64-linux-gnu/libvirt.so.0.9000.0
Rss:                 572 kB
7f8a8c000000-7f8a8c100000 r-xp 00028000 fe:00 100        /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                1464 kB
7f8a8d000000-7f8a8d004000 rw-p 00000000 00:00 0
Rss:                  12 kB
7ffd1000-7ffd2000 r-xp 00000000 00:00 0                  [vdso]
Rss:                   4 kB
";

    #[test]
    fn pages_are_counted_by_the_file_they_are_mapped_from() {
        let breakdown = breakdown_of(SMAPS, Path::new("/opt/bin/virt-launcher"));
        assert_eq!(
            breakdown,
            RssBreakdown {
                executable_kib: 708,
                c_runtime_kib: 1464,
                other_libraries_kib: 1360,
                anonymous_kib: 664,
            }
        );
    }

    #[test]
    fn a_smaps_line_is_read_by_its_name() {
        assert_eq!(field_kib("Rss:  12 kB\nPss:   7 kB\n", "Pss:"), Some(7));
        assert_eq!(field_kib("Rss:  12 kB\n", "Pss:"), None);
    }
}
