//! A DataVolume's claim spec, as upstream CDI renders it (`renderPvcSpec`): `spec.pvc` as given;
//! `spec.storage` completed from the StorageClass's profile (access and volume modes) and sized
//! for the filesystem that takes part of a Filesystem volume. Pure.

use std::collections::BTreeMap;

use cdi_api::{DataVolumeSpec, StorageProfileStatus};
use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, VolumeResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Kubernetes' annotation on the default StorageClass.
pub const DEFAULT_CLASS: &str = "storageclass.kubernetes.io/is-default-class";
/// KubeVirt's annotation on the default StorageClass for VM disks.
pub const DEFAULT_VIRT_CLASS: &str = "storageclass.kubevirt.io/is-default-virt-class";

const MIB: u64 = 1 << 20;

/// Why a claim spec cannot be rendered; the message is upstream's, for the DataVolume's `Bound`
/// and `Ready` conditions (reason `ErrClaimNotValid`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// Neither `pvc` nor `storage`.
    #[error("datavolume one of {{pvc, storage}} field is required")]
    NoClaimSpec,
    /// An archive extracts into a filesystem.
    #[error("ContentType Archive cannot have block volumeMode")]
    ArchiveOnBlock,
    /// No class, and no access mode given.
    #[error("PVC spec is missing accessMode and no storageClass to choose profile")]
    NoClass,
    /// The class has no profile yet.
    #[error("cannot get StorageProfile: StorageProfile {0} not found")]
    NoProfile(String),
    /// The profile offers nothing.
    #[error("no accessMode specified in StorageProfile {0}")]
    NoAccessMode(String),
    /// The profile offers nothing in the volume mode asked for.
    #[error("no matching accessMode specified in StorageProfile {0}")]
    NoMatchingAccessMode(String),
    /// No size.
    #[error("PVC Spec is not valid - missing storage size")]
    NoSize,
    /// Less than 1 MiB.
    #[error("PVC Spec is not valid - storage size should be at least 1MiB")]
    TooSmall,
    /// A size or an overhead that is not a number.
    #[error("{0}")]
    Malformed(String),
}

/// The StorageClass a claim gets, with what the controller knows of it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ChosenClass {
    /// Its name.
    pub name: String,
    /// Its profile's status, if the profile is there.
    pub profile: Option<StorageProfileStatus>,
    /// Its filesystem overhead, as CDIConfig's status says (`0` to `1`, three decimals at most).
    pub filesystem_overhead: String,
}

/// A StorageClass as the default-class choice sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClassCandidate {
    /// Its name.
    pub name: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// When it was made.
    pub created: Option<Time>,
}

/// The class a claim without `storageClassName` gets: the default class for VM disks (for
/// `kubevirt` content), else the default class; among several, the newest, then the first by
/// name, as upstream's.
#[must_use]
pub fn default_class(classes: &[ClassCandidate], kubevirt_content: bool) -> Option<&ClassCandidate> {
    let marked = |annotation: &str| {
        let mut found: Vec<&ClassCandidate> = classes
            .iter()
            .filter(|c| c.annotations.get(annotation).is_some_and(|v| v == "true"))
            .collect();
        found.sort_by(|a, b| {
            let newest = b.created.as_ref().map(|t| t.0).cmp(&a.created.as_ref().map(|t| t.0));
            newest.then_with(|| a.name.cmp(&b.name))
        });
        found.first().copied()
    };
    kubevirt_content
        .then(|| marked(DEFAULT_VIRT_CLASS))
        .flatten()
        .or_else(|| marked(DEFAULT_CLASS))
}

/// The size a Filesystem claim needs for `size` bytes of disk: rounded up to a MiB, then grown by
/// the overhead, rounded up to a byte (upstream's `GetRequiredSpace`).
///
/// # Errors
/// An overhead that is not a share.
pub fn required_space(size: u64, overhead: &str) -> Result<u64, RenderError> {
    let rounded = size.div_ceil(MIB).saturating_mul(MIB);
    let share =
        cdi_api::cdi_config::overhead_thousandths(overhead).map_err(|e| RenderError::Malformed(e.to_string()))?;
    let grown = u128::from(rounded) * u128::from(1000 + share);
    u64::try_from(grown.div_ceil(1000)).map_err(|_| RenderError::Malformed(format!("size {size} is too large")))
}

fn default_modes(claim: &mut PersistentVolumeClaimSpec, class: &ChosenClass) -> Result<(), RenderError> {
    let profile = class
        .profile
        .as_ref()
        .ok_or_else(|| RenderError::NoProfile(class.name.clone()))?;
    let sets = &profile.claim_property_sets;
    let access_modes = claim.access_modes.clone().unwrap_or_default();
    match (access_modes.is_empty(), claim.volume_mode.is_none()) {
        (true, true) => {
            let first = sets
                .first()
                .ok_or_else(|| RenderError::NoAccessMode(class.name.clone()))?;
            claim.access_modes = Some(first.access_modes.clone());
            claim.volume_mode.clone_from(&first.volume_mode);
        }
        (true, false) => {
            let matching = sets
                .iter()
                .find(|s| s.volume_mode == claim.volume_mode)
                .ok_or_else(|| RenderError::NoMatchingAccessMode(class.name.clone()))?;
            claim.access_modes = Some(matching.access_modes.clone());
        }
        (false, true) => {
            claim.volume_mode = sets
                .iter()
                .find(|s| s.access_modes.iter().any(|a| access_modes.contains(a)))
                .and_then(|s| s.volume_mode.clone());
        }
        (false, false) => {}
    }
    Ok(())
}

/// The claim spec of a DataVolume. `class` is the class it names, or the default class when it
/// names none (`None` when there is none); `archive` is `contentType: archive`; a clone's size
/// may be left for the source to give.
///
/// # Errors
/// [`RenderError`], with upstream's message.
pub fn render(
    spec: &DataVolumeSpec,
    class: Option<&ChosenClass>,
    archive: bool,
) -> Result<PersistentVolumeClaimSpec, RenderError> {
    if let Some(pvc) = &spec.pvc {
        return Ok(pvc.clone());
    }
    let storage = spec.storage.as_ref().ok_or(RenderError::NoClaimSpec)?;
    let mut claim = PersistentVolumeClaimSpec {
        access_modes: (!storage.access_modes.is_empty()).then(|| storage.access_modes.clone()),
        selector: storage.selector.clone(),
        resources: storage.resources.clone(),
        volume_name: storage.volume_name.clone(),
        storage_class_name: storage.storage_class_name.clone(),
        volume_mode: storage
            .volume_mode
            .clone()
            .filter(|m| m != cdi_api::data_volume::VOLUME_MODE_FROM_STORAGE_PROFILE),
        data_source: storage.data_source.clone(),
        data_source_ref: storage.data_source_ref.clone(),
        ..PersistentVolumeClaimSpec::default()
    };
    if archive {
        if claim.volume_mode.as_deref() == Some("Block") {
            return Err(RenderError::ArchiveOnBlock);
        }
        claim.volume_mode = Some("Filesystem".to_owned());
    }
    match class {
        None if claim.access_modes.is_none() => return Err(RenderError::NoClass),
        None => {}
        Some(class) => {
            claim.storage_class_name = Some(class.name.clone());
            default_modes(&mut claim, class)?;
        }
    }
    let is_clone = spec
        .source
        .as_ref()
        .is_some_and(|s| s.pvc.is_some() || s.snapshot.is_some());
    let requested = claim
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
        .cloned();
    let Some(requested) = requested else {
        return if is_clone { Ok(claim) } else { Err(RenderError::NoSize) };
    };
    let bytes = kubevirt_api::quantity::to_bytes(&requested).map_err(|e| RenderError::Malformed(e.to_string()))?;
    if bytes < MIB {
        return Err(RenderError::TooSmall);
    }
    let block = claim.volume_mode.as_deref() == Some("Block");
    let size = if block {
        requested
    } else {
        let overhead = class.map_or("0", |c| c.filesystem_overhead.as_str());
        Quantity(required_space(bytes, overhead)?.to_string())
    };
    let resources = claim.resources.get_or_insert_with(VolumeResourceRequirements::default);
    resources
        .requests
        .get_or_insert_with(BTreeMap::new)
        .insert("storage".to_owned(), size);
    Ok(claim)
}

#[cfg(test)]
mod tests;
