//! The status table of [`super`], row by row.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::render::tests::ssp;

fn now() -> Time {
    Time(Timestamp::from_second(1_796_000_000).expect("a time"))
}

fn deployment(replicas: i32, available: i32) -> Box<Deployment> {
    Box::new(
        serde_json::from_value(json!({
            "metadata": { "name": VALIDATOR, "generation": 1 },
            "spec": { "replicas": replicas, "selector": {}, "template": {} },
            "status": { "observedGeneration": 1, "replicas": replicas, "updatedReplicas": available, "readyReplicas": available, "availableReplicas": available },
        }))
        .expect("a Deployment"),
    )
}

/// (phase, [(status, message) of Available, Progressing, Degraded]).
fn summary(status: &SSPStatus) -> (String, Vec<(String, String)>) {
    for c in &status.conditions {
        assert_eq!(
            c.reason.as_deref(),
            Some(c.condition_type.as_str()),
            "the reason is the type"
        );
    }
    (
        status.phase.clone().unwrap_or_default(),
        status
            .conditions
            .iter()
            .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
            .collect(),
    )
}

fn row(phase: &str, conditions: [(&str, &str); 3]) -> (String, Vec<(String, String)>) {
    (
        phase.to_owned(),
        conditions
            .iter()
            .map(|(s, m)| ((*s).to_owned(), (*m).to_owned()))
            .collect(),
    )
}

#[test]
fn each_pass_gives_upstreams_phase_and_conditions() {
    let not_all = |running: i32| {
        format!(
            "Deployment kubevirt/virt-template-validator: Not all pods for deployment kubevirt/virt-template-validator are running. Expected: 2, running: {running}"
        )
    };
    let none = "Deployment kubevirt/virt-template-validator: No pods for deployment kubevirt/virt-template-validator are running. Expected: 2";
    let cases = [
        (
            Pass::Applied(Some(deployment(2, 2))),
            row(
                "Deployed",
                [
                    ("True", "All SSP resources are available"),
                    ("False", "No SSP resources are progressing"),
                    ("False", "No SSP resources are degraded"),
                ],
            ),
        ),
        (
            Pass::Applied(Some(deployment(2, 1))),
            row(
                "Deploying",
                [
                    ("True", "All SSP resources are available"),
                    ("True", &not_all(1)),
                    ("True", &not_all(1)),
                ],
            ),
        ),
        (
            Pass::Applied(Some(deployment(2, 0))),
            row(
                "Deploying",
                [("False", none), ("True", &not_all(0)), ("True", &not_all(0))],
            ),
        ),
        (
            Pass::Applied(Some(deployment(0, 0))),
            row(
                "Deployed",
                [
                    ("True", "All SSP resources are available"),
                    ("False", "No SSP resources are progressing"),
                    ("False", "No SSP resources are degraded"),
                ],
            ),
        ),
        (
            Pass::Failed("boom".to_owned()),
            row(
                "Deploying",
                [
                    ("False", "Error: boom"),
                    ("True", "Error: boom"),
                    ("True", "Error: boom"),
                ],
            ),
        ),
        (
            Pass::Deleting,
            row(
                "Deleting",
                [
                    ("False", "Deleting SSP resources"),
                    ("True", "Deleting SSP resources"),
                    ("True", "Deleting SSP resources"),
                ],
            ),
        ),
    ];
    for (pass, expected) in cases {
        let status = decide(&ssp(None), &pass, "1.2.3", &now());
        assert_eq!(summary(&status), expected, "{pass:?}");
        assert_eq!(status.operator_version.as_deref(), Some("1.2.3"));
        assert_eq!(status.target_version.as_deref(), Some("1.2.3"));
        assert_eq!(status.paused, Some(false));
        assert_eq!(status.observed_generation, Some(3));
        let deployed = status.phase.as_deref() == Some("Deployed");
        assert_eq!(status.observed_version.is_some(), deployed, "{pass:?}");
    }
}

#[test]
fn a_paused_ssp_keeps_its_status_and_says_it_is_paused() {
    let mut cr = ssp(None);
    cr.status = Some(decide(&cr, &Pass::Applied(Some(deployment(2, 2))), "1.2.3", &now()));
    let paused = decide(&cr, &Pass::Paused, "1.2.4", &now());
    let before = cr.status.clone().unwrap_or_default();
    assert_eq!(
        paused,
        SSPStatus {
            paused: Some(true),
            ..before
        }
    );
}

#[test]
fn unchanged_conditions_keep_their_times() {
    let mut cr = ssp(None);
    let first = decide(&cr, &Pass::Deleting, "1.2.3", &now());
    cr.status = Some(first.clone());
    let later = Time(Timestamp::from_second(1_796_000_100).expect("a time"));
    let again = decide(&cr, &Pass::Deleting, "1.2.3", &later);
    assert_eq!(again.conditions, first.conditions);
    let failed = decide(&cr, &Pass::Failed("boom".to_owned()), "1.2.3", &later);
    let stamped: Vec<_> = failed
        .conditions
        .iter()
        .map(|c| c.last_heartbeat_time.clone())
        .collect();
    assert_eq!(stamped, vec![Some(later.clone()); 3], "a changed message is stamped");
    let moved: Vec<_> = failed
        .conditions
        .iter()
        .map(|c| c.last_transition_time.clone())
        .collect();
    assert_eq!(moved, vec![Some(now()); 3], "the statuses did not change");
}
