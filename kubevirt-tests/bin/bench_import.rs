//! CDI's import and upload against their floor, `qemu-img convert` of the same file on the same
//! machine: a 1 GiB disk (half data, half zeros) as qcow2 and as raw, (1) served over HTTP on the
//! loopback by busybox httpd and imported by cdi-importer's own pipeline (`run::run`), and (2)
//! sent by curl over TLS with the proxy's client certificate to cdi-uploadserver's server (a sync
//! upload), each a release build in a child process whose peak memory is read; medians of
//! interleaved runs. Writes the `import` and `upload` sections of BENCHMARKS.md.
//!
//! With `--cluster KUBECTL`, the same disk is imported, cloned and uploaded (by a release
//! virtctl, through the proxy) on the running test cluster instead (`bench_import/cluster.rs`), and only the `cdi-cluster` section is written.
//!
//! bench-import [--gib 1] [--runs 3] [--output BENCHMARKS.md] [--cluster KUBECTL]
//! bench-import --worker URL DATA_DIR SCRATCH_DIR SIZE   (one import; prints its peak memory)
//! bench-import --upload-worker CERT_DIR DATA_DIR SCRATCH_DIR SIZE   (one upload server; prints
//! its port, then its peak memory)
//! bench-import --upload-sink CERT_DIR   (a TLS server that reads one body and throws it away:
//! the upload's ceiling; prints its port)

#[path = "bench_import/cluster.rs"]
mod cluster;
#[path = "bench_import/tls_sink.rs"]
mod tls_sink;
#[path = "bench_import/upload.rs"]
mod upload;

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use cdi_importer::convert::QemuImg;
use cdi_importer::http_source::HttpSource;
use cdi_importer::job::{Job, Source};
use cdi_importer::run::{self, Ended, Paths};

/// The goal: at least this share of the floor's throughput.
pub(crate) const GOAL: f64 = 0.8;

/// A child process (the web server, an upload server); stopped when dropped.
pub(crate) struct Server(pub(crate) Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(crate) fn peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// One import in this process (the child's side).
fn worker(args: &[String]) -> anyhow::Result<()> {
    let [url, data, scratch, size] = args else {
        bail!("--worker URL DATA_DIR SCRATCH_DIR SIZE");
    };
    let job = Job {
        source: Source::Http(HttpSource {
            url: url.clone(),
            ..HttpSource::default()
        }),
        cert_dir: None,
        image_size: Some(size.parse().context("SIZE")?),
        filesystem_overhead: "0".to_owned(),
        preallocation: false,
        checksum: None,
        owner_uid: None,
    };
    let paths = Paths {
        data_dir: PathBuf::from(data),
        block_device: PathBuf::from(data).join("no-block-device"),
        scratch_dir: PathBuf::from(scratch),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    match runtime.block_on(run::run(job, &paths, QemuImg::default())) {
        Ok(Ended::Finished(finished)) if !finished.scratch_space_required => {}
        Ok(other) => bail!("the import did not finish: {other:?}"),
        Err(e) => bail!("the import failed: {e}"),
    }
    println!("peak_kib {}", peak_kib());
    Ok(())
}

/// 1 MiB chunks, alternately pseudo-random data and zeros.
fn make_raw(path: &Path, bytes: u64) -> anyhow::Result<()> {
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut chunk = vec![0_u8; 1 << 20];
    for index in 0..bytes >> 20 {
        if index % 2 == 0 {
            for word in chunk.chunks_exact_mut(8) {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                word.copy_from_slice(&state.to_le_bytes());
            }
        } else {
            chunk.fill(0);
        }
        file.write_all(&chunk)?;
    }
    file.flush()?;
    Ok(())
}

pub(crate) fn qemu_img(args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("qemu-img")
        .args(args)
        .status()
        .context("qemu-img (make deps)")?;
    if !status.success() {
        bail!("qemu-img {args:?} failed");
    }
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn serve(dir: &Path) -> anyhow::Result<(Server, u16)> {
    let port = free_port()?;
    let child = Command::new("busybox")
        .args(["httpd", "-f", "-p", &format!("127.0.0.1:{port}"), "-h"])
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .context("busybox httpd (make deps)")?;
    let mut server = Server(child);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = server.0.try_wait()? {
            bail!("busybox httpd ended ({status}) before it listened on {port}");
        }
        if Instant::now() > deadline {
            bail!("busybox httpd did not listen on {port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // Whoever answers must be our server (the port was free a moment ago).
    if let Some(status) = server.0.try_wait()? {
        bail!("busybox httpd ended ({status}): port {port} was taken");
    }
    Ok((server, port))
}

pub(crate) fn clear(dir: &Path) -> anyhow::Result<()> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    Ok(())
}

/// The floor: `qemu-img convert` of the served file into a raw file.
pub(crate) fn floor(source: &Path, format: &str, out: &Path) -> anyhow::Result<Duration> {
    let _ = std::fs::remove_file(out);
    let started = Instant::now();
    qemu_img(&[
        "convert",
        "-t",
        "writeback",
        "-f",
        format,
        "-O",
        "raw",
        source.to_str().context("path")?,
        out.to_str().context("path")?,
    ])?;
    Ok(started.elapsed())
}

/// One import by a child process; its time and peak memory.
fn import(url: &str, work: &Path, size: u64) -> anyhow::Result<(Duration, u64)> {
    // No scratch space, as an HTTP import's first importer pod has none: a qcow2 image must
    // stream into the disk (the worker fails if it asks for scratch space).
    let (data, scratch) = (work.join("data"), work.join("no-scratch"));
    clear(&data)?;
    let _ = std::fs::remove_dir_all(&scratch);
    let started = Instant::now();
    let output = Command::new(std::env::current_exe()?)
        .arg("--worker")
        .args([
            url,
            data.to_str().context("path")?,
            scratch.to_str().context("path")?,
            &size.to_string(),
        ])
        .output()?;
    let took = started.elapsed();
    if !output.status.success() {
        bail!("the import worker failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let peak = String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("peak_kib ").and_then(|v| v.trim().parse().ok()))
        .context("the worker's peak memory")?;
    Ok((took, peak))
}

pub(crate) fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

/// Bytes in MiB, for a report.
#[expect(clippy::cast_precision_loss, reason = "a size in a report")]
pub(crate) fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

pub(crate) fn mib_per_s(bytes: u64, took: Duration) -> f64 {
    mib(bytes) / took.as_secs_f64()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--worker") {
        return worker(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("--upload-worker") {
        return upload::worker(&args[1..]);
    }
    if args.first().map(String::as_str) == Some("--upload-sink") {
        return tls_sink::worker(&args[1..]);
    }
    let (mut gib, mut runs, mut output) = (1_u64, 3_usize, PathBuf::from("BENCHMARKS.md"));
    let mut on_cluster: Option<PathBuf> = None;
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--gib" => gib = value.parse().context("--gib")?,
            "--runs" => runs = value.parse().context("--runs")?,
            "--output" => output = value.into(),
            "--cluster" => on_cluster = Some(value.into()),
            other => bail!("unknown flag {other}"),
        }
    }
    if runs == 0 || gib == 0 {
        bail!("--runs and --gib must be at least 1");
    }
    let size = gib << 30;
    // On disk, beside the build: the files are larger than a tmpfs may hold.
    let work = kubevirt_tests::repo_root().join("target/bench-import");
    clear(&work)?;
    let served = work.join("served");
    clear(&served)?;
    make_raw(&served.join("disk.raw"), size)?;
    qemu_img(&[
        "convert",
        "-f",
        "raw",
        "-O",
        "qcow2",
        served.join("disk.raw").to_str().context("path")?,
        served.join("disk.qcow2").to_str().context("path")?,
    ])?;
    if let Some(kubectl) = on_cluster {
        let body = cluster::measure(&kubectl, &work, &served, size, runs)?;
        kubevirt_tests::replace_markdown_section(&output, "cdi-cluster", &body)?;
        let _ = std::fs::remove_dir_all(&work);
        return Ok(());
    }
    let (_server, port) = serve(&served)?;

    let mut body = format!(
        "## CDI import vs `qemu-img convert` (1 image, loopback HTTP)\n\nMachine: {}. A {gib} GiB disk, 1 MiB chunks alternately pseudo-random and zero, as qcow2 ({:.0} MiB) and raw, served by busybox httpd on the loopback; cdi-importer's pipeline (release build, its own process) into a `disk.img` without scratch space (as an HTTP import's first importer pod), against `qemu-img convert -t writeback -O raw` of the same file from local disk (the floor). Medians of {runs} interleaved runs; throughput is the disk's virtual size over the time.\n\n| image | floor: qemu-img convert | import | import / floor | goal | met | importer peak memory (VmHWM) |\n|---|---|---|---|---|---|---|\n",
        kubevirt_tests::machine_description(),
        mib(std::fs::metadata(served.join("disk.qcow2"))?.len()),
    );
    for (format, file) in [("qcow2", "disk.qcow2"), ("raw", "disk.raw")] {
        let (mut floors, mut imports, mut peaks) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            floors.push(floor(&served.join(file), format, &work.join("floor.raw"))?);
            let (took, peak) = import(&format!("http://127.0.0.1:{port}/{file}"), &work, size)?;
            imports.push(took);
            peaks.push(peak);
        }
        let _ = std::fs::remove_file(work.join("floor.raw"));
        let (floor_time, import_time) = (median(floors), median(imports));
        let (floor_rate, import_rate) = (mib_per_s(size, floor_time), mib_per_s(size, import_time));
        let ratio = import_rate / floor_rate;
        let peak = peaks.iter().max().copied().unwrap_or(0);
        let _ = writeln!(
            body,
            "| {format} | {:.2} s ({floor_rate:.0} MiB/s) | {:.2} s ({import_rate:.0} MiB/s) | {ratio:.2} | ≥ {GOAL} | {} | {:.1} MiB |",
            floor_time.as_secs_f64(),
            import_time.as_secs_f64(),
            if ratio >= GOAL { "yes" } else { "**no**" },
            mib(peak << 10),
        );
        println!("{format}: floor {floor_time:?}, import {import_time:?}, ratio {ratio:.2}, peak {peak} KiB");
    }
    body.push_str("\nBoth stream into the disk as they download: the raw image with its zero runs left as holes, the qcow2 image cluster by cluster through its tables (an image whose layout or features one pass cannot take goes through scratch space and qemu-img instead). A thread of the importer's own flushes the disk to the device as it fills (`fdatasync` every 32 MiB, the writer never waiting for it), so the final fsync, which the floor's qemu-img makes too, finds little left.\n\n");
    kubevirt_tests::replace_markdown_section(&output, "import", &body)?;
    let upload_body = upload::measure(&work, &served, size, runs)?;
    kubevirt_tests::replace_markdown_section(&output, "upload", &upload_body)?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(())
}
