//! The PersistentVolumeClaims launcher pods use, as virt-controller's PVC watch last saw them:
//! whether each exists and its `volumeMode`. Upstream's renderer reads the same from its PVC
//! informer: a block claim becomes a `volumeDevices` entry at `/dev/<volume>`, a filesystem claim
//! (or one without a mode) a mount of its directory, and a claim that is not there yet holds the
//! pod back (`FailedPvcNotFound`) until it appears.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::watcher::Event;
use kubevirt_api::v1::{PersistentVolumeClaimInfo, VirtualMachineInstance, Volume};

use self::label_index::LabelIndex;
use crate::state_claims::StateClaim;
use crate::watched_facts::WatchedFacts;

mod label_index;

/// How a claim's volume reaches the pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VolumeMode {
    /// Mounted as a directory (`volumeMode: Filesystem`, or none).
    Filesystem,
    /// Handed over as a device node (`volumeMode: Block`).
    Block,
}

impl VolumeMode {
    /// The mode of `claim`: Block only when it says so, as upstream reads it.
    #[must_use]
    pub fn of(claim: &PersistentVolumeClaim) -> Self {
        let mode = claim.spec.as_ref().and_then(|s| s.volume_mode.as_deref());
        if mode == Some("Block") {
            Self::Block
        } else {
            Self::Filesystem
        }
    }
}

/// The modes of one VMI's claims, by claim name (its namespace's), and its VM state claim.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimModes {
    modes: BTreeMap<String, VolumeMode>,
    state_claim: Option<String>,
}

impl ClaimModes {
    /// Modes given by hand (tests, and callers that know the claims).
    #[must_use]
    pub fn new(modes: impl IntoIterator<Item = (String, VolumeMode)>) -> Self {
        Self {
            modes: modes.into_iter().collect(),
            state_claim: None,
        }
    }

    /// These modes with the VM state claim (persistent TPM and EFI) named `name`.
    #[must_use]
    pub fn with_state_claim(mut self, name: Option<String>) -> Self {
        self.state_claim = name;
        self
    }

    /// The mode of the claim `name`, if it is known.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<VolumeMode> {
        self.modes.get(name).copied()
    }

    /// The VM state claim, when the VMI has one.
    #[must_use]
    pub fn state_claim(&self) -> Option<&str> {
        self.state_claim.as_deref()
    }
}

/// A claim the VMI needs is not there (yet).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("PVC {namespace}/{name} does not exist, waiting for it to appear")]
pub struct MissingClaim {
    /// The VMI's namespace.
    pub namespace: String,
    /// The claim.
    pub name: String,
}

/// The claim a volume needs in the launcher pod: `persistentVolumeClaim`, `dataVolume` (the
/// claim of the DataVolume's name) and `ephemeral`. (Hotpluggable volumes are refused at
/// admission, `kubevirt_api::support`, so every claim is the pod's.)
#[must_use]
pub fn claim_of(volume: &Volume) -> Option<&str> {
    if let Some(pvc) = &volume.persistent_volume_claim {
        return Some(pvc.claim_name.as_str());
    }
    if let Some(dv) = &volume.data_volume {
        return Some(dv.name.as_str());
    }
    volume
        .ephemeral
        .as_ref()
        .and_then(|e| e.persistent_volume_claim.as_ref())
        .map(|pvc| pvc.claim_name.as_str())
}

/// What the controller keeps of a claim.
#[derive(Clone, Debug, PartialEq)]
struct ClaimFacts {
    mode: VolumeMode,
    /// `status.phase` is `Bound`.
    bound: bool,
    /// A DataVolume controls the claim (it fills it).
    filled_by_data_volume: bool,
    /// For the VMI's `status.volumeStatus[].persistentVolumeClaimInfo`.
    info: PersistentVolumeClaimInfo,
    /// The VMI whose state it keeps (the label `persistent-state-for`).
    state_for: Option<String>,
    /// The migration whose target's state it is to keep (the label `kubevirt.io/migrationName`).
    migration_target_of: Option<String>,
    /// Being deleted.
    terminating: bool,
    /// `status.phase`.
    phase: Option<String>,
    /// `spec.storageClassName`.
    storage_class: Option<String>,
}

/// Whether a DataVolume is the claim's controller, as CDI makes the claims it fills.
fn filled_by_data_volume(claim: &PersistentVolumeClaim) -> bool {
    claim.metadata.owner_references.as_ref().is_some_and(|owners| {
        owners.iter().any(|o| {
            o.controller == Some(true) && o.kind == "DataVolume" && o.api_version.starts_with("cdi.kubevirt.io/")
        })
    })
}

/// Upstream's (and CDI's) default share of a filesystem volume that its filesystem takes.
pub const DEFAULT_FILESYSTEM_OVERHEAD: &str = "0.055";

/// What the VMI's status says of a claim, as upstream's `processPVCInfo` writes it: the access
/// and volume modes, capacity, requests, whether CDI preallocated it, and the filesystem overhead.
#[must_use]
pub fn claim_info(claim: &PersistentVolumeClaim) -> PersistentVolumeClaimInfo {
    let spec = claim.spec.clone().unwrap_or_default();
    let preallocated = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("cdi.kubevirt.io/storage.preallocation"))
        .is_some_and(|v| v == "true");
    PersistentVolumeClaimInfo {
        claim_name: claim.metadata.name.clone(),
        access_modes: spec.access_modes.unwrap_or_default(),
        volume_mode: spec.volume_mode,
        capacity: claim.status.as_ref().and_then(|s| s.capacity.clone()),
        requests: spec.resources.and_then(|r| r.requests),
        preallocated: Some(preallocated),
        // Upstream's default whenever CDI is not installed, whatever the volume mode (CDI's
        // CDIConfig says it otherwise, and 0 for a block volume).
        filesystem_overhead: Some(DEFAULT_FILESYSTEM_OVERHEAD.to_owned()),
    }
}

/// The first of `names` (given in name order) in `namespace` that is there and not being deleted.
fn first_claim<'a>(
    cache: &WatchedFacts<ClaimFacts>,
    namespace: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> Option<(StateClaim, PersistentVolumeClaimInfo)> {
    names.into_iter().find_map(|name| {
        let facts = cache.get(namespace, name).filter(|f| !f.terminating)?;
        let claim = StateClaim {
            name: name.to_owned(),
            phase: facts.phase.clone(),
            storage_class: facts.storage_class.clone(),
            labelled: facts.state_for.is_some(),
        };
        Some((claim, facts.info.clone()))
    })
}

/// The claims the PVC watch has seen.
#[derive(Debug, Default)]
pub struct ClaimStore {
    cache: Mutex<WatchedFacts<ClaimFacts>>,
    /// The claims by their labels `persistent-state-for` and `kubevirt.io/migrationName`.
    labelled: Mutex<Labelled>,
}

/// The claims by the labels the state-claim lookups ask for.
#[derive(Debug, Default)]
struct Labelled {
    state_for: LabelIndex,
    migration_target_of: LabelIndex,
}

impl ClaimStore {
    fn cache(&self) -> std::sync::MutexGuard<'_, WatchedFacts<ClaimFacts>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn labelled(&self) -> std::sync::MutexGuard<'_, Labelled> {
        self.labelled.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes in one watch event; returns the claims (`namespace/name`) that appeared, changed or
    /// went. A relist forgets the claims it did not see again (a deletion the watch missed).
    pub fn on_event(&self, event: &Event<PersistentVolumeClaim>) -> Vec<String> {
        // The index is changed under the cache's lock, so that no lookup sees one without the
        // other (the cache's lock is always taken first).
        let mut cache = self.cache();
        let changed = Self::take_in(&mut cache, event);
        let mut labelled = self.labelled();
        for key in &changed {
            let facts = key
                .split_once('/')
                .and_then(|(namespace, name)| cache.get(namespace, name));
            labelled.state_for.set(key, facts.and_then(|f| f.state_for.as_deref()));
            labelled
                .migration_target_of
                .set(key, facts.and_then(|f| f.migration_target_of.as_deref()));
        }
        changed
    }

    fn take_in(cache: &mut WatchedFacts<ClaimFacts>, event: &Event<PersistentVolumeClaim>) -> Vec<String> {
        cache.on_event(event, |claim| ClaimFacts {
            mode: VolumeMode::of(claim),
            bound: claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"),
            filled_by_data_volume: filled_by_data_volume(claim),
            info: claim_info(claim),
            state_for: claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(kubevirt_api::persistent_state::CLAIM_LABEL))
                .cloned(),
            migration_target_of: claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(kubevirt_api::persistent_state::MIGRATION_NAME_LABEL))
                .cloned(),
            terminating: claim.metadata.deletion_timestamp.is_some(),
            phase: claim.status.as_ref().and_then(|s| s.phase.clone()),
            storage_class: claim.spec.as_ref().and_then(|s| s.storage_class_name.clone()),
        })
    }

    /// The VM state claim of the VMI `namespace/vmi_name`: the one labelled for it (the first by
    /// name, should a migration's hand-off briefly leave two), else one of the name an older
    /// release gave it; never one being deleted. With what the VMI's status says of it.
    #[must_use]
    pub fn state_claim(&self, namespace: &str, vmi_name: &str) -> Option<(StateClaim, PersistentVolumeClaimInfo)> {
        let legacy = kubevirt_api::persistent_state::legacy_claim_name(vmi_name);
        let cache = self.cache();
        let labelled = self.labelled();
        first_claim(&cache, namespace, labelled.state_for.names(namespace, vmi_name)).or_else(|| {
            let unlabelled = cache.get(namespace, &legacy).is_some_and(|f| f.state_for.is_none());
            first_claim(&cache, namespace, unlabelled.then_some(legacy.as_str()))
        })
    }

    /// The VMI a claim keeps the state of (its `persistent-state-for` label), if it is there.
    #[must_use]
    pub fn labelled_for(&self, namespace: &str, name: &str) -> Option<String> {
        self.cache().get(namespace, name).and_then(|f| f.state_for.clone())
    }

    /// The state claim made for the target of the migration `namespace/migration`, until the
    /// migration hands it over.
    #[must_use]
    pub fn migration_target_claim(
        &self,
        namespace: &str,
        migration: &str,
    ) -> Option<(StateClaim, PersistentVolumeClaimInfo)> {
        let cache = self.cache();
        let labelled = self.labelled();
        first_claim(
            &cache,
            namespace,
            labelled.migration_target_of.names(namespace, migration),
        )
    }

    /// The modes of every claim `vmi` needs in its launcher pod, or the first (in volume order)
    /// that is not there.
    ///
    /// # Errors
    /// [`MissingClaim`] naming the claim.
    pub fn modes_for(&self, vmi: &VirtualMachineInstance) -> Result<ClaimModes, MissingClaim> {
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let cache = self.cache();
        let mut modes = BTreeMap::new();
        for name in vmi.spec.volumes.iter().filter_map(claim_of) {
            let mode = cache
                .get(namespace, name)
                .map(|facts| facts.mode)
                .ok_or_else(|| MissingClaim {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                })?;
            modes.insert(name.to_owned(), mode);
        }
        Ok(ClaimModes::new(modes))
    }

    /// What the status says of each claim of `vmi` that is there, by claim name.
    #[must_use]
    pub fn infos_for(&self, vmi: &VirtualMachineInstance) -> BTreeMap<String, PersistentVolumeClaimInfo> {
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        let cache = self.cache();
        vmi.spec
            .volumes
            .iter()
            .filter_map(claim_of)
            .filter_map(|name| {
                let facts = cache.get(namespace, name)?;
                Some((name.to_owned(), facts.info.clone()))
            })
            .collect()
    }
}

impl ClaimStore {
    /// Whether the claim `namespace/name` is there and a DataVolume fills it (`None` when it is
    /// not there).
    #[must_use]
    pub fn filled_by_data_volume(&self, namespace: &str, name: &str) -> Option<bool> {
        self.cache().get(namespace, name).map(|f| f.filled_by_data_volume)
    }

    /// Whether the claim `namespace/name` is there and bound (`None` when it is not there).
    #[must_use]
    pub fn is_bound(&self, namespace: &str, name: &str) -> Option<bool> {
        self.cache().get(namespace, name).map(|f| f.bound)
    }
}

/// Which VMIs (or VMs) use which claims, kept from their watch, so that a claim's change (it
/// appears, is resized, goes) wakes every one that uses it, as upstream's PVC handlers do.
#[derive(Debug, Default)]
pub struct ClaimUsers {
    /// `namespace/claim` → VMI keys.
    by_claim: HashMap<String, BTreeSet<String>>,
    /// VMI key → its `namespace/claim` keys.
    by_vmi: HashMap<String, Vec<String>>,
}

impl ClaimUsers {
    /// Records the claims `vmi` (under `key`) uses now.
    pub fn set(&mut self, key: &str, vmi: &VirtualMachineInstance) {
        let namespace = vmi.metadata.namespace.as_deref().unwrap_or("default");
        self.set_names(key, namespace, vmi.spec.volumes.iter().filter_map(claim_of));
    }

    /// Records the claims (or DataVolumes) named `names` in `namespace` that the object `key`
    /// uses now.
    pub fn set_names<'a>(&mut self, key: &str, namespace: &str, names: impl IntoIterator<Item = &'a str>) {
        self.remove(key);
        let mut claims: Vec<String> = names.into_iter().map(|name| format!("{namespace}/{name}")).collect();
        claims.sort();
        claims.dedup();
        if claims.is_empty() {
            return;
        }
        for claim in &claims {
            self.by_claim.entry(claim.clone()).or_default().insert(key.to_owned());
        }
        self.by_vmi.insert(key.to_owned(), claims);
    }

    /// Forgets the VMI `key`.
    pub fn remove(&mut self, key: &str) {
        for claim in self.by_vmi.remove(key).unwrap_or_default() {
            if let Some(users) = self.by_claim.get_mut(&claim) {
                users.remove(key);
                if users.is_empty() {
                    self.by_claim.remove(&claim);
                }
            }
        }
    }

    /// The VMIs that use any of `claims` (`namespace/name`).
    #[must_use]
    pub fn users_of(&self, claims: &[String]) -> Vec<String> {
        let users: BTreeSet<&String> = claims.iter().filter_map(|c| self.by_claim.get(c)).flatten().collect();
        users.into_iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests;
