//! The fake's `PodDisruptionBudget`s: created with a generated name, patched, deleted, watched,
//! every write logged.

use std::collections::BTreeMap;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::watcher::Event;
use tokio::sync::mpsc::UnboundedSender;

use super::{ApiError, BudgetWatchEvent, FakeControllerApi, State, Write, key_of};

/// The stored budgets and their watchers.
#[derive(Debug, Default)]
pub(super) struct Budgets {
    pub(super) objects: BTreeMap<String, PodDisruptionBudget>,
    pub(super) watchers: Vec<UnboundedSender<BudgetWatchEvent>>,
}

impl Budgets {
    fn changed(&mut self, event: &BudgetWatchEvent) {
        self.watchers.retain(|w| w.send(event.clone()).is_ok());
    }
}

impl FakeControllerApi {
    /// The stored budgets.
    #[must_use]
    pub fn disruption_budgets(&self) -> Vec<PodDisruptionBudget> {
        self.lock().budgets.objects.values().cloned().collect()
    }
}

pub(super) fn create(state: &mut State, namespace: &str, budget: &PodDisruptionBudget) -> PodDisruptionBudget {
    let mut created = budget.clone();
    state.admit_new(namespace, &mut created.metadata);
    let key = key_of(&created.metadata);
    state.log(Write::CreateBudget(key.clone()));
    state.budgets.objects.insert(key, created.clone());
    state.budgets.changed(&Event::Apply(created.clone()));
    created
}

pub(super) fn set_min_available(state: &mut State, key: &str, min_available: i32) -> Result<(), ApiError> {
    state.log(Write::PatchBudget(key.to_owned(), min_available));
    let mut budget = state
        .budgets
        .objects
        .get(key)
        .cloned()
        .ok_or_else(|| ApiError::NotFound(key.to_owned()))?;
    budget.spec.get_or_insert_default().min_available = Some(IntOrString::Int(min_available));
    state.stamp(&mut budget.metadata);
    state.budgets.objects.insert(key.to_owned(), budget.clone());
    state.budgets.changed(&Event::Apply(budget));
    Ok(())
}

pub(super) fn delete(state: &mut State, key: &str) -> Result<(), ApiError> {
    state.log(Write::DeleteBudget(key.to_owned()));
    let budget = state
        .budgets
        .objects
        .remove(key)
        .ok_or_else(|| ApiError::NotFound(key.to_owned()))?;
    state.budgets.changed(&Event::Delete(budget));
    Ok(())
}
