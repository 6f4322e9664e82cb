//! Whether an operator's workloads serve, as upstream's operators judge it.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};

/// A DaemonSet serves when its controller has seen its latest spec, every node it is scheduled on
/// runs a pod of that spec, and each of those pods is Ready (at least one). Upstream's
/// hostpath-provisioner-operator counts Ready pods only (`checkDaemonSetReady`), so a DaemonSet
/// whose new pods have not started yet still serves there.
#[must_use]
pub fn daemon_set_ready(daemon_set: &DaemonSet) -> bool {
    let generation = daemon_set.metadata.generation.unwrap_or(0);
    daemon_set.status.as_ref().is_some_and(|s| {
        s.observed_generation.unwrap_or(0) >= generation
            && s.number_ready > 0
            && s.number_ready >= s.desired_number_scheduled
            && s.updated_number_scheduled.unwrap_or(0) >= s.desired_number_scheduled
    })
}

/// A Deployment serves when its controller has seen its latest spec, no replica of an older spec
/// is left, and every replica it wants is updated and available (at least one Ready).
#[must_use]
pub fn deployment_ready(deployment: &Deployment) -> bool {
    let generation = deployment.metadata.generation.unwrap_or(0);
    let wanted = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    deployment.status.as_ref().is_some_and(|s| {
        let updated = s.updated_replicas.unwrap_or(0);
        // As `kubectl rollout status`: no old replica left, every wanted one updated and available.
        s.observed_generation.unwrap_or(0) >= generation
            && s.ready_replicas.unwrap_or(0) > 0
            && updated >= wanted
            && s.replicas.unwrap_or(0) <= updated
            && s.available_replicas.unwrap_or(0) >= wanted
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::{DaemonSetStatus, DeploymentSpec, DeploymentStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn daemon_set(generation: i64, seen: i64, desired: i32, updated: i32, ready: i32) -> DaemonSet {
        DaemonSet {
            metadata: ObjectMeta {
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            status: Some(DaemonSetStatus {
                observed_generation: Some(seen),
                desired_number_scheduled: desired,
                updated_number_scheduled: Some(updated),
                number_ready: ready,
                ..DaemonSetStatus::default()
            }),
            ..DaemonSet::default()
        }
    }

    #[test]
    fn a_daemon_set_serves_with_a_ready_pod_of_its_latest_spec_on_every_node() {
        // (generation, observed, desired, updated, ready) -> serves
        let cases = [
            ((2, 2, 2, 2, 2), true),
            ((2, 2, 2, 2, 1), false),
            ((2, 2, 2, 1, 2), false),
            ((3, 2, 2, 2, 2), false),
            ((2, 2, 0, 0, 0), false),
            ((2, 2, 1, 1, 0), false),
            ((2, 3, 1, 2, 2), true),
        ];
        for ((generation, seen, desired, updated, ready), serves) in cases {
            assert_eq!(
                daemon_set_ready(&daemon_set(generation, seen, desired, updated, ready)),
                serves,
                "{generation} {seen} {desired} {updated} {ready}"
            );
        }
        assert!(!daemon_set_ready(&DaemonSet::default()), "no status yet");
    }

    #[test]
    fn a_deployment_serves_with_every_replica_updated_and_ready() {
        let deployment = |replicas: Option<i32>, updated: Option<i32>, ready: Option<i32>| Deployment {
            // Every existing replica is one of the updated ones here; `ready` are available too.
            metadata: ObjectMeta {
                generation: Some(1),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec {
                replicas,
                ..DeploymentSpec::default()
            }),
            status: Some(DeploymentStatus {
                observed_generation: Some(1),
                replicas: updated,
                updated_replicas: updated,
                ready_replicas: ready,
                available_replicas: ready,
                ..DeploymentStatus::default()
            }),
        };
        assert!(deployment_ready(&deployment(Some(2), Some(2), Some(2))));
        assert!(!deployment_ready(&deployment(Some(2), Some(2), Some(1))));
        assert!(!deployment_ready(&deployment(Some(2), Some(1), Some(2))));
        assert!(
            deployment_ready(&deployment(None, Some(1), Some(1))),
            "one replica by default"
        );
        assert!(!deployment_ready(&deployment(None, None, None)));
        let mut surging = deployment(Some(1), Some(1), Some(1));
        if let Some(status) = surging.status.as_mut() {
            status.replicas = Some(2);
        }
        assert!(!deployment_ready(&surging), "an old replica is still there");
    }
}
