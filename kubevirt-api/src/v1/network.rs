//! `spec.networks`: the networks a VMI's interfaces connect to.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `spec.networks`. Exactly one of `pod` and `multus` is set.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    /// Name; interfaces refer to it.
    pub name: String,
    /// The pod network.
    pub pod: Option<PodNetwork>,
    /// A Multus secondary network.
    pub multus: Option<MultusNetwork>,
}

/// `networks[].pod`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodNetwork {
    /// Guest IPv4 subnet for masquerade; upstream defaults to `10.0.2.0/24`.
    #[serde(rename = "vmNetworkCIDR")]
    pub vm_network_cidr: Option<String>,
    /// Guest IPv6 subnet for masquerade; upstream defaults to `fd10:0:2::/120`.
    #[serde(rename = "vmIPv6NetworkCIDR")]
    pub vm_ipv6_network_cidr: Option<String>,
}

/// `networks[].multus`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MultusNetwork {
    /// `<namespace>/<name>` of a NetworkAttachmentDefinition.
    pub network_name: String,
    /// Use it instead of the pod network as the default.
    pub default: Option<bool>,
}
