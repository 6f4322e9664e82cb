//! Request bodies of the `subresources.kubevirt.io` API: what `virtctl start`, `stop`, `restart`,
//! `migrate`, `pause` and `unpause` send to virt-api. Each is optional on the wire (an empty body means the
//! defaults) and each may carry `apiVersion` and `kind`, which are accepted and not checked, as
//! upstream's decoder does.

use serde::{Deserialize, Serialize};

/// The only value `dryRun` takes: `All`.
pub const DRY_RUN_ALL: &str = "All";

/// Body of `PUT .../virtualmachines/{name}/start`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartOptions {
    /// Start the VMI paused.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// `["All"]` checks the request without changing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// Body of `PUT .../virtualmachines/{name}/stop`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StopOptions {
    /// A shorter grace period for this stop, in seconds (`--force --grace-period`).
    pub grace_period: Option<i64>,
    /// `["All"]` checks the request without changing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// Body of `PUT .../virtualmachines/{name}/restart`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RestartOptions {
    /// Only 0 is accepted: a forced restart that deletes the launcher pod at once.
    pub grace_period_seconds: Option<i64>,
    /// `["All"]` checks the request without changing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// Body of `PUT .../virtualmachineinstances/{name}/pause` and `.../unpause`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PauseOptions {
    /// `["All"]` checks the request without changing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
}

/// Body of `PUT .../virtualmachines/{name}/migrate`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MigrateOptions {
    /// `["All"]` checks the request without changing anything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dry_run: Vec<String>,
    /// Node labels the target node must also have.
    pub added_node_selector: Option<std::collections::BTreeMap<String, String>>,
}

/// Whether a `dryRun` list asks for a dry run.
#[must_use]
pub fn is_dry_run(dry_run: &[String]) -> bool {
    dry_run.iter().any(|d| d == DRY_RUN_ALL)
}
