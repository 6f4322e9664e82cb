//! The upload half of the benchmark: cdi-uploadserver's server in a child process (certificates
//! made here, as cdi-controller makes them), the disk sent by curl with the proxy's client
//! certificate to its sync path, against the same `qemu-img convert` floor.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cdi_importer::convert::QemuImg;
use cdi_importer::import::Target;
use cdi_uploadserver::config::Config;
use cdi_uploadserver::server::{Outcome, Server};
use control_loop::tls::issue::{Usage, new_ca, sign};

use super::{GOAL, Server as Process, clear, floor, median, mib, mib_per_s, peak_kib};

/// The proxy's client name, which the server admits.
pub(crate) const CLIENT_NAME: &str = "client.upload-server.cdi.kubevirt.io";

/// Makes the server's certificate, the client CA and the client's certificate in `dir`.
fn certificates(dir: &Path) -> anyhow::Result<()> {
    let now = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs(),
    )?;
    let (from, to) = (now - 300, now + 3600);
    let server_ca = new_ca("bench-uploadserver-signer", from, to)?;
    let client_ca = new_ca("bench-client-signer", from, to)?;
    let serving = sign(
        &server_ca,
        "bench-uploadserver-signer",
        "localhost",
        &Usage::Server(vec!["localhost".to_owned()]),
        from,
        to,
    )?;
    let client = sign(&client_ca, "bench-client-signer", CLIENT_NAME, &Usage::Client, from, to)?;
    for (name, text) in [
        ("server-ca.crt", &server_ca.cert),
        ("tls.crt", &serving.cert),
        ("tls.key", &serving.key),
        ("client-ca.crt", &client_ca.cert),
        ("client.crt", &client.cert),
        ("client.key", &client.key),
    ] {
        std::fs::write(dir.join(name), text)?;
    }
    Ok(())
}

/// One upload server in this process (the child's side): prints its port, takes one upload,
/// prints its peak memory.
pub(crate) fn worker(args: &[String]) -> anyhow::Result<()> {
    let [certs, data, scratch, size] = args else {
        bail!("--upload-worker CERT_DIR DATA_DIR SCRATCH_DIR SIZE");
    };
    let certs = PathBuf::from(certs);
    let config = Config {
        address: [127, 0, 0, 1].into(),
        port: 0,
        cert_file: certs.join("tls.crt"),
        key_file: certs.join("tls.key"),
        client_ca_file: certs.join("client-ca.crt"),
        client_name: CLIENT_NAME.to_owned(),
        target: Target::File(PathBuf::from(data).join("disk.img")),
        image_size: Some(size.parse().context("SIZE")?),
        filesystem_overhead: "0".to_owned(),
        preallocation: false,
        deadline: None,
        scratch_dir: PathBuf::from(scratch),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        let server = Server::bind(config, Arc::new(QemuImg::default())).await?;
        println!("port {}", server.local_addr()?.port());
        anyhow::Ok(server.run().await?)
    })?;
    if !matches!(outcome, Outcome::Uploaded { .. }) {
        bail!("the upload server ended without an upload: {outcome:?}");
    }
    println!("peak_kib {}", peak_kib());
    Ok(())
}

/// A child that prints `port N` first: its port, and the rest of its output.
fn start(args: &[&str]) -> anyhow::Result<(Process, String, std::io::Lines<BufReader<std::process::ChildStdout>>)> {
    // Stopped on any way out: a worker left waiting for an upload would never end.
    let mut child = Process(
        Command::new(std::env::current_exe()?)
            .args(args)
            .stdout(Stdio::piped())
            .spawn()?,
    );
    let mut lines = BufReader::new(child.0.stdout.take().context("the worker's stdout")?).lines();
    let port = lines
        .next()
        .context("the worker's port")??
        .strip_prefix("port ")
        .context("the worker's first line names its port")?
        .to_owned();
    Ok((child, port, lines))
}

/// curl sending `file` to the upload path on `port` with the proxy's client certificate: its
/// time, and what it was answered.
fn send(file: &Path, certs: &Path, port: &str, child: &mut Process) -> anyhow::Result<(Duration, String)> {
    let cert = |name: &str| certs.join(name);
    let started = Instant::now();
    let curl = Command::new("curl")
        .args(["-sS", "--fail", "-X", "POST", "--cacert"])
        .arg(cert("server-ca.crt"))
        .arg("--cert")
        .arg(cert("client.crt"))
        .arg("--key")
        .arg(cert("client.key"))
        .arg("-T")
        .arg(file)
        .arg(format!("https://localhost:{port}/v1beta1/upload"))
        .output()
        .context("curl (make deps)")?;
    let took = started.elapsed();
    let status = child.0.wait()?;
    if !curl.status.success() || !status.success() {
        bail!(
            "the upload failed (curl {}, server {status}): {}",
            curl.status,
            String::from_utf8_lossy(&curl.stderr)
        );
    }
    Ok((took, String::from_utf8_lossy(&curl.stdout).into_owned()))
}

/// One upload of `file` to a new server; its time (from the request to the disk written) and
/// the server's peak memory.
fn upload(file: &Path, work: &Path, size: u64) -> anyhow::Result<(Duration, u64)> {
    let (data, scratch, certs) = (work.join("data"), work.join("scratch"), work.join("certs"));
    clear(&data)?;
    clear(&scratch)?;
    let path = |p: &Path| p.to_str().map(str::to_owned).context("path");
    let (mut child, port, lines) = start(&[
        "--upload-worker",
        &path(&certs)?,
        &path(&data)?,
        &path(&scratch)?,
        &size.to_string(),
    ])?;
    let (took, _) = send(file, &certs, &port, &mut child)?;
    let peak = lines
        .map_while(Result::ok)
        .find_map(|l| l.strip_prefix("peak_kib ").and_then(|v| v.trim().parse().ok()))
        .context("the worker's peak memory")?;
    Ok((took, peak))
}

/// One send of `file` into a new [`tls_sink`](super::tls_sink): its time, once the sink says it
/// read every byte.
fn into_sink(file: &Path, work: &Path) -> anyhow::Result<Duration> {
    let certs = work.join("certs");
    let (mut child, port, _) = start(&["--upload-sink", certs.to_str().context("path")?])?;
    let (took, answer) = send(file, &certs, &port, &mut child)?;
    let length = std::fs::metadata(file)?.len();
    if answer.trim() != length.to_string() {
        bail!("the sink read {answer:?} bytes of {length}");
    }
    Ok(took)
}

/// The `upload` section: each image's uploads against the floor.
pub(crate) fn measure(work: &Path, served: &Path, size: u64, runs: usize) -> anyhow::Result<String> {
    let certs = work.join("certs");
    clear(&certs)?;
    certificates(&certs)?;
    let mut body = format!(
        "## CDI upload vs `qemu-img convert` (1 image, loopback TLS)\n\nMachine: {}. The same {} GiB disk as qcow2 and raw, sent by curl (`-T`, streamed) over TLS with the proxy's client certificate to cdi-uploadserver's server (release build, its own process) on its sync path, which writes a `disk.img` with scratch space; the time runs from the request to the answer, sent once the disk is written. Against `qemu-img convert -t writeback -O raw` of the same file. Medians of {runs} interleaved runs.\n\n| image | floor: qemu-img convert | upload | upload / floor | goal | met | upload server peak memory (VmHWM) | ceiling: curl into a TLS sink | sink / floor |\n|---|---|---|---|---|---|---|---|---|\n",
        kubevirt_tests::machine_description(),
        size >> 30,
    );
    for (format, file) in [("qcow2", "disk.qcow2"), ("raw", "disk.raw")] {
        let (mut floors, mut uploads, mut peaks, mut sinks) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            floors.push(floor(&served.join(file), format, &work.join("floor.raw"))?);
            let (took, peak) = upload(&served.join(file), work, size)?;
            uploads.push(took);
            peaks.push(peak);
            sinks.push(into_sink(&served.join(file), work)?);
        }
        let _ = std::fs::remove_file(work.join("floor.raw"));
        let (floor_time, upload_time, sink_time) = (median(floors), median(uploads), median(sinks));
        let sink_ratio = mib_per_s(size, sink_time) / mib_per_s(size, floor_time);
        let (floor_rate, upload_rate) = (mib_per_s(size, floor_time), mib_per_s(size, upload_time));
        let ratio = upload_rate / floor_rate;
        let peak = peaks.iter().max().copied().unwrap_or(0);
        let _ = writeln!(
            body,
            "| {format} | {:.2} s ({floor_rate:.0} MiB/s) | {:.2} s ({upload_rate:.0} MiB/s) | {ratio:.2} | ≥ {GOAL} | {} | {:.1} MiB | {:.2} s | {sink_ratio:.2} |",
            floor_time.as_secs_f64(),
            upload_time.as_secs_f64(),
            if ratio >= GOAL { "yes" } else { "**no**" },
            mib(peak << 10),
            sink_time.as_secs_f64(),
        );
        println!(
            "upload {format}: floor {floor_time:?}, upload {upload_time:?}, ratio {ratio:.2}, peak {peak} KiB, sink {sink_time:?} ({sink_ratio:.2})"
        );
    }
    body.push_str("\nBoth are written into the disk as they arrive: a raw upload with its zero runs left as holes, a qcow2 upload cluster by cluster through its tables while a copy is saved to the scratch space (the upload server always has scratch space, as upstream's); an image whose layout one pass cannot take is converted by qemu-img from that copy, since a client's upload cannot be read a second time. The disk is flushed to the device by a thread of its own as it fills, so the final fsync finds little left. The client's TLS encryption and the server's decryption run on the same two cores as the writes, and every byte of the raw upload, zeros too, crosses TLS. The ceiling is curl sending the same file, in the same runs, into a server with the upload server's TLS settings that reads the body and throws it away: curl's reading and encryption, the loopback and the decryption, which no upload server can do without. Where the ceiling's ratio is under the goal, the goal cannot be met with this client on this machine.\n\n");
    Ok(body)
}
