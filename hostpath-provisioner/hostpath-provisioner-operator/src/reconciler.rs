//! One pass over a `HostPathProvisioner`: render what it wants ([`crate::render`]), apply each
//! object, read the CSI DaemonSet back, decide the status ([`crate::status`]) and write it when it
//! changed. A CR being deleted is left to the garbage collector, which removes what it owns.

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::api::ApiResource;
use operator_kit::conditions;
use operator_kit::objects::unchanged::apply_all_changed;
use operator_kit::objects::{Objects, ObjectsError, get_typed, write_status_if_changed};

use crate::api::HostPathProvisioner;
use crate::render::{self, DAEMON_SET, Settings};
use crate::status::{self, Pass};

/// When the CR is to be looked at again: serving, on the next change of it or its DaemonSet
/// (`Rest`); not serving yet, or a write failed, soon (`LookAgain`).
pub use operator_kit::controller::Next;

/// One pass.
///
/// # Errors
/// [`ObjectsError`] when the DaemonSet cannot be read or the status cannot be written; a failed
/// apply is not an error of the pass but the CR's `Degraded` condition.
pub async fn reconcile<O: Objects>(
    objects: &O,
    cr: &HostPathProvisioner,
    settings: &Settings,
    now: &Time,
) -> Result<Next, ObjectsError> {
    if cr.metadata.deletion_timestamp.is_some() {
        return Ok(Next::Rest);
    }
    let name = cr.metadata.name.clone().unwrap_or_default();
    // One CR owns the driver (upstream's rule): every CR would render the same objects.
    let crs = objects
        .list(&ApiResource::erase::<HostPathProvisioner>(&()))
        .await?
        .len();
    let pass = if crs > 1 {
        Pass::Failed(format!(
            "there should be a single hostpath provisioner, {crs} items found"
        ))
    } else {
        apply_all(objects, cr, settings).await
    };
    if let Pass::Failed(why) = &pass {
        tracing::warn!(name, error = why.as_str(), "reconciling the HostPathProvisioner failed");
    }
    // A failed pass still writes its status, even when the DaemonSet cannot be read.
    let daemon_set = match get_typed::<DaemonSet, _>(objects, Some(&settings.namespace), DAEMON_SET).await {
        Ok(daemon_set) => daemon_set,
        Err(_) if matches!(pass, Pass::Failed(_)) => None,
        Err(e) => return Err(e),
    };
    let status = status::decide(cr, &pass, daemon_set.as_ref(), &settings.version, now);
    write_status_if_changed(objects, cr, cr.status.as_ref(), &status).await?;
    Ok(if conditions::serves(&status.conditions) {
        Next::Rest
    } else {
        Next::LookAgain
    })
}

/// Applies every object the CR wants, in order; the first failure stops the pass.
async fn apply_all<O: Objects>(objects: &O, cr: &HostPathProvisioner, settings: &Settings) -> Pass {
    let wanted = match render::render(cr, settings) {
        Ok(wanted) => wanted,
        Err(e) => return Pass::Failed(e.to_string()),
    };
    if let Err(e) = apply_all_changed(objects, &wanted).await {
        return Pass::Failed(e.to_string());
    }
    Pass::Applied
}

/// The CR an object belongs to: its controlling owner of kind `HostPathProvisioner`.
#[must_use]
pub fn owner_of(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == HostPathProvisioner::kind(&()))
        .map(|o| o.name.clone())
}
