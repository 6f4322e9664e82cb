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

/// Why a DataVolume's `sourceRef` gives no source to clone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SourceRefError {
    /// It names another kind than `DataSource`.
    #[error("DataVolume sourceRef kind {0} not supported")]
    Kind(String),
    /// The DataSource is not there.
    #[error("DataSource {namespace}/{name} not found")]
    NotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The DataSource points to nothing yet (upstream's "DataSource may not be ready yet").
    #[error("DataSource {namespace}/{name} points to nothing yet: it may not be ready")]
    Empty {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
}

/// Where a `sourceRef` looks: the DataSource's namespace (the DataVolume's when unset) and name.
///
/// # Errors
/// [`SourceRefError::Kind`] for a kind other than `DataSource`.
pub fn source_ref_target(
    reference: &crate::data_volume::DataVolumeSourceRef,
    data_volume_namespace: &str,
) -> Result<(String, String), SourceRefError> {
    if reference.kind != crate::data_volume::SOURCE_REF_DATA_SOURCE {
        return Err(SourceRefError::Kind(reference.kind.clone()));
    }
    let namespace = reference
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| data_volume_namespace.to_owned());
    Ok((namespace, reference.name.clone()))
}

/// The source a DataSource (`namespace`/`name`, as found) gives a DataVolume, as upstream's
/// `GetResolvedCloneSource`: its claim or snapshot, or, when it points to another DataSource,
/// what its status resolved that to; a claim or snapshot without a namespace is in the
/// DataSource's.
///
/// # Errors
/// [`SourceRefError::NotFound`] when `found` is `None`, [`SourceRefError::Empty`] when it points
/// to nothing (yet).
pub fn resolved_source(
    namespace: &str,
    name: &str,
    found: Option<&DataSource>,
) -> Result<crate::data_volume::DataVolumeSource, SourceRefError> {
    let Some(data_source) = found else {
        return Err(SourceRefError::NotFound {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        });
    };
    let source = if data_source.spec.source.data_source.is_some() {
        data_source.status.clone().map(|s| s.source).unwrap_or_default()
    } else {
        data_source.spec.source.clone()
    };
    let in_namespace = |n: NamespacedName| NamespacedName {
        namespace: if n.namespace.is_empty() {
            namespace.to_owned()
        } else {
            n.namespace
        },
        name: n.name,
    };
    match (source.pvc, source.snapshot) {
        (Some(pvc), _) => Ok(crate::data_volume::DataVolumeSource {
            pvc: Some(in_namespace(pvc)),
            ..crate::data_volume::DataVolumeSource::default()
        }),
        (None, Some(snapshot)) => Ok(crate::data_volume::DataVolumeSource {
            snapshot: Some(in_namespace(snapshot)),
            ..crate::data_volume::DataVolumeSource::default()
        }),
        (None, None) => Err(SourceRefError::Empty {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data_volume::DataVolumeSourceRef;

    fn pointing_to(source: DataSourceSource) -> DataSource {
        DataSource::new("golden", DataSourceSpec { source })
    }

    fn claim(namespace: &str, name: &str) -> NamespacedName {
        NamespacedName {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    #[test]
    fn a_source_ref_looks_in_its_namespace_or_the_data_volumes() {
        let reference = |kind: &str, namespace: Option<&str>| DataVolumeSourceRef {
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: "golden".to_owned(),
        };
        assert_eq!(
            source_ref_target(&reference("DataSource", Some("images")), "vms"),
            Ok(("images".to_owned(), "golden".to_owned()))
        );
        assert_eq!(
            source_ref_target(&reference("DataSource", None), "vms"),
            Ok(("vms".to_owned(), "golden".to_owned()))
        );
        assert_eq!(
            source_ref_target(&reference("DataSource", Some("")), "vms"),
            Ok(("vms".to_owned(), "golden".to_owned()))
        );
        assert_eq!(
            source_ref_target(&reference("PersistentVolumeClaim", None), "vms"),
            Err(SourceRefError::Kind("PersistentVolumeClaim".to_owned()))
        );
    }

    #[test]
    fn a_data_source_resolves_to_its_claim_snapshot_or_its_status() {
        let with_claim = pointing_to(DataSourceSource {
            pvc: Some(claim("", "disk")),
            ..DataSourceSource::default()
        });
        let resolved = resolved_source("images", "golden", Some(&with_claim)).expect("a claim");
        assert_eq!(
            resolved.pvc,
            Some(claim("images", "disk")),
            "the DataSource's namespace"
        );

        let with_snapshot = pointing_to(DataSourceSource {
            snapshot: Some(claim("snaps", "s1")),
            ..DataSourceSource::default()
        });
        let resolved = resolved_source("images", "golden", Some(&with_snapshot)).expect("a snapshot");
        assert_eq!(resolved.snapshot, Some(claim("snaps", "s1")));

        let mut chained = pointing_to(DataSourceSource {
            data_source: Some(claim("", "other")),
            ..DataSourceSource::default()
        });
        assert_eq!(
            resolved_source("images", "golden", Some(&chained)),
            Err(SourceRefError::Empty {
                namespace: "images".to_owned(),
                name: "golden".to_owned()
            }),
            "not resolved by its controller yet"
        );
        chained.status = Some(DataSourceStatus {
            source: DataSourceSource {
                pvc: Some(claim("base", "disk")),
                ..DataSourceSource::default()
            },
            conditions: Vec::new(),
        });
        let resolved = resolved_source("images", "golden", Some(&chained)).expect("its status");
        assert_eq!(resolved.pvc, Some(claim("base", "disk")));

        assert_eq!(
            resolved_source("images", "gone", None),
            Err(SourceRefError::NotFound {
                namespace: "images".to_owned(),
                name: "gone".to_owned()
            })
        );
    }
}
