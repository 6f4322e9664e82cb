//! Live migration between the test cluster's two nodes: the test guest (masquerade, containerDisk,
//! its 10 ms ticker on the serial port) moved by a `VirtualMachineInstanceMigration`, idle and
//! rewriting 64 MiB (with auto-converge, through a `MigrationPolicy`), as the network-namespace
//! rig moves it. Time: the source launcher's "migration started" to "migration completed" log
//! lines (the request to the end, as the rig times it). Downtime: the largest gap in the ticker
//! read from both pods' serial sockets on the nodes. Compared with libvirt's own `virsh migrate`
//! figures that the rig measured in the same `make bench` run (its `--baseline` file).

use std::fmt::Write as _;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};
use kubevirt_tests::serial_tap::{SerialTap, largest_gap, serial_socket};
use serde_json::Value;

use crate::Kubectl;
use crate::watch::spawn_watch;

/// One migration.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample {
    time: Duration,
    downtime: Duration,
}

/// The two loads, idle first.
const LOADS: [(&str, &str); 2] = [("idle", ""), ("rewriting 64 MiB, auto-converge", "kubevirt_rs.dirty")];

/// libvirt's medians from the rig, by load (`idle`, `dirty`), when the file exists.
fn baseline(path: Option<&Path>) -> anyhow::Result<Option<[Sample; 2]>> {
    let Some(path) = path.filter(|p| p.exists()) else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let json: Value = serde_json::from_str(&text).with_context(|| format!("parse {}", path.display()))?;
    let sample = |load: &str| -> anyhow::Result<Sample> {
        let ms = |field: &str| {
            json[load][field]
                .as_u64()
                .with_context(|| format!("{}: {load}.{field} is missing", path.display()))
        };
        Ok(Sample {
            time: Duration::from_millis(ms("timeMs")?),
            downtime: Duration::from_millis(ms("downtimeMs")?),
        })
    };
    Ok(Some([sample("idle")?, sample("dirty")?]))
}

fn vm_manifest(name: &str, kernel_args: &str) -> String {
    format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  runStrategy: Always\n  template:\n    metadata:\n      labels:\n        kubevirt-rs.io/bench-migration: \"{name}\"\n    spec:\n      domain:\n        cpu: {{cores: 1}}\n        memory: {{guest: 256Mi}}\n        resources: {{requests: {{memory: 256Mi}}}}\n        firmware:\n          kernelBoot:\n            kernelArgs: console=ttyS0 quiet panic=-1 kubevirt_rs.ticker {kernel_args}\n            container: {{image: \"localhost/kubevirt-rs/testguest:latest\", imagePullPolicy: IfNotPresent, kernelPath: /boot/vmlinuz, initrdPath: /boot/initrd.img}}\n        devices:\n          autoattachGraphicsDevice: false\n          interfaces: [{{name: default, masquerade: {{}}}}]\n          disks: [{{name: containerdisk, disk: {{bus: virtio}}}}]\n      networks: [{{name: default, pod: {{}}}}]\n      volumes: [{{name: containerdisk, containerDisk: {{image: \"localhost/kubevirt-rs/testguest:latest\", imagePullPolicy: IfNotPresent}}}}]\n"
    )
}

/// The policy giving the loaded guest auto-converge, as the rig migrates it.
fn converge_policy(vm: &str) -> String {
    format!(
        "apiVersion: migrations.kubevirt.io/v1alpha1\nkind: MigrationPolicy\nmetadata:\n  name: {vm}\nspec:\n  selectors:\n    virtualMachineInstanceSelector:\n      kubevirt-rs.io/bench-migration: \"{vm}\"\n  allowAutoConverge: true\n"
    )
}

fn json(kubectl: &Kubectl, args: &[&str]) -> anyhow::Result<Value> {
    let text = kubectl.run(args, None)?;
    serde_json::from_str(&text).with_context(|| format!("kubectl {}: not JSON", args.join(" ")))
}

fn text(value: &Value, path: &[&str]) -> String {
    path.iter()
        .fold(value, |v, key| &v[*key])
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Polls `probe` every 200 ms for at most `timeout`.
fn poll<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> anyhow::Result<Option<T>>) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe()? {
            return Ok(value);
        }
        if Instant::now() >= deadline {
            bail!("no {what} within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits for migration `name` to reach Succeeded or Failed, through one `kubectl get -w` that
/// streams it. A `kubectl get` every 200 ms costs about 0.13 CPU-seconds per call in kubectl alone
/// on this two-core machine, taken from the migration being timed; a watch costs next to
/// nothing, as a user's `kubectl get -w` does.
fn watch_until_finished(kubectl: &Kubectl, name: &str, timeout: Duration) -> anyhow::Result<String> {
    let (phases, seen) = mpsc::channel();
    let mut watch = spawn_watch(
        &kubectl.binary,
        &kubectl.kubeconfig,
        &["get", "vmim", name],
        move |object, _| {
            let _ = phases.send(object["status"]["phase"].as_str().unwrap_or_default().to_owned());
        },
    )?;
    let deadline = Instant::now() + timeout;
    loop {
        match seen.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(phase) if matches!(phase.as_str(), "Succeeded" | "Failed") => return Ok(phase),
            Ok(_) => {}
            Err(RecvTimeoutError::Timeout) => bail!("migration {name} did not end within {timeout:?}"),
            Err(RecvTimeoutError::Disconnected) => {
                let status = watch.exit_status();
                bail!("the watch of migration {name} ended before the migration did (kubectl: {status:?})")
            }
        }
    }
}

/// When the compute container of `pod` logged `message`.
fn logged_at(kubectl: &Kubectl, pod: &str, message: &str) -> anyhow::Result<SystemTime> {
    let logs = kubectl.run(&["logs", pod, "-c", "compute", "--tail=-1"], None)?;
    for line in logs.lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if entry["fields"]["message"] == message {
            let at: k8s_openapi::jiff::Timestamp = text(&entry, &["timestamp"]).parse().context("log timestamp")?;
            let nanos = u64::try_from(at.as_nanosecond()).context("timestamp")?;
            return Ok(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos));
        }
    }
    bail!("{pod} logged no {message:?}")
}

/// The first pod matching `selectors` (`-l …` and `--field-selector …` arguments).
fn first_pod(kubectl: &Kubectl, selectors: &[&str]) -> anyhow::Result<Option<Value>> {
    let mut args = vec!["get", "pods"];
    args.extend_from_slice(selectors);
    args.extend(["-o", "json"]);
    let pods = json(kubectl, &args)?;
    Ok(pods["items"].as_array().and_then(|items| items.first()).cloned())
}

/// The running launcher pod of `vmi_uid` on `node`: name and UID.
fn launcher_on(kubectl: &Kubectl, vmi_uid: &str, node: &str) -> anyhow::Result<Option<(String, String)>> {
    let pod = first_pod(
        kubectl,
        &[
            "-l",
            &format!("kubevirt.io/created-by={vmi_uid}"),
            "--field-selector",
            &format!("spec.nodeName={node},status.phase=Running"),
        ],
    )?;
    Ok(pod.map(|pod| (text(&pod, &["metadata", "name"]), text(&pod, &["metadata", "uid"]))))
}

/// Migrates VMI `name` once, to the other node.
fn migrate_once(kubectl: &Kubectl, cluster_dir: &Path, name: &str, run: usize) -> anyhow::Result<Sample> {
    let vmi = json(kubectl, &["get", "vmi", name, "-o", "json"])?;
    let (uid, node) = (text(&vmi, &["metadata", "uid"]), text(&vmi, &["status", "nodeName"]));
    let (source_pod, source_pod_uid) = poll("the source pod", Duration::from_secs(60), || {
        launcher_on(kubectl, &uid, &node)
    })?;
    let source = SerialTap::open(
        &serial_socket(cluster_dir, &node, &source_pod_uid, &uid),
        Duration::from_secs(60),
    )?;
    poll("the guest's ticker", Duration::from_secs(120), || {
        Ok((source.ticks().len() > 50).then_some(()))
    })?;
    let migration = format!("{name}-{run}");
    kubectl.run(
        &["create", "-f", "-"],
        Some(&format!(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstanceMigration\nmetadata:\n  name: {migration}\n  namespace: default\nspec:\n  vmiName: {name}\n"
        )),
    )?;
    let migration_uid = text(
        &json(kubectl, &["get", "vmim", &migration, "-o", "json"])?,
        &["metadata", "uid"],
    );
    let (target_node, target_pod_uid) = poll("the target pod on a node", Duration::from_secs(180), || {
        let pod = first_pod(
            kubectl,
            &["-l", &format!("kubevirt.io/migrationJobUID={migration_uid}")],
        )?;
        Ok(pod.and_then(|pod| {
            let node = text(&pod, &["spec", "nodeName"]);
            (!node.is_empty()).then(|| (node, text(&pod, &["metadata", "uid"])))
        }))
    })?;
    let target = SerialTap::open(
        &serial_socket(cluster_dir, &target_node, &target_pod_uid, &uid),
        Duration::from_secs(180),
    )?;
    let phase = watch_until_finished(kubectl, &migration, Duration::from_secs(600))?;
    if phase != "Succeeded" {
        bail!("migration {migration} {phase}");
    }
    poll("the ticker on the target", Duration::from_secs(60), || {
        Ok((target.ticks().len() > 50).then_some(()))
    })?;
    let downtime = largest_gap(&source.ticks(), &target.ticks());
    let started = logged_at(kubectl, &source_pod, "migration started")?;
    let completed = logged_at(kubectl, &source_pod, "migration completed")?;
    Ok(Sample {
        time: completed.duration_since(started).unwrap_or_default(),
        downtime,
    })
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values.get(values.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

/// Measures `runs` migrations of each load and writes the table; `baseline_file` holds libvirt's
/// figures from the rig.
pub fn report(
    kubectl: &Kubectl,
    cluster_dir: &Path,
    runs: usize,
    baseline_file: Option<&Path>,
) -> anyhow::Result<String> {
    let libvirt = baseline(baseline_file)?;
    let mut out = format!(
        "**Live migration between the two nodes** (the test guest with masquerade and a containerDisk, its 10 ms \
         ticker read from both pods' serial sockets; time from the source launcher's start of the migration to its \
         end, downtime the largest gap in the ticker; medians of {runs}), against libvirt's own `virsh migrate` \
         between two network namespaces ([Live migration](#live-migration-of-the-test-guest-tcg-two-network-namespaces-as-nodes)), \
         measured in the same run\n\n\
         | load | time | libvirt time | ratio (goal ≤ 1.2) | downtime | libvirt downtime | difference (goal ≤ +50 ms) |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (index, (load, kernel_args)) in LOADS.iter().enumerate() {
        let vm = format!("bench-migrate-{index}");
        kubectl.run(&["create", "-f", "-"], Some(&vm_manifest(&vm, kernel_args)))?;
        if !kernel_args.is_empty() {
            kubectl.run(&["create", "-f", "-"], Some(&converge_policy(&vm)))?;
        }
        let measured = (|| {
            poll("the VMI Running", Duration::from_secs(300), || {
                let vmi = kubectl.run(&["get", "vmi", &vm, "-o", "jsonpath={.status.phase}"], None);
                Ok((vmi.ok().as_deref() == Some("Running")).then_some(()))
            })?;
            (1..=runs)
                .map(|run| migrate_once(kubectl, cluster_dir, &vm, run))
                .collect::<anyhow::Result<Vec<Sample>>>()
        })();
        let _ = kubectl.run(&["delete", "vm", &vm, "--wait=true", "--timeout=120s"], None);
        let _ = kubectl.run(&["delete", "migrationpolicy", &vm, "--ignore-not-found"], None);
        let samples = measured?;
        let time = median(samples.iter().map(|s| s.time).collect());
        let downtime = median(samples.iter().map(|s| s.downtime).collect());
        let row = match libvirt.map(|l| l[index]) {
            Some(base) => {
                let ratio = time.as_secs_f64() / base.time.as_secs_f64().max(1e-9);
                let difference = i128::try_from(downtime.as_millis()).unwrap_or(0)
                    - i128::try_from(base.downtime.as_millis()).unwrap_or(0);
                let met = |ok: bool| if ok { "met" } else { "**not met**" };
                format!(
                    "| {load} | {} | {} | {ratio:.2} ({}) | {} | {} | {difference:+} ms ({}) |",
                    ms(time),
                    ms(base.time),
                    met(ratio <= 1.2),
                    ms(downtime),
                    ms(base.downtime),
                    met(difference <= 50)
                )
            }
            None => format!(
                "| {load} | {} | not measured in this run | – | {} | not measured in this run | – |",
                ms(time),
                ms(downtime)
            ),
        };
        let _ = writeln!(out, "{row}");
    }
    out.push('\n');
    Ok(out)
}
