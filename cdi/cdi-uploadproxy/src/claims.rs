//! The claim an upload token names, as the proxy reads it: its annotations (whether it takes an
//! upload and whether its server is ready) and its content type. [`KubeClaims`] reads the API
//! server; tests give their own.

use std::collections::BTreeMap;
use std::future::Future;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;

/// A claim's annotations, or `None` when it is not there.
pub trait Claims: Send + Sync + 'static {
    /// The annotations of `namespace/name`.
    fn annotations(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Option<BTreeMap<String, String>>, kube::Error>> + Send;
}

/// The claims on the API server.
#[derive(Clone)]
pub struct KubeClaims(pub kube::Client);

impl std::fmt::Debug for KubeClaims {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeClaims").finish_non_exhaustive()
    }
}

impl Claims for KubeClaims {
    async fn annotations(&self, namespace: &str, name: &str) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
        let api: kube::Api<PersistentVolumeClaim> = kube::Api::namespaced(self.0.clone(), namespace);
        Ok(api
            .get_opt(name)
            .await?
            .map(|claim| claim.metadata.annotations.unwrap_or_default()))
    }
}
