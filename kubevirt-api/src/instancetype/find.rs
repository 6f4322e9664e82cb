//! Finding the instance type and preference a VM names, as upstream's `pkg/instancetype/find`
//! does: a revision the matcher pins, else the revision the VM's status records, else the object
//! itself. The lookups go through [`InstancetypeLookup`], which virt-controller and virt-api
//! implement over the API server and local mode over the files it is given.

use std::future::Future;

use k8s_openapi::api::apps::v1::ControllerRevision;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::revision::{RevisionError, spec_of};
use super::{
    KindNames, VirtualMachineClusterInstancetype, VirtualMachineClusterPreference, VirtualMachineInstancetype,
    VirtualMachineInstancetypeSpec, VirtualMachinePreference, VirtualMachinePreferenceSpec,
};
use crate::v1::{InstancetypeMatcher, InstancetypeStatusRef, MatcherFields, PreferenceMatcher, VirtualMachine};

/// A lookup that failed for another reason than the object being absent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LookupError(pub String);

/// Where instance types, preferences and their revisions are read from.
pub trait InstancetypeLookup: Send + Sync {
    /// The object of `kind` named `name` (in `namespace` when the kind is namespaced), as JSON
    /// with its apiVersion and kind, or `None` when there is none.
    fn object(
        &self,
        kind: &KindNames,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<Value>, LookupError>> + Send;
    /// The ControllerRevision `name` in `namespace`, or `None`.
    fn revision(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<ControllerRevision>, LookupError>> + Send;
}

/// Why an instance type or preference could not be found.
#[derive(Debug, thiserror::Error)]
pub enum FindError {
    /// It does not exist; the message is the API server's (`<plural>.<group> "<name>" not found`).
    #[error("{0}")]
    NotFound(String),
    /// The matcher names a kind that is not one of the two.
    #[error("got unexpected kind in {matcher}: {kind}")]
    UnknownKind {
        /// `InstancetypeMatcher` or `PreferenceMatcher`.
        matcher: &'static str,
        /// The kind given.
        kind: String,
    },
    /// The lookup failed.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// A revision holds something else.
    #[error(transparent)]
    Revision(#[from] RevisionError),
}

/// What was found: the spec, and the live object when it did not come from a revision (the VM
/// controller stores it as a new revision).
#[derive(Clone, Debug, PartialEq)]
pub struct Found<S> {
    /// The spec to apply.
    pub spec: S,
    /// The object as read, when read live.
    pub object: Option<Value>,
    /// The kind it was found as.
    pub kind: KindNames,
}

/// The instance type kind a matcher names: empty means the cluster-wide kind.
pub fn instancetype_kind(kind: Option<&str>) -> Result<KindNames, FindError> {
    let lower = kind.unwrap_or_default().to_ascii_lowercase();
    match lower.as_str() {
        "" | "virtualmachineclusterinstancetype" | "virtualmachineclusterinstancetypes" => {
            Ok(VirtualMachineClusterInstancetype::NAMES)
        }
        "virtualmachineinstancetype" | "virtualmachineinstancetypes" => Ok(VirtualMachineInstancetype::NAMES),
        _ => Err(FindError::UnknownKind {
            matcher: "InstancetypeMatcher",
            kind: kind.unwrap_or_default().to_owned(),
        }),
    }
}

/// The preference kind a matcher names: empty means the cluster-wide kind.
pub fn preference_kind(kind: Option<&str>) -> Result<KindNames, FindError> {
    let lower = kind.unwrap_or_default().to_ascii_lowercase();
    match lower.as_str() {
        "" | "virtualmachineclusterpreference" | "virtualmachineclusterpreferences" => {
            Ok(VirtualMachineClusterPreference::NAMES)
        }
        "virtualmachinepreference" | "virtualmachinepreferences" => Ok(VirtualMachinePreference::NAMES),
        _ => Err(FindError::UnknownKind {
            matcher: "PreferenceMatcher",
            kind: kind.unwrap_or_default().to_owned(),
        }),
    }
}

/// One matcher, whichever of the two it is.
struct Wanted<'a> {
    name: &'a str,
    kind: KindNames,
    pinned_revision: Option<&'a str>,
    status: Option<&'a InstancetypeStatusRef>,
}

async fn find<S: DeserializeOwned>(
    lookup: &impl InstancetypeLookup,
    namespace: &str,
    wanted: Wanted<'_>,
) -> Result<Found<S>, FindError> {
    let status_revision = wanted
        .status
        .filter(|s| s.name.as_deref() == Some(wanted.name))
        .filter(|s| s.kind.as_deref().is_none_or(|k| k.is_empty() || k == wanted.kind.kind))
        .and_then(|s| s.controller_revision_ref.as_ref())
        .and_then(|r| r.name.as_deref());
    if let Some(name) = wanted.pinned_revision.or(status_revision).filter(|n| !n.is_empty()) {
        let revision = lookup
            .revision(namespace, name)
            .await?
            .ok_or_else(|| FindError::NotFound(format!("controllerrevisions.apps \"{name}\" not found")))?;
        return Ok(Found {
            spec: spec_of(&revision, wanted.kind.kind)?,
            object: None,
            kind: wanted.kind,
        });
    }
    let object = lookup
        .object(&wanted.kind, namespace, wanted.name)
        .await?
        .ok_or_else(|| {
            FindError::NotFound(format!(
                "{}.{} \"{}\" not found",
                wanted.kind.plural,
                super::GROUP,
                wanted.name
            ))
        })?;
    let spec = object
        .get("spec")
        .cloned()
        .and_then(|s| serde_json::from_value(s).ok())
        .ok_or_else(|| LookupError(format!("{} {} has no valid spec", wanted.kind.kind, wanted.name)))?;
    Ok(Found {
        spec,
        object: Some(object),
        kind: wanted.kind,
    })
}

/// The object a matcher names (in `namespace`, the VM's), of the kinds `kind` allows, with the
/// status the VM records for it; `None` when the matcher names none (yet: `inferFromVolume` not
/// resolved).
pub async fn find_matched<S: DeserializeOwned>(
    lookup: &impl InstancetypeLookup,
    namespace: &str,
    matcher: Option<MatcherFields<'_>>,
    kind: fn(Option<&str>) -> Result<KindNames, FindError>,
    status: Option<&InstancetypeStatusRef>,
) -> Result<Option<Found<S>>, FindError> {
    let Some(matcher) = matcher else {
        return Ok(None);
    };
    let Some(name) = matcher.name.filter(|n| !n.is_empty()) else {
        return Ok(None);
    };
    let wanted = Wanted {
        name,
        kind: kind(matcher.kind)?,
        pinned_revision: matcher.revision_name,
        status,
    };
    find(lookup, namespace, wanted).await.map(Some)
}

/// The instance type a matcher names, as [`find_matched`].
pub async fn find_instancetype(
    lookup: &impl InstancetypeLookup,
    namespace: &str,
    matcher: Option<&InstancetypeMatcher>,
    status: Option<&InstancetypeStatusRef>,
) -> Result<Option<Found<VirtualMachineInstancetypeSpec>>, FindError> {
    find_matched(lookup, namespace, matcher.map(Into::into), instancetype_kind, status).await
}

/// The preference a matcher names, as [`find_matched`].
pub async fn find_preference(
    lookup: &impl InstancetypeLookup,
    namespace: &str,
    matcher: Option<&PreferenceMatcher>,
    status: Option<&InstancetypeStatusRef>,
) -> Result<Option<Found<VirtualMachinePreferenceSpec>>, FindError> {
    find_matched(lookup, namespace, matcher.map(Into::into), preference_kind, status).await
}

/// Both, for a VM as it is stored.
pub async fn find_both(
    lookup: &impl InstancetypeLookup,
    vm: &VirtualMachine,
) -> Result<
    (
        Option<Found<VirtualMachineInstancetypeSpec>>,
        Option<Found<VirtualMachinePreferenceSpec>>,
    ),
    FindError,
> {
    let namespace = vm.metadata.namespace.as_deref().unwrap_or("default");
    let status = vm.status.as_ref();
    let instancetype = find_instancetype(
        lookup,
        namespace,
        vm.spec.instancetype.as_ref(),
        status.and_then(|s| s.instancetype_ref.as_ref()),
    )
    .await?;
    let preference = find_preference(
        lookup,
        namespace,
        vm.spec.preference.as_ref(),
        status.and_then(|s| s.preference_ref.as_ref()),
    )
    .await?;
    Ok((instancetype, preference))
}
