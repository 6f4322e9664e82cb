//! virt-controller starting 10 000 VMIs against the in-memory API server behind its trait: API
//! writes per VMI start and resident memory. Writes the `controller` section of BENCHMARKS.md.
//!
//! bench-controller [--vmis 10000] [--output BENCHMARKS.md]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, bail};
use kube::runtime::watcher::Event;
use kubevirt_api::clock::SystemClock;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use virt_controller::cluster_api::FakeControllerApi;
use virt_controller::pod::PodConfig;
use virt_controller::vmi_controller::VmiController;

fn vmi(i: usize) -> anyhow::Result<VirtualMachineInstance> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": format!("vmi-{i:05}"), "namespace": "bench",
            "uid": format!("00000000-0000-4000-8000-{i:012}"),
            "finalizers": ["foregroundDeleteVirtualMachine"]
        },
        "spec": {
            "domain": {
                "cpu": {"cores": 1},
                "resources": {"requests": {"memory": "256Mi"}},
                "devices": {"disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}]}
            },
            "volumes": [{"name": "containerdisk", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}]
        }
    }))?)
}

struct Measured {
    writes_per_vmi: f64,
    events_per_vmi: f64,
    rss_before_kib: u64,
    rss_kib: u64,
    api_server_bytes: usize,
    elapsed: std::time::Duration,
}

async fn measure(count: usize) -> anyhow::Result<Measured> {
    let api = FakeControllerApi::counting_writes();
    let controller = VmiController::new(
        api.clone(),
        SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
    );
    let before = kubevirt_tests::rss_kib();
    let begin = Instant::now();
    for i in 0..count {
        let vmi = vmi(i)?;
        let key = vmi.key();
        api.apply_vmi(vmi);
        // What the watches deliver, then the reconciles they cause.
        controller.on_vmi_event(Event::Apply(api.vmi(&key).context("stored VMI")?));
        controller.reconcile(&key).await;
        let pod_name = format!("bench/virt-launcher-vmi-{i:05}-{:05}", i + 1);
        api.run_pod(&pod_name, "node01");
        controller.on_pod_event(Event::Apply(api.pod(&pod_name).context("the launcher pod")?));
        controller.reconcile(&key).await;
        if api.vmi(&key).and_then(|v| v.status?.phase) != Some(Phase::Scheduled) {
            bail!("{key} was not scheduled");
        }
        api.drop_stored_pod(&pod_name);
    }
    let elapsed = begin.elapsed();
    #[allow(clippy::cast_precision_loss)]
    let (writes_per_vmi, events_per_vmi) = (
        api.write_count() as f64 / count as f64,
        api.event_count() as f64 / count as f64,
    );
    Ok(Measured {
        writes_per_vmi,
        events_per_vmi,
        rss_before_kib: before,
        rss_kib: kubevirt_tests::rss_kib(),
        api_server_bytes: api.stored_bytes(),
        elapsed,
    })
}

/// What the write count of the in-memory run is, and where the figure that counts is.
const IN_MEMORY_WRITES_NOTE: &str = "\nThe API writes above are counted against the in-process fake API server: no \
     kubelet, no virt-handler and no real scheduler take part, so they are the controller's own writes on the path \
     the test drives. The figure that counts is the real cluster's, from its API server's audit log: \
     **API requests per VMI start** in the cluster section (kubevirt-rs on a real Kubernetes), which also gives \
     upstream's figure as a reference.\n";

/// The BENCHMARKS.md section.
fn report(count: usize, m: &Measured) -> anyhow::Result<String> {
    let (writes_per_vmi, events_per_vmi, elapsed) = (m.writes_per_vmi, m.events_per_vmi, m.elapsed);
    #[allow(clippy::cast_precision_loss)]
    let (rss_mib, before_mib, api_mib) = (
        m.rss_kib as f64 / 1024.0,
        m.rss_before_kib as f64 / 1024.0,
        m.api_server_bytes as f64 / 1024.0 / 1024.0,
    );
    let controller_mib = rss_mib - api_mib;
    let met = |ok: bool| if ok { "yes" } else { "**no**" };
    let mut body = String::new();
    writeln!(
        body,
        "## virt-controller starting {count} VMIs (in-memory API server)\n"
    )?;
    writeln!(
        body,
        "Machine: {}. Release build. Each VMI goes Pending -> Scheduling -> Scheduled: the controller creates its \
         launcher pod, the test plays the kubelet (the pod runs on node01), the controller labels and schedules the \
         VMI. Object writes are the creates, patches, updates and deletes of pods and VMIs; events are counted \
         apart. The API server runs in the same process and keeps every VMI as JSON (so the RSS includes them \
         twice: its copy and the controller's cache); it drops each pod once the VMI is scheduled.\n",
        kubevirt_tests::machine_description()
    )?;
    writeln!(body, "| measure | value | target | met |\n|---|---|---|---|")?;
    let object_writes = writes_per_vmi - events_per_vmi;
    writeln!(
        body,
        "| API writes per VMI start, in-memory API server (no kubelet, no virt-handler, no real scheduler) | \
         {object_writes:.2} (pod create, status Scheduling, node label, status Scheduled) | ≤ 4 | {} |",
        met(object_writes <= 4.0)
    )?;
    writeln!(
        body,
        "| events per VMI start | {events_per_vmi:.2} (`SuccessfulCreate`) | | |"
    )?;
    writeln!(body, "| process RSS with {count} VMIs | {rss_mib:.1} MiB | | |")?;
    writeln!(
        body,
        "| of which the API server's stored objects (JSON bytes) | {api_mib:.1} MiB | | |"
    )?;
    writeln!(
        body,
        "| the controller: RSS less the API server's objects | {controller_mib:.1} MiB | ≤ 50 MiB | {} |",
        met(controller_mib <= 50.0)
    )?;
    writeln!(
        body,
        "| RSS before the first VMI (binary, runtime) | {before_mib:.1} MiB | | |"
    )?;
    writeln!(body, "| time to start all | {:.2} s | | |", elapsed.as_secs_f64())?;
    body.push_str(IN_MEMORY_WRITES_NOTE);
    Ok(body)
}

fn main() -> anyhow::Result<()> {
    let mut count = 10_000;
    let mut output = PathBuf::from("BENCHMARKS.md");
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--vmis" => count = value.parse().context("--vmis")?,
            "--output" => output = value.into(),
            other => bail!("unknown flag {other}"),
        }
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let m = runtime.block_on(measure(count))?;
    let body = report(count, &m)?;
    print!("{body}");
    kubevirt_tests::replace_markdown_section(&output, "controller", &body)
        .with_context(|| format!("cannot write {}", output.display()))?;
    Ok(())
}
