//! The status an `SSP` gets after a pass, decided from what the pass did and what the validator's
//! Deployment reports, with upstream's phases and messages. Each condition's reason is its type,
//! as upstream's:
//!
//! | pass | Deployment | phase | Available | Progressing | Degraded |
//! |---|---|---|---|---|---|
//! | applied | serves | Deployed | True "All SSP resources are available" | False "No SSP resources are progressing" | False "No SSP resources are degraded" |
//! | applied | some pods run | Deploying | True (as above) | True "Deployment ns/name: Not all pods …" | True (the same) |
//! | applied | no pod runs | Deploying | False "Deployment ns/name: No pods for deployment …" | True "… Not all pods …" | True (the same) |
//! | failed | any | Deploying | False "Error: why" | True (the same) | True (the same) |
//! | deleting | any | Deleting | False "Deleting SSP resources" | True (the same) | True (the same) |
//! | paused | any | as it was | as they were | | |
//!
//! `observedVersion` becomes the operator's version when Deployed; `operatorVersion` and
//! `targetVersion` are the operator's version; `observedGeneration` is the spec's generation.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operator_kit::conditions::{AVAILABLE, DEGRADED, PROGRESSING, Wanted, stamp};
use operator_kit::rollout::deployment_ready;

use crate::api::{SSP, SSPStatus};
use crate::render::VALIDATOR;

/// What a pass did.
#[derive(Clone, Debug, PartialEq)]
pub enum Pass {
    /// Every object was applied; the Deployment as read back.
    Applied(Option<Box<Deployment>>),
    /// An object could not be made or applied, or the SSP is not the one in use; why.
    Failed(String),
    /// The SSP is being deleted and its objects are being removed.
    Deleting,
    /// `kubevirt.io/operator.paused` is set.
    Paused,
}

/// One condition's status and message (its reason is its type).
type Stated = (&'static str, String);

fn triple(available: Stated, progressing: Stated, degraded: Stated) -> [(&'static str, Stated); 3] {
    [(AVAILABLE, available), (PROGRESSING, progressing), (DEGRADED, degraded)]
}

/// Upstream's view of the Deployment: the message when no pod runs, and the message when not
/// all run; `None` where that is not so.
fn deployment_problems(namespace: &str, deployment: Option<&Deployment>) -> (Option<String>, Option<String>) {
    let wanted = deployment
        .and_then(|d| d.spec.as_ref())
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let running = deployment
        .and_then(|d| d.status.as_ref())
        .and_then(|s| s.available_replicas)
        .unwrap_or(0);
    let none_left = deployment.is_some_and(|d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.replicas.unwrap_or(0) == 0 && s.observed_generation >= d.metadata.generation)
    });
    // Scaled to none: nothing is missing once the last replica is gone.
    if deployment.is_some_and(deployment_ready) || (wanted == 0 && none_left) {
        return (None, None);
    }
    let at = format!("Deployment {namespace}/{VALIDATOR}");
    let none_running = (wanted > 0 && running == 0)
        .then(|| format!("{at}: No pods for deployment {namespace}/{VALIDATOR} are running. Expected: {wanted}"));
    let not_all = format!(
        "{at}: Not all pods for deployment {namespace}/{VALIDATOR} are running. Expected: {wanted}, running: {running}"
    );
    (none_running, Some(not_all))
}

/// The SSP's new status.
#[must_use]
pub fn decide(cr: &SSP, pass: &Pass, version: &str, now: &Time) -> SSPStatus {
    let old = cr.status.clone().unwrap_or_default();
    let namespace = cr.metadata.namespace.as_deref().unwrap_or_default();
    let failing = |message: String| triple(("False", message.clone()), ("True", message.clone()), ("True", message));
    let (phase, conditions) = match pass {
        Pass::Applied(deployment) => match deployment_problems(namespace, deployment.as_deref()) {
            (None, None) => (
                "Deployed",
                triple(
                    ("True", "All SSP resources are available".to_owned()),
                    ("False", "No SSP resources are progressing".to_owned()),
                    ("False", "No SSP resources are degraded".to_owned()),
                ),
            ),
            (none_running, not_all) => {
                let not_all = not_all.unwrap_or_default();
                let available = none_running.map_or_else(
                    || ("True", "All SSP resources are available".to_owned()),
                    |m| ("False", m),
                );
                (
                    "Deploying",
                    triple(available, ("True", not_all.clone()), ("True", not_all)),
                )
            }
        },
        Pass::Failed(why) => ("Deploying", failing(format!("Error: {why}"))),
        Pass::Deleting => ("Deleting", failing("Deleting SSP resources".to_owned())),
        Pass::Paused => {
            return SSPStatus {
                paused: Some(true),
                ..old
            };
        }
    };
    let wanted = conditions.each_ref().map(|(condition_type, (status, message))| Wanted {
        condition_type,
        status,
        reason: Some(*condition_type),
        message: Some(message.as_str()),
    });
    let deployed = phase == "Deployed";
    SSPStatus {
        phase: Some(phase.to_owned()),
        conditions: stamp(&old.conditions, wanted, now),
        operator_version: Some(version.to_owned()),
        target_version: Some(version.to_owned()),
        observed_version: if deployed {
            Some(version.to_owned())
        } else {
            old.observed_version
        },
        paused: Some(false),
        observed_generation: cr.metadata.generation.or(old.observed_generation),
    }
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
