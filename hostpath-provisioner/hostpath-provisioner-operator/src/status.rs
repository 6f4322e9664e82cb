//! The status a `HostPathProvisioner` gets after a pass, decided from what the pass did and what
//! the CSI DaemonSet reports, with upstream's conditions, reasons and messages:
//!
//! | pass | DaemonSet serves | installed before | conditions (Available, Progressing, Degraded) | reason |
//! |---|---|---|---|---|
//! | failed | any | any | False, True, True | `Reconcile Failed` |
//! | applied | yes | any | True, False, False | `Complete` |
//! | applied | no | never | False, True, False | `DeployStarted` |
//! | applied | no | this version | False, False, True | `Degraded` |
//! | applied | no | another version | True, True, True | `UpgradeStarted` |
//!
//! The DaemonSet serves when every node it is scheduled on runs a Ready pod of its latest spec
//! ([`operator_kit::rollout::daemon_set_ready`]); `observedVersion` becomes the operator's version
//! then. Each pool is `Ready` (a path pool needs nothing prepared), listed by name.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operator_kit::conditions::{self, Health};
use operator_kit::rollout::daemon_set_ready;

use crate::api::{HostPathProvisioner, HostPathProvisionerStatus, StoragePoolStatus};

/// What a pass did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Every object was applied.
    Applied,
    /// An object could not be applied; why.
    Failed(String),
}

/// The CR's new status.
#[must_use]
pub fn decide(
    cr: &HostPathProvisioner,
    pass: &Pass,
    daemon_set: Option<&DaemonSet>,
    version: &str,
    now: &Time,
) -> HostPathProvisionerStatus {
    let old = cr.status.clone().unwrap_or_default();
    let serves = matches!(pass, Pass::Applied) && daemon_set.is_some_and(daemon_set_ready);
    let health = match (pass, serves, old.observed_version.as_deref()) {
        (Pass::Failed(why), _, _) => Health::FailedHealing {
            reason: "Reconcile Failed".to_owned(),
            message: format!("Unable to successfully reconcile: {why}"),
        },
        (Pass::Applied, true, _) => Health::Healthy {
            reason: "Complete".to_owned(),
            message: "Application Available".to_owned(),
        },
        (Pass::Applied, false, None) => Health::Deploying {
            reason: "DeployStarted".to_owned(),
            message: "Started Deployment".to_owned(),
        },
        (Pass::Applied, false, Some(observed)) if observed == version => Health::Failed {
            reason: "Degraded".to_owned(),
            message: "CR is deployed but DaemonSets are not ready".to_owned(),
        },
        (Pass::Applied, false, Some(_)) => Health::Upgrading {
            reason: "UpgradeStarted".to_owned(),
            message: format!("Started upgrade to version {version}"),
        },
    };
    let mut pools: Vec<StoragePoolStatus> = cr
        .spec
        .storage_pools
        .iter()
        .map(|p| StoragePoolStatus {
            name: p.name.clone(),
            phase: "Ready".to_owned(),
            ..StoragePoolStatus::default()
        })
        .collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    HostPathProvisionerStatus {
        conditions: conditions::apply(&old.conditions, &health, now),
        operator_version: Some(version.to_owned()),
        target_version: Some(version.to_owned()),
        observed_version: if serves {
            Some(version.to_owned())
        } else {
            old.observed_version
        },
        storage_pool_statuses: pools,
    }
}
