//! The objects an operator owns: each rendered as a [`Desired`] (a typed object made dynamic,
//! with its resource), applied by server-side apply under the operator's field manager, so that a
//! pass sends the whole object every time and the API server keeps only what changed. Every one
//! carries its CR as controlling owner ([`owned_by`]): deleting the CR lets the garbage collector
//! remove them.
//!
//! [`Objects`] is the API server as an operator sees it; [`kube::KubeObjects`] (feature `client`)
//! talks to it, [`fake::FakeObjects`] (tests) keeps objects in memory and records every write.

use ::kube::Resource;
use ::kube::core::{ApiResource, DynamicObject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::Serialize;
use serde::de::DeserializeOwned;

#[cfg(any(test, feature = "testing"))]
pub mod fake;
#[cfg(feature = "client")]
pub mod kube;
pub mod strategic_merge;
pub mod unchanged;

/// Why an object could not be rendered, read or written.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// A typed object did not convert to or from its dynamic form.
    #[error("{what}: {source}")]
    Convert {
        /// The object.
        what: String,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The object changed since it was read (the API server's 409 Conflict): read it again.
    #[error("{operation} failed: the object has been modified since it was read")]
    Conflict {
        /// What was attempted.
        operation: String,
    },
    /// The API server refused or could not be reached.
    #[error("{operation} failed: {message}")]
    Api {
        /// What was attempted.
        operation: String,
        /// Why.
        message: String,
    },
}

/// One object an operator wants, as it wants it.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Its group, version, kind and plural.
    pub resource: ApiResource,
    /// Its namespace; `None` for a cluster-scoped object.
    pub namespace: Option<String>,
    /// Its name.
    pub name: String,
    /// The object, with `apiVersion` and `kind`.
    pub object: DynamicObject,
}

impl Desired {
    /// A typed object, made dynamic.
    ///
    /// # Errors
    /// [`ObjectsError::Convert`] when it does not serialize as an object.
    pub fn from_typed<K>(object: &K) -> Result<Self, ObjectsError>
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        let resource = ApiResource::erase::<K>(&());
        let what = describe(
            &resource.kind,
            object.meta().namespace.as_deref(),
            object.meta().name.as_deref().unwrap_or_default(),
        );
        let value = serde_json::to_value(object).map_err(|source| ObjectsError::Convert {
            what: what.clone(),
            source,
        })?;
        let object: DynamicObject =
            serde_json::from_value(value).map_err(|source| ObjectsError::Convert { what, source })?;
        Ok(Self {
            resource,
            namespace: object.metadata.namespace.clone(),
            name: object.metadata.name.clone().unwrap_or_default(),
            object,
        })
    }

    /// An object written as JSON, read as its type first (so that a misspelt field fails here, in
    /// tests), then made dynamic.
    ///
    /// # Errors
    /// [`ObjectsError::Convert`] when it is not a `K`.
    pub fn from_json<K>(value: serde_json::Value) -> Result<Self, ObjectsError>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned,
    {
        let what = describe(
            &K::kind(&()),
            value["metadata"]["namespace"].as_str(),
            value["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let object: K = serde_json::from_value(value).map_err(|source| ObjectsError::Convert { what, source })?;
        Self::from_typed(&object)
    }

    /// `Kind namespace/name` (or `Kind name`), for messages and fakes.
    #[must_use]
    pub fn describe(&self) -> String {
        describe(&self.resource.kind, self.namespace.as_deref(), &self.name)
    }

    /// The object as its type.
    ///
    /// # Errors
    /// [`ObjectsError::Convert`] when it is not one.
    pub fn typed<K: DeserializeOwned>(&self) -> Result<K, ObjectsError> {
        parse(&self.object, &self.describe())
    }
}

/// `Kind namespace/name`, or `Kind name` for a cluster-scoped object.
#[must_use]
pub fn describe(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// A dynamic object as its type.
///
/// # Errors
/// [`ObjectsError::Convert`] naming `what`.
pub fn parse<K: DeserializeOwned>(object: &DynamicObject, what: &str) -> Result<K, ObjectsError> {
    let value = serde_json::to_value(object).map_err(|source| ObjectsError::Convert {
        what: what.to_owned(),
        source,
    })?;
    serde_json::from_value(value).map_err(|source| ObjectsError::Convert {
        what: what.to_owned(),
        source,
    })
}

/// The controlling owner reference to `owner` (a CR with its name and uid), for the objects it
/// makes; `None` when the owner has no uid yet.
#[must_use]
pub fn owned_by<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    let mut reference = owner.controller_owner_ref(&())?;
    reference.block_owner_deletion = Some(true);
    Some(reference)
}

/// The finalizers of `meta` with `finalizer` on (`present`) or off, the others kept in order.
#[must_use]
pub fn finalizers_with(meta: &ObjectMeta, finalizer: &str, present: bool) -> Vec<String> {
    let mut finalizers: Vec<String> = meta
        .finalizers
        .iter()
        .flatten()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    if present {
        finalizers.push(finalizer.to_owned());
    }
    finalizers
}

/// The API server, as an operator sees it.
pub trait Objects: Send + Sync {
    /// Applies `desired` by server-side apply, taking over fields another manager set.
    fn apply(&self, desired: &Desired) -> impl Future<Output = Result<(), ObjectsError>> + Send;
    /// Replaces the whole of an object that is at `resource_version` with `desired` (an update,
    /// so what other writers added is gone too); refused when the object moved on since.
    fn replace(
        &self,
        desired: &Desired,
        resource_version: &str,
    ) -> impl Future<Output = Result<(), ObjectsError>> + Send;
    /// An object as it is now; `None` when it is not there.
    fn get(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<Option<DynamicObject>, ObjectsError>> + Send;
    /// Every object of a resource, in every namespace.
    fn list(&self, resource: &ApiResource) -> impl Future<Output = Result<Vec<DynamicObject>, ObjectsError>> + Send;
    /// Puts `finalizer` on the object `meta` describes (`present`) or takes it off, leaving its
    /// other finalizers ([`finalizers_with`]); refused when the object is no longer the one
    /// `meta` read (another uid, or a newer `resourceVersion`), so the next pass reads it again.
    fn set_finalizer(
        &self,
        resource: &ApiResource,
        meta: &ObjectMeta,
        finalizer: &str,
        present: bool,
    ) -> impl Future<Output = Result<(), ObjectsError>> + Send;
    /// Deletes an object; one already gone is no error.
    fn delete(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
    ) -> impl Future<Output = Result<(), ObjectsError>> + Send;
    /// Replaces an object's `status` (its status subresource).
    fn write_status(
        &self,
        resource: &ApiResource,
        namespace: Option<&str>,
        name: &str,
        status: serde_json::Value,
    ) -> impl Future<Output = Result<(), ObjectsError>> + Send;
}

/// Writes `status` as the status of the CR `cr` when it differs from the one it has (`current`).
///
/// # Errors
/// [`ObjectsError`] when it does not serialize or the write is refused.
pub async fn write_status_if_changed<K, S, O>(
    objects: &O,
    cr: &K,
    current: Option<&S>,
    status: &S,
) -> Result<(), ObjectsError>
where
    K: Resource<DynamicType = ()>,
    S: Serialize + PartialEq,
    O: Objects,
{
    if current == Some(status) {
        return Ok(());
    }
    let name = cr.meta().name.clone().unwrap_or_default();
    let resource = ApiResource::erase::<K>(&());
    let value = serde_json::to_value(status).map_err(|source| ObjectsError::Convert {
        what: format!("the status of {} {name}", resource.kind),
        source,
    })?;
    objects
        .write_status(&resource, cr.meta().namespace.as_deref(), &name, value)
        .await
}

/// An object of a type, read through [`Objects::get`].
///
/// # Errors
/// What [`Objects::get`] gives, or [`ObjectsError::Convert`].
pub async fn get_typed<K, O>(objects: &O, namespace: Option<&str>, name: &str) -> Result<Option<K>, ObjectsError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
    O: Objects,
{
    let resource = ApiResource::erase::<K>(&());
    let what = describe(&resource.kind, namespace, name);
    match objects.get(&resource, namespace, name).await? {
        Some(object) => parse(&object, &what).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    #[test]
    fn a_typed_object_keeps_its_kind_name_and_fields() {
        let account = ServiceAccount {
            metadata: ObjectMeta {
                name: Some("sa".to_owned()),
                namespace: Some("ns".to_owned()),
                ..ObjectMeta::default()
            },
            automount_service_account_token: Some(false),
            ..ServiceAccount::default()
        };
        let desired = Desired::from_typed(&account).expect("converts");
        assert_eq!(desired.describe(), "ServiceAccount ns/sa");
        assert_eq!(desired.resource.plural, "serviceaccounts");
        let types = desired.object.types.clone().expect("apiVersion and kind");
        assert_eq!(
            (types.api_version.as_str(), types.kind.as_str()),
            ("v1", "ServiceAccount")
        );
        assert_eq!(desired.typed::<ServiceAccount>().expect("back"), account);
    }
}
