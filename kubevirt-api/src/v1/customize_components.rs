//! `spec.customizeComponents` of the `KubeVirt` resource: patches virt-operator applies to the
//! objects it renders, and flags it puts on the components' commands (upstream's types and
//! JSON names; virt-operator's `customize` module carries them out).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec.customizeComponents`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeComponents {
    /// Patches of the objects virt-operator renders, applied shortest first (as upstream).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub patches: Vec<CustomizeComponentsPatch>,
    /// Flags of the components' commands.
    pub flags: Option<Flags>,
}

/// One patch of `spec.customizeComponents.patches`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CustomizeComponentsPatch {
    /// The object's name, compared ignoring case; `*` for every object of the type.
    #[schemars(length(min = 1))]
    pub resource_name: String,
    /// The object's kind (`Deployment`, `DaemonSet`, `Service`, `ValidatingWebhookConfiguration`,
    /// `MutatingWebhookConfiguration`, `APIService`), compared ignoring case; `*` for every kind.
    #[schemars(length(min = 1))]
    pub resource_type: String,
    /// The patch, as JSON text.
    pub patch: String,
    /// `json` (RFC 6902), `merge` (RFC 7386) or `strategic` (Kubernetes' strategic merge).
    #[serde(rename = "type")]
    pub patch_type: String,
}

/// `spec.customizeComponents.flags`: each map, when not empty, becomes its component's command.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Flags {
    /// virt-api's flags.
    pub api: Option<BTreeMap<String, String>>,
    /// virt-controller's flags.
    pub controller: Option<BTreeMap<String, String>>,
    /// virt-handler's flags.
    pub handler: Option<BTreeMap<String, String>>,
}
