//! [`InstancetypeLookup`] over the API server, for virt-controller (the VM controller) and virt-api
//! (admission and `expand-spec`).

use k8s_openapi::api::apps::v1::ControllerRevision;
use kube::api::{Api, ApiResource, DynamicObject};
use kubevirt_api::instancetype::{GROUP, InstancetypeLookup, KindNames, LookupError, VERSION};
use serde_json::Value;

/// Reads instance types, preferences and ControllerRevisions with a kube client.
#[derive(Clone)]
pub struct KubeInstancetypeLookup {
    client: kube::Client,
}

impl std::fmt::Debug for KubeInstancetypeLookup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeInstancetypeLookup").finish_non_exhaustive()
    }
}

impl KubeInstancetypeLookup {
    /// A lookup over `client`.
    #[must_use]
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }
}

/// A 404 is an absent object; anything else is an error naming what was asked for.
fn absent_or<T>(result: Result<T, kube::Error>, what: &str) -> Result<Option<T>, LookupError> {
    match result {
        Ok(found) => Ok(Some(found)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(LookupError(format!("cannot get {what}: {error}"))),
    }
}

impl InstancetypeLookup for KubeInstancetypeLookup {
    async fn object(&self, kind: &KindNames, namespace: &str, name: &str) -> Result<Option<Value>, LookupError> {
        let resource = ApiResource {
            group: GROUP.to_owned(),
            version: VERSION.to_owned(),
            api_version: format!("{GROUP}/{VERSION}"),
            kind: kind.kind.to_owned(),
            plural: kind.plural.to_owned(),
        };
        let api: Api<DynamicObject> = if kind.namespaced {
            Api::namespaced_with(self.client.clone(), namespace, &resource)
        } else {
            Api::all_with(self.client.clone(), &resource)
        };
        let found = absent_or(api.get(name).await, &format!("{} {name}", kind.kind))?;
        found
            .map(|object| serde_json::to_value(object).map_err(|e| LookupError(e.to_string())))
            .transpose()
    }

    async fn revision(&self, namespace: &str, name: &str) -> Result<Option<ControllerRevision>, LookupError> {
        let api: Api<ControllerRevision> = Api::namespaced(self.client.clone(), namespace);
        absent_or(api.get(name).await, &format!("ControllerRevision {namespace}/{name}"))
    }
}
