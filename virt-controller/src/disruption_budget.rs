//! A VMI's `PodDisruptionBudget`, decided. A VMI that is migrated rather than killed when its
//! pod is evicted (eviction strategy `LiveMigrate`, `External`, or `LiveMigrateIfPossible` while
//! it is live migratable) gets one budget over its launcher pods (`kubevirt.io/created-by`), as
//! upstream's disruption-budget controller gives it: `minAvailable: 1`, raised to 2 while a
//! migration of it is unfinished so the target pod is covered too. It is a second guard beside
//! the pod-eviction webhook: evictions are refused by the budget even while virt-api is down.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kubevirt_api::v1::VirtualMachineInstance;
use kubevirt_api::well_known::labels;

use crate::evacuation::is_live_migratable;

/// The name prefix of the budgets.
pub const NAME_PREFIX: &str = "kubevirt-disruption-budget-";

/// A budget of the VMI that exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Existing {
    /// Its name.
    pub name: String,
    /// Its `spec.minAvailable`, when a number.
    pub min_available: Option<i32>,
}

/// One write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Create the budget with this `minAvailable`.
    Create(i32),
    /// Set an existing budget's `minAvailable`.
    SetMinAvailable {
        /// The budget.
        name: String,
        /// The new value.
        min_available: i32,
    },
    /// Delete a budget.
    Delete(String),
}

/// Whether `vmi` is protected by a budget: it is not over or being deleted, and its eviction
/// strategy (or the cluster's) keeps its pod from being evicted.
#[must_use]
pub fn wants_budget(vmi: &VirtualMachineInstance, default_strategy: Option<&str>) -> bool {
    let over = vmi
        .status
        .as_ref()
        .and_then(|s| s.phase)
        .is_some_and(kubevirt_api::v1::VirtualMachineInstancePhase::is_final);
    if over || vmi.metadata.deletion_timestamp.is_some() {
        return false;
    }
    match vmi.spec.eviction_strategy.as_deref().or(default_strategy) {
        Some("LiveMigrate" | "External") => true,
        Some("LiveMigrateIfPossible") => is_live_migratable(vmi),
        _ => false,
    }
}

/// The writes that give the VMI (`None` once it is gone) the budget it needs, given the budgets
/// it has and whether one of its migrations is unfinished.
#[must_use]
pub fn plan(
    vmi: Option<&VirtualMachineInstance>,
    default_strategy: Option<&str>,
    migrating: bool,
    existing: &[Existing],
) -> Vec<Action> {
    let wanted = vmi.is_some_and(|v| wants_budget(v, default_strategy));
    let mut sorted: Vec<&Existing> = existing.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    if !wanted {
        return sorted.into_iter().map(|b| Action::Delete(b.name.clone())).collect();
    }
    let min_available = if migrating { 2 } else { 1 };
    let Some((kept, extra)) = sorted.split_first() else {
        return vec![Action::Create(min_available)];
    };
    let mut actions = Vec::new();
    if kept.min_available != Some(min_available) {
        actions.push(Action::SetMinAvailable {
            name: kept.name.clone(),
            min_available,
        });
    }
    actions.extend(extra.iter().map(|b| Action::Delete(b.name.clone())));
    actions
}

/// A new budget for `vmi`: owned by it, over the pods it created.
#[must_use]
pub fn render(vmi: &VirtualMachineInstance, min_available: i32) -> PodDisruptionBudget {
    let uid = vmi.metadata.uid.clone().unwrap_or_default();
    let created_by = std::collections::BTreeMap::from([(labels::CREATED_BY.to_owned(), uid.clone())]);
    PodDisruptionBudget {
        metadata: ObjectMeta {
            generate_name: Some(NAME_PREFIX.to_owned()),
            namespace: vmi.metadata.namespace.clone(),
            labels: Some(created_by.clone()),
            owner_references: Some(vec![OwnerReference {
                api_version: "kubevirt.io/v1".to_owned(),
                kind: "VirtualMachineInstance".to_owned(),
                name: vmi.metadata.name.clone().unwrap_or_default(),
                uid,
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(PodDisruptionBudgetSpec {
            min_available: Some(IntOrString::Int(min_available)),
            selector: Some(LabelSelector {
                match_labels: Some(created_by),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests;
