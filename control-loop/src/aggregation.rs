//! What an aggregated API server (virt-api's `subresources.kubevirt.io`, cdi-apiserver's
//! `upload.cdi.kubevirt.io`) learns of the aggregation layer: its request-header CA and allowed
//! names, from `kube-system/extension-apiserver-authentication`, and the client policy they make.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::tls::{ClientCa, ClientPolicy, Identities};

/// The ConfigMap the API server publishes its authentication settings in.
pub const AUTHENTICATION_CONFIG_MAP: &str = "configmap kube-system/extension-apiserver-authentication";

/// The aggregation layer's request-header settings: its CA (PEM) and the common names its
/// client certificates may carry (empty: any).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeader {
    /// `requestheader-client-ca-file`.
    pub ca: Option<String>,
    /// `requestheader-allowed-names`, a JSON list.
    pub allowed_names: Vec<String>,
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RequestHeaderError {
    /// The API server refused.
    #[error("get {AUTHENTICATION_CONFIG_MAP}: {0}")]
    Api(#[from] kube::Error),
    /// The allowed names are not a JSON list.
    #[error("{AUTHENTICATION_CONFIG_MAP}: requestheader-allowed-names is not a JSON list of names ({0})")]
    AllowedNames(serde_json::Error),
}

/// The aggregation layer's request-header settings.
///
/// # Errors
/// [`RequestHeaderError`].
pub async fn requestheader(client: &kube::Client) -> Result<RequestHeader, RequestHeaderError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let map = api.get_opt("extension-apiserver-authentication").await?;
    let data: BTreeMap<String, String> = map.and_then(|m| m.data).unwrap_or_default();
    let allowed_names = match data.get("requestheader-allowed-names") {
        None => Vec::new(),
        Some(text) => serde_json::from_str(text).map_err(RequestHeaderError::AllowedNames)?,
    };
    Ok(RequestHeader {
        ca: data.get("requestheader-client-ca-file").cloned(),
        allowed_names,
    })
}

/// The aggregation layer's client certificates: optional (the server learns from the connection
/// whether one came), signed by `ca`, and naming one of `allowed` when it is not empty.
#[must_use]
pub fn front_proxy_clients(ca: ClientCa, allowed: &[String]) -> ClientPolicy {
    ClientPolicy {
        ca,
        identities: if allowed.is_empty() {
            Identities::AnySignedByTheCa
        } else {
            Identities::Only(allowed.to_vec())
        },
        required: false,
    }
}
