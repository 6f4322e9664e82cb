//! `CDI` (`cdi`, `cdis`; cluster-scoped): the resource cdi-operator installs CDI from, as
//! upstream's: where CDI's pods run, how it is removed, its configuration (a [`CDIConfigSpec`])
//! and its certificates' lifetimes; the status says how far the install is.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cdi_config::CDIConfigSpec;

/// Upstream's operator condition and node placement, shared by every operator's API.
pub use operator_kit::conditions::OperatorCondition;
pub use operator_kit::placement::NodePlacement;

/// `spec` of a `CDI`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "CDI",
    plural = "cdis",
    singular = "cdi",
    shortname = "cdi",
    shortname = "cdis",
    status = "CDIStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CDISpec {
    /// The pull policy of CDI's images.
    #[schemars(extend("enum" = ["Always", "IfNotPresent", "Never"]))]
    pub image_pull_policy: Option<String>,
    /// `RemoveWorkloads` or `BlockUninstallIfWorkloadsExist`.
    #[schemars(extend("enum" = ["RemoveWorkloads", "BlockUninstallIfWorkloadsExist"]))]
    pub uninstall_strategy: Option<String>,
    /// Where CDI's own pods run.
    pub infra: Option<ComponentConfig>,
    /// Where CDI's worker pods (importer, upload server, cloner) run.
    pub workload: Option<NodePlacement>,
    /// Patches and flags for CDI's components (kept as given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::preserve_unknown_object")]
    pub customize_components: Option<serde_json::Value>,
    /// `copy`, `snapshot` or `csi-clone` for every clone.
    #[schemars(extend("enum" = ["copy", "snapshot", "csi-clone"]))]
    pub clone_strategy_override: Option<String>,
    /// The configuration, copied to the `CDIConfig`.
    pub config: Option<CDIConfigSpec>,
    /// The certificates' lifetimes.
    pub cert_config: Option<CDICertConfig>,
    /// The priority class of CDI's pods.
    pub priority_class: Option<String>,
}

/// `infra`: node placement and replica counts.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ComponentConfig {
    /// Node placement.
    #[serde(flatten)]
    pub placement: NodePlacement,
    /// Replicas of cdi-deployment.
    pub deployment_replicas: Option<i32>,
    /// Replicas of cdi-apiserver.
    pub api_server_replicas: Option<i32>,
    /// Replicas of cdi-uploadproxy.
    pub upload_proxy_replicas: Option<i32>,
}

/// `certConfig`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CDICertConfig {
    /// The CA's.
    pub ca: Option<CertConfig>,
    /// The servers'.
    pub server: Option<CertConfig>,
    /// The clients'.
    pub client: Option<CertConfig>,
}

/// A certificate's lifetime and when it is renewed, as Go durations (`48h`).
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CertConfig {
    /// How long it is valid.
    pub duration: Option<String>,
    /// How long before its end it is renewed.
    pub renew_before: Option<String>,
}

/// `status` of a `CDI`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CDIStatus {
    /// `Deploying`, `Deployed`, `Deleting`, `Deleted`, `Error`, `Upgrading`.
    pub phase: Option<String>,
    /// `Available`, `Progressing`, `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<OperatorCondition>,
    /// The operator's version.
    pub operator_version: Option<String>,
    /// The version being installed.
    pub target_version: Option<String>,
    /// The version installed.
    pub observed_version: Option<String>,
}
