//! The status a `KubeVirt` gets after a pass, with upstream's phases, conditions, reasons and
//! messages:
//!
//! | pass | phase | Available | Progressing | Degraded | Created | Synchronized |
//! |---|---|---|---|---|---|---|
//! | applied, installing | Deploying | False | True | False (`DeploymentInProgress`) | True | removed |
//! | applied, updating | Deploying | True | True | True (`UpdateInProgress`) | removed | removed |
//! | applied, all ready | Deployed | True | False | False (`AllComponentsReady`) | True | removed |
//! | failed | as it was | False | False | True (`DeploymentFailed`) | as it was | False |
//! | another CR in use | as it was | as they were | | | | False (`ExistingDeployment`) |
//! | deleting | Deleting | False | False | True (`DeletionInProgress`) | removed | removed |
//! | deleted | Deleted | as they were | | | | |
//!
//! `Created` is True (`AllResourcesCreated`) once every object was applied. The target version,
//! registry, deployment ID and config are the pass's; the observed ones, `observedGeneration` and
//! the workloads' generations follow once all is ready. A condition's probe and transition times
//! move only when its status, reason or message does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kubevirt_api::v1::{GenerationStatus, KubeVirt, KubeVirtCondition, KubeVirtStatus};

use crate::render::{Rendered, Target};

/// `Available`.
pub const AVAILABLE: &str = "Available";
/// `Progressing`.
pub const PROGRESSING: &str = "Progressing";
/// `Degraded`.
pub const DEGRADED: &str = "Degraded";
/// `Created`.
pub const CREATED: &str = "Created";
/// `Synchronized`: only written when False.
pub const SYNCHRONIZED: &str = "Synchronized";

/// What a pass did.
#[derive(Clone, Debug, PartialEq)]
pub enum Pass {
    /// Every object it was let apply was applied.
    Applied {
        /// Replacing a deployed install by another.
        updating: bool,
        /// Every component runs the target install and is ready.
        ready: bool,
        /// The workloads' generations, as read back.
        generations: Vec<GenerationStatus>,
    },
    /// An object could not be made or applied; why.
    Failed(String),
    /// Another KubeVirt CR is the one in use.
    Existing,
    /// The CR is being deleted and its objects are being removed.
    Deleting,
    /// Everything it made is gone.
    Deleted,
}

/// The target of a pass: what it deploys.
#[derive(Clone, Copy, Debug)]
pub struct Aim<'a> {
    /// Registry and tag.
    pub target: &'a Target,
    /// The rendered install, for its ID and config.
    pub rendered: &'a Rendered,
    /// The operator's version.
    pub operator_version: &'a str,
}

/// The CR's new status.
#[must_use]
pub fn decide(cr: &KubeVirt, pass: &Pass, aim: Option<Aim<'_>>, now: &Time) -> KubeVirtStatus {
    let old = cr.status.clone().unwrap_or_default();
    let mut status = old.clone();
    if let Some(aim) = aim {
        status.operator_version = Some(aim.operator_version.to_owned());
        status.target_kube_virt_version = Some(aim.target.tag.clone());
        status.target_kube_virt_registry = Some(aim.target.registry.clone());
        status.target_deployment_id = Some(aim.rendered.deployment_id.clone());
        status.target_deployment_config = Some(aim.rendered.deployment_config.clone());
    }
    let all = |reason: &str, message: &str, available: &str, progressing: &str, degraded: &str| {
        [(AVAILABLE, available), (PROGRESSING, progressing), (DEGRADED, degraded)]
            .map(|(t, s)| (t, s.to_owned(), reason.to_owned(), message.to_owned()))
    };
    let (set, remove): (Vec<_>, &[&str]) = match pass {
        Pass::Applied {
            updating,
            ready,
            generations,
        } => {
            let created = (
                CREATED,
                "True".to_owned(),
                "AllResourcesCreated".to_owned(),
                "All resources were created.".to_owned(),
            );
            if *ready {
                status.phase = Some("Deployed".to_owned());
                if let Some(aim) = aim {
                    status.observed_kube_virt_version = Some(aim.target.tag.clone());
                    status.observed_kube_virt_registry = Some(aim.target.registry.clone());
                    status.observed_deployment_id = Some(aim.rendered.deployment_id.clone());
                    status.observed_deployment_config = Some(aim.rendered.deployment_config.clone());
                }
                status.observed_generation = cr.metadata.generation;
                status.generations.clone_from(generations);
                let mut set = all(
                    "AllComponentsReady",
                    "All components are ready.",
                    "True",
                    "False",
                    "False",
                )
                .to_vec();
                set.push(created);
                (set, &[SYNCHRONIZED])
            } else if *updating {
                status.phase = Some("Deploying".to_owned());
                let message = format!(
                    "Transitioning from previous version {} with registry {} to target version {} using registry {}",
                    old.observed_kube_virt_version.as_deref().unwrap_or_default(),
                    old.observed_kube_virt_registry.as_deref().unwrap_or_default(),
                    status.target_kube_virt_version.as_deref().unwrap_or_default(),
                    status.target_kube_virt_registry.as_deref().unwrap_or_default(),
                );
                let set = all("UpdateInProgress", &message, "True", "True", "True").to_vec();
                (set, &[CREATED, SYNCHRONIZED])
            } else {
                status.phase = Some("Deploying".to_owned());
                let message = format!(
                    "Deploying version {} with registry {}",
                    status.target_kube_virt_version.as_deref().unwrap_or_default(),
                    status.target_kube_virt_registry.as_deref().unwrap_or_default(),
                );
                let mut set = all("DeploymentInProgress", &message, "False", "True", "False").to_vec();
                set.push(created);
                (set, &[SYNCHRONIZED])
            }
        }
        Pass::Failed(why) => {
            let message = format!("An error occurred during deployment: {why}");
            let mut set = all("DeploymentFailed", &message, "False", "False", "True").to_vec();
            set.push((SYNCHRONIZED, "False".to_owned(), "DeploymentFailed".to_owned(), message));
            (set, &[])
        }
        Pass::Existing => (
            vec![(
                SYNCHRONIZED,
                "False".to_owned(),
                "ExistingDeployment".to_owned(),
                "There is an active KubeVirt deployment".to_owned(),
            )],
            &[],
        ),
        Pass::Deleting => {
            status.phase = Some("Deleting".to_owned());
            let set = all("DeletionInProgress", "Deletion was triggered", "False", "False", "True").to_vec();
            (set, &[CREATED, SYNCHRONIZED])
        }
        Pass::Deleted => {
            status.phase = Some("Deleted".to_owned());
            (Vec::new(), &[])
        }
    };
    status.conditions = stamp(&old.conditions, &set, remove, now);
    status
}

/// The conditions after setting `set` (type, status, reason, message) and removing `remove`, the
/// others kept; a condition keeps its times while its status, reason and message stay.
fn stamp(
    old: &[KubeVirtCondition],
    set: &[(&str, String, String, String)],
    remove: &[&str],
    now: &Time,
) -> Vec<KubeVirtCondition> {
    let mut conditions: Vec<KubeVirtCondition> = old
        .iter()
        .filter(|c| !remove.contains(&c.condition_type.as_str()))
        .cloned()
        .collect();
    for (condition_type, status, reason, message) in set {
        let wanted = KubeVirtCondition {
            condition_type: (*condition_type).to_owned(),
            status: status.clone(),
            reason: Some(reason.clone()),
            message: Some(message.clone()),
            last_probe_time: Some(now.clone()),
            last_transition_time: Some(now.clone()),
        };
        match conditions.iter_mut().find(|c| c.condition_type == *condition_type) {
            Some(existing) => {
                let same = existing.status == wanted.status
                    && existing.reason == wanted.reason
                    && existing.message == wanted.message;
                if !same {
                    *existing = wanted;
                }
            }
            None => conditions.push(wanted),
        }
    }
    conditions
}

#[cfg(test)]
#[path = "status_tests.rs"]
mod tests;
