//! A DataVolume's status from its claim, as upstream's DataVolume controller reads it for an
//! import (`updateStatus`, `updateStatusPhase`, `updateConditions`): the phase from the claim's
//! phase and the importer pod's phase annotation, the restarts, and the `Bound`, `Ready` and
//! `Running` conditions, with the event a phase change brings. Pure.

use std::collections::BTreeMap;

use cdi_api::data_volume::{ConditionState, DataVolumeCondition, DataVolumePhase, DataVolumeStatus, conditions};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::claim_annotations::ann;

/// The claim, as the status reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimView {
    /// Its name.
    pub name: String,
    /// Its namespace.
    pub namespace: String,
    /// `Pending`, `Bound`, `Lost` (or empty before the API server set it).
    pub phase: String,
    /// Its annotations.
    pub annotations: BTreeMap<String, String>,
    /// Whether it is being deleted.
    pub deleting: bool,
}

/// What else the status depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Circumstances {
    /// The claim still has to be filled (false for a claim that was populated before).
    pub requires_work: bool,
    /// The class binds on first consumer and immediate binding was not asked for (with
    /// `populating`: and no node was chosen for the claim yet).
    pub wait_for_first_consumer: bool,
    /// A populator fills the claim through a prime claim: the claim stays `Pending` until it is
    /// filled, and its annotations are the prime's.
    pub populating: bool,
}

/// An event for the DataVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataVolumeEvent {
    /// `Normal` or `Warning`.
    pub event_type: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// An event for a phase change.
#[expect(clippy::unnecessary_wraps, reason = "every phase's event is optional")]
fn event(event_type: &'static str, reason: &'static str, message: String) -> Option<DataVolumeEvent> {
    Some(DataVolumeEvent {
        event_type,
        reason,
        message,
    })
}

/// The import phase from the importer pod's phase annotation (`updateStatusPhase`); `None`
/// keeps the phase as it was.
fn import_phase(claim: &ClaimView, circumstances: Circumstances) -> Option<(DataVolumePhase, Option<DataVolumeEvent>)> {
    if let Some(source) = claim.annotations.get(cdi_api::clone::CLONE_REQUEST) {
        return clone_phase(claim, source, circumstances);
    }
    if claim.annotations.contains_key(ann::UPLOAD_REQUEST) {
        return upload_phase(claim, circumstances);
    }
    let pod_phase = claim.annotations.get(ann::POD_PHASE).map(String::as_str);
    if pod_phase != Some("Succeeded")
        && !(claim.annotations.contains_key(ann::IMPORT_POD)
            && (claim.phase == "Bound" || circumstances.populating)
            && circumstances.requires_work)
    {
        return None;
    }
    let name = &claim.name;
    Some(match pod_phase {
        Some("Pending") => (
            DataVolumePhase::ImportScheduled,
            event("Normal", "ImportScheduled", format!("Import into {name} scheduled")),
        ),
        Some("Running") => (
            DataVolumePhase::ImportInProgress,
            event("Normal", "ImportInProgress", format!("Import into {name} in progress")),
        ),
        Some("Failed") => {
            let fatal = claim.annotations.get(ann::FATAL_ERROR).is_some_and(|v| v == "true");
            (
                if fatal {
                    DataVolumePhase::Failed
                } else {
                    DataVolumePhase::ImportScheduled
                },
                event("Warning", "ImportFailed", format!("Failed to import into PVC {name}")),
            )
        }
        Some("Succeeded") => (
            DataVolumePhase::Succeeded,
            event(
                "Normal",
                "ImportSucceeded",
                format!("Successfully imported into PVC {name}"),
            ),
        ),
        // No phase yet, or one the pod never has.
        None | Some(_) => (DataVolumePhase::ImportScheduled, None),
    })
}

/// The upload phase from the upload server's phase and readiness annotations (upstream's upload
/// `updateStatusPhase`); `None` keeps the phase as it was.
fn upload_phase(claim: &ClaimView, circumstances: Circumstances) -> Option<(DataVolumePhase, Option<DataVolumeEvent>)> {
    let pod_phase = claim.annotations.get(ann::POD_PHASE).map(String::as_str);
    if pod_phase != Some("Succeeded")
        && !((claim.phase == "Bound" || circumstances.populating) && circumstances.requires_work)
    {
        return None;
    }
    let name = &claim.name;
    let ready = claim.annotations.get(ann::POD_READY).is_some_and(|r| r == "true");
    Some(match pod_phase {
        Some("Pending") => (
            DataVolumePhase::UploadScheduled,
            event("Normal", "UploadScheduled", format!("Upload into {name} scheduled")),
        ),
        Some("Running") if ready => (
            DataVolumePhase::UploadReady,
            event("Normal", "UploadReady", format!("Upload into {name} ready")),
        ),
        Some("Failed") => (
            DataVolumePhase::UploadScheduled,
            event("Warning", "UploadFailed", format!("Upload into {name} failed")),
        ),
        Some("Succeeded") => (
            DataVolumePhase::Succeeded,
            event(
                "Normal",
                "UploadSucceeded",
                format!("Successfully uploaded into {name}"),
            ),
        ),
        // No pod yet, one starting, or one whose deadline passed.
        None | Some(_) => (DataVolumePhase::UploadScheduled, None),
    })
}

/// The clone phase from the target's upload server's phase annotation (upstream's host-assisted
/// `updateStatusPhase`); `source` is the clone request, `<namespace>/<name>`. `None` keeps the
/// phase as it was.
fn clone_phase(
    claim: &ClaimView,
    source: &str,
    circumstances: Circumstances,
) -> Option<(DataVolumePhase, Option<DataVolumeEvent>)> {
    let pod_phase = claim.annotations.get(ann::POD_PHASE).map(String::as_str);
    if pod_phase != Some("Succeeded") && !(claim.phase == "Bound" && circumstances.requires_work) {
        return None;
    }
    let target = format!("{}/{}", claim.namespace, claim.name);
    Some(match pod_phase {
        Some("Running") => (
            DataVolumePhase::CloneInProgress,
            event(
                "Normal",
                "CloneInProgress",
                format!("Cloning from {source} into {target} in progress"),
            ),
        ),
        Some("Failed") => (
            DataVolumePhase::CloneScheduled,
            event(
                "Warning",
                "CloneFailed",
                format!("Cloning from {source} into {target} failed"),
            ),
        ),
        Some("Succeeded") => (
            DataVolumePhase::Succeeded,
            event(
                "Normal",
                "CloneSucceeded",
                format!("Successfully cloned from {source} into {target}"),
            ),
        ),
        Some("Pending") => (
            DataVolumePhase::CloneScheduled,
            event(
                "Normal",
                "CloneScheduled",
                format!("Cloning from {source} into {target} scheduled"),
            ),
        ),
        None | Some(_) => (DataVolumePhase::CloneScheduled, None),
    })
}

/// Sets a condition, stamping the transition time when its status changes and the heartbeat when
/// only its reason or message does (upstream's `updateCondition`).
fn set_condition(
    conditions: &mut Vec<DataVolumeCondition>,
    kind: &str,
    status: &str,
    message: &str,
    reason: &str,
    now: &Time,
) {
    let index = conditions
        .iter()
        .position(|c| c.condition_type == kind)
        .unwrap_or_else(|| {
            conditions.push(DataVolumeCondition {
                condition_type: kind.to_owned(),
                state: ConditionState::default(),
            });
            conditions.len() - 1
        });
    conditions[index].state.update(status, message, reason, now);
}

/// The claim's own `Bound` condition, when a controller set one on it.
fn claim_bound(annotations: &BTreeMap<String, String>) -> Option<(&'static str, String, String)> {
    let value = annotations.get(ann::BOUND)?;
    let status = match value.to_lowercase().as_str() {
        "true" => "True",
        "false" => "False",
        _ => "Unknown",
    };
    let get = |k: &str| annotations.get(k).cloned().unwrap_or_default();
    Some((status, get(ann::BOUND_MESSAGE), get(ann::BOUND_REASON)))
}

/// The `Bound` condition from the claim: status, message, reason.
fn bound(claim: Option<&ClaimView>) -> (&'static str, String, String) {
    let Some(claim) = claim else {
        return ("False", "No PVC found".to_owned(), "NotFound".to_owned());
    };
    let own = claim_bound(&claim.annotations).filter(|(status, ..)| *status != "True");
    match (claim.phase.as_str(), own) {
        ("Bound", None) => ("True", format!("PVC {} Bound", claim.name), "Bound".to_owned()),
        ("Bound", Some((_, message, reason))) => ("False", message, reason),
        ("Pending", None) => ("False", format!("PVC {} Pending", claim.name), "Pending".to_owned()),
        ("Pending", Some((_, message, reason))) => (
            "False",
            format!("target PVC {} Pending and {message}", claim.name),
            reason,
        ),
        ("Lost", _) => ("False", "Claim Lost".to_owned(), "ClaimLost".to_owned()),
        _ => ("False", String::new(), String::new()),
    }
}

/// The `Running` condition from the claim's annotations: status, message, reason.
fn running(claim: Option<&ClaimView>) -> (&'static str, String, String) {
    let get = |k: &str| claim.and_then(|c| c.annotations.get(k)).cloned().unwrap_or_default();
    if get(ann::POD_SCHEDULABLE) == "false" {
        return (
            "False",
            "Importer pod cannot be scheduled".to_owned(),
            "Unschedulable".to_owned(),
        );
    }
    let status = match get(ann::RUNNING).to_lowercase().as_str() {
        "true" => "True",
        "false" | "" => "False",
        _ => "Unknown",
    };
    (status, get(ann::RUNNING_MESSAGE), get(ann::RUNNING_REASON))
}

fn update_conditions(
    conditions: &mut Vec<DataVolumeCondition>,
    phase: DataVolumePhase,
    claim: Option<&ClaimView>,
    now: &Time,
) {
    let (status, message, reason) = bound(claim);
    set_condition(conditions, conditions::BOUND, status, &message, &reason, now);
    let (running_status, message, reason) = running(claim);
    set_condition(conditions, conditions::RUNNING, running_status, &message, &reason, now);
    // Upstream sets Ready up to three times in a pass (False while unbound, then from the phase,
    // then False again while the transfer runs); only the last counts, and setting it once keeps
    // a pass that changes nothing from writing.
    let (ready, reason) = match (running_status, phase) {
        ("True", _) => ("False", "TransferRunning"),
        (_, DataVolumePhase::Succeeded) => ("True", ""),
        (_, DataVolumePhase::Unknown) => ("Unknown", ""),
        _ => ("False", ""),
    };
    set_condition(conditions, conditions::READY, ready, "", reason, now);
}

/// The status of a DataVolume that cannot go on: `phase`, and `Bound` and `Running` false with
/// `reason` and `message`.
#[must_use]
pub fn blocked(
    current: &DataVolumeStatus,
    phase: DataVolumePhase,
    reason: &str,
    message: &str,
    now: &Time,
) -> DataVolumeStatus {
    let mut status = current.clone();
    status.phase = phase;
    set_condition(&mut status.conditions, conditions::BOUND, "False", message, reason, now);
    set_condition(&mut status.conditions, conditions::READY, "False", "", "", now);
    set_condition(
        &mut status.conditions,
        conditions::RUNNING,
        "False",
        message,
        reason,
        now,
    );
    status
}

/// The progress shown before the importer reports any (upstream's).
pub const NO_PROGRESS: &str = "N/A";

/// The DataVolume's next status, and the event its phase change brings.
#[must_use]
pub fn next_status(
    current: &DataVolumeStatus,
    claim: Option<&ClaimView>,
    circumstances: Circumstances,
    now: &Time,
) -> (DataVolumeStatus, Option<DataVolumeEvent>) {
    let mut status = current.clone();
    let mut event = None;
    match claim {
        None => {
            if status.phase == DataVolumePhase::Unset {
                status.phase = DataVolumePhase::Pending;
            }
        }
        Some(claim) if !claim.deleting => {
            status.claim_name = Some(claim.name.clone());
            let pod_phase = claim.annotations.get(ann::POD_PHASE).map(String::as_str);
            let mut import = |status: &mut DataVolumeStatus| {
                if let Some((phase, with)) = import_phase(claim, circumstances) {
                    if phase == DataVolumePhase::Succeeded {
                        status.progress = Some("100.0%".to_owned());
                    }
                    status.phase = phase;
                    event = with;
                }
            };
            if pod_phase == Some("Succeeded") && circumstances.requires_work {
                import(&mut status);
            } else {
                match claim.phase.as_str() {
                    "Pending" if !circumstances.requires_work => status.phase = DataVolumePhase::Succeeded,
                    // Upstream's `updateStatusPVCPending` for a claim a populator fills.
                    "Pending" if circumstances.populating && circumstances.wait_for_first_consumer => {
                        status.phase = DataVolumePhase::PendingPopulation;
                    }
                    "Pending" if circumstances.populating => import(&mut status),
                    "Pending" if circumstances.wait_for_first_consumer => {
                        status.phase = DataVolumePhase::WaitForFirstConsumer;
                    }
                    "Pending" => status.phase = DataVolumePhase::Pending,
                    "Bound" => {
                        if matches!(
                            status.phase,
                            DataVolumePhase::Pending | DataVolumePhase::WaitForFirstConsumer | DataVolumePhase::Unknown
                        ) {
                            status.phase = DataVolumePhase::PvcBound;
                        }
                        if circumstances.requires_work {
                            import(&mut status);
                        } else {
                            status.phase = DataVolumePhase::Succeeded;
                        }
                    }
                    "Lost" => {
                        status.phase = DataVolumePhase::Failed;
                        event = Some(DataVolumeEvent {
                            event_type: "Warning",
                            reason: "ErrClaimLost",
                            message: format!("PVC {} lost", claim.name),
                        });
                    }
                    "" => {}
                    _ => status.phase = DataVolumePhase::Unknown,
                }
            }
            if let Some(restarts) = claim
                .annotations
                .get(ann::POD_RESTARTS)
                .and_then(|r| r.parse::<i32>().ok())
                && restarts >= 0
            {
                status.restart_count = Some(restarts);
            }
        }
        Some(_) => {}
    }
    update_conditions(&mut status.conditions, status.phase, claim, now);
    // Upstream's placeholder until the importer reports.
    if status.progress.is_none() {
        status.progress = Some(NO_PROGRESS.to_owned());
    }
    if status.phase == current.phase {
        event = None;
    }
    (status, event)
}

#[cfg(test)]
mod tests;
