//! `SSP` (`ssp.kubevirt.io/v1beta3`, namespaced), as upstream's: where the template validator
//! runs and how many of it (`templateValidator`), the namespace of the common templates
//! (`commonTemplates`, required), and the install's phase, conditions and versions.
//!
//! What this operator does not do is in the schema and refused by the API server (rules in
//! [`crate::crd`]), never ignored: DataImportCron templates, a TLS security profile, the token
//! generation service, and multiple architectures.

use kube::CustomResource;
use operator_kit::conditions::OperatorCondition;
use operator_kit::placement::NodePlacement;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The annotation that pauses the operator for one SSP (`true`, as Go's `ParseBool` reads it).
pub const PAUSED_ANNOTATION: &str = "kubevirt.io/operator.paused";
/// The finalizer that lets the operator remove the cluster-scoped objects it made.
pub const FINALIZER: &str = "ssp.kubevirt.io/finalizer";

/// `spec` of an `SSP`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "ssp.kubevirt.io",
    version = "v1beta3",
    kind = "SSP",
    plural = "ssps",
    singular = "ssp",
    namespaced,
    status = "SSPStatus",
    derive = "Default",
    derive = "PartialEq",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct SSPSpec {
    /// Upstream deploys templates, DataSources and DataImportCrons for several architectures
    /// (refused when true).
    pub enable_multiple_architectures: Option<bool>,
    /// The template validator's replicas and placement.
    pub template_validator: Option<TemplateValidator>,
    /// The architectures of the cluster's nodes (refused).
    pub cluster: Option<Value>,
    /// The common templates' namespace.
    pub common_templates: CommonTemplates,
    /// The TLS profile of the validator's server (refused).
    pub tls_security_profile: Option<Value>,
    /// The VM console proxy's token service (refused when enabled).
    pub token_generation_service: Option<TokenGenerationService>,
}

/// `spec.templateValidator`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateValidator {
    /// How many validator pods run: the CRD defaults it to 2 when `templateValidator` is given,
    /// and 1 run when it is left out (upstream's code).
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Where they run.
    pub placement: Option<NodePlacement>,
}

/// `spec.commonTemplates`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommonTemplates {
    /// The namespace upstream puts the common templates in.
    #[schemars(length(max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub namespace: String,
    /// DataImportCrons to keep boot sources fresh (refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_import_cron_templates: Vec<Value>,
}

/// `spec.tokenGenerationService`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TokenGenerationService {
    /// Whether the service runs.
    pub enabled: Option<bool>,
}

/// `status` of an `SSP`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SSPStatus {
    /// `Deploying`, `Deployed` or `Deleting`.
    pub phase: Option<String>,
    /// `Available`, `Progressing` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<OperatorCondition>,
    /// The operator's version.
    pub operator_version: Option<String>,
    /// The version being deployed.
    pub target_version: Option<String>,
    /// The version deployed.
    pub observed_version: Option<String>,
    /// Whether the operator is paused for this SSP.
    pub paused: Option<bool>,
    /// The generation of the spec the status is about.
    pub observed_generation: Option<i64>,
}

impl SSP {
    /// Whether `kubevirt.io/operator.paused` says so (`1`, `t`, `T`, `true`, `TRUE`, `True`, as
    /// Go's `ParseBool`).
    #[must_use]
    pub fn paused(&self) -> bool {
        self.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(PAUSED_ANNOTATION))
            .is_some_and(|v| matches!(v.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"))
    }

    /// How many validator pods it wants (see [`TemplateValidator::replicas`]).
    #[must_use]
    pub fn validator_replicas(&self) -> i32 {
        self.spec
            .template_validator
            .as_ref()
            .and_then(|v| v.replicas)
            .unwrap_or(1)
    }
}
