//! From the launcher serving its command socket to the VMI Running, split: the kubelet reporting
//! the pod Running, virt-controller handing the VMI to its node (phase Scheduled), virt-handler
//! and the launcher preparing and defining the domain, libvirt starting QEMU, and virt-handler
//! writing Running. Set against a local `virt-launcher run` of the same guest on the same host,
//! measured in the same run: its start to the domain running (its host-side start).

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, bail};

use crate::watch::PhaseWatch;
use crate::{Kubectl, ms, since, stats};

/// The median, as the other tables take it.
fn p50(values: &[Duration]) -> Duration {
    stats(values).0
}

/// When the launcher logged each step of its start (wall clock, from its JSON log).
#[derive(Clone, Copy, Debug)]
pub struct LauncherTimes {
    /// "serving commands": its socket is ready.
    pub serving: SystemTime,
    /// "domain defined".
    pub defined: SystemTime,
    /// "domain started".
    pub started: SystemTime,
}

fn log_time(entry: &serde_json::Value) -> anyhow::Result<SystemTime> {
    let at: k8s_openapi::jiff::Timestamp = entry["timestamp"]
        .as_str()
        .context("timestamp")?
        .parse()
        .context("launcher log timestamp")?;
    let nanos = u64::try_from(at.as_nanosecond()).context("timestamp")?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
}

/// The launcher's log lines of the VMI with `vmi_uid`, read from its compute container.
pub fn launcher_times(kubectl: &Kubectl, vmi_uid: &str) -> anyhow::Result<LauncherTimes> {
    let selector = format!("kubevirt.io/created-by={vmi_uid}");
    let logs = kubectl.run(&["logs", "-l", &selector, "-c", "compute", "--tail=-1"], None)?;
    // The first time each step was logged, in one pass over the log.
    let mut first = std::collections::BTreeMap::new();
    for line in logs.lines() {
        let Ok(entry) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(message) = entry["fields"]["message"].as_str()
            && ["serving commands", "domain defined", "domain started"].contains(&message)
            && !first.contains_key(message)
        {
            first.insert(message.to_owned(), log_time(&entry)?);
        }
    }
    let find = |message: &str| -> anyhow::Result<SystemTime> {
        first
            .get(message)
            .copied()
            .with_context(|| format!("the launcher of VMI {vmi_uid} logged no {message:?}"))
    };
    Ok(LauncherTimes {
        serving: find("serving commands")?,
        defined: find("domain defined")?,
        started: find("domain started")?,
    })
}

/// One start's domain phase, split.
#[derive(Clone, Copy, Debug, Default)]
pub struct DomainSplit {
    /// Launcher serving -> its pod seen Running (the kubelet's status update).
    pub pod_running: Duration,
    /// Pod Running -> VMI Scheduled (virt-controller).
    pub handover: Duration,
    /// The later of Scheduled and serving -> domain defined (virt-handler's mounts and wiring,
    /// the launcher's volumes and define).
    pub define: Duration,
    /// Domain defined -> started (libvirt starts QEMU).
    pub start: Duration,
    /// Domain started -> VMI Running (virt-handler's status write, seen by the watch).
    pub status: Duration,
}

/// The split of the VMI `name`'s start, whose launcher logged `times`.
pub fn split(watch: &PhaseWatch, name: &str, times: &LauncherTimes) -> anyhow::Result<DomainSplit> {
    let uid = watch.uid(name).context("uid")?;
    let pod = watch.launcher_pod(&uid).context("the launcher pod")?;
    let pod_running = watch
        .when(&format!("pod/{pod}"), "Running")
        .context("the launcher pod seen Running")?;
    let scheduled = watch.when(name, "Scheduled").context("the VMI seen Scheduled")?;
    let running = watch.when(name, "Running").context("the VMI seen Running")?;
    let handed_over = scheduled.max(times.serving);
    Ok(DomainSplit {
        pod_running: since(times.serving, pod_running),
        handover: since(pod_running, scheduled),
        define: since(handed_over, times.defined),
        start: since(times.defined, times.started),
        status: since(times.started, running),
    })
}

/// Runs the test guest locally `runs` times with `launcher` and returns each start -> "domain
/// started" (the launcher's host-side start before the guest boots). Each run is stopped with
/// SIGTERM and waited for.
pub fn local_starts(launcher: &Path, runs: usize) -> anyhow::Result<Vec<Duration>> {
    let manifest = kubevirt_tests::repo_root().join("manifests/examples/vmi-testguest.yaml");
    let mut starts = Vec::new();
    for _ in 0..runs {
        let began = Instant::now();
        let mut child = Command::new(launcher)
            .args(["run", "--vmi"])
            .arg(&manifest)
            .arg("--force-emulation")
            .env("VIRT_LAUNCHER_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("run {}", launcher.display()))?;
        let (sender, lines) = mpsc::channel::<(Instant, String)>();
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let sender = sender.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    let _ = sender.send((Instant::now(), line));
                }
            });
        }
        drop(sender);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut started = None;
        let mut tail = Vec::new();
        while started.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok((at, line)) if line.contains("domain started") => started = Some(at - began),
                Ok((_, line)) => tail.push(line),
                Err(_) => break,
            }
        }
        // The launcher stops its guest and daemons on SIGTERM; should the signal not go out, the
        // launcher is killed so that the wait ends.
        let signalled = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status()
            .is_ok_and(|s| s.success());
        if !signalled {
            child.kill().context("kill the local launcher")?;
        }
        let status = child.wait().context("wait for the local launcher")?;
        let Some(started) = started else {
            bail!(
                "the local launcher did not start the domain within 120 s ({status}): {}",
                tail.iter().rev().take(3).cloned().collect::<Vec<_>>().join(" | ")
            );
        };
        starts.push(started);
    }
    Ok(starts)
}

/// The table of the sequential starts' splits, against the local start.
pub fn table(splits: &[DomainSplit], serving_to_running: &[Duration], local: &[Duration]) -> String {
    let column = |pick: fn(&DomainSplit) -> Duration| p50(&splits.iter().map(pick).collect::<Vec<_>>());
    let mut out = String::from(
        "**Where the launcher serving -> Running goes** (medians over the sequential starts; the watch's \
         sightings and the launcher's log; a local `virt-launcher run` of the same guest in the same run for \
         comparison)\n\n| span | p50 |\n|---|---|\n",
    );
    let kubelet = column(|s| s.pod_running);
    let rows = [
        ("the kubelet: launcher serving -> pod seen Running", kubelet),
        ("virt-controller: pod Running -> VMI Scheduled", column(|s| s.handover)),
        (
            "virt-handler and the launcher: Scheduled -> domain defined (mounts, pod network, volumes, define)",
            column(|s| s.define),
        ),
        ("libvirt: domain defined -> started", column(|s| s.start)),
        ("virt-handler: domain started -> VMI seen Running", column(|s| s.status)),
    ];
    for (label, value) in rows {
        let _ = writeln!(out, "| {label} | {} |", ms(value));
    }
    let total = p50(serving_to_running);
    let runs = local.len();
    let local = p50(local);
    // Per start, then the median: medians of parts do not add up.
    let ours = p50(&splits
        .iter()
        .zip(serving_to_running)
        .map(|(split, total)| total.saturating_sub(split.pod_running))
        .collect::<Vec<_>>());
    let _ = writeln!(
        out,
        "| local `virt-launcher run`: start -> domain started ({runs} runs) | {} |\n",
        ms(local)
    );
    let over = i128::try_from(ours.as_millis()).unwrap_or(i128::MAX) - i128::try_from(local.as_millis()).unwrap_or(0);
    let _ = write!(
        out,
        "Goal: launcher serving -> Running within 0.2 s of the local host-side start. Serving -> Running is {} \
         against {} locally. Of it, {} are the kubelet noticing the compute container running and reporting the \
         pod Running, which a local run does not wait for; the rest, {}, is {over:+} ms from the local start ({}).\n\n",
        ms(total),
        ms(local),
        ms(kubelet),
        ms(ours),
        if over <= 200 { "met" } else { "not met" },
    );
    out
}
