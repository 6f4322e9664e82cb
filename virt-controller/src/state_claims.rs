//! VM state claims (upstream's "backend storage"): the small claim a VMI with a persistent TPM or
//! persistent EFI variables keeps that state on ([`kubevirt_api::persistent_state`]).
//!
//! Before a launcher pod is made, the controller finds the VMI's claim (labelled
//! `persistent-state-for=<vmi>`, else an older release's `persistent-state-for-<vmi>`), makes one
//! when there is none, and holds the pod back until the claim is bound or waits for its first
//! consumer. A claim whose VMI no longer needs one is deleted. These are the pure decisions; the
//! VMI controller observes and applies them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kubevirt_api::persistent_state::{
    self, APPLY_STORAGE_PROFILE_LABEL, CLAIM_LABEL, CLAIM_SIZE, MIGRATION_NAME_LABEL,
};
use kubevirt_api::v1::VirtualMachineInstance;

/// Upstream's reason when the claim cannot be made.
pub const REASON_CREATE_FAILED: &str = "FailedBackendStorageCreate";
/// Upstream's reason when the claim's readiness cannot be told.
pub const REASON_PROBE_FAILED: &str = "FailedBackendStorageProbe";
/// Upstream's reason while the claim is not ready.
pub const REASON_NOT_READY: &str = "BackendStorageNotReady";

/// What the controller knows of a VMI's state claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateClaim {
    /// The claim's name.
    pub name: String,
    /// `status.phase` (`Pending`, `Bound`, `Lost`).
    pub phase: Option<String>,
    /// `spec.storageClassName`.
    pub storage_class: Option<String>,
    /// It carries the `persistent-state-for` label (an older release's claim, found by its name,
    /// does not).
    pub labelled: bool,
}

/// How the claim's StorageClass binds, as far as the controller could tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassBinding {
    /// Not looked at (the claim is not pending).
    NotNeeded,
    /// `volumeBindingMode: WaitForFirstConsumer`.
    WaitsForFirstConsumer,
    /// Binds at once (`Immediate`, or no mode).
    Immediate,
    /// The class could not be read: why.
    Unknown(String),
}

/// What to do about a VMI's state claim before its launcher pod is made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateStep {
    /// The VMI needs no claim and has none.
    Nothing,
    /// The VMI no longer needs its claim: delete it.
    Delete(String),
    /// The VMI needs a claim and has none: make it.
    Create,
    /// The pod must wait: upstream's reason and a message.
    Wait {
        /// `BackendStorageNotReady` or `FailedBackendStorageProbe`.
        reason: &'static str,
        /// Why.
        message: String,
    },
    /// The claim is usable: the pod mounts it.
    Ready(String),
}

/// Decides about the state claim of a VMI that needs one (`needed`) or not, whose claim is
/// `claim`, its class binding as `binding`.
#[must_use]
pub fn decide(needed: bool, claim: Option<&StateClaim>, binding: &ClassBinding) -> StateStep {
    let Some(claim) = claim else {
        return if needed { StateStep::Create } else { StateStep::Nothing };
    };
    if !needed {
        return StateStep::Delete(claim.name.clone());
    }
    let wait = |reason, message: String| StateStep::Wait { reason, message };
    match claim.phase.as_deref() {
        Some("Bound") => StateStep::Ready(claim.name.clone()),
        Some("Lost") => wait(REASON_PROBE_FAILED, "backend storage PVC lost".to_owned()),
        _ => match binding {
            ClassBinding::WaitsForFirstConsumer => StateStep::Ready(claim.name.clone()),
            ClassBinding::Unknown(why) => wait(REASON_PROBE_FAILED, why.clone()),
            ClassBinding::Immediate | ClassBinding::NotNeeded => wait(
                REASON_NOT_READY,
                format!("the VM state PVC {} is not bound yet", claim.name),
            ),
        },
    }
}

/// What the controller knows of a StorageClass when it picks one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassFacts {
    /// Its name.
    pub name: String,
    /// Annotated `storageclass.kubevirt.io/is-default-virt-class: "true"`.
    pub default_for_virt: bool,
    /// Annotated `storageclass.kubernetes.io/is-default-class: "true"`.
    pub default: bool,
}

/// The class of a new claim: the cluster's `vmStateStorageClass`, else the class marked the
/// default for virtualization, else the cluster's default (the last of each, as upstream).
///
/// # Errors
/// Upstream's `no default storage class found`.
pub fn choose_class(configured: Option<&str>, classes: &[ClassFacts]) -> Result<String, String> {
    if let Some(class) = configured.filter(|c| !c.is_empty()) {
        return Ok(class.to_owned());
    }
    let last = |pick: fn(&ClassFacts) -> bool| classes.iter().rev().find(|c| pick(c)).map(|c| c.name.clone());
    last(|c| c.default_for_virt)
        .or_else(|| last(|c| c.default))
        .ok_or_else(|| "no default storage class found".to_owned())
}

/// The access mode of a new claim: `ReadWriteMany` when the class's storage profile offers it for
/// filesystem volumes, else `ReadWriteOnce` when it offers that; without a profile that says,
/// `ReadWriteMany` for a configured class and `ReadWriteOnce` for a default one, as upstream.
/// `profile` holds the profile's claim property sets as (volume mode, access modes).
#[must_use]
pub fn access_mode(class_configured: bool, profile: &[(Option<String>, Vec<String>)]) -> &'static str {
    let filesystem: Vec<&String> = profile
        .iter()
        .filter(|(mode, _)| mode.as_deref() == Some("Filesystem"))
        .flat_map(|(_, modes)| modes)
        .collect();
    if filesystem.iter().any(|m| *m == "ReadWriteMany") {
        "ReadWriteMany"
    } else if filesystem.iter().any(|m| *m == "ReadWriteOnce") {
        "ReadWriteOnce"
    } else if class_configured {
        "ReadWriteMany"
    } else {
        "ReadWriteOnce"
    }
}

/// Whom a new claim is for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimPurpose {
    /// The VMI's own (labelled `persistent-state-for=<vmi>`).
    Vmi,
    /// The target of the migration of this name (labelled `kubevirt.io/migrationName`), until
    /// the migration hands it over.
    MigrationTarget(String),
}

/// The claim to make for `vmi`: owned by the VMI's owners (its VM), so that it outlives the VMI,
/// or by the VMI itself when nothing owns it.
#[must_use]
pub fn claim_for(
    vmi: &VirtualMachineInstance,
    class: &str,
    access_mode: &str,
    purpose: &ClaimPurpose,
) -> PersistentVolumeClaim {
    let name = vmi.metadata.name.clone().unwrap_or_default();
    let owners = vmi
        .metadata
        .owner_references
        .clone()
        .filter(|owners| !owners.is_empty())
        .unwrap_or_else(|| {
            vec![OwnerReference {
                api_version: "kubevirt.io/v1".to_owned(),
                kind: "VirtualMachineInstance".to_owned(),
                name: name.clone(),
                uid: vmi.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]
        });
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            generate_name: Some(persistent_state::claim_generate_name(&name)),
            namespace: vmi.metadata.namespace.clone(),
            labels: Some(BTreeMap::from([
                match purpose {
                    ClaimPurpose::Vmi => (CLAIM_LABEL.to_owned(), name),
                    ClaimPurpose::MigrationTarget(migration) => (MIGRATION_NAME_LABEL.to_owned(), migration.clone()),
                },
                (APPLY_STORAGE_PROFILE_LABEL.to_owned(), "true".to_owned()),
            ])),
            owner_references: Some(owners),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec![access_mode.to_owned()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_owned(),
                    Quantity(CLAIM_SIZE.to_owned()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            storage_class_name: Some(class.to_owned()),
            volume_mode: Some("Filesystem".to_owned()),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

pub mod make;
#[cfg(test)]
mod tests;
