//! The node's heartbeat: virt-handler labels its node schedulable (or not) for VMIs and stamps a
//! heartbeat annotation, about every minute with jitter, and marks the node unschedulable when it
//! stops. virt-controller treats a stale heartbeat as an unresponsive node.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kubevirt_api::well_known::{annotations, labels};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::clock::Clock;
use crate::cluster_api::ClusterApi;

/// Upstream's heartbeat interval.
pub const INTERVAL: Duration = Duration::from_secs(60);

/// What the node offers VMIs, read on every beat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeFacts {
    /// The kubelet pins exclusive CPUs (static CPU manager policy).
    pub cpu_manager_static: bool,
    /// Realtime scheduling is not throttled (`kernel.sched_rt_runtime_us` is -1).
    pub realtime: bool,
}

impl NodeFacts {
    /// Reads the kubelet's CPU manager state file and the kernel's realtime throttling.
    #[must_use]
    pub fn read(cpu_manager_state: &Path) -> Self {
        Self {
            cpu_manager_static: is_cpu_manager_static(cpu_manager_state),
            realtime: is_realtime_unthrottled(Path::new(SCHED_RT_RUNTIME)),
        }
    }
}

/// The kernel's realtime throttling: -1 leaves realtime threads unthrottled.
const SCHED_RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";

/// The node patch: schedulable label, CPU manager label, the realtime label where realtime VMIs
/// can run (never removed: an administrator may set it), and the heartbeat annotation.
#[must_use]
pub fn node_patch(schedulable: bool, facts: NodeFacts, now: Timestamp) -> serde_json::Value {
    let mut patch = json!({
        "metadata": {
            "labels": {
                labels::NODE_SCHEDULABLE: schedulable.to_string(),
                labels::CPU_MANAGER: facts.cpu_manager_static.to_string(),
            },
            "annotations": {
                annotations::HEARTBEAT: now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            },
        },
    });
    if facts.realtime {
        patch["metadata"]["labels"][labels::REALTIME] = json!("true");
    }
    patch
}

/// Whether the kernel leaves realtime threads unthrottled.
#[must_use]
pub fn is_realtime_unthrottled(sched_rt_runtime: &Path) -> bool {
    std::fs::read_to_string(sched_rt_runtime).is_ok_and(|v| v.trim() == "-1")
}

/// Whether the kubelet's CPU manager state file declares the static policy.
#[must_use]
pub fn is_cpu_manager_static(state_file: &Path) -> bool {
    std::fs::read_to_string(state_file)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .is_some_and(|state| state.get("policyName").and_then(|p| p.as_str()) == Some("static"))
}

/// The wait before the next beat: the interval stretched by up to 20 %, as upstream's sliding
/// jitter, from `entropy` (any changing number).
#[must_use]
pub fn next_wait(interval: Duration, entropy: u32) -> Duration {
    interval + interval.mul_f64(f64::from(entropy % 1000) / 1000.0 * 0.2)
}

/// Beats until `stop`, then marks the node unschedulable.
pub async fn run<C: ClusterApi, K: Clock>(
    api: &C,
    clock: &K,
    node: &str,
    cpu_manager_state: &Path,
    interval: Duration,
    stop: CancellationToken,
) {
    loop {
        let patch = node_patch(true, NodeFacts::read(cpu_manager_state), clock.now());
        if let Err(error) = api.patch_node(node, patch).await {
            warn!(node, error = %error, "heartbeat failed");
        }
        let entropy = clock.now().subsec_nanosecond().unsigned_abs();
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(next_wait(interval, entropy)) => {}
        }
    }
    let patch = node_patch(false, NodeFacts::read(cpu_manager_state), clock.now());
    if let Err(error) = api.patch_node(node, patch).await {
        warn!(node, error = %error, "cannot mark the node unschedulable");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patch_carries_the_labels_and_an_rfc3339_heartbeat() {
        let now: Timestamp = "2026-11-21T10:00:00.123Z".parse().expect("time");
        assert_eq!(
            node_patch(true, NodeFacts::default(), now),
            json!({"metadata": {
                "labels": {"kubevirt.io/schedulable": "true", "cpumanager": "false"},
                "annotations": {"kubevirt.io/heartbeat": "2026-11-21T10:00:00Z"},
            }})
        );
        let realtime = NodeFacts {
            cpu_manager_static: true,
            realtime: true,
        };
        assert_eq!(
            node_patch(true, realtime, now)["metadata"]["labels"],
            json!({"kubevirt.io/schedulable": "true", "cpumanager": "true", "kubevirt.io/realtime": "true"})
        );
    }

    #[test]
    fn the_wait_is_stretched_by_at_most_a_fifth() {
        for entropy in [0, 1, 499, 999, 1000, u32::MAX] {
            let wait = next_wait(INTERVAL, entropy);
            assert!(wait >= INTERVAL && wait <= INTERVAL.mul_f64(1.2), "{wait:?}");
        }
    }

    #[test]
    fn realtime_is_offered_only_when_the_kernel_leaves_it_unthrottled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("sched_rt_runtime_us");
        assert!(!is_realtime_unthrottled(&file), "no file");
        std::fs::write(&file, "950000\n").expect("write");
        assert!(!is_realtime_unthrottled(&file));
        std::fs::write(&file, "-1\n").expect("write");
        assert!(is_realtime_unthrottled(&file));
    }

    #[test]
    fn the_cpu_manager_policy_is_read_from_the_kubelet_state() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("cpu_manager_state");
        assert!(!is_cpu_manager_static(&file), "no file");
        std::fs::write(&file, r#"{"policyName":"none","defaultCpuSet":""}"#).expect("write");
        assert!(!is_cpu_manager_static(&file));
        std::fs::write(&file, r#"{"policyName":"static","defaultCpuSet":"0-3"}"#).expect("write");
        assert!(is_cpu_manager_static(&file));
    }
}
