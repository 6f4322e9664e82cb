//! Shared fixtures for the cross-component tests: where the repository's manifests are.

use std::path::{Path, PathBuf};

pub mod node_processes;
pub mod process_memory;
pub mod serial_tap;

/// The repository root.
#[must_use]
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The kubectl the test cluster's build makes (`cluster/build.sh`, which `make test` runs before
/// the tests), or `$KUBECTL`.
///
/// # Panics
/// When there is none, saying how to get one.
#[must_use]
pub fn kubectl_binary() -> PathBuf {
    let path = std::env::var_os("KUBECTL").map_or_else(
        || {
            let cache = std::env::var_os("KUBEVIRT_RS_CACHE").unwrap_or_else(|| "/var/cache/kubevirt-rs".into());
            Path::new(&cache).join("cluster/bin/kubectl")
        },
        PathBuf::from,
    );
    assert!(
        path.exists(),
        "no kubectl at {}: run cluster/build.sh (make test does) or set KUBECTL",
        path.display()
    );
    path
}

/// Every file under `manifests/examples/`, sorted.
#[must_use]
pub fn example_manifests() -> Vec<PathBuf> {
    let dir = repo_root().join("manifests/examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "yaml"));
    files.sort();
    files
}

/// Replaces the section `<!-- name:start -->` .. `<!-- name:end -->` of a markdown file (appending
/// it when absent), so each benchmark script owns one section of BENCHMARKS.md.
pub fn replace_markdown_section(path: &Path, name: &str, body: &str) -> std::io::Result<()> {
    let start = format!("<!-- {name}:start -->");
    let end = format!("<!-- {name}:end -->");
    let section = format!("{start}\n{body}{end}");
    let current = std::fs::read_to_string(path).unwrap_or_else(|_| {
        "# Benchmarks\n\nWritten by `make bench` (scripts/bench.sh); do not edit by hand.\n".to_owned()
    });
    let updated = match (current.find(&start), current.find(&end)) {
        (Some(s), Some(e)) if e > s => format!("{}{section}{}", &current[..s], &current[e + end.len()..]),
        _ => format!("{}\n\n{section}\n", current.trim_end()),
    };
    std::fs::write(path, updated)
}

/// "N cores, CPU model" of this machine, for benchmark reports.
#[must_use]
pub fn machine_description() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    format!("{cores} cores, {cpu}")
}

/// This process's resident memory (`VmRSS`), in KiB; 0 where /proc cannot tell.
#[must_use]
pub fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}
