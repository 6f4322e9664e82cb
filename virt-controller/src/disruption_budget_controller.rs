//! The disruption-budget controller: keeps the VMIs, their budgets and their unfinished
//! migrations it watched, and for one VMI at a time (`pdb:` keys) plans
//! ([`crate::disruption_budget::plan`]) and applies the writes, with upstream's events on the VMI.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstanceMigration};

use crate::cluster_api::{ApiError, ControllerApi};
use crate::compact::Compact;
use crate::disruption_budget::{Action, Existing, plan, render};
use crate::reconcile_error::{ReconcileError, cannot, log_and_retry};

#[derive(Debug, Default)]
struct Known {
    vmis: HashMap<String, Compact<VirtualMachineInstance>>,
    /// Budgets by their VMI's key, then by name: their `minAvailable`.
    budgets: HashMap<String, BTreeMap<String, Option<i32>>>,
    /// Unfinished migrations (by their key): their VMI's key.
    migrating: HashMap<String, String>,
}

/// The controller.
#[derive(Debug)]
pub struct DisruptionBudgetController<A> {
    api: A,
    /// The cluster's `evictionStrategy`.
    default_strategy: Mutex<Option<String>>,
    known: Mutex<Known>,
}

fn key_of(namespace: Option<&String>, name: &str) -> String {
    format!("{}/{name}", namespace.map_or("default", String::as_str))
}

/// The key of the VMI that owns `budget`.
fn owner_key(budget: &PodDisruptionBudget) -> Option<String> {
    let owner = budget
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "VirtualMachineInstance" && o.controller == Some(true))?;
    Some(key_of(budget.metadata.namespace.as_ref(), &owner.name))
}

impl<A: ControllerApi> DisruptionBudgetController<A> {
    /// A controller over `api`.
    pub fn new(api: A) -> Self {
        Self {
            api,
            default_strategy: Mutex::default(),
            known: Mutex::default(),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies the `KubeVirt` resource's `evictionStrategy` (none without it); returns every VMI.
    pub fn set_cluster_configuration(&self, kubevirt: Option<&kubevirt_api::v1::KubeVirt>) -> Vec<String> {
        let config =
            kubevirt_api::v1::ClusterConfig::from_configuration(kubevirt.and_then(|k| k.spec.configuration.as_ref()));
        *self.default_strategy.lock().unwrap_or_else(PoisonError::into_inner) = config.eviction_strategy;
        self.known().vmis.keys().cloned().collect()
    }

    /// Takes in a VMI watch event; returns its key.
    pub fn on_vmi_event(&self, event: Event<VirtualMachineInstance>) -> Vec<String> {
        let mut known = self.known();
        match event {
            Event::Apply(vmi) | Event::InitApply(vmi) => {
                let key = vmi.key();
                known.vmis.insert(key.clone(), Compact::new(&vmi));
                vec![key]
            }
            Event::Delete(vmi) => {
                let key = vmi.key();
                known.vmis.remove(&key);
                vec![key]
            }
            Event::Init | Event::InitDone => Vec::new(),
        }
    }

    /// Takes in a migration watch event; returns its VMI's key.
    pub fn on_migration_event(&self, event: Event<VirtualMachineInstanceMigration>) -> Vec<String> {
        let (migration, gone) = match event {
            Event::Apply(m) | Event::InitApply(m) => (m, false),
            Event::Delete(m) => (m, true),
            Event::Init | Event::InitDone => return Vec::new(),
        };
        let key = key_of(
            migration.metadata.namespace.as_ref(),
            migration.metadata.name.as_deref().unwrap_or_default(),
        );
        let vmi_key = key_of(
            migration.metadata.namespace.as_ref(),
            migration.spec.vmi_name.as_deref().unwrap_or_default(),
        );
        let finished = migration
            .status
            .as_ref()
            .and_then(|s| s.phase)
            .unwrap_or_default()
            .is_final();
        let mut known = self.known();
        if gone || finished {
            known.migrating.remove(&key);
        } else {
            known.migrating.insert(key, vmi_key.clone());
        }
        vec![vmi_key]
    }

    /// Takes in a budget watch event; returns its VMI's key.
    pub fn on_budget_event(&self, event: Event<PodDisruptionBudget>) -> Vec<String> {
        let (budget, gone) = match event {
            Event::Apply(b) | Event::InitApply(b) => (b, false),
            Event::Delete(b) => (b, true),
            Event::Init | Event::InitDone => return Vec::new(),
        };
        let Some(vmi_key) = owner_key(&budget) else {
            return Vec::new();
        };
        let name = budget.metadata.name.clone().unwrap_or_default();
        let min_available = budget.spec.as_ref().and_then(|s| match s.min_available {
            Some(IntOrString::Int(n)) => Some(n),
            _ => None,
        });
        let mut known = self.known();
        let budgets = known.budgets.entry(vmi_key.clone()).or_default();
        if gone {
            budgets.remove(&name);
        } else {
            budgets.insert(name, min_available);
        }
        if budgets.is_empty() {
            known.budgets.remove(&vmi_key);
        }
        vec![vmi_key]
    }

    /// Reconciles the budget of the VMI `key`; returns when to look again.
    #[tracing::instrument(skip_all, fields(vmi = %key))]
    pub async fn reconcile(&self, key: &str) -> Option<Duration> {
        self.try_reconcile(key).await.err().map(|error| log_and_retry(&error))
    }

    async fn try_reconcile(&self, key: &str) -> Result<(), ReconcileError> {
        let default_strategy = self
            .default_strategy
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (vmi, existing, migrating) = {
            let known = self.known();
            let vmi = known.vmis.get(key).and_then(Compact::get);
            let existing: Vec<Existing> = known
                .budgets
                .get(key)
                .into_iter()
                .flatten()
                .map(|(name, min_available)| Existing {
                    name: name.clone(),
                    min_available: *min_available,
                })
                .collect();
            let migrating = known.migrating.values().any(|k| k == key);
            (vmi, existing, migrating)
        };
        let namespace = key.split_once('/').map_or("default", |(ns, _)| ns).to_owned();
        for action in plan(vmi.as_ref(), default_strategy.as_deref(), migrating, &existing) {
            let (reason, message) = match &action {
                Action::Create(min_available) => {
                    let Some(vmi) = &vmi else { continue };
                    let created = self
                        .api
                        .create_disruption_budget(&namespace, &render(vmi, *min_available))
                        .await
                        .map_err(cannot("create the VMI's PodDisruptionBudget"))?;
                    let name = created.metadata.name.clone().unwrap_or_default();
                    self.on_budget_event(Event::Apply(created));
                    ("SuccessfulCreate", format!("Created PodDisruptionBudget {name}"))
                }
                Action::SetMinAvailable { name, min_available } => {
                    self.api
                        .set_disruption_budget_min_available(&namespace, name, *min_available)
                        .await
                        .map_err(cannot("resize the VMI's PodDisruptionBudget"))?;
                    let verb = if *min_available > 1 { "Expanded" } else { "Shrank" };
                    ("SuccessfulUpdate", format!("{verb} PodDisruptionBudget {name}"))
                }
                Action::Delete(name) => {
                    match self.api.delete_disruption_budget(&namespace, name).await {
                        Ok(()) | Err(ApiError::NotFound(_)) => {}
                        Err(error) => return Err(ReconcileError::new("delete a PodDisruptionBudget", error)),
                    }
                    ("SuccessfulDelete", format!("Deleted PodDisruptionBudget {name}"))
                }
            };
            if let Some(vmi) = &vmi
                && let Err(error) = self.api.record_event(vmi, "Normal", reason, &message).await
            {
                tracing::warn!(error = %error, "cannot record an event");
            }
        }
        Ok(())
    }
}
