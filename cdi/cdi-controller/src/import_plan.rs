//! One pass of the import controller over a DataVolume with an `http`, `registry`, `blank` or
//! `upload` source, in upstream's legacy flow (the claim is filled in place): observe the
//! DataVolume, its claim, the importer or upload server pod and the scratch claim; decide here,
//! purely, the steps; the caller applies them in order. The claim is created owned by the
//! DataVolume; the pod once the claim is bound (or at once when a WaitForFirstConsumer claim asked
//! for immediate binding); a second importer pod with scratch space when the image asked for it
//! (an upload server has one from the start); the DataVolume's status follows the claim.

use std::collections::BTreeMap;

use cdi_api::DataVolume;
use cdi_api::data_volume::DataVolumeStatus;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::claim_annotations::{self, ClaimEvent, ann};
use crate::claim_spec::{self, ChosenClass};
use crate::import_status::{self, Circumstances, DataVolumeEvent};
use crate::importer_pod::{self, ImportSource};
use crate::upload_server::UploadServer;
use clone::CloneFacts;
pub use populator::PopulatorFacts;

/// The annotation asking a WaitForFirstConsumer claim to bind for the import at once.
pub const IMMEDIATE_BINDING: &str = "cdi.kubevirt.io/storage.bind.immediate.requested";
/// The reason of a source this controller does not import.
pub const UNSUPPORTED: &str = "UnsupportedSource";
/// The reason of a claim spec that cannot be rendered (upstream's).
pub const CLAIM_NOT_VALID: &str = "ErrClaimNotValid";
/// The reason of a claim another owner has (upstream's).
pub const RESOURCE_EXISTS: &str = "ErrResourceExists";

/// The controller's settings for importer pods.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ImporterSettings {
    /// The importer image.
    pub image: String,
    /// The upload server image.
    pub upload_image: String,
    /// Its pull policy.
    pub pull_policy: String,
    /// CDIConfig's `scratchSpaceStorageClass`; else the claim's class.
    pub scratch_class: Option<String>,
    /// CDIConfig's `preallocation`, for DataVolumes that do not say.
    pub preallocation: bool,
    /// CDIConfig's `podResourceRequirements`.
    pub resources: Option<ResourceRequirements>,
    /// CDIConfig's `imagePullSecrets`.
    pub image_pull_secrets: Vec<k8s_openapi::api::core::v1::LocalObjectReference>,
    /// The CDI CR's `workload`: where importer, upload server and clone source pods run.
    pub placement: cdi_api::cdi::NodePlacement,
    /// CDIConfig sets an import proxy, which the importer does not use yet: imports are refused.
    pub import_proxy: bool,
    /// CDIConfig's `insecureRegistries`: registries (`host[:port]`) reached unverified.
    pub insecure_registries: Vec<String>,
    /// The clone source image.
    pub cloner_image: String,
    /// Checks cdi-apiserver's clone tokens.
    pub clone_tokens: Option<cdi_token::Validator>,
}

/// What one pass sees.
#[derive(Clone, Copy, Debug)]
pub struct ImportFacts<'a> {
    /// The DataVolume.
    pub data_volume: &'a DataVolume,
    /// Its claim (same name), if any.
    pub claim: Option<&'a PersistentVolumeClaim>,
    /// The importer pod, if any.
    pub pod: Option<&'a Pod>,
    /// The scratch claim, if any.
    pub scratch_claim: Option<&'a PersistentVolumeClaim>,
    /// The class the claim gets, with its profile and overhead (`None`: no class at all).
    pub class: Option<&'a ChosenClass>,
    /// The class binds on first consumer.
    pub wait_for_first_consumer: bool,
    /// The controller's settings.
    pub settings: &'a ImporterSettings,
    /// The running importer's progress, in percent, when it could be read.
    pub progress: Option<f64>,
    /// A clone's source, when the DataVolume is a clone.
    pub clone: Option<CloneFacts<'a>>,
    /// Why the DataVolume's `sourceRef` gives no source, when it gives none (the DataVolume above
    /// is as its `sourceRef` resolved when it does).
    pub source_ref: Option<&'a SourceRefProblem>,
    /// What the import populator's flow sees (`pod` and `scratch_claim` above are then the prime
    /// claim's).
    pub populator: PopulatorFacts<'a>,
}

/// A step, applied in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Create the claim.
    CreateClaim(Box<PersistentVolumeClaim>),
    /// Set these annotations on the claim (a merge: only the keys given).
    AnnotateClaim(BTreeMap<String, String>),
    /// Set these labels on the claim (a merge: only the keys given).
    LabelClaim(BTreeMap<String, String>),
    /// Delete the importer pod of this name.
    DeletePod(String),
    /// Create the importer pod.
    CreatePod(Box<Pod>),
    /// Create the upload server: its Service, its certificate Secret, then its pod.
    CreateUploadServer(Box<UploadServer>),
    /// Delete the upload server's Service of this name.
    DeleteService(String),
    /// Delete the upload server's certificate Secret of this name.
    DeleteSecret(String),
    /// Create the scratch claim.
    CreateScratchClaim(Box<PersistentVolumeClaim>),
    /// Lift the scratch claim's scheduling gate from the pod of this name, its scratch claim
    /// being there ([`importer_pod::SCRATCH_GATE`]).
    UngatePod(String),
    /// Record an event on the claim.
    ClaimEvent(ClaimEvent),
    /// Create a clone's source pod, then its client certificate Secret.
    CreateCloneSource(Box<crate::clone_source::CloneSourceArgs>),
    /// Give a clone's live source pod the Secret with its client certificate, which it waits for:
    /// the pass that made the pod did not get to write it.
    GiveCloneSourceSecret {
        /// The source's namespace.
        namespace: String,
        /// The pod, and the Secret's name.
        pod: String,
        /// The name the certificate is for.
        client_name: String,
    },
    /// Delete a clone's source pod (in the source's namespace).
    DeleteCloneSource {
        /// The source's namespace.
        namespace: String,
        /// The pod.
        name: String,
    },
    /// Set these annotations on another claim of the DataVolume's (a merge): the prime claim.
    AnnotateNamedClaim(String, BTreeMap<String, String>),
    /// Set these labels on another claim of the DataVolume's (a merge): the prime claim.
    LabelNamedClaim(String, BTreeMap<String, String>),
    /// Delete this claim of the DataVolume's: the prime claim, once its volume went to the target.
    DeleteNamedClaim(String),
    /// Create the VolumeImportSource or VolumeUploadSource the claim's `dataSourceRef` names.
    CreatePopulationSource(populator::PopulationSource),
    /// Delete the DataVolume's source object of this kind and name, once it is filled.
    DeletePopulationSource(populator::SourceKind, String),
    /// Replace the prime claim's volume with this one, bound to the target claim.
    RebindVolume(Box<k8s_openapi::api::core::v1::PersistentVolume>),
    /// Write the DataVolume's status.
    WriteStatus(Box<DataVolumeStatus>),
    /// Record an event on the DataVolume.
    Event(DataVolumeEvent),
}

/// The scratch claim's name (upstream's).
#[must_use]
pub fn scratch_name(claim: &str) -> String {
    format!("{claim}-scratch")
}

/// What fills a claim.
#[derive(Clone, Debug, PartialEq)]
pub enum Transfer {
    /// An importer pod reads a source.
    Import(ImportSource),
    /// An upload server takes what a client sends through cdi-uploadproxy.
    Upload,
    /// An upload server takes what a source pod streams from the source claim.
    Clone {
        /// The source's namespace.
        namespace: String,
        /// The source claim.
        name: String,
    },
}

impl Transfer {
    /// Whether an upload server fills the claim.
    #[must_use]
    pub fn uploads(&self) -> bool {
        matches!(self, Self::Upload | Self::Clone { .. })
    }
}

/// What fills the DataVolume's claim, if this controller runs it.
#[must_use]
pub fn transfer(data_volume: &DataVolume) -> Option<Transfer> {
    let source = data_volume.spec.source.as_ref()?;
    if let Some(http) = &source.http {
        return Some(Transfer::Import(ImportSource::Http(http.clone())));
    }
    if let Some(registry) = &source.registry {
        return Some(Transfer::Import(ImportSource::Registry(registry.clone())));
    }
    if source.upload.is_some() {
        return Some(Transfer::Upload);
    }
    if let Some(pvc) = &source.pvc {
        let namespace = if pvc.namespace.is_empty() {
            data_volume.metadata.namespace.clone().unwrap_or_default()
        } else {
            pvc.namespace.clone()
        };
        return Some(Transfer::Clone {
            namespace,
            name: pvc.name.clone(),
        });
    }
    source.blank.is_some().then_some(Transfer::Import(ImportSource::Blank))
}

/// The name of the pod that fills the claim `claim` by `transfer`.
#[must_use]
pub fn pod_name(transfer: &Transfer, claim: &str) -> String {
    match transfer {
        Transfer::Import(_) => importer_pod::pod_name(claim),
        Transfer::Upload | Transfer::Clone { .. } => cdi_api::upload::pod_name(claim),
    }
}

/// A status write when the status changed, and the phase change's event.
fn status_steps(current: &DataVolumeStatus, next: DataVolumeStatus, event: Option<DataVolumeEvent>) -> Vec<Step> {
    let mut steps = Vec::new();
    if next != *current {
        steps.push(Step::WriteStatus(Box::new(next)));
    }
    steps.extend(event.map(Step::Event));
    steps
}

/// A DataVolume that cannot go on: its status says why, with a warning the first time.
fn blocked(
    facts: &ImportFacts<'_>,
    phase: cdi_api::DataVolumePhase,
    reason: &'static str,
    message: String,
    now: &Time,
) -> Vec<Step> {
    let current = facts.data_volume.status.clone().unwrap_or_default();
    let next = import_status::blocked(&current, phase, reason, &message, now);
    let first = current
        .conditions
        .iter()
        .all(|c| c.state.message.as_deref() != Some(message.as_str()));
    let mut steps = status_steps(&current, next, None);
    if first {
        steps.push(Step::Event(DataVolumeEvent {
            event_type: "Warning",
            reason,
            message,
        }));
    }
    steps
}

/// Plans one pass.
#[must_use]
pub fn plan(facts: &ImportFacts<'_>, now: &Time) -> Vec<Step> {
    let data_volume = facts.data_volume;
    if data_volume.metadata.deletion_timestamp.is_some() {
        return orphan_steps(facts.claim, facts.pod);
    }
    if let Some(refused) = refusal(facts, now) {
        return refused;
    }
    let Some(source) = transfer(data_volume) else {
        return Vec::new();
    };
    let current = data_volume.status.clone().unwrap_or_default();
    let Some(claim) = facts.claim else {
        return match claim_spec::render(&data_volume.spec, facts.class, false) {
            Ok(spec) => {
                if let Transfer::Clone { namespace, name } = &source
                    && let Some(held) = clone::hold_back(facts, (namespace, name), &spec, now)
                {
                    return held;
                }
                let populator_kind = match populator::SourceKind::of(&source) {
                    Some(kind) => match populator::wanted(data_volume, &facts.populator) {
                        Ok(wanted) => wanted.then_some(kind),
                        Err(why) => {
                            return blocked(facts, cdi_api::DataVolumePhase::Pending, CLAIM_NOT_VALID, why, now);
                        }
                    },
                    None => None,
                };
                let mut steps = Vec::new();
                if let Some(kind) = populator_kind {
                    steps.push(Step::CreatePopulationSource(populator::population_source(
                        data_volume,
                        kind,
                    )));
                    steps.push(Step::CreateClaim(Box::new(populator::target_claim(
                        data_volume,
                        spec,
                        (kind, &source),
                    ))));
                } else {
                    steps.push(Step::CreateClaim(Box::new(claim_of(data_volume, spec, &source))));
                }
                let work = Circumstances {
                    requires_work: true,
                    wait_for_first_consumer: facts.wait_for_first_consumer,
                    populating: false,
                };
                let (next, event) = import_status::next_status(&current, None, work, now);
                steps.extend(status_steps(&current, next, event));
                steps
            }
            Err(e) => blocked(
                facts,
                cdi_api::DataVolumePhase::Pending,
                CLAIM_NOT_VALID,
                e.to_string(),
                now,
            ),
        };
    };
    let ours = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(&o.uid) == data_volume.metadata.uid.as_ref());
    if !ours {
        let name = claim.metadata.name.clone().unwrap_or_default();
        return blocked(
            facts,
            current.phase,
            RESOURCE_EXISTS,
            format!("Resource \"{name}\" already exists and is not managed by DataVolume"),
            now,
        );
    }
    if let Some(kind) = populator::populated_by(claim) {
        // A claim named for another populator than the DataVolume's source takes (not one this
        // controller made): nothing fills it.
        return if populator::SourceKind::of(&source) == Some(kind) {
            populator::steps(facts, claim, (kind, &source), &current, now)
        } else {
            Vec::new()
        };
    }
    if let Some(refused) = foreign_pod(facts, claim, &current, now) {
        return refused;
    }
    if let Transfer::Clone { namespace, name } = &source
        && let Some(why) = clone::foreign_claim(claim, namespace, name)
    {
        return blocked(facts, current.phase, clone::VALIDATION_FAILED, why, now);
    }
    claim_steps(facts, claim, &source, &current, now)
}

/// The entries of `wanted` that `known` lacks or holds otherwise: what a merge patch sets.
fn changed_entries(known: &BTreeMap<String, String>, wanted: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    wanted
        .iter()
        .filter(|(k, v)| known.get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// A pod of the name the pass would give its pod that `claim` does not control: the DataVolume
/// cannot go on.
fn foreign_pod(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    current: &DataVolumeStatus,
    now: &Time,
) -> Option<Vec<Step>> {
    let pod = facts.pod?;
    let meta = ObjectMeta {
        deletion_timestamp: None,
        ..pod.metadata.clone()
    };
    if controlled_by(&meta, claim.metadata.uid.as_deref()) {
        return None;
    }
    let name = pod.metadata.name.clone().unwrap_or_default();
    Some(blocked(
        facts,
        current.phase,
        RESOURCE_EXISTS,
        format!(
            "Pod \"{name}\" already exists and is not controlled by claim {}",
            claim.metadata.name.clone().unwrap_or_default()
        ),
        now,
    ))
}

/// Whether `meta`'s controlling owner has `uid`.
fn controlled_by(meta: &ObjectMeta, uid: Option<&str>) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid)
        && meta.deletion_timestamp.is_none()
}

/// The steps for a claim on its way out: its importer pod goes, since the claim cannot go while
/// a pod uses it (its `pvc-protection` finalizer) and the pod, which it owns, would only go after
/// it (as upstream's import controller cleans up).
fn release_claim(claim: &PersistentVolumeClaim, pod: Option<&Pod>) -> Option<Step> {
    claim.metadata.deletion_timestamp.as_ref()?;
    let pod = pod.filter(|p| controlled_by(&p.metadata, claim.metadata.uid.as_deref()))?;
    pod.metadata.name.clone().map(Step::DeletePod)
}

/// The steps once the DataVolume is gone: a claim it leaves deleting gets its importer pod
/// removed ([`release_claim`]).
#[must_use]
pub fn orphan_steps(claim: Option<&PersistentVolumeClaim>, pod: Option<&Pod>) -> Vec<Step> {
    let Some(claim) = claim else {
        return Vec::new();
    };
    let source = clone::source_of_leaving(claim).map(|(namespace, name)| Step::DeleteCloneSource { namespace, name });
    release_claim(claim, pod).into_iter().chain(source).collect()
}

/// The steps of a claim filled in place, and the DataVolume's status from it.
fn claim_steps(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    source: &Transfer,
    current: &DataVolumeStatus,
    now: &Time,
) -> Vec<Step> {
    let (mut steps, annotations) = fill_steps(facts, claim, source, now);
    let immediate = annotations.contains_key(IMMEDIATE_BINDING);
    let work = Circumstances {
        requires_work: true,
        wait_for_first_consumer: facts.wait_for_first_consumer && !immediate,
        populating: false,
    };
    let (mut next, event) = import_status::next_status(current, Some(&view(claim, annotations)), work, now);
    if let Some(percent) = facts.progress
        && next.phase == cdi_api::DataVolumePhase::ImportInProgress
    {
        next.progress = Some(crate::import_progress::shown(percent));
    }
    steps.extend(status_steps(current, next, event));
    steps
}

/// What filling `claim` (the DataVolume's own, or a populator's prime claim) takes in this pass:
/// its annotations and labels from the pod, the pod, its scratch claim, a clone's source pod; and
/// the claim's annotations as they will be.
fn fill_steps(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    source: &Transfer,
    now: &Time,
) -> (Vec<Step>, BTreeMap<String, String>) {
    let mut steps: Vec<Step> = release_claim(claim, facts.pod).into_iter().collect();
    let known = claim.metadata.annotations.clone().unwrap_or_default();
    let mut annotations = known.clone();
    let claim_name = claim.metadata.name.clone().unwrap_or_default();
    let mut pod_present = false;
    if let Some(pod) = facts.pod.filter(|p| p.metadata.deletion_timestamp.is_none()) {
        pod_present = true;
        let observed = match source {
            Transfer::Import(_) => claim_annotations::observe_importer(&known, pod),
            Transfer::Upload => claim_annotations::observe_upload(&known, pod),
            Transfer::Clone { .. } => claim_annotations::observe_clone_target(&known, pod),
        };
        annotations = observed.annotations;
        // Upstream's `addLabelsFromTerminationMessage`: a registry image's labels.
        let labels = claim.metadata.labels.clone().unwrap_or_default();
        let new_labels: BTreeMap<String, String> = observed
            .labels
            .into_iter()
            .filter(|(k, v)| labels.get(k) != Some(v))
            .collect();
        if !new_labels.is_empty() {
            steps.push(Step::LabelClaim(new_labels));
        }
        steps.extend(observed.events.into_iter().map(Step::ClaimEvent));
        let pending = pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending");
        // A gated pod waits for its scratch claim whatever the claim says.
        let needs_scratch = pending
            && (annotations.get(ann::REQUIRES_SCRATCH).is_some_and(|v| v == "true")
                || importer_pod::gated_for_scratch(pod));
        if observed.delete_pod {
            steps.push(Step::DeletePod(pod.metadata.name.clone().unwrap_or_default()));
            // A finished upload's Service and certificate go with its server (upstream's cleanup;
            // its Secret goes with the pod that owns it).
            if source.uploads() && annotations.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded") {
                steps.push(Step::DeleteService(cdi_api::upload::service_name(&claim_name)));
                steps.push(Step::DeleteSecret(cdi_api::upload::pod_name(&claim_name)));
            }
        } else if needs_scratch {
            match facts.scratch_claim {
                None => {
                    steps.push(Step::CreateScratchClaim(Box::new(scratch_claim(facts, claim, pod))));
                    // Lifted in the same pass: nothing about a gated pod changes to bring another.
                    if importer_pod::gated_for_scratch(pod) {
                        steps.push(Step::UngatePod(pod.metadata.name.clone().unwrap_or_default()));
                    }
                }
                // A scratch claim of an earlier pod, on its way out: this pod would wait for it
                // forever; it goes, and the next one gets a scratch claim of its own.
                Some(scratch) if !controlled_by(&scratch.metadata, pod.metadata.uid.as_deref()) => {
                    steps.push(Step::DeletePod(pod.metadata.name.clone().unwrap_or_default()));
                }
                Some(_) if importer_pod::gated_for_scratch(pod) => {
                    steps.push(Step::UngatePod(pod.metadata.name.clone().unwrap_or_default()));
                }
                Some(_) => {}
            }
        }
    } else if facts.pod.is_some() {
        pod_present = true;
    }
    let changed = changed_entries(&known, &annotations);
    if !changed.is_empty() {
        steps.insert(0, Step::AnnotateClaim(changed));
    }
    let phase = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default();
    let complete = annotations.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded");
    let fatal = annotations.get(ann::FATAL_ERROR).is_some_and(|v| v == "true");
    let immediate = annotations.contains_key(IMMEDIATE_BINDING);
    let can_run = phase == "Bound" || (phase == "Pending" && facts.wait_for_first_consumer && immediate);
    if !pod_present && !complete && !fatal && claim.metadata.deletion_timestamp.is_none() && can_run {
        let scratch = annotations
            .get(ann::REQUIRES_SCRATCH)
            .is_some_and(|v| v == "true")
            .then(|| scratch_name(&claim_name));
        match source {
            Transfer::Import(source) => {
                steps.push(Step::CreatePod(Box::new(importer_pod::render(&pod_args(
                    facts, claim, source, scratch,
                )))));
                annotations
                    .entry(ann::IMPORT_POD.to_owned())
                    .or_insert_with(|| importer_pod::pod_name(&claim_name));
            }
            Transfer::Upload | Transfer::Clone { .. } => {
                let args = pods::upload_server_args(facts, claim, source, now);
                steps.push(Step::CreateUploadServer(Box::new(crate::upload_server::render(&args))));
                annotations
                    .entry(ann::UPLOAD_POD.to_owned())
                    .or_insert_with(|| cdi_api::upload::pod_name(&claim_name));
            }
        }
    }
    if let Transfer::Clone { namespace, name } = source {
        steps.extend(clone::source_steps(facts, claim, &annotations, (namespace, name)));
    }
    (steps, annotations)
}

pub mod bare_claim;
mod claim;
pub mod clone;
mod pods;
pub mod populator;
mod sources;

pub(crate) use claim::requested_size;
use claim::{claim_of, view};
use pods::{pod_args, scratch_claim};

use sources::refusal;
pub use sources::{SourceRefProblem, with_source};

#[cfg(test)]
mod bare_claim_tests;
#[cfg(test)]
mod bare_claim_upload_tests;
#[cfg(test)]
mod clone_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod upload_tests;
