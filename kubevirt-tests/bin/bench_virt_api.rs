//! virt-api's admission latency on loopback: the release binary serves HTTPS with a certificate
//! made here, and eight keep-alive connections send a typical VMI's reviews at a fixed rate,
//! alternating the mutating and the validating webhook. Writes the `virt-api` section of
//! BENCHMARKS.md.
//!
//! bench-virt-api --virt-api target/release/virt-api [--rate 1000] [--seconds 10] [--output BENCHMARKS.md]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls_pki_types::pem::PemObject as _;
use tokio::net::TcpStream;

const CONNECTIONS: usize = 8;

fn typical_review() -> Vec<u8> {
    let vmi = serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "fedora", "namespace": "bench", "labels": {"app": "fedora"}},
        "spec": {
            "domain": {
                "cpu": {"cores": 2},
                "resources": {"requests": {"memory": "2Gi"}},
                "devices": {
                    "disks": [
                        {"name": "containerdisk", "disk": {"bus": "virtio"}},
                        {"name": "cloudinitdisk", "disk": {"bus": "virtio"}}
                    ],
                    "interfaces": [{"name": "default", "masquerade": {}}]
                }
            },
            "networks": [{"name": "default", "pod": {}}],
            "volumes": [
                {"name": "containerdisk", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}},
                {"name": "cloudinitdisk", "cloudInitNoCloud": {"userData": "#cloud-config\npassword: fedora\nchpasswd: { expire: False }\n"}}
            ]
        }
    });
    let review = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "bench", "operation": "CREATE", "userInfo": {"username": "bench"},
            "kind": {"group": "kubevirt.io", "version": "v1", "kind": "VirtualMachineInstance"},
            "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
            "object": vmi
        }
    });
    review.to_string().into_bytes()
}

/// The virt-api process; stopped by pid when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").arg("-TERM").arg(&pid).status();
        let _ = self.0.wait();
    }
}

type Sender = hyper::client::conn::http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16, tls: &Arc<rustls::ClientConfig>) -> anyhow::Result<Sender> {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await?;
    tcp.set_nodelay(true)?;
    let name = rustls_pki_types::ServerName::try_from("localhost")?;
    let stream = tokio_rustls::TlsConnector::from(tls.clone()).connect(name, tcp).await?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    Ok(sender)
}

async fn post(sender: &mut Sender, path: &str, body: &Bytes) -> anyhow::Result<()> {
    sender.ready().await?;
    let request = http::Request::post(path)
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body.clone()))?;
    let response = sender.send_request(request).await?;
    if !response.status().is_success() {
        bail!("{path} answered {}", response.status());
    }
    let answer = response.into_body().collect().await?.to_bytes();
    let value: serde_json::Value = serde_json::from_slice(&answer)?;
    if value["response"]["allowed"] != true {
        bail!("{path} refused the typical VMI: {value}");
    }
    Ok(())
}

/// Sends `total` requests at `rate` per second; each worker owns one connection.
async fn drive(
    port: u16,
    tls: &Arc<rustls::ClientConfig>,
    rate: u32,
    total: usize,
) -> anyhow::Result<(Vec<Duration>, Duration)> {
    let interval = Duration::from_secs(1) / rate;
    let start = tokio::time::Instant::now() + Duration::from_millis(50);
    let bodies = Arc::new([
        ("/virtualmachineinstances-mutate", Bytes::from(typical_review())),
        (
            "/virtualmachineinstances-validate-create",
            Bytes::from(typical_review()),
        ),
    ]);
    let mut workers = Vec::new();
    for w in 0..CONNECTIONS {
        let mut sender = connect(port, tls).await?;
        let bodies = bodies.clone();
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut worst_lateness = Duration::ZERO;
            let mut free_at = start;
            for slot in (w..total).step_by(CONNECTIONS) {
                let due = start + interval * u32::try_from(slot)?;
                tokio::time::sleep_until(due).await;
                let sent = tokio::time::Instant::now();
                worst_lateness = worst_lateness.max(sent - due);
                let (path, body) = &bodies[slot % 2];
                post(&mut sender, path, body).await?;
                // No coordinated omission: a request held back because the connection still
                // waited for the answer before it counts from when it was due, so a stall counts
                // against every request it delayed. A request the connection was free for counts
                // from when it went out (the client's own timer, ~1 ms coarse, is not virt-api's).
                let began = if free_at > due { due } else { sent };
                free_at = tokio::time::Instant::now();
                latencies.push(free_at - began);
            }
            Ok::<_, anyhow::Error>((latencies, worst_lateness))
        }));
    }
    let mut all = Vec::with_capacity(total);
    let mut lateness = Duration::ZERO;
    for worker in workers {
        let (latencies, late) = worker.await??;
        all.extend(latencies);
        lateness = lateness.max(late);
    }
    all.sort();
    Ok((all, lateness))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

/// Upstream's virt-api memory, a reference beside the measurements, not one of them.
const UPSTREAM_REFERENCE: &str = "\nUpstream reference (not measured here): about 300 MB resident for upstream's \
     virt-api, a figure quoted by upstream, not reproduced here; upstream's manifests request 500 Mi of memory \
     for it.\n";

/// The BENCHMARKS.md section.
fn report(
    latencies: &[Duration],
    lateness: Duration,
    rss_kib: u64,
    elapsed: Duration,
    rate: u32,
    seconds: u64,
) -> anyhow::Result<String> {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p99 = percentile(latencies, 0.99);
    #[allow(clippy::cast_precision_loss)]
    let achieved = latencies.len() as f64 / elapsed.as_secs_f64();
    let mut body = String::new();
    writeln!(body, "## virt-api admission latency ({rate} requests/s on loopback)\n")?;
    writeln!(
        body,
        "Machine: {}. Release build of virt-api over HTTPS (rustls, TLS 1.3) with HTTP/1.1 keep-alive on {CONNECTIONS} \
         connections, as the API server keeps its webhook connections open. The requests alternate \
         `/virtualmachineinstances-mutate` and `/virtualmachineinstances-validate-create` with a typical VMI \
         (2 vCPUs, 2 Gi, containerDisk, cloud-init, masquerade), {seconds} s after 1 s of warm-up; latency runs \
         to reading the whole answer, from when the request was due on the fixed schedule if its connection \
         was still busy with the answer before (so a stall counts against every request it held back: no \
         coordinated omission), else from when it was sent. The client shares the 2 cores with virt-api.\n",
        kubevirt_tests::machine_description()
    )?;
    writeln!(body, "| measure | value | target | met |\n|---|---|---|---|")?;
    writeln!(
        body,
        "| requests | {} at {achieved:.0}/s | {rate}/s | |",
        latencies.len()
    )?;
    writeln!(body, "| p50 | {:.3} ms | | |", ms(percentile(latencies, 0.50)))?;
    writeln!(body, "| p90 | {:.3} ms | | |", ms(percentile(latencies, 0.90)))?;
    writeln!(
        body,
        "| p99 | {:.3} ms | ≤ 1 ms | {} |",
        ms(p99),
        if p99 <= Duration::from_millis(1) {
            "yes"
        } else {
            "**no**"
        }
    )?;
    writeln!(body, "| p99.9 | {:.3} ms | | |", ms(percentile(latencies, 0.999)))?;
    writeln!(body, "| max | {:.3} ms | | |", ms(percentile(latencies, 1.0)))?;
    writeln!(body, "| latest send behind schedule | {:.3} ms | | |", ms(lateness))?;
    #[allow(clippy::cast_precision_loss)]
    let resident_mib = rss_kib as f64 / 1024.0;
    writeln!(body, "| virt-api RSS after the run | {resident_mib:.1} MiB | | |")?;
    body.push_str(UPSTREAM_REFERENCE);
    Ok(body)
}

fn main() -> anyhow::Result<()> {
    let (mut binary, mut rate, mut seconds, mut output) = (None, 1000_u32, 10_u64, PathBuf::from("BENCHMARKS.md"));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--virt-api" => binary = Some(PathBuf::from(value)),
            "--rate" => rate = value.parse().context("--rate")?,
            "--seconds" => seconds = value.parse().context("--seconds")?,
            "--output" => output = value.into(),
            other => bail!("unknown flag {other}"),
        }
    }
    let binary = binary.context("--virt-api PATH is required")?;
    rustls::crypto::ring::default_provider().install_default().ok();
    let dir = tempfile::tempdir()?;
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()])?;
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&cert, made.cert.pem())?;
    std::fs::write(&key, made.signing_key.serialize_pem())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let child = Command::new(&binary)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .arg("--tls-cert-file")
        .arg(&cert)
        .arg("--tls-key-file")
        .arg(&key)
        .env("KUBECONFIG", "/dev/null")
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let server = Server(child);
    let mut roots = rustls::RootCertStore::empty();
    roots.add(rustls_pki_types::CertificateDer::from_pem_slice(
        made.cert.pem().as_bytes(),
    )?)?;
    let tls = Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    );

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let (latencies, lateness, rss_kib, elapsed) = runtime.block_on(async {
        let ready = Instant::now();
        while connect(port, &tls).await.is_err() {
            if ready.elapsed() > Duration::from_secs(10) {
                bail!("virt-api did not listen within 10 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drive(port, &tls, rate, rate as usize).await?; // one second of warm-up
        let begin = Instant::now();
        let total = usize::try_from(u64::from(rate) * seconds)?;
        let (latencies, lateness) = drive(port, &tls, rate, total).await?;
        Ok((
            latencies,
            lateness,
            kubevirt_tests::process_memory::resident(&server.0.id().to_string()).rss_kib,
            begin.elapsed(),
        ))
    })?;
    drop(server);

    let body = report(&latencies, lateness, rss_kib, elapsed, rate, seconds)?;
    print!("{body}");
    kubevirt_tests::replace_markdown_section(&output, "virt-api", &body)
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(())
}
