//! Upstream's import and upload populators for a claim a user makes: a claim without a
//! DataVolume whose `dataSourceRef` names a `VolumeImportSource` or a `VolumeUploadSource` in its
//! own namespace is filled as a DataVolume's populated claim is (a prime claim on the chosen
//! node, its importer or upload server, the rebinding), from the source object's own spec. There
//! is no DataVolume status to write: what the pass has to say goes to the claim as events, with
//! upstream's reasons. Pure.

use cdi_api::data_volume::Empty;
use cdi_api::data_volume::{DataVolumePhase, DataVolumeStatus};
use cdi_api::{DataVolume, DataVolumeSource, DataVolumeSpec, VolumeImportSource};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::populator::{self, PopulationSource, SourceKind};
use super::{ImportFacts, ImporterSettings, Step, transfer};
use crate::claim_annotations::{ClaimEvent, ann};

/// The target's event once its prime claim is made (upstream's).
pub const PRIME_CREATED: &str = "CreatedPVCPrimeSuccessfully";
/// The target's event once the import is done (upstream's).
pub const IMPORT_SUCCEEDED: &str = "importSucceeded";
/// The target's event when the importer failed (upstream's).
pub const IMPORT_FAILED: &str = "importFailed";
/// The target's event once the upload is done (upstream's).
pub const UPLOAD_SUCCEEDED: &str = "UploadSucceeded";
/// The target's event when the upload server failed (upstream's).
pub const UPLOAD_FAILED: &str = "UploadFailed";
/// The target's event when its population cannot be done here.
pub const POPULATION_REFUSED: &str = "ErrPopulationRefused";

/// What the class the claim names is, as far as the populator cares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClassSeen {
    /// The class is there, with this provisioner.
    Provisioner(String),
    /// No class of that name (yet).
    Missing,
}

/// What becomes of a claim in this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum Population {
    /// Not a claim this populator fills (or not any more): nothing to do until it changes.
    NotOurs,
    /// It waits for something not watched (its VolumeImportSource, its class): look again.
    Wait(String),
    /// It cannot be filled here: said once on the claim, then nothing until it changes.
    Refuse(String),
    /// Fill it as this DataVolume would be (its name, namespace and UID are the claim's).
    Fill(Box<DataVolume>),
}

/// Whether the claim is a DataVolume's (its controlling owner is one), which the DataVolume's own
/// pass fills.
fn data_volume_owned(claim: &PersistentVolumeClaim) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DataVolume")
}

/// Whether the claim may be one the populators fill, from the claim alone: its `dataSourceRef`
/// names a VolumeImportSource or a VolumeUploadSource, it is not a DataVolume's, and it is not
/// on its way out.
#[must_use]
pub fn candidate(claim: &PersistentVolumeClaim) -> bool {
    populator::populated_by(claim).is_some()
        && claim
            .spec
            .as_ref()
            .and_then(|s| s.data_source_ref.as_ref())
            .is_some_and(|r| !r.name.is_empty())
        && !data_volume_owned(claim)
        && claim.metadata.deletion_timestamp.is_none()
}

/// Whether the claim is bound (a populated claim is bound only once filled).
#[must_use]
pub fn filled(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// A claim migrated to a CSI driver from a class of Kubernetes' own, which a populator may fill
/// (upstream's exception).
const MIGRATED_TO: &str = "pv.kubernetes.io/migrated-to";

/// Decides what becomes of `claim`: `source` is the VolumeImportSource or VolumeUploadSource its
/// `dataSourceRef` names (if there), `class` what its class is (`None`: the claim names no
/// class), `prime` whether its prime claim exists already (a population under way goes on
/// whatever its class and CDIConfig say since, but needs its source to make its pods).
#[must_use]
pub fn population(
    claim: &PersistentVolumeClaim,
    source: Option<&PopulationSource>,
    class: Option<&ClassSeen>,
    prime: bool,
    settings: &ImporterSettings,
) -> Population {
    let namespace = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let reference = claim.spec.as_ref().and_then(|s| s.data_source_ref.as_ref());
    let kind = populator::populated_by(claim);
    let Some(reference) = reference.filter(|_| candidate(claim)) else {
        return Population::NotOurs;
    };
    if reference
        .namespace
        .as_deref()
        .is_some_and(|n| !n.is_empty() && n != namespace)
    {
        return Population::Refuse(format!(
            "spec.dataSourceRef.namespace: a {} in another namespace is not supported",
            reference.kind
        ));
    }
    let Some(source) = source.filter(|s| Some(s.kind()) == kind) else {
        return if filled(claim) {
            Population::NotOurs
        } else {
            Population::Wait(format!(
                "{} {namespace}/{} is not there",
                reference.kind, reference.name
            ))
        };
    };
    // Upstream's: a source meant for another claim is left alone.
    if let PopulationSource::Import(import) = source
        && import
            .spec
            .target_claim
            .as_deref()
            .is_some_and(|t| !t.is_empty() && t != name)
    {
        return Population::NotOurs;
    }
    if !prime {
        match (claim.spec.as_ref().and_then(|s| s.storage_class_name.as_deref()), class) {
            (None, _) => return Population::Wait("the claim names no storage class yet".to_owned()),
            (Some(""), _) => {
                return Population::Refuse(format!(
                    "PVC {namespace}/{name} has empty storage class name: \
                     only a claim of a storage class can be populated"
                ));
            }
            (Some(class), None | Some(ClassSeen::Missing)) => {
                return Population::Wait(format!("storage class {class} not found"));
            }
            (Some(_), Some(ClassSeen::Provisioner(provisioner)))
                if provisioner.starts_with("kubernetes.io/") && !migrated_to_csi(claim) =>
            {
                return Population::Refuse(format!(
                    "can't use populator for PVC {namespace}/{name} with in-tree storage class {provisioner}"
                ));
            }
            (Some(_), Some(ClassSeen::Provisioner(_))) => {}
        }
    }
    let data_volume = match source {
        PopulationSource::Import(import) => as_data_volume(claim, import),
        PopulationSource::Upload(upload) => {
            let mut data_volume = as_data_volume(claim, &VolumeImportSource::default());
            data_volume.spec.source = Some(DataVolumeSource {
                upload: Some(Empty::default()),
                ..DataVolumeSource::default()
            });
            data_volume.spec.content_type.clone_from(&upload.spec.content_type);
            data_volume.spec.preallocation = upload.spec.preallocation;
            data_volume
        }
    };
    if prime {
        return Population::Fill(Box::new(data_volume));
    }
    let reads_a_source = data_volume
        .spec
        .source
        .as_ref()
        .is_some_and(|s| s.http.is_some() || s.registry.is_some());
    if settings.import_proxy && reads_a_source {
        return Population::Refuse(
            "CDIConfig's importProxy is set, and this CDI does not import through a proxy yet".to_owned(),
        );
    }
    match super::sources::unsupported(&data_volume) {
        Some(why) => Population::Refuse(why),
        None => Population::Fill(Box::new(data_volume)),
    }
}

fn migrated_to_csi(claim: &PersistentVolumeClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MIGRATED_TO))
        .is_some_and(|driver| !driver.is_empty())
}

/// The DataVolume the claim is filled as: the claim's name, namespace and UID (the importer
/// reports its progress under the target's UID, as upstream's), the VolumeImportSource's source,
/// content type, preallocation and checkpoints.
fn as_data_volume(claim: &PersistentVolumeClaim, source: &VolumeImportSource) -> DataVolume {
    let spec = &source.spec;
    let from = spec.source.clone().unwrap_or_default();
    // Upstream's populator takes a source that names none as blank.
    let blank = from.blank.is_some()
        || [
            from.http.is_none(),
            from.s3.is_none(),
            from.gcs.is_none(),
            from.registry.is_none(),
            from.imageio.is_none(),
            from.vddk.is_none(),
        ]
        .iter()
        .all(|none| *none);
    DataVolume {
        metadata: ObjectMeta {
            name: claim.metadata.name.clone(),
            namespace: claim.metadata.namespace.clone(),
            uid: claim.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        spec: DataVolumeSpec {
            source: Some(DataVolumeSource {
                http: from.http,
                s3: from.s3,
                gcs: from.gcs,
                registry: from.registry,
                imageio: from.imageio,
                vddk: from.vddk,
                blank: blank.then(Empty::default),
                ..DataVolumeSource::default()
            }),
            content_type: spec.content_type.clone(),
            checkpoints: spec.checkpoints.clone(),
            final_checkpoint: spec.final_checkpoint,
            preallocation: spec.preallocation,
            pvc: claim.spec.clone(),
            ..DataVolumeSpec::default()
        },
        status: None,
    }
}

/// A step as it applies to a claim without a DataVolume: no status to write, and what would be
/// said on the DataVolume is said on the claim.
fn on_claim(step: Step) -> Option<Step> {
    match step {
        Step::WriteStatus(_) => None,
        Step::Event(event) => Some(Step::ClaimEvent(ClaimEvent {
            event_type: event.event_type,
            reason: event.reason,
            message: event.message,
        })),
        other => Some(other),
    }
}

/// One pass's plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pass {
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// The claim cannot be filled as things are (a pod in the way): said, then nothing until
    /// something changes.
    pub refused: bool,
}

/// Plans one pass over a claim [`population`] said to fill (`facts.data_volume` is the
/// DataVolume it gave, `facts.claim` the claim).
#[must_use]
pub fn plan(facts: &ImportFacts<'_>, now: &Time) -> Pass {
    let (Some(target), Some(source)) = (facts.claim, transfer(facts.data_volume)) else {
        return Pass::default();
    };
    let Some(kind) = SourceKind::of(&source) else {
        return Pass::default();
    };
    let name = target.metadata.name.clone().unwrap_or_default();
    let known = target.metadata.annotations.clone().unwrap_or_default();
    let phase_before = known.get(ann::POD_PHASE).cloned();
    // The rebinding's warning is said once: before the target's copied phase says Succeeded.
    let current = DataVolumeStatus {
        phase: if phase_before.as_deref() == Some("Succeeded") {
            DataVolumePhase::Succeeded
        } else {
            DataVolumePhase::default()
        },
        ..DataVolumeStatus::default()
    };
    let pass = match populator::target_pass(facts, target, (kind, &source), &current, now) {
        Ok(pass) => pass,
        Err(refused) => {
            return Pass {
                steps: refused.into_iter().filter_map(on_claim).collect(),
                refused: true,
            };
        }
    };
    let made_prime = pass.steps.iter().any(|s| matches!(s, Step::CreateClaim(_)));
    // Said with the step that hands the volume over: a rebinding that fails is tried again, and
    // said again, in the next pass.
    let hands_over = pass.steps.iter().any(|s| matches!(s, Step::RebindVolume(_)));
    let mut steps: Vec<Step> = pass.steps.into_iter().filter_map(on_claim).collect();
    if made_prime {
        steps.push(said(
            "Normal",
            PRIME_CREATED,
            "PVC Prime created successfully".to_owned(),
        ));
    }
    if hands_over {
        steps.push(match kind {
            SourceKind::Import => said("Normal", IMPORT_SUCCEEDED, format!("Successfully imported into {name}")),
            SourceKind::Upload => said("Normal", UPLOAD_SUCCEEDED, format!("Successfully uploaded into {name}")),
        });
    }
    let phase_after = pass.annotations.get(ann::POD_PHASE);
    if phase_after != phase_before.as_ref() && phase_after.is_some_and(|p| p == "Failed") {
        steps.push(match kind {
            SourceKind::Import => said("Warning", IMPORT_FAILED, format!("import into {name} failed")),
            SourceKind::Upload => said("Warning", UPLOAD_FAILED, format!("Upload into {name} failed")),
        });
    }
    Pass { steps, refused: false }
}

/// What is said on a claim that cannot be filled. The pass then rests until the claim changes
/// (or cdi-controller starts again), so it is said again only then.
#[must_use]
pub fn refusal(why: String) -> ClaimEvent {
    ClaimEvent {
        event_type: "Warning",
        reason: POPULATION_REFUSED,
        message: why,
    }
}

/// A step saying this on the claim.
fn said(event_type: &'static str, reason: &'static str, message: String) -> Step {
    Step::ClaimEvent(ClaimEvent {
        event_type,
        reason,
        message,
    })
}
