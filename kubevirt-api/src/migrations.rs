//! `MigrationPolicy` (`migrations.kubevirt.io/v1alpha1`): migration settings for the VMIs its
//! selectors pick, overriding the cluster's (`KubeVirt.spec.configuration.migrations`).
//!
//! Which policy applies to a VMI is upstream's rule ([`select`]): every label of both selectors
//! must match, the policy with the most matched labels wins, then the one with more VMI-label
//! matches, then the smallest name. [`MigrationSettings::with_policy`] applies the winner.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::migration_settings::{CLUSTER_DISRUPTION_PATH, MigrationSettings, PAUSED_MODE};
use crate::v1::ExperimentalMigrationOptions;
use crate::validation::{Cause, CauseType};

/// The API group.
pub const GROUP: &str = "migrations.kubevirt.io";

/// `spec` of a `MigrationPolicy`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "migrations.kubevirt.io",
    version = "v1alpha1",
    kind = "MigrationPolicy",
    plural = "migrationpolicies",
    singular = "migrationpolicy",
    status = "MigrationPolicyStatus",
    derive = "Default",
    derive = "PartialEq",
    label("kubevirt.io", "")
)]
#[serde(rename_all = "camelCase")]
pub struct MigrationPolicySpec {
    /// Which VMIs the policy applies to.
    pub selectors: Selectors,
    /// Throttle the guest's vCPUs so that the migration converges.
    pub allow_auto_converge: Option<bool>,
    /// Bandwidth per migration per second; 0 is unlimited.
    pub bandwidth_per_migration: Option<Quantity>,
    /// Seconds per GiB of data before the migration is aborted (or switched to post-copy).
    #[serde(rename = "completionTimeoutPerGiB")]
    pub completion_timeout_per_gib: Option<i64>,
    /// Longest pause of the guest at the switch-over, in milliseconds (1 to 2000000).
    #[schemars(range(min = 1, max = 2_000_000))]
    pub max_downtime_ms: Option<u64>,
    /// Switch to post-copy when the completion budget runs out.
    pub allow_post_copy: Option<bool>,
    /// Allow disrupting the guest (post-copy) to finish the migration; when unset, what
    /// `allowPostCopy` says.
    pub allow_workload_disruption: Option<bool>,
    /// Experimental tuning (upstream's feature-gated stall detector and downtime tuning). Refused.
    pub experimental: Option<ExperimentalMigrationOptions>,
}

/// `spec.selectors`: labels that must all match, each an exact value.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Selectors {
    /// Labels of the VMI's namespace.
    pub namespace_selector: Option<BTreeMap<String, String>>,
    /// Labels of the VMI.
    pub virtual_machine_instance_selector: Option<BTreeMap<String, String>>,
}

/// `status` of a `MigrationPolicy` (empty, as upstream's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MigrationPolicyStatus {}

/// How well a policy matches: labels matched on the VMI and on its namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Score {
    vmi: usize,
    namespace: usize,
}

impl Score {
    /// More matched labels in all; on a tie, more of them on the VMI.
    fn beats(self, other: Self) -> bool {
        let (total, other_total) = (self.vmi + self.namespace, other.vmi + other.namespace);
        total > other_total || (total == other_total && self.vmi > other.vmi)
    }
}

/// Whether every label of `selector` is in `labels` with the same value; the number matched.
fn matched(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> Option<usize> {
    selector
        .iter()
        .all(|(key, value)| labels.get(key) == Some(value))
        .then_some(selector.len())
}

/// Whether `policy` applies to a VMI with `vmi_labels` (`None`: it has none) in a namespace with
/// `namespace_labels`, and how well. As upstream: a VMI without labels is matched by every policy
/// with no label counted, since both selectors are looked at only when the VMI has labels.
fn score(
    policy: &MigrationPolicySpec,
    vmi_labels: Option<&BTreeMap<String, String>>,
    namespace_labels: &BTreeMap<String, String>,
) -> Option<Score> {
    let Some(labels) = vmi_labels else {
        return Some(Score::default());
    };
    let selectors = &policy.selectors;
    let vmi = selectors
        .virtual_machine_instance_selector
        .as_ref()
        .map_or(Some(0), |s| matched(s, labels))?;
    let namespace = selectors
        .namespace_selector
        .as_ref()
        .map_or(Some(0), |s| matched(s, namespace_labels))?;
    Some(Score { vmi, namespace })
}

/// The policy that applies to a VMI with `vmi_labels` in a namespace with `namespace_labels`:
/// the best match, the smallest name among equals; `None` when none matches.
#[must_use]
pub fn select<'a>(
    policies: &'a [MigrationPolicy],
    vmi_labels: Option<&BTreeMap<String, String>>,
    namespace_labels: &BTreeMap<String, String>,
) -> Option<&'a MigrationPolicy> {
    let mut best: Option<(Score, &MigrationPolicy)> = None;
    for policy in policies {
        let Some(score) = score(&policy.spec, vmi_labels, namespace_labels) else {
            continue;
        };
        let wins = match best {
            None => true,
            Some((best_score, best_policy)) => {
                score.beats(best_score) || (score == best_score && policy.metadata.name < best_policy.metadata.name)
            }
        };
        if wins {
            best = Some((score, policy));
        }
    }
    best.map(|(_, policy)| policy)
}

/// Why a policy cannot be admitted (upstream's checks and messages, and what kubevirt-rs refuses).
#[must_use]
pub fn validate(spec: &MigrationPolicySpec) -> Vec<Cause> {
    let invalid = |field: &str, message: &str| Cause {
        kind: CauseType::Invalid,
        field: field.to_owned(),
        message: message.to_owned(),
    };
    let mut causes = Vec::new();
    if spec.completion_timeout_per_gib.is_some_and(|t| t < 0) {
        causes.push(invalid("spec.completionTimeoutPerGiB", "must not be negative"));
    }
    if let Some(bandwidth) = &spec.bandwidth_per_migration {
        match crate::quantity::parse(bandwidth) {
            Ok(q) if q.is_negative() => causes.push(invalid("spec.bandwidthPerMigration", "must not be negative")),
            Ok(_) => {}
            Err(_) => causes.push(invalid("spec.bandwidthPerMigration", "must be a quantity")),
        }
    }
    if spec.experimental.is_some() {
        causes.push(Cause {
            kind: CauseType::NotSupported,
            field: "spec.experimental".to_owned(),
            message: "experimental migration options (upstream's stall detector and downtime tuning) are not supported by kubevirt-rs".to_owned(),
        });
    }
    // Disruption with post-copy unset takes the cluster's post-copy setting: held at run time
    // (named) only where that does not allow it.
    if spec.allow_workload_disruption == Some(true) && spec.allow_post_copy == Some(false) {
        causes.push(Cause {
            kind: CauseType::NotSupported,
            field: "spec.allowWorkloadDisruption".to_owned(),
            message: "allowWorkloadDisruption with allowPostCopy false (the guest paused until the migration ends) is not supported by kubevirt-rs".to_owned(),
        });
    }
    causes
}

impl MigrationSettings {
    /// These settings with `policy`'s overriding them, as upstream applies a policy: a policy
    /// that says `allowPostCopy` but not `allowWorkloadDisruption` sets both.
    #[must_use]
    pub fn with_policy(&self, name: &str, policy: &MigrationPolicySpec) -> Self {
        let mut settings = self.clone();
        settings.unsupported.retain(|u| !u.ends_with(PAUSED_MODE));
        let disruption = policy.allow_workload_disruption.or(policy.allow_post_copy);
        if let Some(disruption) = disruption {
            settings.allow_workload_disruption = disruption;
        }
        if let Some(converge) = policy.allow_auto_converge {
            settings.allow_auto_converge = converge;
        }
        if let Some(bandwidth) = &policy.bandwidth_per_migration {
            match crate::migration_settings::mib(bandwidth) {
                Some(mib) => settings.bandwidth_mib_per_second = mib,
                None => settings.unsupported.push(format!(
                    "MigrationPolicy {name}: spec.bandwidthPerMigration is not a quantity"
                )),
            }
        }
        if let Some(seconds) = policy.completion_timeout_per_gib {
            settings.completion_timeout_per_gib = u64::try_from(seconds).unwrap_or(0);
        }
        if let Some(ms) = policy.max_downtime_ms {
            settings.max_downtime_ms = Some(ms);
        }
        if let Some(post_copy) = policy.allow_post_copy {
            settings.allow_post_copy = post_copy;
        }
        if policy.experimental.is_some() {
            settings
                .unsupported
                .push(format!("MigrationPolicy {name}: spec.experimental"));
        }
        let path = if disruption.is_some() {
            format!("MigrationPolicy {name}: spec.allowWorkloadDisruption")
        } else {
            CLUSTER_DISRUPTION_PATH.to_owned()
        };
        settings.check_disruption(&path);
        settings
    }
}

#[cfg(test)]
mod tests;
