//! Density, as upstream's performance suite measures it: many small VMIs created at once across
//! the nodes. For each count, created -> Running (p50, p95, max), the object writes kubevirt-rs
//! made for them (the API server's audit log), where they ran, and the resident memory of
//! virt-api, virt-controller and virt-handler before the VMIs were created and once all ran.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use kubevirt_tests::node_processes;
use kubevirt_tests::process_memory::resident;

use crate::watch::PhaseWatch;
use crate::{Kubectl, audit, ms, since};

/// The least memory the test guest boots in (80 MiB does not reach its marker; 96 MiB does).
const GUEST_MEMORY: &str = "96Mi";
/// Each VMI's CPU request. Upstream's default (one vCPU over a `cpuAllocationRatio` of 10, 100m)
/// would let about 35 VMIs fit on the two nodes' four CPUs next to the cluster's own pods.
const CPU_REQUEST: &str = "10m";
const LABEL: &str = "kubevirt-rs.io/bench-density";
const COMPONENTS: [&str; 3] = ["virt-api", "virt-controller", "virt-handler"];

/// The test guest VMI named `name`, as small as it boots.
fn small_vmi(name: &str) -> anyhow::Result<String> {
    let text = crate::vmi_manifest(name)?;
    let text = text.replace("256Mi", GUEST_MEMORY).replace(
        "    app: testguest\n",
        &format!("    app: testguest\n    {LABEL}: \"true\"\n"),
    );
    let requests = format!("      requests:\n        cpu: {CPU_REQUEST}\n");
    let with_cpu = text.replacen("      requests:\n", &requests, 1);
    anyhow::ensure!(
        with_cpu != text && text.contains(GUEST_MEMORY) && text.contains(LABEL),
        "manifests/examples/vmi-testguest.yaml no longer has the memory and requests this bench resizes"
    );
    Ok(with_cpu)
}

/// Resident memory of each component's processes, summed over its processes on the nodes, in KiB.
fn components_kib() -> BTreeMap<&'static str, u64> {
    COMPONENTS
        .iter()
        .map(|component| {
            let kib = node_processes::of_program(component)
                .iter()
                .map(|p| resident(&p.pid.to_string()).rss_kib)
                .sum();
            (*component, kib)
        })
        .collect()
}

/// One density run.
struct Run {
    count: usize,
    starts: Vec<Duration>,
    writes: usize,
    per_node: BTreeMap<String, usize>,
    before: BTreeMap<&'static str, u64>,
    after: BTreeMap<&'static str, u64>,
}

fn percentile(sorted: &[Duration], percent: usize) -> Duration {
    let index = (sorted.len() * percent).div_ceil(100).saturating_sub(1);
    sorted.get(index).copied().unwrap_or_default()
}

fn measure(kubectl: &Kubectl, watch: &PhaseWatch, audit_log: &Path, count: usize) -> anyhow::Result<Run> {
    let names: Vec<String> = (0..count).map(|i| format!("bench-density-{count}-{i}")).collect();
    let manifests: Vec<String> = names.iter().map(|n| small_vmi(n)).collect::<anyhow::Result<_>>()?;
    let before = components_kib();
    let asked = SystemTime::now();
    kubectl.run(&["create", "-f", "-"], Some(&manifests.join("\n---\n")))?;
    if let Err(error) = watch.wait_running(&names, Duration::from_secs(900)) {
        return Err(error.context(not_running(kubectl)));
    }
    let mut starts = Vec::new();
    let mut last_running = asked;
    for name in &names {
        let created = watch.when(name, "").context("created")?;
        let running = watch.when(name, "Running").context("Running")?;
        last_running = last_running.max(running);
        starts.push(since(created, running));
    }
    starts.sort();
    let after = components_kib();
    let mut per_node = BTreeMap::new();
    let list: serde_json::Value = serde_json::from_str(&kubectl.run(&["get", "vmi", "-l", LABEL, "-o", "json"], None)?)
        .context("the VMIs' JSON")?;
    for vmi in list["items"].as_array().into_iter().flatten() {
        let node = vmi["status"]["nodeName"].as_str().unwrap_or("none").to_owned();
        *per_node.entry(node).or_default() += 1;
    }
    // The audit log is written as requests complete: give the last ones a moment.
    std::thread::sleep(Duration::from_secs(2));
    let writes = audit::count(
        audit_log,
        asked - Duration::from_millis(500),
        last_running + Duration::from_secs(1),
    )?
    .iter()
    .filter(|((_, request), _)| {
        !request.starts_with("get ") && !request.starts_with("list ") && !request.ends_with(" events")
    })
    .map(|(_, n)| n)
    .sum();
    // Fifty guests going down together take a while on two cores.
    kubectl.run(&["delete", "vmi", "-l", LABEL, "--timeout=900s"], None)?;
    Ok(Run {
        count,
        starts,
        writes,
        per_node,
        before,
        after,
    })
}

/// The phase and reason of each VMI of the run that is not Running.
fn not_running(kubectl: &Kubectl) -> String {
    let Ok(text) = kubectl.run(&["get", "vmi", "-l", LABEL, "-o", "json"], None) else {
        return "the VMIs could not be listed".to_owned();
    };
    let list: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let lines: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["status"]["phase"] != "Running")
        .map(|v| {
            format!(
                "{}: {} {}",
                v["metadata"]["name"].as_str().unwrap_or_default(),
                v["status"]["phase"].as_str().unwrap_or("no phase"),
                v["status"]["reason"].as_str().unwrap_or_default()
            )
        })
        .collect();
    format!("not Running: {}", lines.join(", "))
}

/// `n` as a float; counts here are far below `u32::MAX`.
fn float(n: u64) -> f64 {
    f64::from(u32::try_from(n).unwrap_or(u32::MAX))
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", float(kib) / 1024.0)
}

fn growth(small: Duration, large: Duration) -> String {
    if small.is_zero() {
        return "-".to_owned();
    }
    format!("{:.1}x", large.as_secs_f64() / small.as_secs_f64())
}

/// Runs each of `counts` (e.g. 10 then 50) and writes their table.
pub fn report(kubectl: &Kubectl, watch: &PhaseWatch, cluster_dir: &Path, counts: &[usize]) -> String {
    let audit_log = cluster_dir.join("audit/audit.log");
    let (mut runs, mut failures) = (Vec::new(), Vec::new());
    for count in counts {
        match measure(kubectl, watch, &audit_log, *count) {
            Ok(run) => runs.push(run),
            // Reported in the section, not dropped: the other figures still stand.
            Err(error) => {
                failures.push(format!("{count} VMIs at once: **failed**: {error:#}"));
                if let Err(e) = kubectl.run(&["delete", "vmi", "-l", LABEL, "--timeout=900s"], None) {
                    failures.push(format!("and its VMIs could not be deleted: {e:#}"));
                }
            }
        }
    }
    let mut out = format!(
        "**Density: small VMIs created at once** (the test guest with {GUEST_MEMORY}, the least it boots in, \
         and a CPU request of {CPU_REQUEST}; one `kubectl create` for all; percentiles are nearest-rank, so at 10 VMIs p95 \
         is the slowest)\n\n| figure |"
    );
    for run in &runs {
        let _ = write!(out, " {} VMIs |", run.count);
    }
    out.push_str(" growth |\n|---|");
    out.push_str(&"---|".repeat(runs.len() + 1));
    out.push('\n');
    // Growth compares the first count's run with the last's; with fewer than two, there is none.
    let (first, last) = match runs.as_slice() {
        [first, .., last] => (Some(first), Some(last)),
        _ => (None, None),
    };
    let mut row = |label: &str, cell: &dyn Fn(&Run) -> String, grow: String| {
        let _ = write!(out, "| {label} |");
        for run in &runs {
            let _ = write!(out, " {} |", cell(run));
        }
        let _ = writeln!(out, " {grow} |");
    };
    for (label, percent) in [("created -> Running p50", 50), ("p95", 95), ("max", 100)] {
        let grow = match (first, last) {
            (Some(a), Some(b)) => growth(percentile(&a.starts, percent), percentile(&b.starts, percent)),
            _ => "-".to_owned(),
        };
        row(label, &|r: &Run| ms(percentile(&r.starts, percent)), grow);
    }
    let per_vmi = |r: &Run| float(r.writes as u64) / float(r.count.max(1) as u64);
    row(
        "object writes by kubevirt-rs (VMIs and pods; per VMI)",
        &|r: &Run| format!("{} ({:.1})", r.writes, per_vmi(r)),
        match (first, last) {
            (Some(a), Some(b)) => format!("{:.2}x per VMI", per_vmi(b) / per_vmi(a).max(f64::MIN_POSITIVE)),
            _ => "-".to_owned(),
        },
    );
    row(
        "VMIs per node",
        &|r: &Run| {
            r.per_node
                .iter()
                .map(|(node, n)| format!("{node}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        },
        String::new(),
    );
    for component in COMPONENTS {
        let kib = |when: &BTreeMap<&'static str, u64>| when.get(component).copied().unwrap_or(0);
        row(
            &format!("{component} resident (all its processes), before -> with the VMIs running"),
            &|r: &Run| format!("{} -> {}", mib(kib(&r.before)), mib(kib(&r.after))),
            match (first, last) {
                (Some(a), Some(b)) => {
                    let grown = |r: &Run| kib(&r.after).saturating_sub(kib(&r.before));
                    format!(
                        "+{} at {} against +{} at {}",
                        mib(grown(b)),
                        b.count,
                        mib(grown(a)),
                        a.count
                    )
                }
                _ => "-".to_owned(),
            },
        );
    }
    for failure in &failures {
        let _ = writeln!(out, "\n{failure}");
    }
    out.push('\n');
    out
}
