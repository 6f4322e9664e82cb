//! The DataVolumes VMs and VMIs use, as virt-controller's DataVolume watch last saw them, and what
//! upstream decides from them (`pkg/virt-controller/watch/vm/vm.go` and
//! `watch/vmi/datavolumes.go`):
//! - a VM's templates: which DataVolumes to create or adopt, and whether all are far enough along
//!   for its VMI ([`plan_templates`]);
//! - the VM's printable status: `DataVolumeError` and `Provisioning`;
//! - a VMI's pod: held back while a DataVolume fills its claim, and the VMI's
//!   `DataVolumesReady` condition ([`vmi_gate`]).
//!
//! A DataVolume's claim has the DataVolume's name (CDI makes it so).

use std::sync::{Mutex, PoisonError};

use cdi_api::{DataVolume, DataVolumePhase as Phase};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};

use crate::watched_facts::WatchedFacts;

/// A condition's status and reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConditionFacts {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Its reason.
    pub reason: String,
}

/// What is kept of a DataVolume.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataVolumeFacts {
    /// `status.phase`.
    pub phase: Phase,
    /// The `Bound` condition.
    pub bound: Option<ConditionFacts>,
    /// The `Ready` condition.
    pub ready: Option<ConditionFacts>,
    /// The `Running` condition.
    pub running: Option<ConditionFacts>,
    /// The uid of its controlling owner, if it has one.
    pub controller_uid: Option<String>,
    /// Its own uid.
    pub uid: Option<String>,
    /// Its owners.
    pub owners: Vec<OwnerReference>,
}

fn condition(data_volume: &DataVolume, kind: &str) -> Option<ConditionFacts> {
    let found = data_volume
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.condition_type == kind)?;
    Some(ConditionFacts {
        status: found.state.status.clone(),
        reason: found.state.reason.clone().unwrap_or_default(),
    })
}

impl DataVolumeFacts {
    /// The facts of `data_volume`.
    #[must_use]
    pub fn of(data_volume: &DataVolume) -> Self {
        use cdi_api::data_volume::conditions;
        Self {
            phase: data_volume.status.as_ref().map(|s| s.phase).unwrap_or_default(),
            bound: condition(data_volume, conditions::BOUND),
            ready: condition(data_volume, conditions::READY),
            running: condition(data_volume, conditions::RUNNING),
            controller_uid: data_volume
                .metadata
                .owner_references
                .as_ref()
                .and_then(|owners| owners.iter().find(|o| o.controller == Some(true)))
                .map(|o| o.uid.clone()),
            uid: data_volume.metadata.uid.clone(),
            owners: data_volume.metadata.owner_references.clone().unwrap_or_default(),
        }
    }

    /// Far enough along for the VM to create its VMI (upstream's `handleDataVolumes`).
    #[must_use]
    pub fn lets_vm_start(&self) -> bool {
        matches!(
            self.phase,
            Phase::Succeeded | Phase::WaitForFirstConsumer | Phase::PendingPopulation
        )
    }

    /// Failed, or its pod fails (upstream's `HasDataVolumeErrors`).
    #[must_use]
    pub fn has_error(&self) -> bool {
        self.phase == Phase::Failed
            || self
                .running
                .as_ref()
                .is_some_and(|c| c.status == "False" && matches!(c.reason.as_str(), "Error" | "ImagePullFailed"))
    }

    /// Still being filled (upstream's `HasDataVolumeProvisioning`): not done, and either bound or
    /// not waiting for a consumer.
    #[must_use]
    pub fn is_provisioning(&self) -> bool {
        if matches!(self.phase, Phase::Succeeded | Phase::PendingPopulation) {
            return false;
        }
        self.bound.as_ref().is_some_and(|c| c.status == "True") || self.phase != Phase::WaitForFirstConsumer
    }

    /// Its claim would exceed the namespace's quota.
    #[must_use]
    pub fn exceeds_quota(&self) -> bool {
        self.phase == Phase::Pending
            && self
                .bound
                .as_ref()
                .is_some_and(|c| c.status != "True" && c.reason == "ErrExceededQuota")
    }
}

/// The DataVolumes the DataVolume watch has seen.
#[derive(Debug, Default)]
pub struct DataVolumeStore {
    cache: Mutex<WatchedFacts<DataVolumeFacts>>,
}

impl DataVolumeStore {
    /// Takes in one watch event; returns the DataVolumes (`namespace/name`) that appeared,
    /// changed or went.
    pub fn on_event(&self, event: &Event<DataVolume>) -> Vec<String> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .on_event(event, DataVolumeFacts::of)
    }

    /// The facts of `namespace/name`, if it is there.
    #[must_use]
    pub fn get(&self, namespace: &str, name: &str) -> Option<DataVolumeFacts> {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(namespace, name)
            .cloned()
    }
}

/// A DataVolume no one controls, as the adoption needs it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Orphan {
    /// Its name.
    pub name: String,
    /// Its uid: the adoption applies to this DataVolume only, not to one made again since.
    pub uid: Option<String>,
    /// Its owners, which it keeps.
    pub owners: Vec<OwnerReference>,
}

/// What a VM's DataVolume templates need.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TemplatesPlan {
    /// The templates (by index) whose DataVolume is not there: to create.
    pub create: Vec<usize>,
    /// DataVolumes of the VM's templates that no one controls: the VM adopts them.
    pub adopt: Vec<Orphan>,
    /// Failed DataVolumes (upstream's `FailedDataVolumeImport` event for each).
    pub failed: Vec<String>,
    /// DataVolumes over the quota (an event, and an error).
    pub over_quota: Vec<String>,
    /// Every DataVolume is there and far enough along for the VMI.
    pub ready: bool,
}

/// The name of a template's DataVolume.
#[must_use]
pub fn template_name(template: &kubevirt_api::v1::DataVolumeTemplateSpec) -> &str {
    template
        .metadata
        .as_ref()
        .and_then(|m| m.name.as_deref())
        .unwrap_or_default()
}

/// Decides for a VM's templates from what `lookup` (by name, in the VM's namespace) says.
#[must_use]
pub fn plan_templates(vm: &VirtualMachine, lookup: impl Fn(&str) -> Option<DataVolumeFacts>) -> TemplatesPlan {
    let mut plan = TemplatesPlan {
        ready: true,
        ..TemplatesPlan::default()
    };
    for (index, template) in vm.spec.data_volume_templates.iter().enumerate() {
        let name = template_name(template);
        let Some(facts) = lookup(name) else {
            plan.create.push(index);
            plan.ready = false;
            continue;
        };
        if facts.controller_uid.is_none() {
            plan.adopt.push(Orphan {
                name: name.to_owned(),
                uid: facts.uid.clone(),
                owners: facts.owners.clone(),
            });
        }
        if facts.phase == Phase::Failed {
            plan.failed.push(name.to_owned());
        }
        if facts.exceeds_quota() {
            plan.over_quota.push(name.to_owned());
        }
        plan.ready &= facts.lets_vm_start();
    }
    plan
}

/// The DataVolumes a VMI (or VM template) names in `dataVolume` volumes.
pub fn data_volume_names(volumes: &[kubevirt_api::v1::Volume]) -> impl Iterator<Item = &str> {
    volumes
        .iter()
        .filter_map(|v| v.data_volume.as_ref())
        .map(|d| d.name.as_str())
}

/// What the VM's printable status needs of its template's DataVolumes: any in error, any still
/// being filled (those not there are skipped, as upstream's).
#[must_use]
pub fn template_volume_states(vm: &VirtualMachine, lookup: impl Fn(&str) -> Option<DataVolumeFacts>) -> (bool, bool) {
    let volumes = vm.spec.template_volumes();
    let facts: Vec<DataVolumeFacts> = data_volume_names(volumes).filter_map(lookup).collect();
    (
        facts.iter().any(DataVolumeFacts::has_error),
        facts.iter().any(DataVolumeFacts::is_provisioning),
    )
}

/// Why a VMI's pod waits for its DataVolumes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataVolumeWait {
    /// A DataVolume still fills its claim.
    Populating,
    /// The others are filled, and a DataVolume's claim waits for its first consumer: a temporary
    /// pod, placed as the launcher pod would be, consumes it so that it binds on a node and is
    /// filled there (upstream's `kubevirt.io/ephemeral-provisioning` pod).
    WaitForFirstConsumer,
    /// A claim is a DataVolume's but the DataVolume is not there: upstream's message.
    Unknown(String),
}

/// What a VMI's DataVolumes say of its pod and its status.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VmiGate {
    /// The pod waits, and why.
    pub wait: Option<DataVolumeWait>,
    /// A DataVolume failed: a VMI without a pod fails.
    pub failed: bool,
    /// The `DataVolumesReady` condition (status, reason, message), when any of the VMI's
    /// DataVolumes is there.
    pub condition: Option<(&'static str, &'static str, &'static str)>,
}

/// Decides for a VMI from its claims (`filled_by_data_volume`: `Some(true)` when a DataVolume
/// controls the claim of that name, `None` when the claim is not there) and DataVolumes.
#[must_use]
pub fn vmi_gate(
    vmi: &VirtualMachineInstance,
    filled_by_data_volume: impl Fn(&str) -> Option<bool>,
    lookup: impl Fn(&str) -> Option<DataVolumeFacts>,
) -> VmiGate {
    let mut gate = VmiGate::default();
    let mut names: Vec<&str> = Vec::new();
    for volume in &vmi.spec.volumes {
        let (name, named_as_data_volume) = match (&volume.data_volume, &volume.persistent_volume_claim) {
            (Some(dv), _) => (dv.name.as_str(), true),
            (None, Some(pvc)) => (pvc.claim_name.as_str(), false),
            (None, None) => continue,
        };
        let filled = filled_by_data_volume(name);
        if named_as_data_volume || filled == Some(true) {
            names.push(name);
        }
        if filled != Some(true) {
            continue;
        }
        match lookup(name) {
            None => {
                let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
                if matches!(gate.wait, None | Some(DataVolumeWait::WaitForFirstConsumer)) {
                    gate.wait = Some(DataVolumeWait::Unknown(format!(
                        "Error determining if volume is ready: DataVolume {namespace}/{name} not found"
                    )));
                }
            }
            Some(facts) => match facts.phase {
                Phase::Succeeded | Phase::PendingPopulation => {}
                // Waits unless another DataVolume already holds the pod back for longer.
                Phase::WaitForFirstConsumer => {
                    gate.wait.get_or_insert(DataVolumeWait::WaitForFirstConsumer);
                }
                _ => {
                    if matches!(gate.wait, None | Some(DataVolumeWait::WaitForFirstConsumer)) {
                        gate.wait = Some(DataVolumeWait::Populating);
                    }
                }
            },
        }
    }
    // A failed DataVolume fails a VMI without a pod whether or not its claim was made.
    gate.failed = names
        .iter()
        .any(|name| lookup(name).is_some_and(|f| f.phase == Phase::Failed));
    // Over the DataVolumes that are there, as upstream lists them.
    let statuses: Vec<Option<String>> = names
        .iter()
        .filter_map(|name| lookup(name))
        .map(|f| f.ready.map(|c| c.status))
        .collect();
    if !statuses.is_empty() {
        gate.condition = Some(if statuses.iter().all(|s| s.as_deref() == Some("True")) {
            ("True", "AllDVsReady", "All of the VMI's DVs are bound and ready")
        } else if statuses.iter().any(|s| s.as_deref() == Some("False")) {
            ("False", "NotAllDVsReady", "Not all of the VMI's DVs are ready")
        } else {
            ("Unknown", "NotAllDVsReady", "Not all of the VMI's DVs are ready")
        });
    }
    gate
}

#[cfg(test)]
mod tests;
