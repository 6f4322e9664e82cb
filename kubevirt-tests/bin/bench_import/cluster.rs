//! CDI on the test cluster against the same floor: the 1 GiB qcow2, served by a busybox httpd pod
//! (a hostPath of the host's copy) and imported by a DataVolume on `hostpath-csi` (bound at once,
//! through CDI's populator), from its creation to `Succeeded`; then that DataVolume cloned into
//! another, likewise; then the qcow2 uploaded by `virtctl image-upload` (release build) through
//! cdi-uploadproxy's NodePort into a new DataVolume, from the command's start to `Succeeded`. The
//! floor of the import and the upload is `qemu-img convert` of the qcow2 to raw on the host, the
//! clone's of the 1 GiB raw disk. Peak memory is the highest `VmHWM` of a cdi-importer or
//! cdi-uploadserver process seen meanwhile. Writes the `cdi-cluster` section of BENCHMARKS.md.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{GOAL, floor, median, mib, mib_per_s};

const SERVER: &str = "bench-cdi-images";
/// How long one import, clone or upload may take.
const DEADLINE: Duration = Duration::from_secs(900);

/// kubectl, and the admin kubeconfig of the test cluster it and virtctl use.
struct Kubectl<'a> {
    binary: &'a Path,
    kubeconfig: PathBuf,
}

impl Kubectl<'_> {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        use std::io::Write as _;
        let mut child = Command::new(self.binary)
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", self.binary.display()))?;
        if let Some(text) = stdin {
            child.stdin.take().context("stdin")?.write_all(text.as_bytes())?;
        }
        drop(child.stdin.take());
        let output = child.wait_with_output()?;
        if !output.status.success() {
            bail!(
                "kubectl {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn apply(&self, manifest: &str) -> anyhow::Result<()> {
        self.run(&["apply", "-f", "-"], Some(manifest)).map(|_| ())
    }

    fn delete(&self, kind: &str, name: &str) {
        let _ = self.run(
            &[
                "delete",
                kind,
                name,
                "--ignore-not-found",
                "--wait=true",
                "--timeout=300s",
            ],
            None,
        );
    }
}

fn data_volume(name: &str, source: &str) -> String {
    format!(
        "apiVersion: cdi.kubevirt.io/v1beta1\nkind: DataVolume\nmetadata:\n  name: {name}\n  namespace: default\n  \
         annotations:\n    cdi.kubevirt.io/storage.bind.immediate.requested: \"true\"\nspec:\n  source:\n    {source}\n  \
         storage:\n    storageClassName: hostpath-csi\n    accessModes: [ReadWriteOnce]\n    volumeMode: Filesystem\n    \
         resources:\n      requests:\n        storage: 1Gi\n"
    )
}

/// The highest `VmHWM` (KiB) of the node's processes running `program`, or `peak` if higher.
fn peak_of(program: &str, peak: u64) -> u64 {
    kubevirt_tests::node_processes::of_program(program)
        .iter()
        .filter_map(|process| std::fs::read_to_string(format!("/proc/{}/status", process.pid)).ok())
        .filter_map(|status| kubevirt_tests::process_memory::field_kib(&status, "VmHWM"))
        .fold(peak, u64::max)
}

/// Waits for the DataVolume `name`, whose filling started at `started`, to succeed, following
/// `program`'s peak memory from `peak`; the time from `started`, and that peak (KiB).
fn until_succeeded(
    kubectl: &Kubectl<'_>,
    name: &str,
    started: Instant,
    program: &str,
    mut peak: u64,
) -> anyhow::Result<(Duration, u64)> {
    loop {
        peak = peak_of(program, peak);
        let phase = kubectl.run(&["get", "dv", name, "-o", "jsonpath={.status.phase}"], None)?;
        match phase.trim() {
            "Succeeded" => return Ok((started.elapsed(), peak)),
            "Failed" => bail!("DataVolume {name} failed"),
            _ if started.elapsed() > DEADLINE => bail!("DataVolume {name} not Succeeded within {DEADLINE:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Creates `manifest`'s DataVolume `name` and waits for it to succeed; the time, and the highest
/// `VmHWM` of a cdi-importer process seen meanwhile (KiB).
fn fill(kubectl: &Kubectl<'_>, name: &str, manifest: &str) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    kubectl.apply(manifest)?;
    until_succeeded(kubectl, name, started, "cdi-importer", 0)
}

/// The DataVolume `name`'s phase.
fn phase(kubectl: &Kubectl<'_>, name: &str) -> anyhow::Result<String> {
    let phase = kubectl.run(
        &[
            "get",
            "dv",
            name,
            "-o",
            "jsonpath={.status.phase}",
            "--ignore-not-found",
        ],
        None,
    )?;
    Ok(phase.trim().to_owned())
}

/// `virtctl image-upload dv NAME` of `image` through the proxy (its URL from CDIConfig); the time
/// from the command's start to the DataVolume's `Succeeded` (seen every 100 ms; virtctl's own wait
/// for processing ends a moment later), and the highest `VmHWM` of a cdi-uploadserver process
/// seen meanwhile (KiB). The command must then end successfully.
fn upload(kubectl: &Kubectl<'_>, virtctl: &Path, name: &str, image: &Path) -> anyhow::Result<(Duration, u64)> {
    // A DataVolume of that name left by an interrupted run would be reused, not measured.
    kubectl.delete("dv", name);
    let started = Instant::now();
    let mut child = Command::new(virtctl)
        .env("KUBECONFIG", &kubectl.kubeconfig)
        .args([
            "image-upload",
            "dv",
            name,
            "--size",
            "1Gi",
            "--storage-class",
            "hostpath-csi",
        ])
        .args([
            "--access-mode",
            "ReadWriteOnce",
            "--volume-mode",
            "filesystem",
            "--image-path",
        ])
        .arg(image)
        .args(["--insecure", "--force-bind", "--wait-secs", "600", "-n", "default"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running {}", virtctl.display()))?;
    let stderr = |child: &mut std::process::Child| {
        let mut text = String::new();
        if let Some(mut pipe) = child.stderr.take() {
            use std::io::Read as _;
            let _ = pipe.read_to_string(&mut text);
        }
        text
    };
    let (mut peak, mut took) = (0, None);
    let status = loop {
        peak = peak_of("cdi-uploadserver", peak);
        if took.is_none() && phase(kubectl, name)? == "Succeeded" {
            took = Some(started.elapsed());
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if started.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "virtctl image-upload of {name} not done within {DEADLINE:?}: {}",
                stderr(&mut child)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    if !status.success() {
        bail!("virtctl image-upload of {name}: {status}: {}", stderr(&mut child));
    }
    match took {
        Some(took) => Ok((took, peak)),
        None => until_succeeded(kubectl, name, started, "cdi-uploadserver", peak),
    }
}

fn serve(kubectl: &Kubectl<'_>, served: &Path) -> anyhow::Result<()> {
    // The API server refuses a hostPath with `..` in it.
    let served = served.canonicalize()?;
    let dir = served.to_str().context("path")?;
    kubectl.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {SERVER}\n  namespace: default\n  labels: {{app: {SERVER}}}\nspec:\n  \
         terminationGracePeriodSeconds: 1\n  containers:\n    - name: httpd\n      image: localhost/kubevirt-rs/testclient:latest\n      \
         imagePullPolicy: IfNotPresent\n      args: [httpd, -f, -p, \"8080\", -h, /srv]\n      \
         volumeMounts: [{{name: disk, mountPath: /srv, readOnly: true}}]\n  \
         volumes: [{{name: disk, hostPath: {{path: {dir}, type: Directory}}}}]\n---\napiVersion: v1\nkind: Service\n\
         metadata:\n  name: {SERVER}\n  namespace: default\nspec:\n  selector: {{app: {SERVER}}}\n  ports: [{{port: 8080}}]\n"
    ))?;
    kubectl.run(
        &[
            "wait",
            "--for=condition=Ready",
            "--timeout=120s",
            &format!("pod/{SERVER}"),
        ],
        None,
    )?;
    Ok(())
}

/// Where `make cluster` keeps its state.
fn cluster_dir() -> PathBuf {
    std::env::var_os("KUBEVIRT_RS_CLUSTER_DIR")
        .map_or_else(|| PathBuf::from("/var/lib/kubevirt-rs/cluster"), PathBuf::from)
}

/// Measures `runs` imports, clones and uploads; the section's body.
pub(crate) fn measure(kubectl: &Path, work: &Path, served: &Path, size: u64, runs: usize) -> anyhow::Result<String> {
    let kubectl = Kubectl {
        binary: kubectl,
        kubeconfig: cluster_dir().join("admin.kubeconfig"),
    };
    let virtctl = kubevirt_tests::repo_root().join("target/release/virtctl");
    if !virtctl.exists() {
        bail!("{} is missing: cargo build --release -p virtctl", virtctl.display());
    }
    serve(&kubectl, served)?;
    let url = format!("http://{SERVER}.default.svc.cluster.local:8080/disk.qcow2");
    let (mut floors, mut imports, mut clone_floors, mut clones, mut peaks) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut upload_floors, mut uploads, mut upload_peaks) = (Vec::new(), Vec::new(), Vec::new());
    let result = (|| -> anyhow::Result<()> {
        for run in 0..runs {
            floors.push(floor(&served.join("disk.qcow2"), "qcow2", &work.join("floor.raw"))?);
            let (import, clone) = (format!("bench-import-{run}"), format!("bench-clone-{run}"));
            let (took, peak) = fill(
                &kubectl,
                &import,
                &data_volume(&import, &format!("http:\n      url: {url}")),
            )?;
            imports.push(took);
            peaks.push(peak);
            clone_floors.push(floor(&served.join("disk.raw"), "raw", &work.join("floor.raw"))?);
            let source = format!("pvc:\n      namespace: default\n      name: {import}");
            clones.push(fill(&kubectl, &clone, &data_volume(&clone, &source))?.0);
            kubectl.delete("dv", &clone);
            kubectl.delete("dv", &import);
            upload_floors.push(floor(&served.join("disk.qcow2"), "qcow2", &work.join("floor.raw"))?);
            let uploaded = format!("bench-upload-{run}");
            let (took, peak) = upload(&kubectl, &virtctl, &uploaded, &served.join("disk.qcow2"))?;
            uploads.push(took);
            upload_peaks.push(peak);
            kubectl.delete("dv", &uploaded);
        }
        Ok(())
    })();
    for run in 0..runs {
        kubectl.delete("dv", &format!("bench-clone-{run}"));
        kubectl.delete("dv", &format!("bench-import-{run}"));
        kubectl.delete("dv", &format!("bench-upload-{run}"));
    }
    kubectl.delete("service", SERVER);
    kubectl.delete("pod", SERVER);
    let _ = std::fs::remove_file(work.join("floor.raw"));
    result?;
    let mut body = format!(
        "## CDI on the test cluster vs `qemu-img convert` (make cluster)\n\nMachine: {}. The same {} GiB disk as qcow2 ({:.0} MiB), served by a busybox httpd pod from the host's copy and imported by a DataVolume in `hostpath-csi` (bound at once, filled through CDI's populator: a prime claim, rebound once filled), from its creation to `Succeeded`; then cloned into a second DataVolume (host-assisted: a cdi-cloner pod streams to an upload server); then the qcow2 uploaded by `virtctl image-upload dv` (release build, `--force-bind`) through cdi-uploadproxy's NodePort into a third, from the command's start to `Succeeded` (virtctl's wait for the upload server included). Floors: `qemu-img convert -t writeback -O raw` of the qcow2 (import, upload) and of the raw disk (clone), on the host. Medians of {runs} interleaved runs; throughput is the disk's virtual size over the time.\n\n| | floor: qemu-img convert | cluster | cluster / floor | goal | met | peak memory (VmHWM) |\n|---|---|---|---|---|---|---|\n",
        kubevirt_tests::machine_description(),
        size >> 30,
        mib(std::fs::metadata(served.join("disk.qcow2"))?.len()),
    );
    let peak = peaks.iter().max().copied().unwrap_or(0);
    let upload_peak = upload_peaks.iter().max().copied().unwrap_or(0);
    for (what, floor_times, times, memory) in [
        (
            "import (qcow2 over HTTP)",
            floors,
            imports,
            format!("importer {:.1} MiB", mib(peak << 10)),
        ),
        ("clone", clone_floors, clones, "—".to_owned()),
        (
            "upload (qcow2 through the proxy)",
            upload_floors,
            uploads,
            format!("upload server {:.1} MiB", mib(upload_peak << 10)),
        ),
    ] {
        let (floor_time, time) = (median(floor_times), median(times));
        let (floor_rate, rate) = (mib_per_s(size, floor_time), mib_per_s(size, time));
        let ratio = rate / floor_rate;
        let _ = writeln!(
            body,
            "| {what} | {:.2} s ({floor_rate:.0} MiB/s) | {:.2} s ({rate:.0} MiB/s) | {ratio:.2} | ≥ {GOAL} | {} | {memory} |",
            floor_time.as_secs_f64(),
            time.as_secs_f64(),
            if ratio >= GOAL { "yes" } else { "**no**" },
        );
        println!("cluster {what}: floor {floor_time:?}, cluster {time:?}, ratio {ratio:.2}");
    }
    body.push_str("\nThe cluster's times include what the loopback figures above leave out: the claims' provisioning and binding (the prime claim's, then its rebinding; the upload's scratch claim), the importer's, the clone's and the upload server's pods starting, and for the upload virtctl's wait for the server, its token from cdi-apiserver and the proxy's hop; the qcow2 streams into the prime claim as above. Where the seconds go, step by step, is in docs/storage.md (CDI on the cluster: where the time goes).\n\n");
    Ok(body)
}
