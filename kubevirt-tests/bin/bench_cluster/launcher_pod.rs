//! The launcher pods of the sequential starts against the floor: plain pods on the same cluster
//! (a pause container only, and one shaped as the launcher pod), created -> Running one at a time,
//! and where the launcher pod's start goes ([`crate::pod_start`]).

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;

use crate::watch::PhaseWatch;
use crate::{Kubectl, domain_start, ms, since, stats};

/// The launcher pods of the sequential starts: created -> Running, their start's spans, and their
/// shape (init containers, containers).
pub struct LauncherPods {
    pub created_to_running: Vec<Duration>,
    pub spans: Vec<Vec<(String, Duration)>>,
    pub shape: (usize, usize),
}

pub fn launcher_pod_starts(
    kubectl: &Kubectl,
    watch: &PhaseWatch,
    cluster_dir: &Path,
    names: &[String],
) -> anyhow::Result<LauncherPods> {
    let mut pods = LauncherPods {
        created_to_running: Vec::new(),
        spans: Vec::new(),
        shape: (0, 0),
    };
    for name in names {
        let uid = watch.uid(name).context("uid")?;
        let pod = watch.launcher_pod(&uid).context("the launcher pod")?;
        let key = format!("pod/{pod}");
        let created = watch.when(&key, "").context("pod created")?;
        let running = watch.wait_for(&key, "Running", Duration::from_secs(60))?;
        pods.created_to_running.push(since(created, running));
        let scheduled = watch.pod_bound(&uid).context("pod bound")?;
        let steps = crate::pod_start::steps_on_nodes(cluster_dir, &pod)?;
        pods.spans.push(crate::pod_start::spans(
            scheduled,
            &steps,
            domain_start::launcher_times(kubectl, &uid)?.serving,
        ));
        if pods.shape == (0, 0) {
            let spec: serde_json::Value =
                serde_json::from_str(&kubectl.run(&["get", "pod", &pod, "-o", "json"], None)?)
                    .context("the launcher pod's JSON")?;
            let count = |field: &str| spec["spec"][field].as_array().map_or(0, Vec::len);
            pods.shape = (count("initContainers"), count("containers"));
        }
    }
    Ok(pods)
}

/// Created -> Running of the floor's plain pods, one at a time: (pause, shaped like a launcher).
pub fn floor(
    kubectl: &Kubectl,
    watch: &PhaseWatch,
    shape: &(usize, usize),
    runs: usize,
) -> anyhow::Result<[Vec<Duration>; 2]> {
    // cluster/build.sh keeps the pause image's version beside the kubectl it built.
    let version_file = kubectl.binary.with_file_name("pause.version");
    let version = std::fs::read_to_string(&version_file)
        .map(|v| v.trim().to_owned())
        .with_context(|| format!("the pause image's version: {}", version_file.display()))?;
    let image = format!("registry.k8s.io/pause:{version}");
    let mut floor = [Vec::new(), Vec::new()];
    for index in 0..runs {
        for (slot, (name, yaml)) in crate::pod_start::floor_manifests(index, shape.0, shape.1, &image)
            .into_iter()
            .enumerate()
        {
            kubectl.run(&["create", "-f", "-"], Some(&yaml))?;
            let key = format!("pod/{name}");
            let running = watch.wait_for(&key, "Running", Duration::from_secs(120))?;
            let created = watch.when(&key, "").context("created")?;
            floor[slot].push(since(created, running));
            kubectl.run(&["delete", "pod", &name, "--wait=true", "--timeout=60s"], None)?;
        }
    }
    Ok(floor)
}

pub fn pod_start_table(launchers: &LauncherPods, floor: &[Vec<Duration>; 2]) -> String {
    let row = |label: &str, values: &[Duration]| {
        let (p50, max) = stats(values);
        format!("| {label} | {} | {} |\n", ms(p50), ms(max))
    };
    let (init, containers) = launchers.shape;
    let mut out = format!(
        "**A launcher pod's start against plain pods** (pod created -> Running, one at a time, on the same cluster)\n\n| pod | p50 | max |\n|---|---|---|\n{}{}{}",
        row("a pause container only", &floor[0]),
        row(
            &format!(
                "shaped as the launcher pod: {init} init containers (busybox `true`), {containers} pause containers"
            ),
            &floor[1]
        ),
        row("the launcher pod of the test guest", &launchers.created_to_running)
    );
    let (launcher, shaped) = (stats(&launchers.created_to_running).0, stats(&floor[1]).0);
    let over = launcher.as_millis().saturating_sub(shaped.as_millis());
    let _ = writeln!(
        out,
        "\nGoal: the launcher pod within 0.5 s of the pod shaped like it: {over} ms over ({}).\n",
        if over <= 500 { "met" } else { "**not met**" }
    );
    out.push_str(
        "**Where the launcher pod's start goes** (medians over the sequential starts, from the pod bound to a node \
         to the launcher serving; containerd's own log on the node for its steps, the gaps between them the \
         kubelet's)\n\n| span | p50 |\n|---|---|\n",
    );
    for (label, duration) in crate::pod_start::median_spans(&launchers.spans) {
        let _ = writeln!(out, "| {label} | {} |", ms(duration));
    }
    out.push('\n');
    out
}
