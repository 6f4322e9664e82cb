//! The DataSource status matrix, and a pass over the fake API server.

use cdi_api::data_volume::{DataVolumePhase, NamespacedName};
use cdi_api::{DataSource, DataSourceSource, DataSourceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{Observed, PointedTo, decide, reconcile};
use crate::cluster_api::fake::FakeCdiApi;

fn now() -> Time {
    Time(Timestamp::from_second(100).expect("time"))
}

fn named(namespace: &str, name: &str) -> NamespacedName {
    NamespacedName {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
    }
}

fn data_source(name: &str, source: DataSourceSource) -> DataSource {
    let mut data_source = DataSource::new(name, DataSourceSpec { source });
    data_source.metadata.namespace = Some("images".to_owned());
    data_source
}

fn of_claim(namespace: &str, name: &str) -> DataSourceSource {
    DataSourceSource {
        pvc: Some(named(namespace, name)),
        ..DataSourceSource::default()
    }
}

fn of_data_source(namespace: &str, name: &str) -> DataSourceSource {
    DataSourceSource {
        data_source: Some(named(namespace, name)),
        ..DataSourceSource::default()
    }
}

fn observed(pointed_to: PointedTo, claim_exists: bool, phase: Option<DataVolumePhase>) -> Observed {
    Observed {
        pointed_to,
        claim_exists,
        data_volume_phase: phase,
    }
}

/// (Ready, reason, message, the claim in status.source)
fn summary(data_source: &DataSource, observed: &Observed) -> (String, String, String, Option<NamespacedName>) {
    let status = decide(data_source, observed, &now());
    let ready = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "Ready")
        .expect("Ready");
    (
        ready.state.status.clone(),
        ready.state.reason.clone().unwrap_or_default(),
        ready.state.message.clone().unwrap_or_default(),
        status.source.pvc,
    )
}

#[test]
fn the_ready_matrix() {
    let own = data_source("golden", of_claim("", "disk"));
    let ready = |claim: NamespacedName| {
        (
            "True".to_owned(),
            "Ready".to_owned(),
            "DataSource is ready to be consumed".to_owned(),
            Some(claim),
        )
    };
    let not_ready = |reason: &str, message: &str| ("False".to_owned(), reason.to_owned(), message.to_owned(), None);
    let next = data_source("base", of_claim("images", "base-disk"));
    let too_deep = data_source("base", of_data_source("", "other"));
    let cases = [
        // A claim of its own: there, filled by a DataVolume, filling, gone.
        (
            own.clone(),
            observed(PointedTo::NoDataSource, true, None),
            ready(named("", "disk")),
        ),
        (
            own.clone(),
            observed(PointedTo::NoDataSource, true, Some(DataVolumePhase::Succeeded)),
            ready(named("", "disk")),
        ),
        (
            own.clone(),
            observed(PointedTo::NoDataSource, true, Some(DataVolumePhase::ImportInProgress)),
            not_ready("ImportInProgress", "Import DataVolume phase ImportInProgress"),
        ),
        (
            own.clone(),
            observed(PointedTo::NoDataSource, false, None),
            not_ready("NotFound", "PVC not found"),
        ),
        // Another DataSource: its claim, or why not.
        (
            data_source("golden", of_data_source("", "base")),
            observed(PointedTo::Found(Box::new(next)), true, None),
            ready(named("images", "base-disk")),
        ),
        (
            data_source("golden", of_data_source("", "base")),
            observed(PointedTo::Missing, false, None),
            not_ready("NotFound", "datasources.cdi.kubevirt.io \"base\" not found"),
        ),
        (
            data_source("golden", of_data_source("", "base")),
            observed(PointedTo::Found(Box::new(too_deep)), false, None),
            not_ready(
                "MaxReferenceDepthReached",
                "DataSource reference chain exceeds maximum depth of 1",
            ),
        ),
        (
            data_source("golden", of_data_source("", "golden")),
            observed(PointedTo::Missing, false, None),
            not_ready("SelfReference", "DataSource cannot self-reference"),
        ),
        (
            data_source("golden", of_data_source("other", "base")),
            observed(PointedTo::Missing, false, None),
            not_ready(
                "CrossNamespaceReference",
                "DataSource cannot reference a DataSource in another namespace",
            ),
        ),
        // Nothing, or a snapshot.
        (
            data_source("golden", DataSourceSource::default()),
            observed(PointedTo::NoDataSource, false, None),
            not_ready("NoSource", "No source PVC set"),
        ),
        (
            data_source(
                "golden",
                DataSourceSource {
                    snapshot: Some(named("images", "snap")),
                    ..DataSourceSource::default()
                },
            ),
            observed(PointedTo::NoDataSource, false, None),
            not_ready(
                "SnapshotNotReady",
                "Snapshot phase is not ready: this CDI does not clone snapshots",
            ),
        ),
    ];
    for (data_source, observed, expected) in cases {
        assert_eq!(
            summary(&data_source, &observed),
            expected,
            "{data_source:?} {observed:?}"
        );
    }
}

#[tokio::test]
async fn a_pass_writes_the_status_once_and_follows_the_claim() {
    let api = FakeCdiApi::default();
    api.state().data_sources.insert(
        "images/golden".to_owned(),
        data_source("golden", of_claim("images", "disk")),
    );
    assert!(!reconcile(&api, "images", "golden", &now()).await.expect("a pass"));
    assert_eq!(api.take_writes(), ["status DataSource images/golden"]);
    reconcile(&api, "images", "golden", &now()).await.expect("a pass");
    assert!(api.take_writes().is_empty(), "nothing changed");

    api.state().claims.insert(
        "images/disk".to_owned(),
        serde_json::from_value(json!({"metadata": {"name": "disk", "namespace": "images"}})).expect("claim"),
    );
    assert!(reconcile(&api, "images", "golden", &now()).await.expect("a pass"));
    let status = api.state().data_sources["images/golden"]
        .status
        .clone()
        .expect("status");
    assert_eq!(status.source.pvc, Some(named("images", "disk")));
}
