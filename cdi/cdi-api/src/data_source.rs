//! `DataSource` (`das`): a named pointer to the data a DataVolume clones, as upstream's: a claim,
//! a volume snapshot, or another DataSource (a chain of at most one more).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::data_volume::{ConditionState, NamespacedName};

/// `spec` of a `DataSource`.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "cdi.kubevirt.io",
    version = "v1beta1",
    kind = "DataSource",
    plural = "datasources",
    singular = "datasource",
    shortname = "das",
    category = "all",
    namespaced,
    status = "DataSourceStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceSpec {
    /// What the DataSource points to.
    pub source: DataSourceSource,
}

/// `spec.source` (and `status.source`): exactly one of a claim, a snapshot or a DataSource.
#[serde_with::skip_serializing_none]
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceSource {
    /// A PersistentVolumeClaim.
    pub pvc: Option<NamespacedName>,
    /// A VolumeSnapshot.
    pub snapshot: Option<NamespacedName>,
    /// Another DataSource (which may not point to a DataSource itself).
    pub data_source: Option<NamespacedName>,
}

/// `status` of a `DataSource`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceStatus {
    /// What the DataSource resolves to now.
    #[serde(default)]
    pub source: DataSourceSource,
    /// `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<DataSourceCondition>,
}

/// One condition of a `DataSource`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DataSourceCondition {
    /// `Ready`.
    #[serde(rename = "type")]
    pub condition_type: String,
    /// Status, reason and times.
    #[serde(flatten)]
    pub state: ConditionState,
}
