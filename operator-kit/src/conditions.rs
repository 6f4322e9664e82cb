//! Upstream's operator conditions (`conditionsv1.Condition` from openshift's
//! custom-resource-status): `Available`, `Progressing` and `Degraded`, the three that every
//! KubeVirt operator's CR reports. An operator decides one [`Health`]; [`apply`] turns it into the
//! three conditions as upstream's `MarkCr…` helpers do, keeping each condition's times while it
//! stays the same.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `Available`: the operands serve.
pub const AVAILABLE: &str = "Available";
/// `Progressing`: the operator is still creating or changing them.
pub const PROGRESSING: &str = "Progressing";
/// `Degraded`: something is wrong.
pub const DEGRADED: &str = "Degraded";

/// An operator condition (`conditionsv1.Condition`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OperatorCondition {
    /// `Available`, `Progressing` or `Degraded`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Why, as a word.
    pub reason: Option<String>,
    /// Why, as a sentence.
    pub message: Option<String>,
    /// When it was last looked at.
    pub last_heartbeat_time: Option<Time>,
    /// When it last changed.
    pub last_transition_time: Option<Time>,
}

/// How an operator's install stands, in upstream's terms. The reason and message go on the one
/// condition that explains the state, as upstream's helpers put them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// Being created (upstream's `MarkCrDeploying`): not Available, Progressing (with the
    /// reason), not Degraded.
    Deploying {
        /// Upstream's `DeployStarted`.
        reason: String,
        /// Upstream's "Started Deployment".
        message: String,
    },
    /// Everything serves (`MarkCrHealthyMessage`): Available (with the reason), not
    /// Progressing, not Degraded.
    Healthy {
        /// Upstream's `Complete`.
        reason: String,
        /// Upstream's "Application Available".
        message: String,
    },
    /// A new version is being installed over a working one (`MarkCrUpgradeHealingDegraded`):
    /// Available, Progressing, Degraded (with the reason).
    Upgrading {
        /// Upstream's `UpgradeStarted`.
        reason: String,
        /// Upstream's "Started upgrade to version X".
        message: String,
    },
    /// A pass failed and will be tried again (`MarkCrFailedHealing`): not Available,
    /// Progressing, Degraded (with the reason).
    FailedHealing {
        /// Upstream's `Reconcile Failed`, for example.
        reason: String,
        /// What failed.
        message: String,
    },
    /// Installed but not serving (`MarkCrFailed`): not Available, not Progressing, Degraded
    /// (with the reason).
    Failed {
        /// Upstream's `Degraded`, for example.
        reason: String,
        /// What is wrong.
        message: String,
    },
}

/// One condition's wanted state, without its times, for an operator whose conditions do not
/// follow [`Health`]'s pattern (SSP's give each one its own reason and message).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted<'a> {
    /// `Available`, `Progressing` or `Degraded`.
    pub condition_type: &'static str,
    /// `True` or `False`.
    pub status: &'static str,
    /// Why, as a word.
    pub reason: Option<&'a str>,
    /// Why, as a sentence.
    pub message: Option<&'a str>,
}

impl Health {
    fn wanted<'a>(&'a self) -> [Wanted<'a>; 3] {
        let plain = |condition_type, status| Wanted {
            condition_type,
            status,
            reason: None,
            message: None,
        };
        let explained = |condition_type, status, reason: &'a String, message: &'a String| Wanted::<'a> {
            condition_type,
            status,
            reason: Some(reason.as_str()),
            message: Some(message.as_str()),
        };
        match self {
            Self::Deploying { reason, message } => [
                plain(AVAILABLE, "False"),
                explained(PROGRESSING, "True", reason, message),
                plain(DEGRADED, "False"),
            ],
            Self::Healthy { reason, message } => [
                explained(AVAILABLE, "True", reason, message),
                plain(PROGRESSING, "False"),
                plain(DEGRADED, "False"),
            ],
            Self::Upgrading { reason, message } => [
                plain(AVAILABLE, "True"),
                plain(PROGRESSING, "True"),
                explained(DEGRADED, "True", reason, message),
            ],
            Self::FailedHealing { reason, message } => [
                plain(AVAILABLE, "False"),
                plain(PROGRESSING, "True"),
                explained(DEGRADED, "True", reason, message),
            ],
            Self::Failed { reason, message } => [
                plain(AVAILABLE, "False"),
                plain(PROGRESSING, "False"),
                explained(DEGRADED, "True", reason, message),
            ],
        }
    }
}

/// The conditions `health` gives, from the ones a CR has now. A condition whose status, reason
/// and message are unchanged keeps both its times, so a pass that changes nothing writes nothing;
/// one that changes gets `now` as its heartbeat, and as its transition time when its status
/// changes. Conditions of other types are kept after the three.
#[must_use]
pub fn apply(existing: &[OperatorCondition], health: &Health, now: &Time) -> Vec<OperatorCondition> {
    stamp(existing, health.wanted(), now)
}

/// The conditions `wanted` gives, from the ones a CR has now, with their times kept or stamped as
/// [`apply`] says.
#[must_use]
pub fn stamp(existing: &[OperatorCondition], wanted: [Wanted<'_>; 3], now: &Time) -> Vec<OperatorCondition> {
    let mut conditions: Vec<OperatorCondition> = wanted
        .into_iter()
        .map(|wanted| {
            let reason = wanted.reason.map(str::to_owned);
            let message = wanted.message.map(str::to_owned);
            match existing.iter().find(|c| c.condition_type == wanted.condition_type) {
                Some(old) if old.status == wanted.status && old.reason == reason && old.message == message => {
                    old.clone()
                }
                Some(old) => OperatorCondition {
                    condition_type: wanted.condition_type.to_owned(),
                    status: wanted.status.to_owned(),
                    reason,
                    message,
                    last_heartbeat_time: Some(now.clone()),
                    last_transition_time: if old.status == wanted.status {
                        old.last_transition_time.clone()
                    } else {
                        Some(now.clone())
                    },
                },
                None => OperatorCondition {
                    condition_type: wanted.condition_type.to_owned(),
                    status: wanted.status.to_owned(),
                    reason,
                    message,
                    last_heartbeat_time: Some(now.clone()),
                    last_transition_time: Some(now.clone()),
                },
            }
        })
        .collect();
    conditions.extend(
        existing
            .iter()
            .filter(|c| ![AVAILABLE, PROGRESSING, DEGRADED].contains(&c.condition_type.as_str()))
            .cloned(),
    );
    conditions
}

/// Whether the conditions say the operands serve: Available, neither Progressing nor Degraded.
#[must_use]
pub fn serves(conditions: &[OperatorCondition]) -> bool {
    is_true(conditions, AVAILABLE) && !is_true(conditions, PROGRESSING) && !is_true(conditions, DEGRADED)
}

/// Whether a condition of `condition_type` has status `True`.
#[must_use]
pub fn is_true(conditions: &[OperatorCondition], condition_type: &str) -> bool {
    conditions
        .iter()
        .any(|c| c.condition_type == condition_type && c.status == "True")
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use pretty_assertions::assert_eq;

    use super::*;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).expect("a valid second"))
    }

    fn text(s: &str) -> String {
        s.to_owned()
    }

    /// Every state, as (Available, Progressing, Degraded) and where its reason goes.
    #[test]
    fn each_state_sets_upstreams_three_conditions() {
        let cases = [
            (
                Health::Deploying {
                    reason: text("DeployStarted"),
                    message: text("Started Deployment"),
                },
                ["False", "True", "False"],
                PROGRESSING,
            ),
            (
                Health::Healthy {
                    reason: text("Complete"),
                    message: text("Application Available"),
                },
                ["True", "False", "False"],
                AVAILABLE,
            ),
            (
                Health::Upgrading {
                    reason: text("UpgradeStarted"),
                    message: text("Started upgrade to version 2"),
                },
                ["True", "True", "True"],
                DEGRADED,
            ),
            (
                Health::FailedHealing {
                    reason: text("Reconcile Failed"),
                    message: text("it broke"),
                },
                ["False", "True", "True"],
                DEGRADED,
            ),
            (
                Health::Failed {
                    reason: text("Degraded"),
                    message: text("not ready"),
                },
                ["False", "False", "True"],
                DEGRADED,
            ),
        ];
        for (health, statuses, explained) in cases {
            let conditions = apply(&[], &health, &at(100));
            let got: Vec<(&str, &str)> = conditions
                .iter()
                .map(|c| (c.condition_type.as_str(), c.status.as_str()))
                .collect();
            assert_eq!(
                got,
                vec![
                    (AVAILABLE, statuses[0]),
                    (PROGRESSING, statuses[1]),
                    (DEGRADED, statuses[2])
                ],
                "{health:?}"
            );
            for condition in &conditions {
                assert_eq!(
                    condition.reason.is_some(),
                    condition.condition_type == explained,
                    "{health:?}: {condition:?}"
                );
                assert_eq!(condition.last_transition_time, Some(at(100)));
            }
        }
    }

    #[test]
    fn an_unchanged_condition_keeps_its_times_and_a_changed_one_is_stamped() {
        let deploying = Health::Deploying {
            reason: text("DeployStarted"),
            message: text("Started Deployment"),
        };
        let first = apply(&[], &deploying, &at(100));
        assert_eq!(
            apply(&first, &deploying, &at(200)),
            first,
            "nothing changed, nothing written"
        );

        let healthy = Health::Healthy {
            reason: text("Complete"),
            message: text("Application Available"),
        };
        let second = apply(&first, &healthy, &at(300));
        let available = &second[0];
        assert_eq!(
            (available.status.as_str(), available.last_transition_time.clone()),
            ("True", Some(at(300)))
        );
        // Degraded stays False: its times stay.
        assert_eq!(second[2], first[2]);

        // The same status with another message: a new heartbeat, the old transition time.
        let failing = Health::FailedHealing {
            reason: text("Reconcile Failed"),
            message: text("one"),
        };
        let third = apply(&second, &failing, &at(400));
        let other = Health::FailedHealing {
            reason: text("Reconcile Failed"),
            message: text("two"),
        };
        let fourth = apply(&third, &other, &at(500));
        assert_eq!(fourth[2].last_heartbeat_time, Some(at(500)));
        assert_eq!(fourth[2].last_transition_time, Some(at(400)));
    }

    #[test]
    fn conditions_of_other_types_are_kept() {
        let other = OperatorCondition {
            condition_type: text("Upgradeable"),
            status: text("True"),
            ..OperatorCondition::default()
        };
        let healthy = Health::Healthy {
            reason: text("Complete"),
            message: text("Application Available"),
        };
        let conditions = apply(std::slice::from_ref(&other), &healthy, &at(1));
        assert_eq!(conditions.last(), Some(&other));
        assert!(is_true(&conditions, AVAILABLE));
        assert!(!is_true(&conditions, DEGRADED));
    }
}
