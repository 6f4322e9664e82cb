//! One pass over a `CDI`: refuse it if it is not the one installed or asks for what the operator
//! does not do; else keep the certificates ([`crate::certificates::store`]), render what it wants
//! ([`crate::render`]) and apply each object; read the Deployments back, decide the status
//! ([`crate::status`]) and write it when it changed. A CR being deleted is left to the garbage
//! collector, which removes what it owns.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::ApiResource;
use kube::{Resource, ResourceExt};
use operator_kit::conditions;
use operator_kit::objects::unchanged::apply_all_changed;
use operator_kit::objects::{Objects, ObjectsError, get_typed, owned_by, parse, write_status_if_changed};

use cdi_api::CDI;

use crate::certificates::store::{self, Place};
use crate::render::{self, DEPLOYMENTS, Settings};
use crate::status::{self, Pass, UNWANTED};

/// A refused CR is looked at again after this long.
pub const REFUSED_AGAIN_SECONDS: u64 = 60;

/// When the CR is to be looked at again: serving, on the next change or when a certificate is due
/// (`Rest`, `RestUntil`); refused, a minute later (`RestUntil`); not serving yet, or a write
/// failed, soon (`LookAgain`).
pub use operator_kit::controller::Next;

/// One pass at `now`.
///
/// # Errors
/// [`ObjectsError`] when the CDIs or Deployments cannot be read or the status cannot be written;
/// a failed apply is not an error of the pass but the CR's `Degraded` condition.
pub async fn reconcile<O: Objects>(
    objects: &O,
    cr: &CDI,
    settings: &Settings,
    now: &Time,
) -> Result<Next, ObjectsError> {
    if cr.metadata.deletion_timestamp.is_some() {
        return Ok(Next::Rest);
    }
    let name = cr.name_any();
    let seconds = now.0.as_second();
    let (pass, renewal) = match refused(objects, cr).await? {
        Some(why) => (Pass::Refused(why), None),
        None => install(objects, cr, settings, seconds).await,
    };
    if let Pass::Failed(why) | Pass::Refused(why) = &pass {
        tracing::warn!(name, error = why.as_str(), "reconciling the CDI failed");
    }
    let mut deployments = Vec::new();
    for deployment in DEPLOYMENTS {
        match get_typed::<Deployment, _>(objects, Some(&settings.namespace), deployment).await {
            Ok(found) => deployments.push(found),
            // A failed pass still writes its status.
            Err(_) if !matches!(pass, Pass::Applied) => deployments.push(None),
            Err(e) => return Err(e),
        }
    }
    let status = status::decide(cr, &pass, &deployments, &settings.version, now);
    write_status_if_changed(objects, cr, cr.status.as_ref(), &status).await?;
    Ok(match (conditions::serves(&status.conditions), &pass) {
        // A refused CR is looked at again now and then: the CDI that made it unwanted may go.
        (_, Pass::Refused(_)) => Next::RestUntil(seconds.saturating_add_unsigned(REFUSED_AGAIN_SECONDS)),
        (true, _) => renewal.map_or(Next::Rest, Next::RestUntil),
        (false, _) => Next::LookAgain,
    })
}

/// Why the CR is refused, if it is: another CDI is the one installed (the oldest, upstream's
/// single-CR rule), or it has a field the operator does not act on.
async fn refused<O: Objects>(objects: &O, cr: &CDI) -> Result<Option<String>, ObjectsError> {
    let key = |meta: &ObjectMeta| (meta.creation_timestamp.clone().map(|t| t.0), meta.name.clone());
    let mut oldest = None;
    for object in objects.list(&ApiResource::erase::<CDI>(&())).await? {
        let other: CDI = parse(&object, "a CDI")?;
        if other.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let other_key = key(&other.metadata);
        if oldest.as_ref().is_none_or(|o| &other_key < o) {
            oldest = Some(other_key);
        }
    }
    if oldest.is_some_and(|o| o != key(&cr.metadata)) {
        return Ok(Some(UNWANTED.to_owned()));
    }
    Ok(render::refusal(cr))
}

/// Keeps the certificates and applies every object; the first failure stops the pass. Gives
/// when the next certificate is due.
async fn install<O: Objects>(objects: &O, cr: &CDI, settings: &Settings, now: i64) -> (Pass, Option<i64>) {
    let lifetimes = match crate::certificates::lifetimes(cr.spec.cert_config.as_ref()) {
        Ok(lifetimes) => lifetimes,
        Err(e) => return (Pass::Refused(e.to_string()), None),
    };
    let owner = owned_by(cr);
    let place = Place {
        namespace: &settings.namespace,
        owner: owner.as_ref(),
    };
    let issued = match store::ensure(objects, place, &lifetimes, now).await {
        Ok(issued) => issued,
        Err(e) => return (Pass::Failed(format!("CDI's certificates: {e}")), None),
    };
    let wanted = match render::render(cr, settings, &issued) {
        Ok(wanted) => wanted,
        Err(e) => return (Pass::Failed(e.to_string()), Some(issued.next_renewal)),
    };
    if let Err(e) = apply_all_changed(objects, &wanted).await {
        return (Pass::Failed(e.to_string()), Some(issued.next_renewal));
    }
    (Pass::Applied, Some(issued.next_renewal))
}

/// The CR an object belongs to: its controlling owner of kind `CDI`.
#[must_use]
pub fn owner_of(meta: &ObjectMeta) -> Option<String> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == CDI::kind(&()))
        .map(|o| o.name.clone())
}

#[cfg(test)]
mod tests;
