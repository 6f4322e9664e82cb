//! A DataSource's status, as upstream's DataSource controller keeps it: what it resolves to
//! (`status.source`: its own claim or snapshot, or, when it points to another DataSource in its
//! namespace, that one's) and its `Ready` condition. Decided purely ([`decide`]) from what a pass
//! reads ([`observe`]); written when it changed ([`reconcile`]).
//!
//! `Ready` is True ("DataSource is ready to be consumed", `Ready`) when the claim is there and,
//! if a DataVolume of its name fills it, that DataVolume has Succeeded; otherwise False with
//! upstream's reasons: `NotFound` ("PVC not found", or the DataSource pointed to is missing),
//! the DataVolume's phase ("Import DataVolume phase …"), `NoSource` ("No source PVC set"),
//! `SelfReference`, `CrossNamespaceReference`, `MaxReferenceDepthReached`. A snapshot is
//! `SnapshotNotReady`: this CDI clones no snapshots. `status.source` is emptied while not Ready.

use cdi_api::data_source::DataSourceCondition;
use cdi_api::data_volume::{DataVolumePhase, NamespacedName};
use cdi_api::{DataSource, DataSourceSource, DataSourceStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::cluster_api::{ApiError, CdiApi};

/// The condition type.
const READY: &str = "Ready";

/// The DataSource a DataSource points to, as read.
#[derive(Clone, Debug, PartialEq)]
pub enum PointedTo {
    /// It points to a claim or snapshot, or to nothing.
    NoDataSource,
    /// It points to a DataSource that is not there.
    Missing,
    /// It points to this DataSource.
    Found(Box<DataSource>),
}

/// What a pass read for a DataSource.
#[derive(Clone, Debug, PartialEq)]
pub struct Observed {
    /// The DataSource it points to, if it points to one.
    pub pointed_to: PointedTo,
    /// Whether the claim the resolved source names is there.
    pub claim_exists: bool,
    /// The phase of the DataVolume of the claim's name, when there is one.
    pub data_volume_phase: Option<DataVolumePhase>,
}

/// Where a DataSource points: to another DataSource (its namespace, the DataSource's when unset),
/// else `None`.
#[must_use]
pub fn pointed_to(data_source: &DataSource) -> Option<NamespacedName> {
    let reference = data_source.spec.source.data_source.as_ref()?;
    let own = data_source.metadata.namespace.clone().unwrap_or_default();
    Some(NamespacedName {
        namespace: if reference.namespace.is_empty() {
            own
        } else {
            reference.namespace.clone()
        },
        name: reference.name.clone(),
    })
}

/// The source a DataSource resolves to, or why it does not (reason, message).
fn resolve(data_source: &DataSource, observed: &Observed) -> Result<DataSourceSource, (&'static str, String)> {
    let Some(target) = pointed_to(data_source) else {
        return Ok(data_source.spec.source.clone());
    };
    let own = data_source.metadata.namespace.as_deref().unwrap_or_default();
    if target.namespace != own {
        return Err((
            "CrossNamespaceReference",
            "DataSource cannot reference a DataSource in another namespace".to_owned(),
        ));
    }
    if Some(target.name.as_str()) == data_source.metadata.name.as_deref() {
        return Err(("SelfReference", "DataSource cannot self-reference".to_owned()));
    }
    match &observed.pointed_to {
        PointedTo::NoDataSource | PointedTo::Missing => Err((
            "NotFound",
            format!("datasources.cdi.kubevirt.io \"{}\" not found", target.name),
        )),
        PointedTo::Found(next) if next.spec.source.data_source.is_some() => Err((
            "MaxReferenceDepthReached",
            "DataSource reference chain exceeds maximum depth of 1".to_owned(),
        )),
        PointedTo::Found(next) => Ok(next.spec.source.clone()),
    }
}

/// The claim the resolved source names, in the DataSource's namespace when it gives none.
#[must_use]
pub fn claim_of(data_source: &DataSource, observed: &Observed) -> Option<NamespacedName> {
    let source = resolve(data_source, observed).ok()?;
    let claim = source.pvc?;
    let own = data_source.metadata.namespace.clone().unwrap_or_default();
    Some(NamespacedName {
        namespace: if claim.namespace.is_empty() {
            own
        } else {
            claim.namespace
        },
        name: claim.name,
    })
}

/// The DataSource's new status.
#[must_use]
pub fn decide(data_source: &DataSource, observed: &Observed, now: &Time) -> DataSourceStatus {
    let mut status = data_source.status.clone().unwrap_or_default();
    let (ready, reason, message, source) = match resolve(data_source, observed) {
        Err((reason, message)) => (false, reason, message, DataSourceSource::default()),
        Ok(source) if source.pvc.is_some() => match (observed.claim_exists, observed.data_volume_phase) {
            (_, Some(DataVolumePhase::Succeeded)) | (true, None) => {
                (true, READY, "DataSource is ready to be consumed".to_owned(), source)
            }
            (_, Some(phase)) => (
                false,
                phase.as_str(),
                format!("Import DataVolume phase {}", phase.as_str()),
                source,
            ),
            (false, None) => (false, "NotFound", "PVC not found".to_owned(), source),
        },
        Ok(source) if source.snapshot.is_some() => (
            false,
            "SnapshotNotReady",
            "Snapshot phase is not ready: this CDI does not clone snapshots".to_owned(),
            source,
        ),
        Ok(source) => (false, "NoSource", "No source PVC set".to_owned(), source),
    };
    status.source = if ready { source } else { DataSourceSource::default() };
    let index = status
        .conditions
        .iter()
        .position(|c| c.condition_type == READY)
        .unwrap_or_else(|| {
            status.conditions.push(DataSourceCondition {
                condition_type: READY.to_owned(),
                state: cdi_api::data_volume::ConditionState::default(),
            });
            status.conditions.len() - 1
        });
    status.conditions[index]
        .state
        .update(if ready { "True" } else { "False" }, &message, reason, now);
    status
}

/// Reads what [`decide`] needs.
///
/// # Errors
/// [`ApiError`] from the reads.
pub async fn observe<A: CdiApi>(api: &A, data_source: &DataSource) -> Result<Observed, ApiError> {
    let mut observed = Observed {
        pointed_to: PointedTo::NoDataSource,
        claim_exists: false,
        data_volume_phase: None,
    };
    if let Some(target) = pointed_to(data_source) {
        observed.pointed_to = match api.data_source(&target.namespace, &target.name).await? {
            Some(found) => PointedTo::Found(Box::new(found)),
            None => PointedTo::Missing,
        };
    }
    if let Some(claim) = claim_of(data_source, &observed) {
        observed.claim_exists = api.claim(&claim.namespace, &claim.name).await?.is_some();
        observed.data_volume_phase = api
            .data_volume(&claim.namespace, &claim.name)
            .await?
            .map(|dv| dv.status.unwrap_or_default().phase);
    }
    Ok(observed)
}

/// One pass over the DataSource `namespace/name`; gives whether it is Ready.
///
/// # Errors
/// [`ApiError`] from the reads or the write.
pub async fn reconcile<A: CdiApi>(api: &A, namespace: &str, name: &str, now: &Time) -> Result<bool, ApiError> {
    let Some(data_source) = api.data_source(namespace, name).await? else {
        return Ok(false);
    };
    let observed = observe(api, &data_source).await?;
    let status = decide(&data_source, &observed, now);
    let ready = status.source.pvc.is_some();
    if data_source.status.as_ref() != Some(&status) {
        let mut updated = data_source;
        updated.status = Some(status);
        api.replace_data_source_status(&updated).await?;
    }
    Ok(ready)
}

#[cfg(test)]
mod tests;
