//! What an importer pod tells its claim, as upstream's import controller writes it
//! (`updatePvcFromPod`): the pod's phase and restarts, a `Running` condition with its reason and
//! message (from the container's state and termination message), whether the image asked for
//! scratch space, and a checksum mismatch as a fatal error. The DataVolume's status is then read
//! from these annotations ([`crate::import_status`]). Pure.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};
use serde::Deserialize;

/// The annotations, upstream's names.
pub mod ann {
    /// The importer pod's phase.
    pub const POD_PHASE: &str = "cdi.kubevirt.io/storage.pod.phase";
    /// Its container's restarts.
    pub const POD_RESTARTS: &str = "cdi.kubevirt.io/storage.pod.restarts";
    /// `false` while the scheduler cannot place it.
    pub const POD_SCHEDULABLE: &str = "cdi.kubevirt.io/storage.pod.schedulable";
    /// `true` keeps the pod after it completed.
    pub const POD_RETAIN: &str = "cdi.kubevirt.io/storage.pod.retainAfterCompletion";
    /// The importer pod's name.
    pub const IMPORT_POD: &str = "cdi.kubevirt.io/storage.import.importPodName";
    /// The `Running` condition: `true`, `false`.
    pub const RUNNING: &str = "cdi.kubevirt.io/storage.condition.running";
    /// Its message.
    pub const RUNNING_MESSAGE: &str = "cdi.kubevirt.io/storage.condition.running.message";
    /// Its reason.
    pub const RUNNING_REASON: &str = "cdi.kubevirt.io/storage.condition.running.reason";
    /// The `Bound` condition a controller sets on the claim.
    pub const BOUND: &str = "cdi.kubevirt.io/storage.condition.bound";
    /// Its message.
    pub const BOUND_MESSAGE: &str = "cdi.kubevirt.io/storage.condition.bound.message";
    /// Its reason.
    pub const BOUND_REASON: &str = "cdi.kubevirt.io/storage.condition.bound.reason";
    /// The image must be converted through scratch space.
    pub const REQUIRES_SCRATCH: &str = "cdi.kubevirt.io/storage.import.requiresScratch";
    /// The import failed for good (a checksum mismatch): no new pod.
    pub const FATAL_ERROR: &str = "cdi.kubevirt.io/storage.import.fatalError";
    /// Preallocation was applied.
    pub const PREALLOCATION_APPLIED: &str = "cdi.kubevirt.io/storage.preallocation";
    /// The source kind.
    pub const SOURCE: &str = "cdi.kubevirt.io/storage.import.source";
    /// The source's URL.
    pub const ENDPOINT: &str = "cdi.kubevirt.io/storage.import.endpoint";
    /// The content type.
    pub const CONTENT_TYPE: &str = "cdi.kubevirt.io/storage.contentType";
    /// The claim takes an upload (upstream's `AnnUploadRequest`, empty).
    pub const UPLOAD_REQUEST: &str = "cdi.kubevirt.io/storage.upload.target";
    /// The upload server pod's name.
    pub const UPLOAD_POD: &str = "cdi.kubevirt.io/storage.uploadPodName";
    /// Whether the upload server is ready for an upload (`true`, `false`).
    pub const POD_READY: &str = "cdi.kubevirt.io/storage.pod.ready";
}

/// The `Running` reason of a running pod (upstream's).
pub const POD_RUNNING: &str = "Pod is running";
/// The `Running` reason while scratch space is made (upstream's).
pub const SCRATCH_REQUIRED_REASON: &str = "Scratch space required";
/// Its message (upstream's).
pub const SCRATCH_REQUIRED_MESSAGE: &str = "scratch space required and none found";
/// The reason of an image that could not be pulled.
pub const IMAGE_PULL_FAILED: &str = "ImagePullFailed";
/// The message prefix of an image that could not be pulled.
pub const IMAGE_PULL_FAILURE_TEXT: &str = "failed to pull image";
/// The reason of a checksum mismatch.
pub const CHECKSUM_ERROR: &str = "ChecksumError";

/// An event for the claim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimEvent {
    /// `Normal` or `Warning`.
    pub event_type: &'static str,
    /// The reason.
    pub reason: &'static str,
    /// The message.
    pub message: String,
}

/// What the pod says, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// The claim's annotations, updated.
    pub annotations: BTreeMap<String, String>,
    /// The pod must go: it completed, it needs scratch space (a new pod mounts it), or it failed
    /// for good.
    pub delete_pod: bool,
    /// Events for the claim.
    pub events: Vec<ClaimEvent>,
    /// Labels the importer's termination message gives the claim (a registry image's).
    pub labels: BTreeMap<String, String>,
}

/// The importer's JSON termination message.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TerminationMessage {
    scratch_space_required: Option<bool>,
    preallocation_applied: Option<bool>,
    message: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    deadline_passed: Option<bool>,
}

/// Upstream's short message for the ways an image does not fit.
#[must_use]
pub fn simplify(message: &str) -> String {
    const TOO_SMALL: [&str; 4] = [
        "is larger than the reported available",
        "no space left on device",
        "file largest block is bigger than maxblock",
        "disk quota exceeded",
    ];
    let lower = message.to_lowercase();
    if TOO_SMALL.iter().any(|s| lower.contains(s)) {
        return "DataVolume too small to contain image".to_owned();
    }
    message.to_owned()
}

fn statuses(pod: &Pod) -> &[ContainerStatus] {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_deref())
        .unwrap_or_default()
}

/// The pod's phase as it will settle: `Succeeded` as soon as every container of a pod that
/// restarts them only on failure has exited 0. The kubelet reports that phase only once it has
/// torn the pod down (about a second later on the test cluster); nothing runs in the pod again,
/// and the CDI programs make their writes durable before they exit.
#[must_use]
pub fn settled_phase(pod: &Pod) -> String {
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    let restarts_on_success = pod
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .is_none_or(|policy| policy == "Always");
    let containers = pod.spec.as_ref().map_or(0, |s| s.containers.len());
    let statuses = statuses(pod);
    let all_exited_zero = !statuses.is_empty()
        && statuses.len() == containers
        && statuses.iter().all(|s| {
            s.state
                .as_ref()
                .and_then(|state| state.terminated.as_ref())
                .is_some_and(|t| t.exit_code == 0)
        });
    if matches!(phase.as_str(), "Pending" | "Running") && !restarts_on_success && all_exited_zero {
        return "Succeeded".to_owned();
    }
    phase
}

fn termination_message(pod: &Pod) -> Option<TerminationMessage> {
    let message = statuses(pod)
        .first()?
        .state
        .as_ref()?
        .terminated
        .as_ref()?
        .message
        .as_deref()?;
    serde_json::from_str(message).ok()
}

fn set(anno: &mut BTreeMap<String, String>, status: &str, message: String, reason: &str) {
    anno.insert(ann::RUNNING.to_owned(), status.to_owned());
    anno.insert(ann::RUNNING_MESSAGE.to_owned(), message);
    anno.insert(ann::RUNNING_REASON.to_owned(), reason.to_owned());
}

/// Writes the `Running` condition and restarts from the pod's containers (upstream's
/// `setAnnotationsFromPodWithPrefix`).
fn set_running(anno: &mut BTreeMap<String, String>, pod: &Pod, term: Option<&TerminationMessage>) {
    let statuses = statuses(pod);
    let Some(first) = statuses.first() else {
        return;
    };
    let known: i32 = anno.get(ann::POD_RESTARTS).and_then(|r| r.parse().ok()).unwrap_or(0);
    if first.restart_count >= known {
        anno.insert(ann::POD_RESTARTS.to_owned(), first.restart_count.to_string());
    }
    if statuses
        .iter()
        .all(|s| s.state.as_ref().is_some_and(|state| state.running.is_some()))
    {
        set(anno, "true", String::new(), POD_RUNNING);
        return;
    }
    for status in statuses {
        let waiting = status.state.as_ref().and_then(|s| s.waiting.as_ref());
        if status.started == Some(false)
            && let Some(reason) = waiting.and_then(|w| w.reason.as_deref())
            && matches!(reason, "ImagePullBackOff" | "ErrImagePull" | "InvalidImageName")
        {
            set(
                anno,
                "false",
                format!("{IMAGE_PULL_FAILURE_TEXT}: {}", status.image),
                IMAGE_PULL_FAILED,
            );
            return;
        }
    }
    let state = first.state.clone().unwrap_or_default();
    anno.insert(ann::RUNNING.to_owned(), "false".to_owned());
    if let Some(waiting) = &state.waiting
        && waiting.reason.as_deref() != Some("CrashLoopBackOff")
    {
        set(
            anno,
            "false",
            simplify(waiting.message.as_deref().unwrap_or_default()),
            waiting.reason.as_deref().unwrap_or_default(),
        );
        return;
    }
    let Some(terminated) = &state.terminated else {
        return;
    };
    if let Some(term) = term {
        if term.scratch_space_required == Some(true) {
            anno.insert(ann::REQUIRES_SCRATCH.to_owned(), "true".to_owned());
            set(
                anno,
                "false",
                SCRATCH_REQUIRED_MESSAGE.to_owned(),
                SCRATCH_REQUIRED_REASON,
            );
            return;
        }
        if let Some(message) = &term.message {
            anno.insert(ann::RUNNING_MESSAGE.to_owned(), message.clone());
        }
        if term.preallocation_applied == Some(true) {
            anno.insert(ann::PREALLOCATION_APPLIED.to_owned(), "true".to_owned());
        }
    } else {
        let message = terminated.message.as_deref().unwrap_or_default();
        anno.insert(ann::RUNNING_MESSAGE.to_owned(), simplify(message));
        if message.contains(IMAGE_PULL_FAILURE_TEXT) {
            anno.insert(ann::RUNNING_REASON.to_owned(), IMAGE_PULL_FAILED.to_owned());
            return;
        }
    }
    anno.insert(
        ann::RUNNING_REASON.to_owned(),
        terminated.reason.clone().unwrap_or_default(),
    );
}

/// Reads the importer `pod` of a claim with `annotations`.
#[must_use]
pub fn observe_importer(annotations: &BTreeMap<String, String>, pod: &Pod) -> Observed {
    let mut anno = annotations.clone();
    let mut events = Vec::new();
    let term = termination_message(pod);
    set_running(&mut anno, pod, term.as_ref());
    if let Some(message) = term.as_ref().and_then(|t| t.message.as_deref())
        && message.contains("checksum mismatch")
    {
        anno.insert(ann::POD_PHASE.to_owned(), "Failed".to_owned());
        anno.insert(ann::FATAL_ERROR.to_owned(), "true".to_owned());
        anno.insert(ann::RUNNING.to_owned(), "false".to_owned());
        if anno.get(ann::RUNNING_MESSAGE).is_none_or(String::is_empty) {
            anno.insert(ann::RUNNING_MESSAGE.to_owned(), simplify(message));
        }
        anno.insert(ann::RUNNING_REASON.to_owned(), CHECKSUM_ERROR.to_owned());
        events.push(ClaimEvent {
            event_type: "Warning",
            reason: "ErrImportFailed",
            message: simplify(message),
        });
    }
    let scratch_required = term.as_ref().and_then(|t| t.scratch_space_required) == Some(true);
    // A failure is announced once: when the restarts or the message are new.
    let changed = |key: &str| anno.get(key) != annotations.get(key);
    if let Some(terminated) = statuses(pod)
        .first()
        .and_then(|s| s.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        && terminated.exit_code > 0
        && (changed(ann::POD_RESTARTS) || changed(ann::RUNNING_MESSAGE))
    {
        events.push(ClaimEvent {
            event_type: "Warning",
            reason: "ErrImportFailed",
            message: terminated.message.clone().unwrap_or_default(),
        });
    }
    if let Some(name) = &pod.metadata.name {
        anno.insert(ann::IMPORT_POD.to_owned(), name.clone());
    }
    let fatal = anno.get(ann::FATAL_ERROR).is_some_and(|v| v == "true");
    let phase = settled_phase(pod);
    if !scratch_required && !fatal {
        anno.insert(ann::POD_PHASE.to_owned(), phase);
    }
    let unschedulable = anno.get(ann::POD_PHASE).is_some_and(|p| p == "Pending")
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))
            });
    anno.insert(ann::POD_SCHEDULABLE.to_owned(), (!unschedulable).to_string());
    let complete = anno.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded");
    let completed_now = complete && annotations.get(ann::POD_PHASE).is_none_or(|p| p != "Succeeded");
    if completed_now && !scratch_required {
        events.push(ClaimEvent {
            event_type: "Normal",
            reason: "ImportSucceeded",
            message: "Import Successful".to_owned(),
        });
    }
    let retain = anno.get(ann::POD_RETAIN).is_some_and(|v| v == "true")
        && anno.get(ann::REQUIRES_SCRATCH).is_none_or(|v| v != "true");
    let delete_pod = fatal || ((complete || scratch_required) && !retain);
    Observed {
        annotations: anno,
        delete_pod,
        events,
        labels: term.map(|t| t.labels).unwrap_or_default(),
    }
}

/// Whether every container of `pod` is ready (upstream's `isPodReady`; none: not ready).
fn all_ready(pod: &Pod) -> bool {
    let statuses = statuses(pod);
    !statuses.is_empty() && statuses.iter().all(|s| s.ready)
}

/// Reads the upload server `pod` of a claim with `annotations` (upstream's upload controller's
/// `reconcilePVC`): its phase and readiness, which the DataVolume's `UploadReady` follows, the
/// `Running` condition and restarts; a server whose deadline passed with no upload goes, and the
/// next pod gets a new certificate.
#[must_use]
pub fn observe_upload(annotations: &BTreeMap<String, String>, pod: &Pod) -> Observed {
    let mut anno = annotations.clone();
    let term = termination_message(pod);
    let deadline_passed = term.as_ref().and_then(|t| t.deadline_passed) == Some(true);
    if deadline_passed {
        anno.insert(ann::POD_PHASE.to_owned(), String::new());
        anno.insert(ann::POD_READY.to_owned(), "false".to_owned());
    } else {
        anno.insert(ann::POD_PHASE.to_owned(), settled_phase(pod));
        anno.insert(ann::POD_READY.to_owned(), all_ready(pod).to_string());
    }
    set_running(&mut anno, pod, term.as_ref());
    if let Some(name) = &pod.metadata.name {
        anno.insert(ann::UPLOAD_POD.to_owned(), name.clone());
    }
    let complete = anno.get(ann::POD_PHASE).is_some_and(|p| p == "Succeeded");
    let mut events = Vec::new();
    if complete && annotations.get(ann::POD_PHASE).is_none_or(|p| p != "Succeeded") {
        events.push(ClaimEvent {
            event_type: "Normal",
            reason: "UploadSucceeded",
            message: "Upload Successful".to_owned(),
        });
    }
    let retain = anno.get(ann::POD_RETAIN).is_some_and(|v| v == "true");
    Observed {
        annotations: anno,
        delete_pod: deadline_passed || (complete && !retain),
        events,
        labels: BTreeMap::new(),
    }
}

/// What a clone target's upload server says ([`observe_upload`]), with the clone's event
/// (upstream's `CloneSucceeded`, "Clone Complete") in place of the upload's.
#[must_use]
pub fn observe_clone_target(annotations: &BTreeMap<String, String>, pod: &Pod) -> Observed {
    let mut observed = observe_upload(annotations, pod);
    for event in &mut observed.events {
        if event.reason == "UploadSucceeded" {
            *event = ClaimEvent {
                event_type: "Normal",
                reason: "CloneSucceeded",
                message: "Clone Complete".to_owned(),
            };
        }
    }
    observed
}

#[cfg(test)]
mod tests;
