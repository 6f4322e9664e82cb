//! The creation and update webhooks of the `KubeVirt` CR, as upstream's
//! `kubevirt-create-validator.kubevirt.io` (`POST /kubevirt-validate-create`) and
//! `kubevirt-update-validator.kubevirt.io` (`POST /kubevirt-validate-update`) in
//! `virt-operator-validator`. The operator registers them once it runs, so the first CR is
//! created before they exist: creation refuses only a second CR ("Kubevirt is already created"),
//! and an update is refused when `spec.certificateRotateStrategy.selfSigned` gives lifetimes that
//! cannot be kept ([`kubevirt_api::v1::rotation`]), with upstream's messages joined as its
//! webhooks join them, or when `spec.workloadUpdateStrategy` cannot be followed
//! ([`kubevirt_api::v1::workload_updates`]: an interval that is not a duration; the CRD refuses
//! unknown methods and batch sizes under one). Upstream's update webhook checks further fields
//! (TLS ciphers, placement, seccomp) and not the workload updates (`docs/compatibility.md`).

use kubevirt_api::v1::{KubeVirt, WorkloadUpdateError, rotation, workload_updates};
use serde_json::Value;

use crate::uninstall::Cluster;

/// The creation webhook's path (upstream's).
pub const CREATE_PATH: &str = "/kubevirt-validate-create";
/// The update webhook's path (upstream's).
pub const UPDATE_PATH: &str = "/kubevirt-validate-update";
/// The creation webhook's name.
pub const CREATE_WEBHOOK: &str = "kubevirt-create-validator.kubevirt.io";
/// The update webhook's name.
pub const UPDATE_WEBHOOK: &str = "kubevirt-update-validator.kubevirt.io";
/// Upstream's refusal of a second CR.
pub const ALREADY_CREATED: &str = "Kubevirt is already created";

/// How many reasons a refusal lists, as upstream's webhooks.
const SHOWN_REASONS: usize = 10;

/// A refusal: the message, and each reason as a cause (a refusal with causes is answered 422
/// `Invalid`, one without 400, as upstream's webhooks answer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// What the API server shows.
    pub message: String,
    /// One line per reason (empty for a refusal with a single message).
    pub causes: Vec<String>,
}

impl Refusal {
    fn single(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            causes: Vec::new(),
        }
    }

    /// Every reason, the first ten in the message, as upstream's webhooks show them.
    fn of(causes: Vec<String>) -> Self {
        let shown = causes
            .iter()
            .take(SHOWN_REASONS)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        let message = match causes.len().checked_sub(SHOWN_REASONS) {
            Some(more) if more > 0 => format!("{shown}, and {more} more validation errors"),
            _ => shown,
        };
        Self { message, causes }
    }
}

/// The CR in the request's `object`.
fn requested(request: &Value) -> Result<KubeVirt, Refusal> {
    let object = request
        .get("object")
        .filter(|o| !o.is_null())
        .ok_or_else(|| Refusal::single("the AdmissionReview's request has no object"))?;
    serde_json::from_value(object.clone()).map_err(|e| Refusal::single(format!("the KubeVirt CR: {e}")))
}

/// Whether the update in `request` may go on. An update that leaves the spec as it was (the
/// operator's finalizer, labels) always may, so that a CR created with lifetimes that cannot be
/// kept can still be deleted.
///
/// # Errors
/// Every reason the new spec is refused.
pub fn admit_update(request: &Value) -> Result<(), Refusal> {
    let has_object = request.get("object").is_some_and(|o| !o.is_null());
    if has_object && request.pointer("/oldObject/spec") == request.pointer("/object/spec") {
        return Ok(());
    }
    let cr = requested(request)?;
    let self_signed = cr
        .spec
        .certificate_rotate_strategy
        .as_ref()
        .and_then(|s| s.self_signed.as_ref());
    let mut causes = rotation(self_signed).err().map(|e| e.0).unwrap_or_default();
    if let Err(WorkloadUpdateError(errors)) = workload_updates(cr.spec.workload_update_strategy.as_ref()) {
        causes.extend(errors);
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(Refusal::of(causes))
    }
}

/// Whether the creation in `request` may go on: no other KubeVirt CR exists, in any namespace.
///
/// # Errors
/// Upstream's refusal, or the API server's error when the CRs cannot be listed.
pub async fn admit_create<C: Cluster>(cluster: &C, request: &Value) -> Result<(), Refusal> {
    requested(request)?;
    if cluster.any_kubevirt().await.map_err(Refusal::single)? {
        return Err(Refusal::single(ALREADY_CREATED));
    }
    Ok(())
}

#[cfg(test)]
#[path = "spec_admission_tests.rs"]
mod tests;
