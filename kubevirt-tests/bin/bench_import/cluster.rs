//! CDI on the test cluster against the same floor: the 1 GiB qcow2, served by a busybox httpd pod
//! (a hostPath of the host's copy) and imported by a DataVolume on `hostpath-csi` (bound at once,
//! through CDI's populator), from its creation to `Succeeded`; then that DataVolume cloned into
//! another, likewise. The import's floor is `qemu-img convert` of the qcow2 to raw on the host, the
//! clone's of the 1 GiB raw disk. The importer's peak memory is the highest `VmHWM` of its
//! cdi-importer process seen while it runs. Writes the `cdi-cluster` section of BENCHMARKS.md.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::{GOAL, floor, median, mib, mib_per_s};

const SERVER: &str = "bench-cdi-images";
/// How long one import or clone may take.
const DEADLINE: Duration = Duration::from_secs(900);

struct Kubectl<'a>(&'a Path);

impl Kubectl<'_> {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        use std::io::Write as _;
        let mut child = Command::new(self.0)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("running {}", self.0.display()))?;
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

/// Creates `manifest`'s DataVolume `name` and waits for it to succeed; the time, and the highest
/// `VmHWM` of a cdi-importer process seen meanwhile (KiB).
fn fill(kubectl: &Kubectl<'_>, name: &str, manifest: &str) -> anyhow::Result<(Duration, u64)> {
    let started = Instant::now();
    kubectl.apply(manifest)?;
    let mut peak = 0;
    loop {
        for process in kubevirt_tests::node_processes::of_program("cdi-importer") {
            let status = std::fs::read_to_string(format!("/proc/{}/status", process.pid)).unwrap_or_default();
            peak = peak.max(kubevirt_tests::process_memory::field_kib(&status, "VmHWM").unwrap_or(0));
        }
        let phase = kubectl.run(&["get", "dv", name, "-o", "jsonpath={.status.phase}"], None)?;
        match phase.trim() {
            "Succeeded" => return Ok((started.elapsed(), peak)),
            "Failed" => bail!("DataVolume {name} failed"),
            _ if started.elapsed() > DEADLINE => bail!("DataVolume {name} not Succeeded within {DEADLINE:?}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
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

/// Measures `runs` imports and clones; the section's body.
pub(crate) fn measure(kubectl: &Path, work: &Path, served: &Path, size: u64, runs: usize) -> anyhow::Result<String> {
    let kubectl = Kubectl(kubectl);
    serve(&kubectl, served)?;
    let url = format!("http://{SERVER}.default.svc.cluster.local:8080/disk.qcow2");
    let (mut floors, mut imports, mut clone_floors, mut clones, mut peaks) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
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
        }
        Ok(())
    })();
    for run in 0..runs {
        kubectl.delete("dv", &format!("bench-clone-{run}"));
        kubectl.delete("dv", &format!("bench-import-{run}"));
    }
    kubectl.delete("service", SERVER);
    kubectl.delete("pod", SERVER);
    let _ = std::fs::remove_file(work.join("floor.raw"));
    result?;
    let mut body = format!(
        "## CDI on the test cluster vs `qemu-img convert` (make cluster)\n\nMachine: {}. The same {} GiB disk as qcow2 ({:.0} MiB), served by a busybox httpd pod from the host's copy and imported by a DataVolume in `hostpath-csi` (bound at once, filled through CDI's populator: a prime claim, rebound once filled), from its creation to `Succeeded`; then cloned into a second DataVolume (host-assisted: a cdi-cloner pod streams to an upload server). Floors: `qemu-img convert -t writeback -O raw` of the qcow2 (import) and of the raw disk (clone), on the host. Medians of {runs} interleaved runs; throughput is the disk's virtual size over the time.\n\n| | floor: qemu-img convert | cluster | cluster / floor | goal | met | importer peak memory (VmHWM) |\n|---|---|---|---|---|---|---|\n",
        kubevirt_tests::machine_description(),
        size >> 30,
        mib(std::fs::metadata(served.join("disk.qcow2"))?.len()),
    );
    let peak = peaks.iter().max().copied().unwrap_or(0);
    for (what, floor_times, times, memory) in [
        (
            "import (qcow2 over HTTP)",
            floors,
            imports,
            format!("{:.1} MiB", mib(peak << 10)),
        ),
        ("clone", clone_floors, clones, "—".to_owned()),
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
    body.push_str("\nThe cluster's times include what the loopback figures above leave out: the claims' provisioning and binding (the prime claim's, then its rebinding), and the importer's and the clone's pods starting; the qcow2 streams into the prime claim as above, with no scratch claim.\n\n");
    Ok(body)
}
