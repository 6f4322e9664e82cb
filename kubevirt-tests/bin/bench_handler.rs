//! virt-handler with 1000 VMIs on one node, fake launchers and the in-memory API server behind
//! its traits: resident memory, a full resync, and the time from a domain event to the status
//! write it causes. Writes the `handler` section of BENCHMARKS.md.
//!
//! bench-handler [--vmis 1000] [--resyncs 20] [--events 200] [--output BENCHMARKS.md]

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::StreamExt as _;
use kube::runtime::watcher::Event;
use kubevirt_api::domain_state::{DomainState, StateReason};
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use tokio_util::sync::CancellationToken;
use virt_handler::clock::SystemClock;
use virt_handler::cluster_api::{ClusterApi, FakeClusterApi};
use virt_handler::launchers::FakeLaunchers;
use virt_handler::reconciler::{Reconciler, ReconcilerConfig};
use virt_handler::runner::{Control, RunOptions, channels, run};

const NODE: &str = "node01";

struct Args {
    vmis: usize,
    resyncs: usize,
    events: usize,
    output: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        vmis: 1000,
        resyncs: 20,
        events: 200,
        output: PathBuf::from("BENCHMARKS.md"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--vmis" => args.vmis = value.parse().context("--vmis")?,
            "--resyncs" => args.resyncs = value.parse().context("--resyncs")?,
            "--events" => args.events = value.parse().context("--events")?,
            "--output" => args.output = value.into(),
            other => bail!("unknown flag {other}"),
        }
    }
    Ok(args)
}

fn uid(i: usize) -> String {
    format!("00000000-0000-4000-8000-{i:012}")
}

fn vmi(i: usize) -> anyhow::Result<VirtualMachineInstance> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": format!("vmi-{i:04}"),
            "namespace": "bench",
            "uid": uid(i),
            "labels": {"kubevirt.io/nodeName": NODE}
        },
        "spec": {
            "domain": {
                "cpu": {"cores": 1},
                "resources": {"requests": {"memory": "256Mi"}},
                "devices": {"disks": [{"name": "containerdisk", "disk": {"bus": "virtio"}}]}
            },
            "volumes": [{"name": "containerdisk", "containerDisk": {"image": "quay.io/containerdisks/fedora:latest"}}]
        },
        "status": {"phase": "Scheduled", "nodeName": NODE, "activePods": {format!("pod-{i}"): NODE}}
    }))?)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let index = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[index]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn met(ok: bool) -> &'static str {
    if ok { "yes" } else { "**no**" }
}

struct Results {
    startup: Duration,
    resync: Vec<Duration>,
    events: Vec<Duration>,
    rss_kib: u64,
    baseline_kib: u64,
}

async fn measure(args: &Args) -> anyhow::Result<Results> {
    let api = FakeClusterApi::counting_writes();
    let (senders, inputs) = channels();
    let launchers = FakeLaunchers::new(senders.domains.clone());
    for i in 0..args.vmis {
        launchers.start_launcher(&uid(i));
        api.apply(vmi(i)?);
    }
    let baseline_kib = kubevirt_tests::rss_kib();
    let reconciler = Arc::new(Reconciler::new(
        ReconcilerConfig::for_node(NODE),
        api.clone(),
        launchers,
        SystemClock,
    ));
    let stop = CancellationToken::new();
    let begin = Instant::now();
    let handler = tokio::spawn(run(
        reconciler.clone(),
        api.watch_vmis(NODE),
        inputs,
        RunOptions {
            workers: 10,
            resync: Duration::from_secs(3600),
        },
        stop.clone(),
    ));
    let running = |api: &FakeClusterApi| {
        (0..args.vmis)
            .filter(|i| api.vmi(&format!("bench/vmi-{i:04}")).and_then(|v| v.status?.phase) == Some(Phase::Running))
            .count()
    };
    while running(&api) < args.vmis {
        if begin.elapsed() > Duration::from_secs(120) {
            bail!("only {} of {} VMIs turned Running", running(&api), args.vmis);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let startup = begin.elapsed();

    let mut resync = Vec::new();
    for _ in 0..args.resyncs {
        let (done, finished) = tokio::sync::oneshot::channel();
        let begin = Instant::now();
        senders
            .control
            .send(Control::Resync { done: Some(done) })
            .context("the handler stopped")?;
        finished.await.context("no resync answer")?;
        resync.push(begin.elapsed());
    }

    // Time each event to the status write it causes, as a watcher of the API server sees it.
    let mut observer = api.watch_vmis(NODE);
    while let Some(Ok(event)) = observer.next().await {
        if matches!(event, Event::InitDone) {
            break;
        }
    }
    let mut events = Vec::new();
    for n in 0..args.events {
        let i = n % args.vmis;
        let key = format!("bench/vmi-{i:04}");
        let pause = (n / args.vmis).is_multiple_of(2);
        let (state, reason) = if pause {
            (DomainState::Paused, StateReason::User)
        } else {
            (DomainState::Running, StateReason::Unknown)
        };
        let begin = Instant::now();
        reconciler.launchers().domain_changes(&uid(i), state, reason);
        loop {
            let event = tokio::time::timeout(Duration::from_secs(5), observer.next())
                .await
                .with_context(|| format!("no status write for {key}"))?;
            if let Some(Ok(Event::Apply(written))) = event
                && written.key() == key
            {
                let paused = written
                    .status
                    .as_ref()
                    .is_some_and(|s| s.conditions.iter().any(|c| c.condition_type == "Paused"));
                if paused == pause {
                    break;
                }
            }
        }
        events.push(begin.elapsed());
    }
    let rss_kib = kubevirt_tests::rss_kib();
    stop.cancel();
    handler.await.context("handler task")?;
    resync.sort();
    events.sort();
    Ok(Results {
        startup,
        resync,
        events,
        rss_kib,
        baseline_kib,
    })
}

fn main() -> anyhow::Result<()> {
    // The handler's process settings: its arenas and runtime threads.
    let arenas = if control_loop::process::limit_malloc_arenas() {
        format!("{} malloc arenas", control_loop::process::RUNTIME_WORKERS)
    } else {
        "malloc arenas as MALLOC_ARENA_MAX or GLIBC_TUNABLES set them".to_owned()
    };
    let args = parse_args()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(control_loop::process::RUNTIME_WORKERS)
        .enable_all()
        .build()?;
    let results = runtime.block_on(measure(&args))?;
    let resync_median = percentile(&results.resync, 0.5);
    let resync_max = percentile(&results.resync, 1.0);
    let event_median = percentile(&results.events, 0.5);
    let event_p99 = percentile(&results.events, 0.99);
    #[allow(clippy::cast_precision_loss)]
    let (rss_mib, baseline_mib) = (results.rss_kib as f64 / 1024.0, results.baseline_kib as f64 / 1024.0);
    let mut body = String::new();
    writeln!(
        body,
        "## virt-handler with {} VMIs on one node (fake launchers)\n",
        args.vmis
    )?;
    writeln!(
        body,
        "Machine: {}. Release build; {} runtime threads, {arenas} and 10 workers, as virt-handler runs. The launchers and the API server are \
         in-process fakes behind the handler's traits: there is no gRPC channel or socket per launcher and \
         no Kubernetes client, which a real handler with 1000 launchers has. So the RSS below is the \
         handler's own caches, queues and runtime with 1000 VMIs plus the fakes, not what a handler on a \
         real node uses; it is not comparable with upstream's virt-handler, and no ratio is given \
         (the real cluster's handler is measured in the cluster section). \
         Resync: every VMI reconciled (sync to its launcher, status computed, nothing to write), {} runs. \
         Event to status: a launcher reports a paused or resumed domain and the handler writes the VMI \
         status, {} events.\n",
        kubevirt_tests::machine_description(),
        control_loop::process::RUNTIME_WORKERS,
        args.resyncs,
        args.events
    )?;
    writeln!(body, "| measure | value | target | met |\n|---|---|---|---|")?;
    writeln!(body, "| all VMIs Scheduled -> Running | {} | | |", ms(results.startup))?;
    writeln!(
        body,
        "| full resync, median (max) | {} ({}) | ≤ 100 ms | {} |",
        ms(resync_median),
        ms(resync_max),
        met(resync_max <= Duration::from_millis(100))
    )?;
    writeln!(
        body,
        "| domain event -> status write, median (p99) | {} ({}) | ≤ 10 ms | {} |",
        ms(event_median),
        ms(event_p99),
        met(event_p99 <= Duration::from_millis(10))
    )?;
    writeln!(
        body,
        "| process RSS (handler state and fakes, no real channels) | {rss_mib:.1} MiB | ≤ 30 MiB | {} |",
        met(rss_mib <= 30.0)
    )?;
    writeln!(
        body,
        "| of which before the handler started (binary, runtime, fakes) | {baseline_mib:.1} MiB | | |"
    )?;
    print!("{body}");
    kubevirt_tests::replace_markdown_section(&args.output, "handler", &body)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    Ok(())
}
