//! A pass's clone decisions (upstream's host-assisted clone): before the target claim is made,
//! cdi-apiserver's token must allow the clone and the source must be there and fit; once the
//! target's upload server is ready, the source pod is made in the source's namespace, unless
//! another pod uses the source; once the copy is done, or the target goes, the source pod goes.

use std::collections::BTreeMap;

use cdi_api::DataVolume;
use cdi_api::clone as names;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimSpec, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::{ImportFacts, Step, blocked};
use crate::claim_annotations::ann;
use crate::clone_source::CloneSourceArgs;
use crate::import_status::DataVolumeEvent;

/// The reason of a clone whose source is not there (upstream's).
pub const WITHOUT_SOURCE: &str = "CloneWithoutSource";
/// The reason of a clone its token or its source does not allow (upstream's).
pub const VALIDATION_FAILED: &str = "CloneValidationFailed";
/// The reason of a source another pod uses (upstream's).
pub const SOURCE_IN_USE: &str = "CloneSourceInUse";

/// What a pass sees of a clone's source.
#[derive(Clone, Copy, Debug)]
pub struct CloneFacts<'a> {
    /// The source claim, if it is there.
    pub source_claim: Option<&'a PersistentVolumeClaim>,
    /// The source pod, if it is there.
    pub source_pod: Option<&'a Pod>,
    /// The source pod is there, not being deleted, and its certificate Secret is not.
    pub source_pod_without_secret: bool,
    /// The pods other than the source pod that use the source claim, `namespace/name`.
    pub source_users: &'a [String],
    /// Whether the DataVolume's clone token allows the clone, and why not.
    pub authorized: Result<(), &'a str>,
}

/// Whether the DataVolume's token (cdi-apiserver's, from its admission) allows cloning
/// `source_namespace/source` into the DataVolume, at `now` (seconds).
///
/// # Errors
/// Why not, for the DataVolume's status.
pub fn authorize(
    data_volume: &DataVolume,
    validator: Option<&cdi_token::Validator>,
    source_namespace: &str,
    source: &str,
    now: i64,
) -> Result<(), String> {
    let token = data_volume
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::TOKEN))
        .ok_or_else(|| {
            format!(
                "the DataVolume has no clone token ({}): was it admitted by cdi-apiserver?",
                names::TOKEN
            )
        })?;
    let validator = validator.ok_or("the controller has no key to check clone tokens with")?;
    let payload = validator
        .validate(token, now)
        .map_err(|e| format!("the clone token is not valid: {e}"))?;
    let namespace = data_volume.metadata.namespace.clone().unwrap_or_default();
    let name = data_volume.metadata.name.clone().unwrap_or_default();
    let wanted = cdi_token::Payload::clone_of(source_namespace, source, &namespace, &name);
    if payload != wanted {
        return Err(format!(
            "the clone token is for {}/{} into {:?}, not {source_namespace}/{source} into {namespace}/{name}",
            payload.namespace, payload.name, payload.params
        ));
    }
    Ok(())
}

fn storage(spec: Option<&PersistentVolumeClaimSpec>) -> Option<&Quantity> {
    spec?.resources.as_ref()?.requests.as_ref()?.get("storage")
}

/// Why the source cannot be cloned into a claim of `target`, if it cannot (upstream's
/// `validateClone`: the same content type, and a target at least as large as the source).
fn invalid(
    data_volume: &DataVolume,
    source: &PersistentVolumeClaim,
    target: &PersistentVolumeClaimSpec,
) -> Option<String> {
    let source_content = source
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ann::CONTENT_TYPE))
        .map_or("kubevirt", String::as_str);
    let target_content = data_volume.spec.content_type.as_deref().unwrap_or("kubevirt");
    if source_content != target_content {
        return Some(format!(
            "source contentType ({source_content}) and target contentType ({target_content}) do not match"
        ));
    }
    let bytes = |q: Option<&Quantity>| q.and_then(|q| kubevirt_api::quantity::to_bytes(q).ok());
    // The requests, as upstream compares them (a static volume may be larger than asked for).
    let source_size = storage(source.spec.as_ref()).or_else(|| {
        source
            .status
            .as_ref()
            .and_then(|s| s.capacity.as_ref())
            .and_then(|c| c.get("storage"))
    });
    match (bytes(source_size), bytes(storage(Some(target)))) {
        (Some(source_bytes), Some(target_bytes)) if target_bytes < source_bytes => Some(format!(
            "target resources requests storage size is smaller than the source ({} < {})",
            storage(Some(target)).map_or("", |q| q.0.as_str()),
            source_size.map_or("", |q| q.0.as_str()),
        )),
        _ => None,
    }
}

/// The steps that hold a clone back before its claim is made, if it must wait: a token that does
/// not allow it, a source not there, a source that does not fit.
pub(super) fn hold_back(
    facts: &ImportFacts<'_>,
    source: (&str, &str),
    target: &PersistentVolumeClaimSpec,
    now: &Time,
) -> Option<Vec<Step>> {
    let phase = cdi_api::DataVolumePhase::Pending;
    let Some(clone) = facts.clone else {
        return Some(blocked(
            facts,
            phase,
            VALIDATION_FAILED,
            "the clone's source was not read".to_owned(),
            now,
        ));
    };
    if let Err(why) = clone.authorized {
        let message = format!("The clone doesn't meet the validation requirements: {why}");
        return Some(blocked(facts, phase, VALIDATION_FAILED, message, now));
    }
    let Some(source_claim) = clone.source_claim else {
        let message = format!("The source pvc {} doesn't exist", source.1);
        return Some(blocked(facts, phase, WITHOUT_SOURCE, message, now));
    };
    invalid(facts.data_volume, source_claim, target).map(|why| {
        let message = format!("The clone doesn't meet the validation requirements: {why}");
        blocked(facts, phase, VALIDATION_FAILED, message, now)
    })
}

/// Why the DataVolume's claim, made before, may not receive a clone of `source_namespace/source`:
/// only a claim made for that clone (after its token was checked) may. A DataVolume whose source
/// was changed to a clone after its claim was made is refused here.
#[must_use]
pub fn foreign_claim(claim: &PersistentVolumeClaim, source_namespace: &str, source: &str) -> Option<String> {
    let wanted = format!("{source_namespace}/{source}");
    let requested = claim
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::CLONE_REQUEST));
    (requested != Some(&wanted)).then(|| {
        format!(
            "The clone doesn't meet the validation requirements: claim {} was not made for a clone of {wanted}",
            claim.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// The target claim's clone annotations.
pub(super) fn claim_annotations(
    source_namespace: &str,
    source: &str,
    target_namespace: &str,
    target: &str,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        (names::CLONE_REQUEST.to_owned(), format!("{source_namespace}/{source}")),
        (
            names::CLIENT_NAME.to_owned(),
            names::client_name(source_namespace, source, target_namespace, target),
        ),
        (names::CLONE_TYPE.to_owned(), "copy".to_owned()),
    ])
}

/// The source pod's steps, for the target `claim` whose annotations are now `annotations`.
pub(super) fn source_steps(
    facts: &ImportFacts<'_>,
    claim: &PersistentVolumeClaim,
    annotations: &BTreeMap<String, String>,
    source: (&str, &str),
) -> Vec<Step> {
    let Some(clone) = facts.clone else {
        return Vec::new();
    };
    let done = annotations.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded");
    let live_pod = clone.source_pod.filter(|p| p.metadata.deletion_timestamp.is_none());
    if done || claim.metadata.deletion_timestamp.is_some() || facts.data_volume.metadata.deletion_timestamp.is_some() {
        return live_pod
            .and_then(|p| p.metadata.name.clone())
            .map(|name| Step::DeleteCloneSource {
                namespace: source.0.to_owned(),
                name,
            })
            .into_iter()
            .collect();
    }
    if let Some(pod) = live_pod.and_then(|p| p.metadata.name.clone())
        && clone.source_pod_without_secret
    {
        let (target_namespace, target) = (
            claim.metadata.namespace.as_deref().unwrap_or_default(),
            claim.metadata.name.as_deref().unwrap_or_default(),
        );
        return vec![Step::GiveCloneSourceSecret {
            namespace: source.0.to_owned(),
            pod,
            client_name: names::client_name(source.0, source.1, target_namespace, target),
        }];
    }
    let ready = annotations.get(ann::POD_READY).is_some_and(|r| r == "true");
    if !ready || clone.source_pod.is_some() {
        return Vec::new();
    }
    let Some(source_claim) = clone.source_claim else {
        return vec![Step::Event(DataVolumeEvent {
            event_type: "Warning",
            reason: WITHOUT_SOURCE,
            message: format!("The source pvc {} doesn't exist", source.1),
        })];
    };
    if !clone.source_users.is_empty() {
        return clone
            .source_users
            .iter()
            .map(|user| {
                Step::Event(DataVolumeEvent {
                    event_type: "Warning",
                    reason: SOURCE_IN_USE,
                    message: format!("pod {user} using PersistentVolumeClaim {}", source.1),
                })
            })
            .collect();
    }
    let spec = source_claim.spec.clone().unwrap_or_default();
    let modes = spec.access_modes.unwrap_or_default();
    let target = claim.metadata.name.clone().unwrap_or_default();
    let args = CloneSourceArgs {
        target_namespace: claim.metadata.namespace.clone().unwrap_or_default(),
        target_uid: claim.metadata.uid.clone().unwrap_or_default(),
        target,
        source_namespace: source.0.to_owned(),
        source: source.1.to_owned(),
        source_uid: source_claim.metadata.uid.clone().unwrap_or_default(),
        source_block: spec.volume_mode.as_deref() == Some("Block"),
        source_read_write_once: modes.len() == 1 && modes[0] == "ReadWriteOnce",
        owner_uid: facts.data_volume.metadata.uid.clone().unwrap_or_default(),
        pod: super::pods::pod_settings(facts, &facts.settings.cloner_image),
    };
    let name = names::source_pod_name(&args.target_uid);
    vec![
        Step::AnnotateClaim(BTreeMap::from([(names::SOURCE_POD.to_owned(), name)])),
        Step::CreateCloneSource(Box::new(args)),
    ]
}

/// The pods in `pods` other than `source_pod` that use `claim` and have not ended,
/// `namespace/name`.
#[must_use]
pub fn users_of(pods: &[Pod], claim: &str, source_pod: &str) -> Vec<String> {
    pods.iter()
        .filter(|pod| pod.metadata.name.as_deref() != Some(source_pod))
        .filter(|pod| {
            let phase = crate::claim_annotations::settled_phase(pod);
            phase != "Succeeded" && phase != "Failed"
        })
        .filter(|pod| {
            pod.spec
                .as_ref()
                .and_then(|s| s.volumes.as_ref())
                .into_iter()
                .flatten()
                .any(|v| {
                    v.persistent_volume_claim
                        .as_ref()
                        .is_some_and(|c| c.claim_name == claim)
                })
        })
        .map(|pod| {
            format!(
                "{}/{}",
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect()
}

/// The source pod's namespace and name for a target claim on its way out, so that it goes with
/// it (a pod in another namespace is not collected with its target). Only a claim a DataVolume
/// controls has one, and its name comes from the claim's uid: the claim's annotations, which its
/// namespace's editors may write, only say which namespace (the pod is checked to be the claim's
/// before it is deleted, [`source_pod_of`]).
#[must_use]
pub fn source_of_leaving(claim: &PersistentVolumeClaim) -> Option<(String, String)> {
    claim.metadata.deletion_timestamp.as_ref()?;
    let controlled_by_data_volume = claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "DataVolume");
    if !controlled_by_data_volume {
        return None;
    }
    let annotations = claim.metadata.annotations.as_ref()?;
    let (namespace, _) = names::parse_request(annotations.get(names::CLONE_REQUEST)?)?;
    let name = names::source_pod_name(claim.metadata.uid.as_deref().filter(|uid| !uid.is_empty())?);
    Some((namespace.to_owned(), name))
}

/// Whether `pod` is the source pod of the claim `target_namespace/target`: made by cdi-controller
/// for it (its owner annotation and its unique-id label).
#[must_use]
pub fn source_pod_of(pod: &Pod, target_namespace: &str, target: &str) -> bool {
    let owner = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(crate::clone_source::OWNER_REF));
    let labelled = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(names::UNIQUE_ID_LABEL))
        .is_some_and(|id| Some(id) == pod.metadata.name.as_ref());
    labelled && owner.is_some_and(|o| *o == format!("{target_namespace}/{target}"))
}
