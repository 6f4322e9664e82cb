//! Pod networking with the test guest under TCG, in local mode: for each binding, the time from
//! the domain's start to the guest's DHCP lease, and TCP throughput from the guest's web server to
//! the host (through the forwarded pod port for masquerade, straight to the guest for bridge).
//! Writes the `network` section of BENCHMARKS.md.
//!
//! bench-network --launcher target/release/virt-launcher [--runs 3] [--mib 64] [--output BENCHMARKS.md]

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// What one run measured.
struct Sample {
    lease_after_nic: Duration,
    lease_after_domain_start: Duration,
    lease_after_launch: Duration,
    mbit_per_s: f64,
}

/// The launcher; stopped by pid when dropped.
struct Launcher(Child);

impl Drop for Launcher {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let pid = self.0.id().to_string();
            let _ = Command::new("kill").arg("-TERM").arg(&pid).status();
            let _ = self.0.wait();
        }
    }
}

/// Lines of both streams, each with the moment it was read.
fn lines(child: &mut Child) -> anyhow::Result<Receiver<(Instant, String)>> {
    let (tx, rx) = channel();
    let stdout = child.stdout.take().context("stdout")?;
    let stderr = child.stderr.take().context("stderr")?;
    for stream in [Box::new(stdout) as Box<dyn std::io::Read + Send>, Box::new(stderr)] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stream);
            let mut line = Vec::new();
            while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                let _ = tx.send((Instant::now(), String::from_utf8_lossy(&line).into_owned()));
                line.clear();
            }
        });
    }
    Ok(rx)
}

fn wait_for(rx: &Receiver<(Instant, String)>, text: &str, deadline: Instant) -> anyhow::Result<(Instant, String)> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (at, line) = rx.recv_timeout(left).with_context(|| format!("no {text:?} in time"))?;
        if line.contains(text) {
            return Ok((at, line));
        }
    }
}

/// Reads `mib` MiB from the guest's web server; Mbit/s.
fn download(address: Ipv4Addr, mib: u32) -> anyhow::Result<f64> {
    let mut stream = TcpStream::connect_timeout(&SocketAddrV4::new(address, 80).into(), Duration::from_secs(10))?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(stream, "GET /cgi-bin/stream?{mib} HTTP/1.0\r\nHost: guest\r\n\r\n")?;
    let begin = Instant::now();
    let mut buffer = vec![0_u8; 1 << 16];
    let mut total: u64 = 0;
    loop {
        let n = stream.read(&mut buffer)?;
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    let expected = u64::from(mib) << 20;
    if total < expected {
        bail!("read {total} bytes, expected at least {expected}");
    }
    #[allow(clippy::cast_precision_loss)]
    Ok(total as f64 * 8.0 / begin.elapsed().as_secs_f64() / 1e6)
}

fn run_once(launcher: &str, manifest: &str, mib: u32) -> anyhow::Result<Sample> {
    let spawned_at = Instant::now();
    let mut child = Command::new(launcher)
        .args(["run", "--force-emulation", "--vmi", manifest])
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("start {launcher}"))?;
    let rx = lines(&mut child)?;
    let launcher = Launcher(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    let (_, network) = wait_for(&rx, "virt-launcher: network:", deadline)?;
    let address: Ipv4Addr = network
        .split("the VM is at ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|a| a.parse().ok())
        .with_context(|| format!("no address in {network:?}"))?;
    let (started, _) = wait_for(&rx, "domain started", deadline)?;
    let (nic_up, _) = wait_for(&rx, "KUBEVIRT-RS-GUEST-NIC", deadline)?;
    let (leased, _) = wait_for(&rx, "KUBEVIRT-RS-GUEST-IP", deadline)?;
    wait_for(&rx, "KUBEVIRT-RS-GUEST-GATEWAY-REACHED", deadline)?;
    let mbit_per_s = download(address, mib)?;
    drop(launcher);
    Ok(Sample {
        lease_after_nic: leased - nic_up,
        lease_after_domain_start: leased - started,
        lease_after_launch: leased - spawned_at,
        mbit_per_s,
    })
}

fn median<T: Copy + PartialOrd>(mut values: Vec<T>) -> T {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    values[values.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let mut launcher = "target/release/virt-launcher".to_owned();
    let mut runs = 3_usize;
    let mut mib = 64_u32;
    let mut output = kubevirt_tests::repo_root().join("BENCHMARKS.md");
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--launcher" => launcher = value()?,
            "--runs" => runs = value()?.parse().context("--runs")?,
            "--mib" => mib = value()?.parse().context("--mib")?,
            "--output" => output = PathBuf::from(value()?),
            other => bail!("unknown argument {other}"),
        }
    }
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let examples = kubevirt_tests::repo_root().join("manifests/examples");
    let mut body = String::new();
    writeln!(body, "## Pod networking (test guest, TCG, local mode)\n")?;
    writeln!(
        body,
        "Machine: {}. Release build of virt-launcher running `manifests/examples/vmi-testguest-<binding>.yaml`; \
         {runs} runs per binding, medians shown. *Lease* runs from the launcher's `domain started` log line \
         (and from spawning the launcher) to the guest's `KUBEVIRT-RS-GUEST-IP` console line, which busybox \
         udhcpc's script prints once the lease is applied, which includes the guest's kernel boot; *DHCP \
         exchange* runs from the guest's `KUBEVIRT-RS-GUEST-NIC` line, printed just before udhcpc starts, to \
         the same line. *Throughput* \
         is one TCP stream of {mib} MiB from the guest's busybox httpd to the host: masquerade through the \
         pod's forwarded port 80 (DNAT + masquerade in the VM's namespace), bridge straight to the guest on \
         the pod address. Under TCG the guest's CPU, not the path, bounds throughput.\n",
        kubevirt_tests::machine_description()
    )?;
    writeln!(
        body,
        "| binding | DHCP exchange | lease after domain start | lease after launcher start | throughput guest → host |\n|---|---|---|---|---|"
    )?;
    for binding in ["masquerade", "bridge"] {
        let manifest = examples.join(format!("vmi-testguest-{binding}.yaml"));
        let manifest = manifest.to_string_lossy();
        let mut samples = Vec::new();
        for run in 0..runs {
            let sample = run_once(&launcher, &manifest, mib).with_context(|| format!("{binding}, run {run}"))?;
            eprintln!(
                "bench-network: {binding} run {run}: lease {:.2} s after domain start, {:.0} Mbit/s",
                sample.lease_after_domain_start.as_secs_f64(),
                sample.mbit_per_s
            );
            samples.push(sample);
        }
        writeln!(
            body,
            "| {binding} | {:.0} ms | {:.2} s | {:.2} s | {:.0} Mbit/s |",
            median(
                samples
                    .iter()
                    .map(|s| s.lease_after_nic.as_secs_f64() * 1000.0)
                    .collect()
            ),
            median(
                samples
                    .iter()
                    .map(|s| s.lease_after_domain_start.as_secs_f64())
                    .collect()
            ),
            median(samples.iter().map(|s| s.lease_after_launch.as_secs_f64()).collect()),
            median(samples.iter().map(|s| s.mbit_per_s).collect()),
        )?;
    }
    kubevirt_tests::replace_markdown_section(&output, "network", &body)
        .with_context(|| format!("write {}", output.display()))?;
    print!("{body}");
    Ok(())
}
