//! The status a `CDI` gets after a pass, decided from what the pass did and what CDI's three
//! Deployments report, with upstream's phases, conditions, reasons and messages:
//!
//! | pass | Deployments serve | installed before | phase | conditions (Available, Progressing, Degraded) | reason |
//! |---|---|---|---|---|---|
//! | another CDI is the one installed | any | any | `Error` | False, False, True | `ConfigError` |
//! | a field it does not act on | any | any | `Error` | False, False, True | `ConfigError` |
//! | failed | any | never | `Deploying` | False, True, True | `Reconcile Failed` |
//! | failed | any | yes | `Deployed` | False, True, True | `Reconcile Failed` |
//! | applied | yes | any | `Deployed` | True, False, False | `Complete` |
//! | applied | no | never | `Deploying` | False, True, False | `DeployStarted` |
//! | applied | no | this version | `Deployed` | False, False, True | `Degraded` |
//! | applied | no | another version | `Upgrading` | True, True, True | `UpgradeStarted` |
//!
//! The Deployments serve when each has rolled out its latest spec with every replica Ready
//! ([`operator_kit::rollout::deployment_ready`]); `observedVersion` becomes the operator's version
//! then.

use cdi_api::CDI;
use cdi_api::cdi::CDIStatus;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operator_kit::conditions::{self, Health};
use operator_kit::rollout::deployment_ready;

/// What a pass did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pass {
    /// Every object was applied.
    Applied,
    /// An object could not be applied; why.
    Failed(String),
    /// The CR asks for what the operator does not do, or is not the CDI installed; why.
    Refused(String),
}

/// The message of a CDI that is not the one installed, upstream's.
pub const UNWANTED: &str = "Reconciling to error state, unwanted CDI object";

/// The CR's new status.
#[must_use]
pub fn decide(cr: &CDI, pass: &Pass, deployments: &[Option<Deployment>], version: &str, now: &Time) -> CDIStatus {
    let old = cr.status.clone().unwrap_or_default();
    let serves = matches!(pass, Pass::Applied) && deployments.iter().all(|d| d.as_ref().is_some_and(deployment_ready));
    let installed = old.observed_version.as_deref();
    let (phase, health) = match (pass, serves, installed) {
        (Pass::Refused(why), _, _) => (
            "Error",
            Health::Failed {
                reason: "ConfigError".to_owned(),
                message: why.clone(),
            },
        ),
        (Pass::Failed(why), _, installed) => (
            if installed.is_some() { "Deployed" } else { "Deploying" },
            Health::FailedHealing {
                reason: "Reconcile Failed".to_owned(),
                message: format!("Unable to successfully reconcile: {why}"),
            },
        ),
        (Pass::Applied, true, _) => (
            "Deployed",
            Health::Healthy {
                reason: "Complete".to_owned(),
                message: "Application Available".to_owned(),
            },
        ),
        (Pass::Applied, false, None) => (
            "Deploying",
            Health::Deploying {
                reason: "DeployStarted".to_owned(),
                message: "Started Deployment".to_owned(),
            },
        ),
        (Pass::Applied, false, Some(observed)) if observed == version => (
            "Deployed",
            Health::Failed {
                reason: "Degraded".to_owned(),
                message: "Not all deployments running".to_owned(),
            },
        ),
        (Pass::Applied, false, Some(_)) => (
            "Upgrading",
            Health::Upgrading {
                reason: "UpgradeStarted".to_owned(),
                message: format!("Started upgrade to version {version}"),
            },
        ),
    };
    CDIStatus {
        phase: Some(phase.to_owned()),
        conditions: conditions::apply(&old.conditions, &health, now),
        operator_version: Some(version.to_owned()),
        target_version: Some(version.to_owned()),
        observed_version: if serves {
            Some(version.to_owned())
        } else {
            old.observed_version
        },
    }
}
