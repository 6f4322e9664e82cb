//! Upstream's common instance types and preferences (the u1, o1, cx1, m1, n1, rt1 and d1 series
//! and the OS preferences), as the cluster-wide kinds: the bundles `kustomize build` makes from
//! kubevirt/common-instancetypes at [`VERSION`], committed in `data/common-instancetypes/`
//! (`scripts/update-common-instancetypes.sh` regenerates them).
//!
//! The operator deploys them once the components are ready, as upstream's does with
//! `spec.configuration.commonInstancetypesDeployment.enabled` unset or true, and carries them as
//! its own: an object of the same name someone else made is taken over, one changed by hand is
//! put back whole (labels, annotations and spec, as upstream compares them), and one it labelled
//! that the bundle no longer holds is deleted. With `enabled: false` it deletes every one it
//! labelled, and nothing else. [`plan`] decides; the reconciler reads and writes.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use kubevirt_api::instancetype::{VirtualMachineClusterInstancetype, VirtualMachineClusterPreference};
use kubevirt_api::v1::KubeVirt;
use operator_kit::manifests::{TemplateError, documents, resource_of};
use operator_kit::objects::{Desired, Objects, ObjectsError};

use crate::labels::{COMPONENT, MANAGED_BY};

/// The release of kubevirt/common-instancetypes the bundles were built from.
pub const VERSION: &str = "v1.7.0";
/// The label with that release on every object, as upstream's released bundles carry it.
pub const VERSION_LABEL: &str = "instancetype.kubevirt.io/common-instancetypes-version";

const BUNDLES: [(&str, &str); 2] = [
    (
        "virt-operator/data/common-instancetypes/common-clusterinstancetypes-bundle.yaml",
        include_str!("../data/common-instancetypes/common-clusterinstancetypes-bundle.yaml"),
    ),
    (
        "virt-operator/data/common-instancetypes/common-clusterpreferences-bundle.yaml",
        include_str!("../data/common-instancetypes/common-clusterpreferences-bundle.yaml"),
    ),
];

/// The two kinds the bundles hold.
#[must_use]
pub fn resources() -> [ApiResource; 2] {
    [
        ApiResource::erase::<VirtualMachineClusterInstancetype>(&()),
        ApiResource::erase::<VirtualMachineClusterPreference>(&()),
    ]
}

/// Whether the CR wants them: `spec.configuration.commonInstancetypesDeployment.enabled`,
/// true when unset.
#[must_use]
pub fn enabled(cr: &KubeVirt) -> bool {
    cr.spec
        .configuration
        .as_ref()
        .and_then(|c| c.common_instancetypes_deployment.as_ref())
        .and_then(|d| d.enabled)
        .unwrap_or(true)
}

/// The bundles' objects as they are committed, with [`VERSION_LABEL`], read once; the caller
/// stamps them.
///
/// # Errors
/// [`TemplateError`] when a bundle does not read, or an object in it has no kind (bugs the
/// tests catch).
pub fn bundle() -> Result<Vec<(ApiResource, DynamicObject)>, TemplateError> {
    static READ: OnceLock<Result<Vec<(ApiResource, DynamicObject)>, TemplateError>> = OnceLock::new();
    READ.get_or_init(read_bundles).clone()
}

fn read_bundles() -> Result<Vec<(ApiResource, DynamicObject)>, TemplateError> {
    let mut objects = Vec::new();
    for (file, text) in BUNDLES {
        for mut object in documents(file, text)? {
            let resource = resource_of(&object).ok_or_else(|| TemplateError {
                file,
                message: format!("{} has no apiVersion or kind", object.name_any()),
            })?;
            object.labels_mut().insert(VERSION_LABEL.to_owned(), VERSION.to_owned());
            objects.push((resource, object));
        }
    }
    Ok(objects)
}

/// The bundle's objects as the operator wants them, each given its metadata by `stamp`.
///
/// # Errors
/// See [`bundle`].
pub fn desired(stamp: impl Fn(&mut ObjectMeta)) -> Result<Vec<Desired>, TemplateError> {
    Ok(bundle()?
        .into_iter()
        .map(|(resource, mut object)| {
            stamp(&mut object.metadata);
            Desired {
                resource,
                namespace: None,
                name: object.name_any(),
                object,
            }
        })
        .collect())
}

/// One write of the plan.
#[derive(Clone, Debug, PartialEq)]
pub enum Write<'a> {
    /// Not there: applied.
    Create(&'a Desired),
    /// There, but not as wanted: replaced whole, at the `resourceVersion` read.
    Replace(&'a Desired, String),
}

/// What one pass does to the common instance types and preferences.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan<'a> {
    /// Objects to create or put back.
    pub write: Vec<Write<'a>>,
    /// Objects the operator labelled that are not wanted (kind, name).
    pub delete: Vec<(ApiResource, String)>,
}

/// Whether an object carries the operator's labels (upstream's selector: managed-by and
/// component).
#[must_use]
pub fn labelled_ours(object: &DynamicObject) -> bool {
    let labels = object.labels();
    [MANAGED_BY, COMPONENT]
        .iter()
        .all(|(key, value)| labels.get(*key).map(String::as_str) == Some(*value))
}

/// The writes and deletes that bring `live` (every object of [`resources`], with its kind) to
/// `wanted` (the stamped bundle) when `enabled`, or to none of the operator's when not.
#[must_use]
pub fn plan<'a>(wanted: &'a [Desired], live: &[(ApiResource, DynamicObject)], enabled: bool) -> Plan<'a> {
    let by_key: BTreeMap<(&str, String), &DynamicObject> = live
        .iter()
        .map(|(resource, object)| ((resource.kind.as_str(), object.name_any()), object))
        .collect();
    let mut plan = Plan::default();
    if enabled {
        for desired in wanted {
            match by_key.get(&(desired.resource.kind.as_str(), desired.name.clone())) {
                None => plan.write.push(Write::Create(desired)),
                Some(object) if differs(object, &desired.object) => plan
                    .write
                    .push(Write::Replace(desired, object.resource_version().unwrap_or_default())),
                Some(_) => {}
            }
        }
    }
    for (resource, object) in live {
        let still_wanted = enabled
            && wanted
                .iter()
                .any(|d| d.resource.kind == resource.kind && d.name == object.name_any());
        if labelled_ours(object) && !still_wanted {
            plan.delete.push((resource.clone(), object.name_any()));
        }
    }
    plan
}

/// Reads both kinds, then writes and deletes what [`plan`] says.
///
/// # Errors
/// [`ObjectsError`] when a list, write or delete fails; a replace of an object changed since it
/// was read is tried once more at the version read again.
pub async fn sync<O: Objects>(objects: &O, wanted: &[Desired], enabled: bool) -> Result<(), ObjectsError> {
    let mut live = Vec::new();
    for resource in resources() {
        for object in objects.list(&resource).await? {
            live.push((resource.clone(), object));
        }
    }
    let plan = plan(wanted, &live, enabled);
    for write in &plan.write {
        match write {
            Write::Create(desired) => objects.apply(desired).await?,
            Write::Replace(desired, version) => match objects.replace(desired, version).await {
                // Changed since the list (someone else's object, unlabelled, brings no pass of
                // its own): read again and replace once more.
                Err(ObjectsError::Conflict { .. }) => {
                    let now = objects
                        .get(&desired.resource, None, &desired.name)
                        .await?
                        .and_then(|o| o.resource_version());
                    match now {
                        Some(version) => objects.replace(desired, &version).await?,
                        None => objects.apply(desired).await?,
                    }
                }
                other => other?,
            },
        }
    }
    for (resource, name) in &plan.delete {
        objects.delete(resource, None, name).await?;
    }
    Ok(())
}

/// Whether the labels, annotations or spec of `live` are not those of `wanted`.
fn differs(live: &DynamicObject, wanted: &DynamicObject) -> bool {
    live.labels() != wanted.labels()
        || live.annotations() != wanted.annotations()
        || live.data.get("spec") != wanted.data.get("spec")
}

#[cfg(test)]
#[path = "common_instancetypes_tests.rs"]
mod tests;
