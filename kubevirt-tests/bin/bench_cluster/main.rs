//! kubevirt-rs on the test cluster (`make cluster`): how long a VMI takes from `kubectl create` to
//! Running, split into the control plane, the pod's start and the domain's start, for VMIs
//! started one after another and all at once; the API requests a start costs, from the API
//! server's audit log; the memory of the components and of a launcher pod. Writes the `cluster`
//! section of BENCHMARKS.md.
//!
//! Many small VMIs at once ([`density`]) and live migration between the two nodes
//! ([`migration`]) are measured too.
//!
//! bench-cluster --kubectl PATH [--runs 10] [--cluster-dir DIR] [--build-seconds N]
//!     [--cold-cluster-seconds N] [--warm-cluster-seconds N] [--migration-runs 5]
//!     [--migration-baseline FILE] [--density 10,50] [--launcher PATH] [--local-runs 3]
//!     [--output BENCHMARKS.md]

mod audit;
mod density;
mod domain_start;
mod launcher_pod;
mod memory;
mod migration;
mod pod_start;
mod watch;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use k8s_openapi::apimachinery::pkg::version::Info;
use kube::config::{KubeConfigOptions, Kubeconfig};

use crate::watch::PhaseWatch;

struct Args {
    kubectl: PathBuf,
    runs: usize,
    cluster_dir: PathBuf,
    build_seconds: Option<u64>,
    cold_cluster_seconds: Option<u64>,
    warm_cluster_seconds: Option<u64>,
    migration_runs: usize,
    migration_baseline: Option<PathBuf>,
    density: Vec<usize>,
    /// The release launcher, run locally for the host-side start the cluster's is set against.
    launcher: PathBuf,
    local_runs: usize,
    output: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        kubectl: PathBuf::new(),
        runs: 10,
        cluster_dir: PathBuf::from("/var/lib/kubevirt-rs/cluster"),
        build_seconds: None,
        cold_cluster_seconds: None,
        warm_cluster_seconds: None,
        migration_runs: 5,
        migration_baseline: None,
        density: vec![10, 50],
        launcher: kubevirt_tests::repo_root().join("target/release/virt-launcher"),
        local_runs: 3,
        output: PathBuf::from("BENCHMARKS.md"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--kubectl" => args.kubectl = value.into(),
            "--runs" => args.runs = value.parse().context("--runs")?,
            "--cluster-dir" => args.cluster_dir = value.into(),
            "--build-seconds" => args.build_seconds = Some(value.parse().context("--build-seconds")?),
            "--cold-cluster-seconds" => {
                args.cold_cluster_seconds = Some(value.parse().context("--cold-cluster-seconds")?);
            }
            "--warm-cluster-seconds" => {
                args.warm_cluster_seconds = Some(value.parse().context("--warm-cluster-seconds")?);
            }
            "--migration-runs" => args.migration_runs = value.parse().context("--migration-runs")?,
            "--migration-baseline" => args.migration_baseline = Some(value.into()),
            "--density" => {
                args.density = value
                    .split(',')
                    .map(|n| {
                        n.trim()
                            .parse::<usize>()
                            .with_context(|| format!("--density: {n:?} is not a count"))
                    })
                    .collect::<anyhow::Result<_>>()?;
                if args.density.contains(&0) {
                    bail!("--density: a count must be at least 1");
                }
            }
            "--launcher" => args.launcher = value.into(),
            "--local-runs" => args.local_runs = value.parse().context("--local-runs")?,
            "--output" => args.output = value.into(),
            other => bail!("unknown flag {other}"),
        }
    }
    if args.kubectl.as_os_str().is_empty() {
        bail!("--kubectl is required");
    }
    if args.local_runs == 0 {
        bail!("--local-runs: at least one local start is needed to compare with");
    }
    if !args.launcher.is_file() {
        bail!(
            "--launcher: {} does not exist (build it: cargo build --release -p virt-launcher)",
            args.launcher.display()
        );
    }
    Ok(args)
}

/// kubectl against the test cluster.
struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        let mut child = Command::new(&self.binary)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("kubectl")?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut pipe, text.as_bytes()).context("kubectl stdin")?;
        }
        drop(child.stdin.take());
        let output = child.wait_with_output().context("kubectl")?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The test guest VMI named `name`.
fn vmi_manifest(name: &str) -> anyhow::Result<String> {
    let path = kubevirt_tests::repo_root().join("manifests/examples/vmi-testguest.yaml");
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    Ok(text.replace("  name: testguest\n", &format!("  name: {name}\n")))
}

fn since(from: SystemTime, to: SystemTime) -> Duration {
    to.duration_since(from).unwrap_or_default()
}

/// One VMI's start, split.
#[derive(Clone, Copy, Debug, Default)]
struct Start {
    total: Duration,
    control_plane: Duration,
    pod_start: Duration,
    domain_start: Duration,
    domain_split: domain_start::DomainSplit,
    guest_boot: Duration,
}

/// The guest's uptime at its marker (its own boot), from the serial log on its node. Ten guests
/// booting at once under TCG on two cores take a while to reach it.
fn guest_boot(cluster_dir: &Path, vmi_uid: &str) -> anyhow::Result<Duration> {
    for _ in 0..1200 {
        let nodes = std::fs::read_dir(cluster_dir.join("nodes")).context("nodes dir")?;
        let pods_dirs: Vec<PathBuf> = nodes
            .filter_map(Result::ok)
            .map(|n| n.path().join("kubelet/pods"))
            .collect();
        let pods = pods_dirs.iter().filter_map(|d| std::fs::read_dir(d).ok()).flatten();
        for pod in pods.filter_map(Result::ok) {
            let log = pod
                .path()
                .join("volumes/kubernetes.io~empty-dir/private")
                .join(vmi_uid)
                .join("virt-serial0-log");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(uptime) = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("KUBEVIRT-RS-GUEST-UPTIME "))
                .and_then(|s| s.trim().parse::<f64>().ok())
            {
                return Ok(Duration::from_secs_f64(uptime));
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    bail!("no guest marker in the serial log of VMI {vmi_uid}")
}

fn start_of(kubectl: &Kubectl, watch: &PhaseWatch, cluster_dir: &Path, name: &str) -> anyhow::Result<Start> {
    let created = watch.when(name, "").context("created")?;
    let running = watch.when(name, "Running").context("Running")?;
    let uid = watch.uid(name).context("uid")?;
    let scheduled = watch.pod_bound(&uid).context("the launcher pod bound to a node")?;
    let times = domain_start::launcher_times(kubectl, &uid)?;
    let ready = times.serving;
    Ok(Start {
        total: since(created, running),
        control_plane: since(created, scheduled),
        pod_start: since(scheduled, ready),
        domain_start: since(ready, running),
        domain_split: domain_start::split(watch, name, &times)?,
        guest_boot: guest_boot(cluster_dir, &uid)?,
    })
}

fn delete_all(kubectl: &Kubectl, names: &[String]) -> anyhow::Result<()> {
    let mut args = vec!["delete", "vmi", "--timeout=180s"];
    args.extend(names.iter().map(String::as_str));
    kubectl.run(&args, None)?;
    Ok(())
}

fn stats(values: &[Duration]) -> (Duration, Duration) {
    let mut sorted = values.to_vec();
    sorted.sort();
    let p50 = sorted.get(sorted.len() / 2).copied().unwrap_or_default();
    (p50, sorted.last().copied().unwrap_or_default())
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

fn table_row(out: &mut String, label: &str, starts: &[Start], pick: fn(&Start) -> Duration) {
    let values: Vec<Duration> = starts.iter().map(pick).collect();
    let (p50, max) = stats(&values);
    let _ = writeln!(out, "| {label} | {} | {} |", ms(p50), ms(max));
}

fn start_table(title: &str, starts: &[Start]) -> String {
    let mut out = format!(
        "**{title}** ({} VMIs)\n\n| span | p50 | max |\n|---|---|---|\n",
        starts.len()
    );
    table_row(&mut out, "created -> Running", starts, |s| s.total);
    table_row(
        &mut out,
        "control plane: created -> launcher pod scheduled",
        starts,
        |s| s.control_plane,
    );
    table_row(&mut out, "pod start: pod scheduled -> launcher serving", starts, |s| {
        s.pod_start
    });
    table_row(&mut out, "domain start: launcher serving -> Running", starts, |s| {
        s.domain_start
    });
    table_row(
        &mut out,
        "the guest's own boot (kernel to its marker, its uptime)",
        starts,
        |s| s.guest_boot,
    );
    out.push('\n');
    out
}

/// `/version` from the API server the kubeconfig names.
async fn apiserver_version(kubeconfig: &Path) -> anyhow::Result<Info> {
    let file = Kubeconfig::read_from(kubeconfig).with_context(|| format!("read {}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .with_context(|| format!("load {}", kubeconfig.display()))?;
    let client = kube::Client::try_from(config).context("a client for the test cluster's API server")?;
    client
        .apiserver_version()
        .await
        .context("ask the test cluster's API server its version (GET /version)")
}

/// The cluster's Kubernetes version as its API server reports it: `gitVersion` without its `v`.
fn kubernetes_version(kubeconfig: &Path) -> anyhow::Result<String> {
    rustls::crypto::ring::default_provider().install_default().ok();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("a runtime to ask the API server its version")?;
    let info = runtime.block_on(apiserver_version(kubeconfig))?;
    let version = info.git_version.strip_prefix('v').unwrap_or(&info.git_version);
    if version.is_empty() {
        bail!("the test cluster's API server reports no gitVersion");
    }
    Ok(version.to_owned())
}

/// The section's title and what it was measured on.
fn heading(kubernetes_version: &str) -> String {
    format!(
        "## kubevirt-rs on a real Kubernetes (make cluster)\n\nMeasured by `bench-cluster` on the test cluster \
         (Kubernetes {kubernetes_version} built from upstream, two nodes, containerd, guests under TCG) with the \
         release images, {}.\n\n",
        kubevirt_tests::machine_description()
    )
}

fn run(args: &Args) -> anyhow::Result<String> {
    let kubectl = Kubectl {
        binary: args.kubectl.clone(),
        kubeconfig: args.cluster_dir.join("admin.kubeconfig"),
    };
    kubectl
        .run(&["get", "--raw", "/readyz"], None)
        .context("no test cluster: run make cluster")?;
    let version = kubernetes_version(&kubectl.kubeconfig)?;
    let watch = PhaseWatch::start(&kubectl.binary, &kubectl.kubeconfig)?;
    let timeout = Duration::from_secs(300);

    // One after another: each VMI starts alone, so its API requests can be told apart.
    let mut sequential = Vec::new();
    let mut requests = audit::Counts::new();
    let audit_log = args.cluster_dir.join("audit/audit.log");
    let sequential_names: Vec<String> = (0..args.runs).map(|i| format!("bench-seq-{i}")).collect();
    for name in &sequential_names {
        kubectl.run(&["create", "-f", "-"], Some(&vmi_manifest(name)?))?;
        watch.wait_running(std::slice::from_ref(name), timeout)?;
        let start = start_of(&kubectl, &watch, &args.cluster_dir, name)?;
        sequential.push(start);
        // The audit log is written as requests complete: give the last ones a moment.
        std::thread::sleep(Duration::from_secs(2));
        let created = watch.when(name, "").context("created")?;
        let running = watch.when(name, "Running").context("running")?;
        for (key, n) in audit::count(
            &audit_log,
            created - Duration::from_millis(500),
            running + Duration::from_secs(1),
        )? {
            *requests.entry(key).or_default() += n;
        }
    }
    let launcher_pods = launcher_pod::launcher_pod_starts(&kubectl, &watch, &args.cluster_dir, &sequential_names)?;
    delete_all(&kubectl, &sequential_names)?;
    // With none of the cluster's guests running, as the sequential starts had none before them.
    let local_starts = domain_start::local_starts(&args.launcher, args.local_runs)?;
    let floor = launcher_pod::floor(&kubectl, &watch, &launcher_pods.shape, args.runs)?;

    // All at once.
    let together: Vec<String> = (0..args.runs).map(|i| format!("bench-par-{i}")).collect();
    let all: Vec<String> = together
        .iter()
        .map(|n| vmi_manifest(n))
        .collect::<anyhow::Result<_>>()?;
    kubectl.run(&["create", "-f", "-"], Some(&all.join("\n---\n")))?;
    watch.wait_running(&together, timeout)?;
    let concurrent: Vec<Start> = together
        .iter()
        .map(|n| start_of(&kubectl, &watch, &args.cluster_dir, n))
        .collect::<anyhow::Result<_>>()?;

    // Memory, with this many VMIs running.
    let memory = memory::report(&together)?;
    delete_all(&kubectl, &together)?;
    let density = density::report(&kubectl, &watch, &args.cluster_dir, &args.density);
    let migration = migration::report(
        &kubectl,
        &args.cluster_dir,
        args.migration_runs,
        args.migration_baseline.as_deref(),
    )?;

    let mut out = heading(&version);
    out.push_str(&start_table("VMI created -> Running, one after another", &sequential));
    let splits: Vec<_> = sequential.iter().map(|s| s.domain_split).collect();
    let serving_to_running: Vec<_> = sequential.iter().map(|s| s.domain_start).collect();
    out.push_str(&domain_start::table(&splits, &serving_to_running, &local_starts));
    out.push_str(&launcher_pod::pod_start_table(&launcher_pods, &floor));
    out.push_str(&start_table("VMI created -> Running, all created at once", &concurrent));
    out.push_str(&requests_table(&requests, args.runs));
    out.push_str(&memory);
    out.push_str(&density);
    out.push_str(&migration);
    out.push_str(&times_table(args));
    Ok(out)
}

fn requests_table(requests: &audit::Counts, runs: usize) -> String {
    let mut out = String::from(
        "**API requests per VMI start** (the API server's audit log, between the VMI's creation and Running, by kubevirt-rs components about the namespace's VMIs, pods and events; average over the sequential starts)\n\n| component | request | per start |\n|---|---|---|\n",
    );
    let (mut objects, mut events) = (0.0, 0.0);
    let runs_f = f64::from(u32::try_from(runs.max(1)).unwrap_or(1));
    for ((component, request), count) in requests {
        let per = f64::from(u32::try_from(*count).unwrap_or(u32::MAX)) / runs_f;
        let is_write = !request.starts_with("get ") && !request.starts_with("list ");
        match (is_write, request.ends_with(" events")) {
            (true, true) => events += per,
            (true, false) => objects += per,
            (false, _) => {}
        }
        let _ = writeln!(out, "| {component} | {request} | {per:.1} |");
    }
    let _ = writeln!(
        out,
        "| all | **object writes** (create, update, patch, delete of VMIs and pods) | **{objects:.1}** |\n\
         | all | events recorded | {events:.1} |\n\n\
         Upstream reference (not measured here): about 19 PUTs per VMI start in upstream KubeVirt, a figure \
         quoted by upstream, not reproduced here.\n"
    );
    out
}

fn times_table(args: &Args) -> String {
    let show = |value: Option<u64>| value.map_or_else(|| "not measured".to_owned(), |s| format!("{s} s"));
    format!(
        "**Times**\n\n| what | time |\n|---|---|\n| cold build of the Kubernetes binaries and etcd (empty Go build cache) | {} |\n| cold `make cluster` (no cluster binaries, empty Go build cache; images built) | {} |\n| warm `make cluster` (everything cached, no cluster running) | {} |\n\n",
        show(args.build_seconds),
        show(args.cold_cluster_seconds),
        show(args.warm_cluster_seconds)
    )
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let section = run(&args)?;
    print!("{section}");
    kubevirt_tests::replace_markdown_section(&args.output, "cluster", &section)
        .with_context(|| format!("write {}", args.output.display()))?;
    Ok(())
}
