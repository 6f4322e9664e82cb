//! What an aggregated API server (virt-api's `subresources.kubevirt.io`, cdi-apiserver's
//! `upload.cdi.kubevirt.io`) learns of the aggregation layer: its request-header CA and allowed
//! names, from `kube-system/extension-apiserver-authentication`, and the client policy they make.

pub mod publish;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;

use crate::tls::{ClientCa, ClientPolicy, Identities};

/// The ConfigMap the API server publishes its authentication settings in.
pub const AUTHENTICATION_CONFIG_MAP: &str = "configmap kube-system/extension-apiserver-authentication";

/// The aggregation layer's request-header settings: its CA (PEM), the common names its client
/// certificates may carry (empty: any), and the headers that name the user.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestHeader {
    /// `requestheader-client-ca-file`.
    pub ca: Option<String>,
    /// `requestheader-allowed-names`, a JSON list.
    pub allowed_names: Vec<String>,
    /// The headers naming the user, their groups and extras.
    pub names: HeaderNames,
}

/// The headers the aggregation layer names the user in (`requestheader-username-headers`,
/// `-group-headers`, `-extra-headers-prefix`), lowercase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderNames {
    /// The user's name.
    pub user: Vec<String>,
    /// Its groups.
    pub group: Vec<String>,
    /// Prefixes of its extras.
    pub extra_prefix: Vec<String>,
}

impl Default for HeaderNames {
    /// Kubernetes' usual names: `X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-`.
    fn default() -> Self {
        Self {
            user: vec!["x-remote-user".to_owned()],
            group: vec!["x-remote-group".to_owned()],
            extra_prefix: vec!["x-remote-extra-".to_owned()],
        }
    }
}

/// Why the settings could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RequestHeaderError {
    /// The API server refused.
    #[error("get {AUTHENTICATION_CONFIG_MAP}: {0}")]
    Api(#[from] kube::Error),
    /// A list is not a JSON list of names.
    #[error("{AUTHENTICATION_CONFIG_MAP}: {key} is not a JSON list of names ({source})")]
    List {
        /// The key.
        key: &'static str,
        /// Why.
        source: serde_json::Error,
    },
}

/// The aggregation layer's request-header settings.
///
/// # Errors
/// [`RequestHeaderError`].
pub async fn requestheader(client: &kube::Client) -> Result<RequestHeader, RequestHeaderError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    let map = api.get_opt("extension-apiserver-authentication").await?;
    let data: BTreeMap<String, String> = map.and_then(|m| m.data).unwrap_or_default();
    let list = |key: &'static str| -> Result<Option<Vec<String>>, RequestHeaderError> {
        data.get(key)
            .map(|text| {
                serde_json::from_str::<Vec<String>>(text).map_err(|source| RequestHeaderError::List { key, source })
            })
            .transpose()
    };
    let lower = |names: Vec<String>| names.into_iter().map(|n| n.to_ascii_lowercase()).collect::<Vec<_>>();
    let defaults = HeaderNames::default();
    Ok(RequestHeader {
        ca: data.get("requestheader-client-ca-file").cloned(),
        allowed_names: list("requestheader-allowed-names")?.unwrap_or_default(),
        names: HeaderNames {
            user: list("requestheader-username-headers")?.map_or(defaults.user, lower),
            group: list("requestheader-group-headers")?.map_or(defaults.group, lower),
            extra_prefix: list("requestheader-extra-headers-prefix")?.map_or(defaults.extra_prefix, lower),
        },
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
