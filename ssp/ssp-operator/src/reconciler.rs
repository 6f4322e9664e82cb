//! One pass over an `SSP`:
//!
//! 1. Being deleted, with the finalizer: the status says `Deleting`; on the next pass the
//!    cluster-scoped objects made for it are deleted and the finalizer comes off (the garbage
//!    collector removes the namespaced ones). Upstream's `Deleted` is not written: the SSP is gone
//!    as its finalizer comes off.
//! 2. Paused (`kubevirt.io/operator.paused`): `status.paused` and nothing else.
//! 3. Otherwise the finalizer goes on; the oldest SSP in the cluster is the one in use, as
//!    upstream's admission lets only one be made, and another gets an error status instead of
//!    objects. For the one in use, the certificates are kept ([`operator_kit::certificates`]),
//!    each object is applied ([`crate::render`]), the Deployment is read back, and the status
//!    ([`crate::status`]) is written when it changed.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ApiResource;
use operator_kit::certificates::Lifetimes;
use operator_kit::certificates::store::{self, Place};
use operator_kit::conditions;
use operator_kit::objects::unchanged::apply_all_changed;
use operator_kit::objects::{Desired, Objects, ObjectsError, get_typed, write_status_if_changed};

use crate::api::{FINALIZER, SSP};
use crate::render::{self, Settings, VALIDATOR};
use crate::status::{self, Pass};

/// When the SSP is to be looked at again: once it serves, when its certificate is due at the
/// latest (`RestUntil`); gone or paused, on the next change (`Rest`); not serving yet, not the one
/// in use, or a write failed, soon (`LookAgain`).
pub use operator_kit::controller::Next;

/// One pass, at `now`.
///
/// # Errors
/// [`ObjectsError`] when the SSPs cannot be listed, the Deployment read, a finalizer set, a
/// cluster-scoped object deleted or the status written; a failed apply is not an error of the
/// pass but the SSP's error status.
pub async fn reconcile<O: Objects>(
    objects: &O,
    cr: &SSP,
    settings: &Settings,
    now: &Time,
) -> Result<Next, ObjectsError> {
    let now_seconds = now.0.as_second();
    let resource = ApiResource::erase::<SSP>(&());
    let namespace = cr.metadata.namespace.clone().unwrap_or_default();
    let name = cr.metadata.name.clone().unwrap_or_default();
    let finalized = cr
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == FINALIZER));
    if cr.metadata.deletion_timestamp.is_some() {
        if !finalized {
            return Ok(Next::Rest);
        }
        // The status first, in a pass of its own: taking the finalizer off is refused unless the
        // SSP is still at the version this pass read, which a status write moves on.
        if cr.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Deleting") {
            write(objects, cr, &Pass::Deleting, settings, now).await?;
            return Ok(Next::LookAgain);
        }
        for (kind, object_name) in render::cluster_scoped() {
            let made_for_it = objects
                .get(&kind, None, object_name)
                .await?
                .is_some_and(|o| render::made_for(o.metadata.annotations.as_ref(), cr));
            if made_for_it {
                objects.delete(&kind, None, object_name).await?;
            }
        }
        objects.set_finalizer(&resource, &cr.metadata, FINALIZER, false).await?;
        return Ok(Next::Rest);
    }
    if cr.paused() {
        write(objects, cr, &Pass::Paused, settings, now).await?;
        return Ok(Next::Rest);
    }
    if !finalized {
        objects.set_finalizer(&resource, &cr.metadata, FINALIZER, true).await?;
    }
    let in_use = in_use(objects, &resource).await?;
    let (pass, renewal) = if in_use.as_ref().is_none_or(|(ns, n)| *ns == namespace && *n == name) {
        apply_all(objects, cr, settings, now_seconds).await
    } else {
        let (ns, n) = in_use.unwrap_or_default();
        let why = format!("there should be a single SSP: {ns}/{n} is the one in use");
        (Pass::Failed(why), None)
    };
    let pass = match pass {
        Pass::Applied(_) => Pass::Applied(
            get_typed::<Deployment, _>(objects, Some(&namespace), VALIDATOR)
                .await?
                .map(Box::new),
        ),
        other => other,
    };
    if let Pass::Failed(why) = &pass {
        tracing::warn!(namespace, name, error = why.as_str(), "reconciling the SSP failed");
    }
    let status = write(objects, cr, &pass, settings, now).await?;
    // An SSP not in use is looked at again too, to take over when the one in use goes.
    Ok(match renewal {
        Some(renewal) if conditions::serves(&status.conditions) => Next::RestUntil(renewal),
        _ => Next::LookAgain,
    })
}

/// The SSP in use: the oldest not being deleted, then the first by namespace and name; `None`
/// when there is none. Only their metadata is read, so one SSP that does not read as the type
/// stops no other.
async fn in_use<O: Objects>(objects: &O, resource: &ApiResource) -> Result<Option<(String, String)>, ObjectsError> {
    Ok(objects
        .list(resource)
        .await?
        .into_iter()
        .map(|o| o.metadata)
        .filter(|m| m.deletion_timestamp.is_none())
        .min_by_key(|m| {
            (
                m.creation_timestamp.clone().map(|t| t.0),
                m.namespace.clone(),
                m.name.clone(),
            )
        })
        .map(|m| (m.namespace.unwrap_or_default(), m.name.unwrap_or_default())))
}

/// Keeps the certificates, then applies every object in order; the first failure stops the pass.
/// Gives the pass and when the certificates are due.
async fn apply_all<O: Objects>(objects: &O, cr: &SSP, settings: &Settings, now_seconds: i64) -> (Pass, Option<i64>) {
    let namespace = cr.metadata.namespace.clone().unwrap_or_default();
    let owner = operator_kit::objects::owned_by(cr);
    let labels = render::labels(cr);
    let place = Place {
        namespace: &namespace,
        owner: owner.as_ref(),
        labels: &labels,
    };
    let kept = match store::ensure_chain(
        objects,
        place,
        &render::chain(&namespace),
        &Lifetimes::default(),
        now_seconds,
    )
    .await
    {
        Ok(kept) => kept,
        Err(e) => return (Pass::Failed(e.to_string()), None),
    };
    let wanted = match render::render(cr, settings, &kept.bundle) {
        Ok(wanted) => wanted,
        Err(e) => return (Pass::Failed(e.to_string()), None),
    };
    if let Err(e) = apply_all_changed(objects, &wanted).await {
        return (Pass::Failed(e.to_string()), None);
    }
    if let Err(e) = remove_unwanted_budget(objects, cr, &wanted).await {
        return (Pass::Failed(e.to_string()), None);
    }
    (Pass::Applied(None), Some(kept.renewal))
}

/// The disruption budget this SSP made, once it runs one validator (or none): a budget of one
/// over a single pod would block every drain of its node.
async fn remove_unwanted_budget<O: Objects>(objects: &O, cr: &SSP, wanted: &[Desired]) -> Result<(), ObjectsError> {
    let resource = ApiResource::erase::<PodDisruptionBudget>(&());
    if wanted.iter().any(|d| d.resource == resource) {
        return Ok(());
    }
    let namespace = cr.metadata.namespace.as_deref();
    let Some(budget) = objects.get(&resource, namespace, VALIDATOR).await? else {
        return Ok(());
    };
    let ours = render::owner_of(&budget.metadata)
        .is_some_and(|(ns, name)| Some(ns.as_str()) == namespace && Some(&name) == cr.metadata.name.as_ref());
    if ours {
        objects.delete(&resource, namespace, VALIDATOR).await?;
    }
    Ok(())
}

async fn write<O: Objects>(
    objects: &O,
    cr: &SSP,
    pass: &Pass,
    settings: &Settings,
    now: &Time,
) -> Result<crate::api::SSPStatus, ObjectsError> {
    let status = status::decide(cr, pass, &settings.version, now);
    write_status_if_changed(objects, cr, cr.status.as_ref(), &status).await?;
    Ok(status)
}

#[cfg(test)]
#[path = "reconciler_tests.rs"]
mod tests;
