//! One pass over a `KubeVirt` CR:
//!
//! 1. Being deleted, with the finalizer: the status says `Deleting` (a pass of its own); then the
//!    CRDs made for it are deleted, and once they are gone (with every VM and VMI: upstream's
//!    `RemoveWorkloads`) the workloads and the other objects it cannot own (cluster-scoped, or
//!    in another namespace); the status says
//!    `Deleted`, and on the next pass the finalizer comes off (the garbage collector removes the
//!    remaining namespaced objects with the CR).
//! 2. Otherwise the oldest KubeVirt CR in the namespace is the one in use; another gets
//!    `Synchronized` False (`ExistingDeployment`) and nothing else.
//! 3. For the one in use: the finalizer goes on; the webhook's certificate is made or renewed
//!    when due ([`crate::validator`]); every object but the workloads is applied; the
//!    workloads are read, and those [`crate::order`] lets through are applied; once all are
//!    ready, the common instance types and preferences are brought to what the CR wants
//!    ([`crate::common_instancetypes`]); the status ([`crate::status`]) is written when it
//!    changed.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::ApiResource;
use kubevirt_api::v1::{GenerationStatus, KubeVirt, KubeVirtStatus};
use operator_kit::certificates::store::{self, Place};
use operator_kit::objects::unchanged::{apply_all_changed, apply_if_changed};
use operator_kit::objects::{Objects, ObjectsError, get_typed, owned_by, write_status_if_changed};

use crate::common_instancetypes;
use crate::order::{self, Live, Path};
use crate::render::{self, Component, Rendered, Settings, Target};
use crate::status::{self, Aim, Pass};
use crate::validator;

/// The finalizer on the CR, upstream's.
pub const FINALIZER: &str = "kubevirt.io/foregroundDeleteKubeVirt";

/// When the CR is to be looked at again: on the next change (`Rest`: gone, or being deleted by
/// another), soon (`LookAgain`: still rolling, deleting, not the one in use, or failed), or, once
/// Deployed, when the webhook's next certificate is due at the latest (`RestUntil`).
pub use operator_kit::controller::Next;

/// One pass.
///
/// # Errors
/// [`ObjectsError`] when the CRs cannot be listed, a finalizer set, an object deleted or read,
/// or the status written; a failed render or apply is not an error of the pass but the CR's
/// `DeploymentFailed` status.
pub async fn reconcile<O: Objects>(
    objects: &O,
    cr: &KubeVirt,
    settings: &Settings,
    now: &Time,
) -> Result<Next, ObjectsError> {
    let resource = ApiResource::erase::<KubeVirt>(&());
    let finalized = cr.finalizers().iter().any(|f| f == FINALIZER);
    if cr.metadata.deletion_timestamp.is_some() {
        return if finalized {
            delete(objects, cr, settings, now).await
        } else {
            Ok(Next::Rest)
        };
    }
    let in_use = in_use(objects, &resource, cr.namespace().as_deref()).await?;
    if in_use.is_some_and(|name| name != cr.name_any()) {
        write(objects, cr, &Pass::Existing, None, now).await?;
        return Ok(Next::LookAgain);
    }
    if !finalized {
        objects.set_finalizer(&resource, &cr.metadata, FINALIZER, true).await?;
    }
    let target = Target::of(cr, settings);
    let mut rendered = match render::render(cr, settings) {
        Ok(rendered) => rendered,
        Err(e) => {
            write(objects, cr, &Pass::Failed(e.to_string()), None, now).await?;
            return Ok(Next::LookAgain);
        }
    };
    let owner = owned_by(cr);
    let labels = render::labels();
    let place = Place {
        namespace: &settings.namespace,
        owner: owner.as_ref(),
        labels: &labels,
    };
    let chain = validator::chain(&settings.namespace);
    let kept = match store::ensure_chain(objects, place, &chain, &validator::lifetimes(), now.0.as_second()).await {
        Ok(kept) => kept,
        Err(e) => {
            let why = format!("virt-operator's webhook certificate: {e}");
            write(objects, cr, &Pass::Failed(why), None, now).await?;
            return Ok(Next::LookAgain);
        }
    };
    validator::set_ca_bundle(&mut rendered.always, &kept.bundle);
    let aim = Aim {
        target: &target,
        rendered: &rendered,
        operator_version: &settings.version,
    };
    let pass = match apply(objects, cr, settings, &rendered).await {
        Ok(pass) => pass,
        Err(e) => Pass::Failed(e.to_string()),
    };
    if let Pass::Failed(why) = &pass {
        tracing::warn!(
            name = cr.name_any(),
            error = why.as_str(),
            "reconciling the KubeVirt CR failed"
        );
    }
    write(objects, cr, &pass, Some(aim), now).await?;
    Ok(match pass {
        Pass::Applied { ready: true, .. } => Next::RestUntil(kept.renewal),
        _ => Next::LookAgain,
    })
}

/// Applies the objects and the workloads the order lets through.
async fn apply<O: Objects>(
    objects: &O,
    cr: &KubeVirt,
    settings: &Settings,
    rendered: &Rendered,
) -> Result<Pass, ObjectsError> {
    apply_all_changed(objects, &rendered.always).await?;
    let mut lives = Vec::new();
    for component in Component::ALL {
        lives.push((component, read(objects, &settings.namespace, component).await?));
    }
    let live = |component: Component| {
        lives
            .iter()
            .find(|(c, _)| *c == component)
            .and_then(|(_, live)| live.as_ref())
    };
    let standing = |component| order::standing(component, live(component), &rendered.deployment_id);
    let observed = cr.status.as_ref().and_then(|s| s.observed_deployment_id.as_deref());
    let path = Path::between(observed, &rendered.deployment_id);
    let allowed = order::allowed(path, standing);
    for component in &allowed {
        if let Some(desired) = rendered.workloads.get(component) {
            apply_if_changed(objects, desired).await?;
        }
    }
    let ready = Component::ALL.into_iter().all(|c| {
        let now = standing(c);
        now.at_target && now.ready
    });
    // Once the components serve (the CRDs long established), as upstream's last step.
    if ready {
        common_instancetypes::sync(objects, &rendered.instancetypes, common_instancetypes::enabled(cr)).await?;
    }
    let generations = lives
        .iter()
        .filter_map(|(component, live)| live.as_ref().map(|l| generation(*component, l, &settings.namespace)))
        .collect();
    Ok(Pass::Applied {
        updating: path == Path::Update,
        ready,
        generations,
    })
}

async fn read<O: Objects>(objects: &O, namespace: &str, component: Component) -> Result<Option<Live>, ObjectsError> {
    Ok(match component {
        Component::Handler => get_typed::<DaemonSet, _>(objects, Some(namespace), component.name())
            .await?
            .map(|d| Live::DaemonSet(Box::new(d))),
        Component::Api | Component::Controller => {
            get_typed::<Deployment, _>(objects, Some(namespace), component.name())
                .await?
                .map(|d| Live::Deployment(Box::new(d)))
        }
    })
}

fn generation(component: Component, live: &Live, namespace: &str) -> GenerationStatus {
    let (resource, generation) = match live {
        Live::Deployment(d) => ("deployments", d.metadata.generation),
        Live::DaemonSet(d) => ("daemonsets", d.metadata.generation),
    };
    GenerationStatus {
        group: "apps".to_owned(),
        resource: resource.to_owned(),
        namespace: Some(namespace.to_owned()),
        name: component.name().to_owned(),
        last_generation: generation.unwrap_or(0),
        hash: None,
    }
}

/// The deletion passes: `Deleting`, then the CRDs, then the rest, then `Deleted`, then the
/// finalizer off. Each status write is a pass of its own: taking the finalizer off is refused
/// unless the CR is still at the version the pass read, which a status write moves on.
async fn delete<O: Objects>(objects: &O, cr: &KubeVirt, settings: &Settings, now: &Time) -> Result<Next, ObjectsError> {
    let resource = ApiResource::erase::<KubeVirt>(&());
    match cr.status.as_ref().and_then(|s| s.phase.as_deref()) {
        Some("Deleted") => {
            objects.set_finalizer(&resource, &cr.metadata, FINALIZER, false).await?;
            return Ok(Next::Rest);
        }
        Some("Deleting") => {}
        _ => {
            write(objects, cr, &Pass::Deleting, None, now).await?;
            return Ok(Next::LookAgain);
        }
    }
    // Deletion needs the objects' names only, which customizations cannot change: a customization
    // that does not apply must not hold the deletion up.
    let mut uncustomized = cr.clone();
    uncustomized.spec.customize_components = None;
    let rendered = match render::render(&uncustomized, settings) {
        Ok(rendered) => rendered,
        Err(e) => {
            write(objects, cr, &Pass::Failed(e.to_string()), None, now).await?;
            return Ok(Next::LookAgain);
        }
    };
    let crds = ApiResource::erase::<CustomResourceDefinition>(&());
    let key = render::owner_key(cr);
    let (first, rest): (Vec<_>, Vec<_>) = rendered.unowned().into_iter().partition(|(r, _, _)| *r == crds);
    let mut crds_left = false;
    for (kind, namespace, name) in &first {
        if delete_if_ours(objects, kind, namespace.as_deref(), name, &key).await? {
            crds_left = true;
        }
    }
    if crds_left {
        return Ok(Next::LookAgain);
    }
    for desired in rendered.workloads.values() {
        objects
            .delete(&desired.resource, desired.namespace.as_deref(), &desired.name)
            .await?;
    }
    for (kind, namespace, name) in &rest {
        delete_if_ours(objects, kind, namespace.as_deref(), name, &key).await?;
    }
    write(objects, cr, &Pass::Deleted, None, now).await?;
    Ok(Next::LookAgain)
}

/// Deletes an object the CR `key` cannot own but was made for it; whether it was there.
async fn delete_if_ours<O: Objects>(
    objects: &O,
    kind: &ApiResource,
    namespace: Option<&str>,
    name: &str,
    key: &str,
) -> Result<bool, ObjectsError> {
    let Some(object) = objects.get(kind, namespace, name).await? else {
        return Ok(false);
    };
    let ours = object
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(render::OWNER_ANNOTATION))
        .is_some_and(|owner| owner == key);
    if ours {
        objects.delete(kind, namespace, name).await?;
    }
    Ok(ours)
}

/// The name of the KubeVirt CR in use in `namespace`: the oldest not being deleted, then the
/// first by name; `None` when there is none. Only metadata is read, so one CR that does not read
/// as the type stops no other.
async fn in_use<O: Objects>(
    objects: &O,
    resource: &ApiResource,
    namespace: Option<&str>,
) -> Result<Option<String>, ObjectsError> {
    Ok(objects
        .list(resource)
        .await?
        .into_iter()
        .map(|o| o.metadata)
        .filter(|m| m.deletion_timestamp.is_none() && m.namespace.as_deref() == namespace)
        .min_by_key(|m| (m.creation_timestamp.clone().map(|t| t.0), m.name.clone()))
        .map(|m| m.name.unwrap_or_default()))
}

async fn write<O: Objects>(
    objects: &O,
    cr: &KubeVirt,
    pass: &Pass,
    aim: Option<Aim<'_>>,
    now: &Time,
) -> Result<KubeVirtStatus, ObjectsError> {
    let status = status::decide(cr, pass, aim, now);
    // virt-controller's workload updater owns the outdated count: it is neither compared nor
    // sent (the status is merge-patched), so a stale cache cannot put an older count back.
    let without_count = |s: &KubeVirtStatus| KubeVirtStatus {
        outdated_virtual_machine_instance_workloads: None,
        ..s.clone()
    };
    let current = cr.status.as_ref().map(without_count);
    write_status_if_changed(objects, cr, current.as_ref(), &without_count(&status)).await?;
    Ok(status)
}

#[cfg(test)]
#[path = "reconciler_tests.rs"]
mod tests;
