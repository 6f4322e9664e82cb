//! Whether an operator's workloads serve, as upstream's operators judge it.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};

/// A DaemonSet serves when at least one of its pods is Ready and every node it is scheduled on
/// has a Ready pod (upstream's hostpath-provisioner-operator's `checkDaemonSetReady`).
#[must_use]
pub fn daemon_set_ready(daemon_set: &DaemonSet) -> bool {
    daemon_set
        .status
        .as_ref()
        .is_some_and(|s| s.number_ready > 0 && s.number_ready >= s.desired_number_scheduled)
}

/// A Deployment serves when every replica it wants is Ready, and at least one is.
#[must_use]
pub fn deployment_ready(deployment: &Deployment) -> bool {
    let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    deployment
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .is_some_and(|ready| ready > 0 && ready >= wanted)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSetStatus, DeploymentSpec, DeploymentStatus};

    use super::*;

    fn daemon_set(desired: i32, ready: i32) -> DaemonSet {
        DaemonSet {
            status: Some(DaemonSetStatus {
                desired_number_scheduled: desired,
                number_ready: ready,
                ..DaemonSetStatus::default()
            }),
            ..DaemonSet::default()
        }
    }

    #[test]
    fn a_daemon_set_serves_with_a_ready_pod_on_every_node() {
        // (desired, ready) -> serves
        let cases = [
            ((2, 2), true),
            ((2, 1), false),
            ((0, 0), false),
            ((1, 0), false),
            ((1, 2), true),
        ];
        for ((desired, ready), serves) in cases {
            assert_eq!(
                daemon_set_ready(&daemon_set(desired, ready)),
                serves,
                "{desired} {ready}"
            );
        }
        assert!(!daemon_set_ready(&DaemonSet::default()), "no status yet");
    }

    #[test]
    fn a_deployment_serves_with_every_replica_ready() {
        let deployment = |replicas: Option<i32>, ready: Option<i32>| Deployment {
            spec: Some(DeploymentSpec {
                replicas,
                ..DeploymentSpec::default()
            }),
            status: Some(DeploymentStatus {
                ready_replicas: ready,
                ..DeploymentStatus::default()
            }),
            ..Deployment::default()
        };
        assert!(deployment_ready(&deployment(Some(2), Some(2))));
        assert!(!deployment_ready(&deployment(Some(2), Some(1))));
        assert!(deployment_ready(&deployment(None, Some(1))), "one replica by default");
        assert!(!deployment_ready(&deployment(None, None)));
    }
}
