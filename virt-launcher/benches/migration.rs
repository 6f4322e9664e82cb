//! Live-migration time and guest downtime of the test guest, kubevirt-rs against libvirt itself,
//! in the same run and on the same rig: two network namespaces as nodes, an unprivileged launcher
//! pod on each (the test's rig, `tests/cluster_run/migration_rig.rs`).
//!
//! - **kubevirt-rs**: `MigrateVirtualMachine` to the source launcher; the migration goes through
//!   the pods' unix sockets and virt-handler's proxies (TCP between the nodes), watched by the
//!   launcher's monitor. Timed from the request to the launcher reporting it completed.
//! - **libvirt (the floor)**: `virsh migrate --live --p2p --persistent --copy-storage-inc` between
//!   the same two launchers' libvirt daemons, straight over TCP between the nodes. Timed as the
//!   `virsh` process.
//!
//! Downtime is the largest gap between two ticks of the guest's 10 ms ticker, as the host sees
//! them appear in the source's and then the target's serial log (read every millisecond). Both are
//! measured idle and under a load rewriting 64 MiB (`kubevirt_rs.dirty`, with auto-converge).
//! Writes a markdown section to `--body` for `bench-report --body-file`.
//!
//! cargo bench -p virt-launcher --bench migration -- [--runs 3] [--body FILE] [--baseline FILE]
//!
//! `--baseline` also writes libvirt's medians as JSON, which `bench-cluster` compares the real
//! cluster's migrations with.
//! (the body goes to the workspace's `target/bench-migration.md` by default)

#[allow(dead_code, reason = "shared with the tests, which use more of it")]
#[path = "../tests/cluster_run/fixture.rs"]
mod fixture;
#[allow(dead_code, reason = "shared with the tests, which use more of it")]
#[path = "../tests/cluster_run/migration_rig.rs"]
mod migration_rig;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cmd_protocol::cmd::MigrationRequest;
use migration_rig::{Nodes, Pod, migration_over, ready_to_migrate_with, request};

/// Every tick the host saw, by counter, with when it first appeared.
#[derive(Default)]
struct Seen {
    ticks: std::collections::BTreeMap<u64, Instant>,
}

/// Reads the serial logs every millisecond, timestamping each new tick.
struct TickWatch {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TickWatch {
    fn start(logs: Vec<PathBuf>) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen_in, stop_in) = (seen.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut offsets = vec![0_usize; logs.len()];
            let mut pending = vec![String::new(); logs.len()];
            while !stop_in.load(Ordering::Relaxed) {
                for (index, log) in logs.iter().enumerate() {
                    let Ok(bytes) = std::fs::read(log) else { continue };
                    if bytes.len() <= offsets[index] {
                        continue;
                    }
                    let now = Instant::now();
                    pending[index].push_str(&String::from_utf8_lossy(&bytes[offsets[index]..]));
                    offsets[index] = bytes.len();
                    let text = std::mem::take(&mut pending[index]);
                    let (complete, rest) = text.rsplit_once('\n').unwrap_or(("", &text));
                    rest.clone_into(&mut pending[index]);
                    let mut seen = seen_in.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    for line in complete.lines() {
                        let counter = line
                            .trim()
                            .strip_prefix("KUBEVIRT-RS-TICK ")
                            .and_then(|t| t.split_whitespace().next())
                            .and_then(|n| n.parse::<u64>().ok());
                        if let Some(counter) = counter {
                            seen.ticks.entry(counter).or_insert(now);
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Self {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    /// The largest gap between consecutive ticks seen after `from`.
    fn largest_gap(&self, from: Instant) -> Duration {
        let seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let times: Vec<Instant> = seen.ticks.values().copied().filter(|t| *t >= from).collect();
        times
            .windows(2)
            .map(|w| w[1].saturating_duration_since(w[0]))
            .max()
            .unwrap_or_default()
    }

    fn ticks_after(&self, instant: Instant) -> usize {
        let seen = self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        seen.ticks.values().filter(|t| **t > instant).count()
    }
}

impl Drop for TickWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How one migration went.
#[derive(Clone, Copy)]
struct Sample {
    time: Duration,
    downtime: Duration,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    KubevirtRs,
    Virsh,
}

const UID: &str = "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9";

/// One migration of the ticking guest between the two nodes.
async fn migrate_once(root: &Path, nodes: &Nodes, way: Way, dirty: bool, run: usize) -> anyhow::Result<Sample> {
    let name = format!("bench-{run}");
    let args = if dirty {
        "kubevirt_rs.ticker kubevirt_rs.dirty"
    } else {
        "kubevirt_rs.ticker"
    };
    let (source, target, vmi, proxies) = ready_to_migrate_with(root, nodes, &name, UID, args).await;
    let watch = TickWatch::start(vec![source.serial_log(UID), target.serial_log(UID)]);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let begin = Instant::now();
    match way {
        Way::KubevirtRs => {
            let mut client = source.client().await;
            let options = serde_json::json!({
                "migrationUid": format!("bench-{run}"), "completionTimeoutPerGib": 150,
                "progressTimeoutSeconds": 150, "allowAutoConverge": dirty
            });
            client
                .migrate(MigrationRequest {
                    vmi: request(&vmi).vmi,
                    options: serde_json::to_vec(&options)?,
                })
                .await?;
            let over = migration_over(&mut client).await;
            anyhow::ensure!(over.completed, "the migration failed: {}", over.failure_reason);
        }
        Way::Virsh => virsh_migrate(&source, &target, nodes, &name, dirty).await?,
    }
    let time = begin.elapsed();
    let after = Instant::now();
    let deadline = after + Duration::from_secs(30);
    while watch.ticks_after(after) < 50 {
        anyhow::ensure!(Instant::now() < deadline, "the guest does not tick on the target");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let downtime = watch.largest_gap(begin);
    drop(watch);
    drop(proxies);
    stop(source);
    stop(target);
    Ok(Sample { time, downtime })
}

/// libvirt itself: peer to peer from the source's daemon to the target's, QEMU and the disk copy
/// straight over TCP to the target node.
async fn virsh_migrate(source: &Pod, target: &Pod, nodes: &Nodes, name: &str, dirty: bool) -> anyhow::Result<()> {
    let source_uri = format!("qemu+unix:///session?socket={}", source.libvirt_socket().display());
    let target_uri = format!("qemu+unix:///session?socket={}", target.libvirt_socket().display());
    let address = nodes.addresses[1];
    let mut command = tokio::process::Command::new("virsh");
    command
        .args([
            "-c",
            &source_uri,
            "migrate",
            "--live",
            "--p2p",
            "--persistent",
            "--copy-storage-inc",
        ])
        .args(["--migrateuri", &format!("tcp://{address}")])
        .args(["--disks-uri", &format!("tcp://{address}")]);
    if dirty {
        command.arg("--auto-converge");
    }
    let output = command.arg(format!("default_{name}")).arg(&target_uri).output().await?;
    anyhow::ensure!(
        output.status.success(),
        "virsh migrate failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(())
}

fn stop(pod: Pod) {
    let status = pod.stop();
    if !status.success() {
        eprintln!("bench-migration: a launcher exited with {status}");
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn ms(duration: Duration) -> String {
    format!("{} ms", duration.as_millis())
}

/// libvirt's own medians for one load, as the real cluster's benchmark compares against them.
fn baseline_entry(time: Duration, downtime: Duration) -> serde_json::Value {
    serde_json::json!({"timeMs": time.as_millis(), "downtimeMs": downtime.as_millis()})
}

/// The section's body, and libvirt's medians (`{"idle": …, "dirty": …}`) for `--baseline`.
async fn measure(runs: usize) -> anyhow::Result<(String, serde_json::Value)> {
    let nodes = Nodes::new(0);
    let mut body = String::from(
        "## Live migration of the test guest (TCG, two network namespaces as nodes)\n\n\
         kubevirt-rs (`MigrateVirtualMachine`, through the pods' unix sockets and virt-handler's \
         proxies) against libvirt itself (`virsh migrate --live --p2p --copy-storage-inc` between \
         the same daemons, straight over TCP), in the same run. Time: from the request to the end. \
         Downtime: the largest gap in the guest's 10 ms ticker as the host sees it. Medians of ",
    );
    let _ = writeln!(body, "{runs} runs each.\n");
    body.push_str(
        "| load | kubevirt-rs time | libvirt time | ratio (goal ≤ 1.2) | kubevirt-rs downtime | libvirt downtime | difference (goal ≤ +50 ms) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let mut run = 0;
    let mut baseline = serde_json::Map::new();
    for dirty in [false, true] {
        let mut samples = [Vec::new(), Vec::new()];
        for _ in 0..runs {
            for (index, way) in [Way::KubevirtRs, Way::Virsh].into_iter().enumerate() {
                let root = tempfile::tempdir()?;
                run += 1;
                let sample = migrate_once(root.path(), &nodes, way, dirty, run).await?;
                samples[index].push(sample);
            }
        }
        let time = |i: usize| median(samples[i].iter().map(|s| s.time).collect());
        let down = |i: usize| median(samples[i].iter().map(|s| s.downtime).collect());
        let ratio = time(0).as_secs_f64() / time(1).as_secs_f64().max(1e-9);
        let difference =
            i128::try_from(down(0).as_millis()).unwrap_or(0) - i128::try_from(down(1).as_millis()).unwrap_or(0);
        baseline.insert(
            if dirty { "dirty" } else { "idle" }.to_owned(),
            baseline_entry(time(1), down(1)),
        );
        let met = |ok: bool| if ok { "met" } else { "**not met**" };
        let _ = writeln!(
            body,
            "| {} | {} | {} | {ratio:.2} ({}) | {} | {} | {difference:+} ms ({}) |",
            if dirty {
                "rewriting 64 MiB, auto-converge"
            } else {
                "idle"
            },
            ms(time(0)),
            ms(time(1)),
            met(ratio <= 1.2),
            ms(down(0)),
            ms(down(1)),
            met(difference <= 50)
        );
    }
    Ok((body, serde_json::Value::Object(baseline)))
}

fn main() -> ExitCode {
    let mut runs = 3;
    // cargo runs a benchmark in its package's directory: the workspace's target directory.
    let mut body_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench-migration.md");
    let mut baseline_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // cargo bench passes it to every benchmark binary.
            "--bench" => {}
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).unwrap_or(runs),
            "--body" => body_file = args.next().map_or(body_file, PathBuf::from),
            "--baseline" => baseline_file = args.next().map(PathBuf::from),
            other => {
                eprintln!("bench-migration: unknown argument {other}");
                return ExitCode::FAILURE;
            }
        }
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bench-migration: needs root (network namespaces, pod mounts)");
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("bench-migration: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(measure(runs)) {
        Ok((body, baseline)) => {
            print!("{body}");
            if let Err(e) = std::fs::write(&body_file, &body) {
                eprintln!("bench-migration: cannot write {}: {e}", body_file.display());
                return ExitCode::FAILURE;
            }
            if let Some(path) = baseline_file
                && let Err(e) = std::fs::write(&path, baseline.to_string())
            {
                eprintln!("bench-migration: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bench-migration: {e:#}");
            ExitCode::FAILURE
        }
    }
}
