//! Upstream's `NodePlacement` (`sdkapi.NodePlacement`): where an operator's pods run, as the
//! `workload` or `infra` fields of CDI's, the hostpath provisioner's and HyperConverged's CRs give it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, PodSpec, Toleration};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Node placement.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    /// Node labels the pods need.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Affinity rules.
    pub affinity: Option<Affinity>,
    /// Tolerations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
}

impl NodePlacement {
    /// Puts the placement into a pod spec: its node selector, affinity and tolerations, each
    /// left unset when the placement has none.
    pub fn place(&self, pod: &mut PodSpec) {
        pod.node_selector = (!self.node_selector.is_empty()).then(|| self.node_selector.clone());
        pod.affinity.clone_from(&self.affinity);
        pod.tolerations = (!self.tolerations.is_empty()).then(|| self.tolerations.clone());
    }
}
