//! Upstream's volume-populator flow for an import or an upload into a claim of a CSI class: the
//! DataVolume's claim (the target) names a `VolumeImportSource` or a `VolumeUploadSource` in its
//! `dataSourceRef`, so that the CSI provisioner leaves it alone; once it may be filled (a node
//! was chosen for it, or its class binds at once), a prime claim `prime-<target uid>` is made on
//! the same node and filled by the importer or the upload server as a claim filled in place is;
//! its annotations are copied to the target (which the DataVolume's status reads), with an
//! import's progress in `cdi.kubevirt.io/storage.populator.progress`; once the prime is filled
//! its volume is rebound to the target, and the prime, left `Lost`, is deleted. An unbound target
//! waiting for its first consumer shows `PendingPopulation`, so that its VM's pod is made and
//! scheduled, which chooses the node. Pure.

use std::collections::BTreeMap;

use cdi_api::DataVolume;
use cdi_api::data_volume::{DataVolumePhase, DataVolumeStatus};
use k8s_openapi::api::core::v1::{
    ObjectReference, PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};

use super::{IMMEDIATE_BINDING, ImportFacts, Step, Transfer, claim_of, fill_steps, status_steps, view};
use crate::claim_annotations::ann;
use crate::import_status::{self, Circumstances, DataVolumeEvent};

/// The annotation a DataVolume sets to choose the flow: `"true"` or `"false"`.
pub const USE_POPULATOR: &str = "cdi.kubevirt.io/storage.usePopulator";
/// The target's annotation with the import's progress (`12.34%`, `100.0%`, `N/A`).
pub const PROGRESS: &str = "cdi.kubevirt.io/storage.populator.progress";
/// The target's annotation naming its prime claim.
pub const PRIME_NAME: &str = cdi_api::volume_upload_source::PRIME_NAME;
/// The prime's annotation naming the populator's kind.
pub const POPULATOR_KIND: &str = "cdi.kubevirt.io/storage.populator.kind";
/// The prime's annotation asking for preallocation.
pub const PREALLOCATION_REQUESTED: &str = "cdi.kubevirt.io/storage.preallocation.requested";
/// The node the scheduler chose for a claim waiting for its first consumer.
pub const SELECTED_NODE: &str = "volume.kubernetes.io/selected-node";
/// The annotation on the prime's importer or upload server pod naming the DataVolume (so that the
/// controller's pod watch reaches it; the pod's owner is the prime claim).
pub const DATA_VOLUME_OF_POD: &str = crate::clone_source::OWNER_REF;

/// The label that keeps the prime and its scratch claim out of Velero's backups (upstream's).
const EXCLUDE_FROM_BACKUP: &str = "velero.io/exclude-from-backup";
/// The reason of a prime whose volume cannot be rebound.
pub const REBIND_FAILED: &str = "ErrRebindPV";

/// The prime's annotations copied to the target (upstream's list, less multi-stage imports').
const COPIED: [&str; 10] = [
    ann::POD_PHASE,
    ann::POD_READY,
    ann::POD_RESTARTS,
    PREALLOCATION_REQUESTED,
    ann::PREALLOCATION_APPLIED,
    ann::RUNNING,
    ann::RUNNING_MESSAGE,
    ann::RUNNING_REASON,
    ann::POD_SCHEDULABLE,
    ann::FATAL_ERROR,
];

/// What a pass sees of the populator's flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct PopulatorFacts<'a> {
    /// Before the claim is made: the class's provisioner has a CSIDriver object.
    pub csi_class: bool,
    /// Before the claim is made: the class's provisioner is one of Kubernetes' own
    /// (`kubernetes.io/...`), which no populator can fill.
    pub in_tree_class: bool,
    /// The prime claim, if any.
    pub prime: Option<&'a PersistentVolumeClaim>,
    /// The prime claim's volume, if it has one.
    pub prime_volume: Option<&'a PersistentVolume>,
    /// The DataVolume's VolumeImportSource or VolumeUploadSource is there.
    pub source_object: bool,
}

/// Whether the DataVolume's import or upload takes the populator's flow: its `usePopulator` annotation
/// says, else whether its class is a CSI driver's.
///
/// # Errors
/// The annotation is not a boolean, or asks for the populator with a class of Kubernetes' own
/// (upstream's populator refuses those).
pub fn wanted(data_volume: &DataVolume, facts: &PopulatorFacts<'_>) -> Result<bool, String> {
    let Some(value) = data_volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(USE_POPULATOR))
    else {
        return Ok(facts.csi_class);
    };
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "t" if facts.in_tree_class => Err(format!(
            "annotation {USE_POPULATOR} asks for a populator, which cannot fill a claim of an in-tree storage class"
        )),
        "true" | "1" | "t" => Ok(true),
        "false" | "0" | "f" => Ok(false),
        _ => Err(format!(
            "annotation {USE_POPULATOR} is {value:?}, which is not a boolean"
        )),
    }
}

/// Whether a label may go from the prime claim to the target (upstream's `CopyAllowedLabels`:
/// `kubevirt.io/...` and `<something>.kubevirt.io/...`, such as a registry image's instancetype
/// labels).
fn copied_label(key: &str) -> bool {
    let Some((prefix, name)) = key.split_once('/') else {
        return false;
    };
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '.';
    let prefix_ok = prefix == "kubevirt.io"
        || prefix
            .strip_suffix(".kubevirt.io")
            .is_some_and(|head| !head.is_empty() && head.chars().all(word));
    prefix_ok && !name.is_empty() && name.chars().all(|c| word(c) || c == '-')
}

/// The prime claim's name for the target of this UID (upstream's).
#[must_use]
pub fn prime_name(target_uid: &str) -> String {
    format!("prime-{target_uid}")
}

/// The prime claim of `target`: its spec less the `dataSourceRef`, the import's annotations, the
/// node chosen for the target, owned by the target.
fn prime_claim(
    facts: &ImportFacts<'_>,
    target: &PersistentVolumeClaim,
    (kind, transfer): (SourceKind, &Transfer),
) -> PersistentVolumeClaim {
    let data_volume = facts.data_volume;
    let target_spec = target.spec.clone().unwrap_or_default();
    let spec = PersistentVolumeClaimSpec {
        access_modes: target_spec.access_modes,
        resources: target_spec.resources,
        storage_class_name: target_spec.storage_class_name,
        volume_mode: target_spec.volume_mode,
        ..PersistentVolumeClaimSpec::default()
    };
    let mut prime = claim_of(data_volume, spec, transfer);
    let target_uid = target.metadata.uid.clone().unwrap_or_default();
    prime.metadata.name = Some(prime_name(&target_uid));
    prime.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_owned(),
        kind: "PersistentVolumeClaim".to_owned(),
        name: target.metadata.name.clone().unwrap_or_default(),
        uid: target_uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let target_annotations = target.metadata.annotations.clone().unwrap_or_default();
    let annotations = prime.metadata.annotations.get_or_insert_default();
    annotations.insert(IMMEDIATE_BINDING.to_owned(), String::new());
    if let Some(node) = target_annotations.get(SELECTED_NODE) {
        annotations.insert(SELECTED_NODE.to_owned(), node.clone());
    }
    if let Some(retain) = target_annotations.get(ann::POD_RETAIN) {
        annotations.insert(ann::POD_RETAIN.to_owned(), retain.clone());
    }
    annotations.insert(POPULATOR_KIND.to_owned(), kind.kind().to_owned());
    let preallocation = data_volume.spec.preallocation.unwrap_or(facts.settings.preallocation);
    prime
        .metadata
        .labels
        .get_or_insert_default()
        .insert(EXCLUDE_FROM_BACKUP.to_owned(), "true".to_owned());
    annotations.insert(PREALLOCATION_REQUESTED.to_owned(), preallocation.to_string());
    prime
}

/// A step of filling the prime claim, aimed at it: its annotations and labels, and its importer
/// pod marked with the DataVolume and, as upstream's, placed on the node chosen for the claim
/// (events stay on the target, where upstream copies them).
fn on_prime(step: Step, prime: &PersistentVolumeClaim, data_volume: &DataVolume) -> Step {
    let name = prime.metadata.name.clone().unwrap_or_default();
    match step {
        Step::AnnotateClaim(annotations) => Step::AnnotateNamedClaim(name, annotations),
        Step::LabelClaim(labels) => Step::LabelNamedClaim(name, labels),
        Step::CreatePod(mut pod) => {
            place_on_prime_node(&mut pod, prime, data_volume);
            Step::CreatePod(pod)
        }
        Step::CreateUploadServer(mut server) => {
            place_on_prime_node(&mut server.pod, prime, data_volume);
            Step::CreateUploadServer(server)
        }
        // The pod skips the scheduler, which would otherwise choose the node of a scratch claim
        // waiting for its first consumer: it gets the prime's (upstream's, for populators).
        Step::CreateScratchClaim(mut claim) => {
            if let Some(node) = prime.metadata.annotations.as_ref().and_then(|a| a.get(SELECTED_NODE)) {
                claim
                    .metadata
                    .annotations
                    .get_or_insert_default()
                    .insert(SELECTED_NODE.to_owned(), node.clone());
            }
            claim
                .metadata
                .labels
                .get_or_insert_default()
                .insert(EXCLUDE_FROM_BACKUP.to_owned(), "true".to_owned());
            Step::CreateScratchClaim(claim)
        }
        other => other,
    }
}

/// A pod filling the prime: placed on the node chosen for it, and marked with the DataVolume.
fn place_on_prime_node(pod: &mut Pod, prime: &PersistentVolumeClaim, data_volume: &DataVolume) {
    let node = prime.metadata.annotations.as_ref().and_then(|a| a.get(SELECTED_NODE));
    if let (Some(node), Some(spec)) = (node, pod.spec.as_mut()) {
        spec.node_name = Some(node.clone());
        // No scheduler takes part, and the API server refuses a gated pod with a node.
        spec.scheduling_gates = None;
    }
    let owner = format!(
        "{}/{}",
        data_volume.metadata.namespace.as_deref().unwrap_or_default(),
        data_volume.metadata.name.as_deref().unwrap_or_default()
    );
    pod.metadata
        .annotations
        .get_or_insert_default()
        .insert(DATA_VOLUME_OF_POD.to_owned(), owner);
}

fn phase_of(claim: &PersistentVolumeClaim) -> &str {
    claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or_default()
}

/// The rebinding of the prime's volume to the target: the volume with its `claimRef` moved, or
/// nothing when it is the target's already.
///
/// # Errors
/// The volume is bound to a third claim, or to none: it is left alone, and said (upstream's
/// words).
fn rebind(
    volume: &PersistentVolume,
    prime: &PersistentVolumeClaim,
    target: &PersistentVolumeClaim,
) -> Result<Option<Step>, String> {
    let volume_name = volume.metadata.name.clone().unwrap_or_default();
    let Some(reference) = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) else {
        return Err(format!("PV {volume_name} claimRef is nil"));
    };
    let names = |claim: &PersistentVolumeClaim| {
        reference.name == claim.metadata.name
            && reference.namespace == claim.metadata.namespace
            && reference.uid == claim.metadata.uid
    };
    if names(target) {
        return Ok(None);
    }
    if !names(prime) {
        return Err(format!(
            "PV {volume_name} bound to unexpected claim {}",
            reference.name.clone().unwrap_or_default()
        ));
    }
    let mut rebound = volume.clone();
    if let Some(spec) = rebound.spec.as_mut() {
        spec.claim_ref = Some(ObjectReference {
            namespace: target.metadata.namespace.clone(),
            name: target.metadata.name.clone(),
            uid: target.metadata.uid.clone(),
            resource_version: target.metadata.resource_version.clone(),
            ..ObjectReference::default()
        });
    }
    Ok(Some(Step::RebindVolume(Box::new(rebound))))
}

/// Once the prime is filled: the target's new labels (before its annotations), then the
/// rebinding of the prime's volume, or the warning that it cannot be rebound.
fn hand_over(
    volume: Option<&PersistentVolume>,
    prime_labels: &BTreeMap<String, String>,
    prime: &PersistentVolumeClaim,
    target: &PersistentVolumeClaim,
) -> (Option<Step>, Option<Step>) {
    let labels = target.metadata.labels.clone().unwrap_or_default();
    let new_labels: BTreeMap<String, String> = prime_labels
        .iter()
        .filter(|(k, _)| copied_label(k) && !labels.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let label_step = (!new_labels.is_empty()).then_some(Step::LabelClaim(new_labels));
    let rebinding = volume.and_then(|volume| match rebind(volume, prime, target) {
        Ok(step) => step,
        Err(message) => Some(Step::Event(DataVolumeEvent {
            event_type: "Warning",
            reason: REBIND_FAILED,
            message,
        })),
    });
    (label_step, rebinding)
}

/// The target's annotations as the DataVolume's status reads them: with the prime's pod once the
/// prime is bound (the phase follows the pod from then on), marked as an upload's for an upload
/// whose prime is bound or done.
fn status_view(
    annotations: &BTreeMap<String, String>,
    kind: SourceKind,
    pod_of_bound_prime: Option<(&'static str, String)>,
) -> BTreeMap<String, String> {
    let mut seen = annotations.clone();
    let done = seen.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded");
    let bound = pod_of_bound_prime.is_some();
    if let Some((key, pod)) = pod_of_bound_prime {
        seen.insert(key.to_owned(), pod);
    }
    if kind == SourceKind::Upload && (bound || done) {
        seen.insert(ann::UPLOAD_REQUEST.to_owned(), String::new());
    }
    seen
}

/// What a pass does to a target claim and its prime, before anyone's status is written.
pub(super) struct TargetPass {
    /// The steps, in order (the target's annotations, then the rebinding).
    pub steps: Vec<Step>,
    /// The target's annotations as the steps leave them.
    pub annotations: BTreeMap<String, String>,
    /// The bound prime's pod, as the target's status reads it.
    pod_of_bound_prime: Option<(&'static str, String)>,
    /// The target waits for its first consumer to choose a node.
    pending_population: bool,
}

/// The steps of a pass over a target claim the populator of `kind` fills by `transfer`, and
/// the DataVolume's status from it.
pub(super) fn steps(
    facts: &ImportFacts<'_>,
    target: &PersistentVolumeClaim,
    (kind, transfer): (SourceKind, &Transfer),
    current: &DataVolumeStatus,
    now: &Time,
) -> Vec<Step> {
    let data_volume = facts.data_volume;
    let pass = match target_pass(facts, target, (kind, transfer), current, now) {
        Ok(pass) => pass,
        Err(refused) => return refused,
    };
    let mut steps = pass.steps;
    let seen = status_view(&pass.annotations, kind, pass.pod_of_bound_prime);
    let work = Circumstances {
        requires_work: true,
        wait_for_first_consumer: pass.pending_population,
        populating: true,
    };
    let (mut next, event) = import_status::next_status(current, Some(&view(target, seen)), work, now);
    if let Some(progress) = pass.annotations.get(PROGRESS)
        && next.phase != cdi_api::DataVolumePhase::Succeeded
    {
        next.progress = Some(progress.clone());
    }
    if next.phase == cdi_api::DataVolumePhase::Succeeded && facts.populator.source_object {
        steps.push(Step::DeletePopulationSource(kind, kind.source_name(data_volume)));
    }
    steps.extend(status_steps(current, next, event));
    steps
}

/// What a pass does to a target claim and its prime: the prime made, filled and rebound to the
/// target, the prime's annotations and progress copied to the target.
///
/// # Errors
/// The steps that say why the target cannot be filled (a pod of the prime's pod's name that
/// the prime does not control).
pub(super) fn target_pass(
    facts: &ImportFacts<'_>,
    target: &PersistentVolumeClaim,
    (kind, transfer): (SourceKind, &Transfer),
    current: &DataVolumeStatus,
    now: &Time,
) -> Result<TargetPass, Vec<Step>> {
    let data_volume = facts.data_volume;
    let known = target.metadata.annotations.clone().unwrap_or_default();
    let mut annotations = known.clone();
    let mut steps = Vec::new();
    let mut last = Vec::new();
    let mut pod_of_bound_prime = None;
    let bound = phase_of(target) == "Bound";
    let chosen = known.contains_key(SELECTED_NODE) || known.contains_key(IMMEDIATE_BINDING);
    let pending_population = facts.wait_for_first_consumer && !chosen;
    match facts.populator.prime {
        // Filled: the prime, whose volume went to the target, goes.
        Some(prime) if bound => {
            // As upstream's, a prime whose pod is kept (`retainAfterCompletion`) stays, Lost.
            let retained = prime
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(ann::POD_RETAIN))
                .is_some_and(|v| v == "true");
            if phase_of(prime) == "Lost" && prime.metadata.deletion_timestamp.is_none() && !retained {
                steps.push(Step::DeleteNamedClaim(prime.metadata.name.clone().unwrap_or_default()));
            }
        }
        None if bound || pending_population || target.metadata.deletion_timestamp.is_some() => {}
        None => steps.push(Step::CreateClaim(Box::new(prime_claim(
            facts,
            target,
            (kind, transfer),
        )))),
        Some(prime) => {
            let prime_name = prime.metadata.name.clone().unwrap_or_default();
            if let Some(refused) = super::foreign_pod(facts, prime, current, now) {
                return Err(refused);
            }
            let (fill, prime_annotations) = fill_steps(facts, prime, transfer, now);
            // The prime's labels as this pass leaves them (a registry image's, from its pod).
            let mut prime_labels = prime.metadata.labels.clone().unwrap_or_default();
            for step in &fill {
                if let Step::LabelClaim(labels) = step {
                    prime_labels.extend(labels.clone());
                }
            }
            steps.extend(fill.into_iter().map(|step| on_prime(step, prime, data_volume)));
            for key in COPIED {
                if let Some(value) = prime_annotations.get(key) {
                    annotations.insert(key.to_owned(), value.clone());
                }
            }
            // As upstream's, the phase follows the importer or upload server once the prime is
            // bound.
            let pod_annotation = match kind {
                SourceKind::Import => ann::IMPORT_POD,
                SourceKind::Upload => ann::UPLOAD_POD,
            };
            pod_of_bound_prime = prime_annotations
                .get(pod_annotation)
                .filter(|_| phase_of(prime) == "Bound")
                .map(|pod| (pod_annotation, pod.clone()));
            let done = prime_annotations.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded");
            annotations.insert(PRIME_NAME.to_owned(), prime_name);
            let progress = match facts.progress {
                // An upload's progress is not followed (upstream's neither).
                _ if kind == SourceKind::Upload => None,
                _ if done => Some("100.0%".to_owned()),
                // Upstream holds 100% back until the importer's pod is done (a conversion or a
                // resize may follow the transfer).
                Some(percent) if percent < 100.0 => Some(crate::import_progress::shown(percent)),
                _ if !known.contains_key(PROGRESS) && phase_of(prime) == "Bound" => {
                    Some(import_status::NO_PROGRESS.to_owned())
                }
                _ => None,
            };
            if let Some(progress) = progress {
                annotations.insert(PROGRESS.to_owned(), progress);
            }
            if done {
                let (labels, rebinding) = hand_over(facts.populator.prime_volume, &prime_labels, prime, target);
                // A volume that cannot be rebound is said once, as the DataVolume succeeds.
                let rebinding = rebinding
                    .filter(|step| !matches!(step, Step::Event(_)) || current.phase != DataVolumePhase::Succeeded);
                steps.extend(labels);
                last.extend(rebinding);
            }
        }
    }
    let changed = super::changed_entries(&known, &annotations);
    if !changed.is_empty() {
        steps.push(Step::AnnotateClaim(changed));
    }
    steps.extend(last);
    Ok(TargetPass {
        steps,
        annotations,
        pod_of_bound_prime,
        pending_population,
    })
}

mod source;
pub use source::{PopulationSource, SourceKind, populated_by, population_source, target_claim};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod upload_tests;
