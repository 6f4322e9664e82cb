//! Benchmarks `virt-launcher run` side by side with raw `qemu-system-x86_64` booting the same test
//! guest, interleaved in one run, and writes the `launcher` section of BENCHMARKS.md:
//!
//! - start to the guest's serial marker: raw QEMU, the launcher with a warm libvirt capabilities
//!   cache, and with a cold (empty) one;
//! - private (anonymous) memory, PSS and RSS of the launcher, and of launcher + libvirtd, at the
//!   marker, with where the launcher's pages come from, next to the smallest client the `virt`
//!   crate allows (`bench-libvirt-client`, run against the same daemon);
//! - SIGTERM to exit for a guest that powers off at once on ACPI.
//!
//! bench-launcher --launcher target/release/virt-launcher [--libvirt-client PATH] [--runs 5]
//!     [--output BENCHMARKS.md]
//!
//! `--libvirt-client` defaults to `bench-libvirt-client` next to this program.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use memory::{MemoryAtMarker, RSS_NOTE, UPSTREAM_REFERENCE, memory_at_marker, memory_rows};

mod breakdown;
mod memory;

const MARKER: &str = "KUBEVIRT-RS-GUEST-READY";
const TIMEOUT: Duration = Duration::from_secs(120);

struct Args {
    launcher: PathBuf,
    libvirt_client: PathBuf,
    runs: usize,
    output: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        launcher: PathBuf::new(),
        libvirt_client: std::env::current_exe()?.with_file_name("bench-libvirt-client"),
        runs: 5,
        output: PathBuf::from("BENCHMARKS.md"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--launcher" => args.launcher = value.into(),
            "--libvirt-client" => args.libvirt_client = value.into(),
            "--runs" => args.runs = value.parse().context("--runs")?,
            "--output" => args.output = value.into(),
            other => bail!("unknown flag {other}"),
        }
    }
    if args.launcher.as_os_str().is_empty() {
        bail!("usage: bench-launcher --launcher PATH [--libvirt-client PATH] [--runs N] [--output FILE]");
    }
    Ok(args)
}

/// Spawns `command` and returns when a stdout line contains the marker, with the time it took and
/// the guest's own uptime at that moment (from its `KUBEVIRT-RS-GUEST-UPTIME` line).
fn until_marker(mut command: Command) -> anyhow::Result<(Child, Duration, f64)> {
    let started = Instant::now();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("spawn")?;
    let stdout = child.stdout.take().context("stdout")?;
    let (seen, marker) = mpsc::channel();
    std::thread::spawn(move || {
        let mut uptime = f64::NAN;
        for line in BufReader::new(stdout).split(b'\n').map_while(Result::ok) {
            let line = String::from_utf8_lossy(&line);
            if let Some(value) = line.split("KUBEVIRT-RS-GUEST-UPTIME ").nth(1) {
                uptime = value.trim().parse().unwrap_or(f64::NAN);
            }
            if line.contains(MARKER) {
                let _ = seen.send(uptime);
            }
        }
    });
    let Ok(uptime) = marker.recv_timeout(TIMEOUT) else {
        let _ = child.kill();
        let _ = child.wait();
        bail!("no marker within {TIMEOUT:?}");
    };
    Ok((child, started.elapsed(), uptime))
}

fn signal(pid: u32, signal: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status();
}

struct GuestFiles {
    kernel: PathBuf,
    initrd: PathBuf,
    disk: PathBuf,
}

fn guest_files() -> anyhow::Result<GuestFiles> {
    let store = std::env::var("KUBEVIRT_RS_IMAGE_STORE").unwrap_or_else(|_| "/var/lib/kubevirt-rs/images".to_owned());
    let root = Path::new(&store).join("localhost/kubevirt-rs/testguest/latest");
    let files = GuestFiles {
        kernel: root.join("boot/vmlinuz"),
        initrd: root.join("boot/initrd.img"),
        disk: root.join("disk/testguest.qcow2"),
    };
    if !files.kernel.exists() {
        bail!("the test guest is missing: run `make guest`");
    }
    Ok(files)
}

fn raw_qemu(files: &GuestFiles, scratch: &Path) -> anyhow::Result<(Duration, f64)> {
    let overlay = scratch.join("raw-overlay.qcow2");
    let _ = std::fs::remove_file(&overlay);
    let status = Command::new("qemu-img")
        .args(["create", "-q", "-f", "qcow2", "-F", "qcow2", "-b"])
        .arg(&files.disk)
        .arg(&overlay)
        .status()?;
    if !status.success() {
        bail!("qemu-img failed");
    }
    let mut command = Command::new("qemu-system-x86_64");
    command
        .stderr(Stdio::null())
        .args([
            "-machine",
            "q35,accel=tcg",
            "-m",
            "256",
            "-smp",
            "1",
            "-nographic",
            "-nodefaults",
            "-no-reboot",
        ])
        .arg("-kernel")
        .arg(&files.kernel)
        .arg("-initrd")
        .arg(&files.initrd)
        .args(["-append", "console=ttyS0 quiet panic=-1", "-serial", "stdio"])
        .arg("-drive")
        .arg(format!("file={},if=virtio,format=qcow2", overlay.display()));
    let (mut child, elapsed, uptime) = until_marker(command)?;
    let _ = child.kill();
    let _ = child.wait();
    Ok((elapsed, uptime))
}

struct LauncherRun {
    to_marker: Duration,
    guest_uptime: f64,
    memory: MemoryAtMarker,
    stop: Duration,
}

fn launcher(args: &Args, manifest: &Path, cache: Option<&Path>, scratch: &Path) -> anyhow::Result<LauncherRun> {
    Ok(launcher_logged(args, manifest, cache, scratch, None)?.0)
}

/// A launcher run whose logs are kept for [`breakdown`]: libvirtd's in `logs/libvirtd.log`, the
/// launcher's stderr in `logs/launcher.log`.
struct Logged<'a> {
    logs: &'a Path,
}

fn launcher_logged(
    args: &Args,
    manifest: &Path,
    cache: Option<&Path>,
    scratch: &Path,
    logged: Option<&Logged<'_>>,
) -> anyhow::Result<(LauncherRun, Option<breakdown::Timeline>)> {
    let mut command = Command::new(&args.launcher);
    command
        .args(["run", "--force-emulation", "--vmi"])
        .arg(manifest)
        .arg("--runtime-dir")
        .arg(scratch);
    if let Some(cache) = cache {
        command.arg("--libvirt-cache-dir").arg(cache);
    }
    command.env("VIRT_LAUNCHER_LOG", "warn");
    let libvirt_log = logged.map(|l| l.logs.join("libvirtd.log"));
    let launcher_log = logged.map(|l| l.logs.join("launcher.log"));
    match (&libvirt_log, &launcher_log) {
        (Some(libvirt_log), Some(launcher_log)) => {
            let _ = std::fs::remove_file(libvirt_log);
            command
                .envs(breakdown::environment(libvirt_log))
                .stderr(std::fs::File::create(launcher_log)?);
        }
        _ => {
            command.stderr(Stdio::null());
        }
    }
    let spawned = breakdown::now();
    let (mut child, to_marker, guest_uptime) = until_marker(command)?;
    let pid = child.id();
    // Measured before the launcher is stopped, which happens whether or not this succeeds.
    let memory = memory_at_marker(&args.libvirt_client, pid, scratch);
    let asked = Instant::now();
    signal(pid, "TERM");
    let status = child.wait()?;
    let stop = asked.elapsed();
    if !status.success() {
        bail!("virt-launcher exited with {status}");
    }
    let timeline = match (libvirt_log, launcher_log) {
        (Some(libvirt_log), Some(launcher_log)) => Some(breakdown::Timeline {
            spawned,
            marker: spawned + to_marker.as_secs_f64(),
            guest_uptime,
            launcher_log: std::fs::read_to_string(&launcher_log)?,
            libvirt_log: std::fs::read_to_string(&libvirt_log)?,
        }),
        _ => None,
    };
    let run = LauncherRun {
        to_marker,
        guest_uptime,
        memory: memory?,
        stop,
    };
    Ok((run, timeline))
}

/// KiB to MiB; memory sizes here are far below f64's exact-integer range.
#[allow(clippy::cast_precision_loss, reason = "KiB counts of a few processes")]
fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The test guest with the device set of the raw QEMU command line: QEMU's default CPU model, no
/// SCSI hotplug controller, no balloon. Serial console, guest-agent channel and everything
/// libvirt adds stay.
fn matched_manifest(default: &Path, dir: &Path) -> anyhow::Result<PathBuf> {
    let text = std::fs::read_to_string(default)?;
    let text = text
        .replace("      cores: 1\n", "      cores: 1\n      model: qemu64\n")
        .replace(
            "      autoattachPodInterface: false\n",
            "      autoattachPodInterface: false\n      disableHotplug: true\n      autoattachMemBalloon: false\n",
        );
    let path = dir.join("vmi-testguest-matched.yaml");
    std::fs::write(&path, text)?;
    Ok(path)
}

struct Series {
    raw: Vec<(f64, f64)>,
    default: Vec<LauncherRun>,
    matched: Vec<LauncherRun>,
    cold: Vec<f64>,
    /// Phases of one more warm and one more cold start of the matched manifest, logged.
    warm_phases: Vec<(String, f64)>,
    cold_phases: Vec<(String, f64)>,
}

fn measure(args: &Args, files: &GuestFiles, default: &Path, matched: &Path, scratch: &Path) -> anyhow::Result<Series> {
    // Warm the persistent cache once so that "warm" really is warm.
    launcher(args, default, None, scratch)?;
    let mut series = Series {
        raw: Vec::new(),
        default: Vec::new(),
        matched: Vec::new(),
        cold: Vec::new(),
        warm_phases: Vec::new(),
        cold_phases: Vec::new(),
    };
    for run in 0..args.runs {
        let (raw, raw_uptime) = raw_qemu(files, scratch)?;
        series.raw.push((raw.as_secs_f64(), raw_uptime));
        series.matched.push(launcher(args, matched, None, scratch)?);
        series.default.push(launcher(args, default, None, scratch)?);
        if run < args.runs.min(3) {
            let empty_cache = tempfile::tempdir()?;
            series.cold.push(
                launcher(args, matched, Some(empty_cache.path()), scratch)?
                    .to_marker
                    .as_secs_f64(),
            );
        }
        eprintln!("bench-launcher: run {} of {} done", run + 1, args.runs);
    }
    let logs = tempfile::tempdir()?;
    let logged = Logged { logs: logs.path() };
    let phases = |cache: Option<&Path>| -> anyhow::Result<Vec<(String, f64)>> {
        let (_, timeline) = launcher_logged(args, matched, cache, scratch, Some(&logged))?;
        breakdown::phases(&timeline.context("a logged run keeps its logs")?)
    };
    series.warm_phases = phases(None).context("the warm start's phases")?;
    let empty_cache = tempfile::tempdir()?;
    series.cold_phases = phases(Some(empty_cache.path())).context("the cold start's phases")?;
    Ok(series)
}

fn report(args: &Args, series: &Series) -> String {
    let med = |runs: &[LauncherRun], f: fn(&LauncherRun) -> f64| median(runs.iter().map(f).collect());
    let raw_s = median(series.raw.iter().map(|r| r.0).collect());
    let raw_host = median(series.raw.iter().map(|r| r.0 - r.1).collect());
    let matched_s = med(&series.matched, |r| r.to_marker.as_secs_f64());
    let matched_host = med(&series.matched, |r| r.to_marker.as_secs_f64() - r.guest_uptime);
    let default_s = med(&series.default, |r| r.to_marker.as_secs_f64());
    let cold_s = median(series.cold.clone());
    let met = |ok: bool| if ok { "yes" } else { "**no**" };
    let mut body = format!(
        "## virt-launcher run vs raw QEMU (test guest, TCG)\n\nMachine: {}. Medians of {} interleaved runs \
         (cold: {} runs with an empty capabilities cache). Release build. \"Matched\" is the test guest with \
         raw QEMU's device set (CPU model qemu64, no SCSI hotplug controller, no balloon); \"default\" is \
         `manifests/examples/vmi-testguest.yaml` as is. Host-side time is time to the marker minus the \
         guest's own uptime at the marker.\n\n",
        kubevirt_tests::machine_description(),
        args.runs,
        args.runs.min(3)
    );
    body.push_str("| measure | value | target | met |\n|---|---|---|---|\n");
    let mut row = |name: &str, value: String, target: &str, ok: Option<bool>| {
        let _ = writeln!(body, "| {name} | {value} | {target} | {} |", ok.map_or("", met));
    };
    row(
        "raw `qemu-system-x86_64` start to marker",
        format!("{raw_s:.2} s"),
        "(baseline)",
        None,
    );
    row(
        "launcher start to marker, warm cache, matched",
        format!("{matched_s:.2} s"),
        "",
        None,
    );
    row(
        "matched / raw",
        format!("{:.2}", matched_s / raw_s),
        "≤ 1.10",
        Some(matched_s / raw_s <= 1.10),
    );
    row(
        "host-side: raw / launcher (launcher − raw)",
        format!(
            "{raw_host:.2} s / {matched_host:.2} s (+{:.2} s)",
            matched_host - raw_host
        ),
        "≤ +0.15 s",
        Some(matched_host - raw_host <= 0.15),
    );
    row(
        "launcher start to marker, warm cache, default manifest",
        format!("{default_s:.2} s ({:.2} × raw)", default_s / raw_s),
        "",
        None,
    );
    row(
        "launcher start to marker, cold cache, matched",
        format!("{cold_s:.2} s"),
        "",
        None,
    );
    row(
        "cold − raw",
        format!("{:.2} s", cold_s - raw_s),
        "≤ 0.5 s",
        Some(cold_s - raw_s <= 0.5),
    );
    let all: Vec<&LauncherRun> = series.matched.iter().chain(&series.default).collect();
    memory_rows(&all.iter().map(|r| &r.memory).collect::<Vec<_>>(), &mut row);
    let stop_s = median(all.iter().map(|r| r.stop.as_secs_f64()).collect());
    row(
        "SIGTERM to exit (guest powers off on ACPI)",
        format!("{stop_s:.2} s"),
        "≤ 0.5 s",
        Some(stop_s <= 0.5),
    );
    body.push_str(&breakdown::table(&series.warm_phases, &series.cold_phases, raw_host));
    body
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let files = guest_files()?;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let default = repo.join("manifests/examples/vmi-testguest.yaml");
    let scratch = tempfile::Builder::new().prefix("kvb").tempdir_in("/tmp")?;
    let matched = matched_manifest(&default, scratch.path())?;
    let series = measure(&args, &files, &default, &matched, scratch.path())?;
    let body = report(&args, &series) + RSS_NOTE + UPSTREAM_REFERENCE;
    kubevirt_tests::replace_markdown_section(&args.output, "launcher", &body)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    print!("{body}");
    Ok(())
}
