//! Where a launcher pod's start goes, from containerd's own log on the pod's node: the sandbox
//! (`RunPodSandbox`, the pod network included), then each container in the order the kubelet made
//! them (init containers one after another, then the others), created and started, and the gaps
//! between, which are the kubelet's (noticing an init container's exit, its sync). Beside it the
//! floor: plain pods on the same cluster, one with a pause container only, one shaped as the test
//! guest's launcher pod (as many init containers and containers, running a trivial static binary).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};

/// One step of a pod's start as containerd logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// `sandbox`, `create <container>` or `start <container>`.
    pub what: String,
    /// When it was asked for.
    pub asked: SystemTime,
    /// When it returned.
    pub done: SystemTime,
}

fn time_of(line: &str) -> Option<SystemTime> {
    let stamp = line.strip_prefix("time=\"")?.split('"').next()?;
    let at: k8s_openapi::jiff::Timestamp = stamp.parse().ok()?;
    let nanos = u64::try_from(at.as_nanosecond()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_nanos(nanos))
}

/// The text between `prefix` and the next `"` (or `,` for metadata names) after it.
fn after<'a>(line: &'a str, prefix: &str, end: char) -> Option<&'a str> {
    let rest = &line[line.find(prefix)? + prefix.len()..];
    rest.split(end).next()
}

/// containerd's steps for the pod `pod` in a node's `containerd.log`, in the order they were asked.
#[must_use]
pub fn steps(log: &str, pod: &str) -> Vec<Step> {
    let sandbox_prefix = format!("RunPodSandbox for &PodSandboxMetadata{{Name:{pod},");
    let mut sandbox = None;
    let mut asked: BTreeMap<String, SystemTime> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    let mut out = Vec::new();
    for line in log.lines() {
        let Some(at) = time_of(line) else { continue };
        if line.contains(&sandbox_prefix) {
            match after(line, "returns sandbox id \\\"", '\\') {
                Some(id) => {
                    if let Some(start) = asked.remove("sandbox") {
                        out.push(Step {
                            what: "sandbox".to_owned(),
                            asked: start,
                            done: at,
                        });
                    }
                    sandbox = Some(id.to_owned());
                }
                None => {
                    asked.insert("sandbox".to_owned(), at);
                }
            }
            continue;
        }
        let Some(id) = sandbox.as_deref() else { continue };
        if line.contains(&format!("CreateContainer within sandbox \\\"{id}\\\"")) {
            let Some(name) = after(line, "&ContainerMetadata{Name:", ',') else {
                continue;
            };
            let key = format!("create {name}");
            match after(line, "returns container id \\\"", '\\') {
                Some(container) => {
                    names.insert(container.to_owned(), name.to_owned());
                    if let Some(start) = asked.remove(&key) {
                        out.push(Step {
                            what: key,
                            asked: start,
                            done: at,
                        });
                    }
                }
                None => {
                    asked.insert(key, at);
                }
            }
        } else if let Some(container) = after(line, "StartContainer for \\\"", '\\')
            && let Some(name) = names.get(container)
        {
            let key = format!("start {name}");
            if line.contains("returns successfully") {
                if let Some(start) = asked.remove(&key) {
                    out.push(Step {
                        what: key,
                        asked: start,
                        done: at,
                    });
                }
            } else {
                asked.insert(key, at);
            }
        }
    }
    out.sort_by_key(|s| s.asked);
    out
}

/// The steps of pod `pod` on whichever node of the cluster in `cluster_dir` ran it.
pub fn steps_on_nodes(cluster_dir: &Path, pod: &str) -> anyhow::Result<Vec<Step>> {
    let nodes = std::fs::read_dir(cluster_dir.join("nodes")).context("nodes dir")?;
    for node in nodes.filter_map(Result::ok) {
        let log = std::fs::read_to_string(node.path().join("containerd.log")).unwrap_or_default();
        let found = steps(&log, pod);
        if !found.is_empty() {
            return Ok(found);
        }
    }
    bail!("no node's containerd logged pod {pod}")
}

/// A pod's start as spans from `scheduled`: when containerd was first asked, each step, the
/// waits between, and the end (`ready`: the launcher serving, or the last container started).
#[must_use]
pub fn spans(scheduled: SystemTime, steps: &[Step], ready: SystemTime) -> Vec<(String, Duration)> {
    let since = |a: SystemTime, b: SystemTime| b.duration_since(a).unwrap_or_default();
    let mut out = Vec::new();
    let mut last = scheduled;
    for step in steps {
        let wait = since(last, step.asked);
        let label = if last == scheduled {
            "kubelet: scheduled -> first request".to_owned()
        } else {
            format!("kubelet: before {}", step.what)
        };
        out.push((label, wait));
        out.push((format!("containerd: {}", step.what), since(step.asked, step.done)));
        last = step.done;
    }
    out.push((
        "after the last container started -> serving".to_owned(),
        since(last, ready),
    ));
    out
}

/// The medians of the spans of several pods (spans matched by label, in the first pod's order).
#[must_use]
pub fn median_spans(all: &[Vec<(String, Duration)>]) -> Vec<(String, Duration)> {
    let Some(first) = all.first() else { return Vec::new() };
    first
        .iter()
        .map(|(label, _)| {
            let mut values: Vec<Duration> = all
                .iter()
                .filter_map(|spans| spans.iter().find(|(l, _)| l == label).map(|(_, d)| *d))
                .collect();
            values.sort();
            (label.clone(), values.get(values.len() / 2).copied().unwrap_or_default())
        })
        .collect()
}

/// The floor's pods: `bench-floor-pause-<i>` (a pause container) and `bench-floor-shaped-<i>`
/// (`init` init containers exiting at once, then `containers` containers that sleep), labelled
/// for the watch.
#[must_use]
pub fn floor_manifests(index: usize, init: usize, containers: usize, pause_image: &str) -> [(String, String); 2] {
    let head = |name: &str| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: default\n  labels: {{kubevirt-rs.io/bench-floor: \"true\"}}\nspec:\n  terminationGracePeriodSeconds: 0\n"
        )
    };
    let pause = format!("bench-floor-pause-{index}");
    let shaped = format!("bench-floor-shaped-{index}");
    let mut shaped_yaml = head(&shaped);
    shaped_yaml.push_str("  initContainers:\n");
    for i in 0..init {
        let _ = writeln!(
            shaped_yaml,
            "    - {{name: init-{i}, image: \"localhost/kubevirt-rs/testclient:latest\", imagePullPolicy: IfNotPresent, command: [/bin/busybox, \"true\"]}}"
        );
    }
    shaped_yaml.push_str("  containers:\n");
    for i in 0..containers {
        let _ = writeln!(
            shaped_yaml,
            "    - {{name: main-{i}, image: \"{pause_image}\", imagePullPolicy: IfNotPresent}}"
        );
    }
    let pause_yaml = format!(
        "{}  containers:\n    - {{name: pause, image: \"{pause_image}\", imagePullPolicy: IfNotPresent}}\n",
        head(&pause)
    );
    [(pause, pause_yaml), (shaped, shaped_yaml)]
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"time="2026-11-28T22:30:51.045688058Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:p,Uid:u,Namespace:default,Attempt:0,}"
time="2026-11-28T22:30:51.294735055Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:p,Uid:u,Namespace:default,Attempt:0,} returns sandbox id \"sb\""
time="2026-11-28T22:30:51.310200917Z" level=info msg="CreateContainer within sandbox \"sb\" for container &ContainerMetadata{Name:main,Attempt:0,}"
time="2026-11-28T22:30:51.327747842Z" level=info msg="CreateContainer within sandbox \"sb\" for &ContainerMetadata{Name:main,Attempt:0,} returns container id \"c1\""
time="2026-11-28T22:30:51.329370125Z" level=info msg="StartContainer for \"c1\""
time="2026-11-28T22:30:51.448796422Z" level=info msg="StartContainer for \"c1\" returns successfully"
time="2026-11-28T22:30:52.000000000Z" level=info msg="RunPodSandbox for &PodSandboxMetadata{Name:other,Uid:v,Namespace:default,Attempt:0,}"
"#;

    #[test]
    fn containerds_lines_become_the_pods_steps() {
        let found = steps(LOG, "p");
        let whats: Vec<&str> = found.iter().map(|s| s.what.as_str()).collect();
        assert_eq!(whats, ["sandbox", "create main", "start main"]);
        let sandbox = found[0].done.duration_since(found[0].asked).expect("order");
        assert_eq!(sandbox.as_micros(), 249_046);
        assert!(steps(LOG, "q").is_empty());
        let spans = spans(found[0].asked, &found, found[2].done + Duration::from_millis(5));
        assert_eq!(spans.len(), 7);
        assert_eq!(spans.last().map(|(_, d)| d.as_millis()), Some(5));
    }
}
