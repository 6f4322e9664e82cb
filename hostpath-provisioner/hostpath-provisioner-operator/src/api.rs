//! `HostPathProvisioner` (`hostpathprovisioner.kubevirt.io/v1beta1`, cluster-scoped), as
//! upstream's: its storage pools (a name and a path on every node), where the CSI pods run
//! (`workload`), and the install's conditions and versions.
//!
//! Upstream's legacy `pathConfig` (its non-CSI provisioner), pools on a `pvcTemplate`, snapshots
//! (`snapshotProvider`, the `Snapshotting` gate) and `overlayClassName` are in the schema and
//! refused by the API server (rules in [`crate::crd`]), never ignored.

use k8s_openapi::api::core::v1::PersistentVolumeClaimStatus;
use kube::CustomResource;
use operator_kit::conditions::OperatorCondition;
use operator_kit::placement::NodePlacement;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `spec` of a `HostPathProvisioner`.
#[serde_with::skip_serializing_none]
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "hostpathprovisioner.kubevirt.io",
    version = "v1beta1",
    kind = "HostPathProvisioner",
    plural = "hostpathprovisioners",
    singular = "hostpathprovisioner",
    status = "HostPathProvisionerStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct HostPathProvisionerSpec {
    /// The pull policy of the CSI pods' images.
    pub image_pull_policy: Option<String>,
    /// Upstream's legacy provisioner (refused).
    pub path_config: Option<PathConfig>,
    /// Where the CSI pods run.
    #[serde(default)]
    pub workload: NodePlacement,
    /// Upstream's feature gates (`Snapshotting` is refused).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<String>,
    /// The storage pools: a directory on every node each.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_pools: Vec<StoragePool>,
}

/// Upstream's legacy `pathConfig`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PathConfig {
    /// The directory on each node.
    pub path: Option<String>,
    /// Whether volume directories are prefixed with their claim's name.
    pub use_naming_prefix: Option<bool>,
}

/// A storage pool.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoragePool {
    /// Its name, which StorageClasses give as the `storagePool` parameter.
    #[schemars(length(min = 1, max = 50))]
    pub name: String,
    /// The directory on each node; volumes are made under its `csi` directory.
    #[schemars(length(min = 1, max = 255))]
    pub path: String,
    /// Upstream's pool on a claim per node (refused).
    #[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
    pub pvc_template: Option<serde_json::Map<String, serde_json::Value>>,
    /// Upstream's snapshot provider (refused).
    pub snapshot_provider: Option<String>,
    /// Upstream's overlay class (refused).
    pub overlay_class_name: Option<String>,
}

/// `status` of a `HostPathProvisioner`.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPathProvisionerStatus {
    /// `Available`, `Progressing` and `Degraded`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<OperatorCondition>,
    /// The operator's version.
    pub operator_version: Option<String>,
    /// The version being installed.
    pub target_version: Option<String>,
    /// The version installed (set once the install has served).
    pub observed_version: Option<String>,
    /// Each pool's state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_pool_statuses: Vec<StoragePoolStatus>,
}

/// A pool's state.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoragePoolStatus {
    /// The pool's name.
    pub name: String,
    /// `Preparing`, `Mounting` or `Ready` (a path pool is always `Ready`).
    pub phase: String,
    /// Pool deployments wanted (pvcTemplate pools only).
    pub desired_ready: Option<i32>,
    /// Pool deployments ready (pvcTemplate pools only).
    pub current_ready: Option<i32>,
    /// The pool's claims (pvcTemplate pools only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub claim_statuses: Vec<ClaimStatus>,
}

/// A pool claim's state.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimStatus {
    /// The claim's name.
    pub name: String,
    /// Its status.
    pub status: PersistentVolumeClaimStatus,
}
