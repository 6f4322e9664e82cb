use k8s_openapi::jiff::Timestamp;
use kubevirt_api::v1::KubeVirtSpec;
use pretty_assertions::assert_eq;

use super::*;
use crate::render::tests::{kubevirt, settings};
use crate::render::{self, Target};

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(1_796_000_000 + second).expect("a time"))
}

/// (type, status, reason) of a condition.
type Row = (String, String, String);

/// (type, status, reason) of every condition, in order.
fn summary(status: &KubeVirtStatus) -> Vec<Row> {
    status
        .conditions
        .iter()
        .map(|c| {
            (
                c.condition_type.clone(),
                c.status.clone(),
                c.reason.clone().unwrap_or_default(),
            )
        })
        .collect()
}

fn rows(rows: &[(&str, &str, &str)]) -> Vec<Row> {
    rows.iter()
        .map(|(t, s, r)| ((*t).to_owned(), (*s).to_owned(), (*r).to_owned()))
        .collect()
}

fn applied(updating: bool, ready: bool) -> Pass {
    Pass::Applied {
        updating,
        ready,
        generations: Vec::new(),
    }
}

fn decided(cr: &KubeVirt, pass: &Pass, second: i64) -> KubeVirtStatus {
    let settings = settings();
    let target = Target::of(cr, &settings);
    let rendered = render::render(cr, &settings).expect("renders");
    let aim = Aim {
        target: &target,
        rendered: &rendered,
        operator_version: "1.0.0",
    };
    decide(cr, pass, Some(aim), &at(second))
}

#[test]
fn each_pass_gives_upstreams_phase_and_conditions() {
    let cr = kubevirt(KubeVirtSpec::default());
    let cases: [(Pass, Option<&str>, Vec<Row>); 7] = [
        (
            applied(false, false),
            Some("Deploying"),
            rows(&[
                ("Available", "False", "DeploymentInProgress"),
                ("Progressing", "True", "DeploymentInProgress"),
                ("Degraded", "False", "DeploymentInProgress"),
                ("Created", "True", "AllResourcesCreated"),
            ]),
        ),
        (
            applied(true, false),
            Some("Deploying"),
            rows(&[
                ("Available", "True", "UpdateInProgress"),
                ("Progressing", "True", "UpdateInProgress"),
                ("Degraded", "True", "UpdateInProgress"),
            ]),
        ),
        (
            applied(false, true),
            Some("Deployed"),
            rows(&[
                ("Available", "True", "AllComponentsReady"),
                ("Progressing", "False", "AllComponentsReady"),
                ("Degraded", "False", "AllComponentsReady"),
                ("Created", "True", "AllResourcesCreated"),
            ]),
        ),
        (
            Pass::Failed("boom".to_owned()),
            None,
            rows(&[
                ("Available", "False", "DeploymentFailed"),
                ("Progressing", "False", "DeploymentFailed"),
                ("Degraded", "True", "DeploymentFailed"),
                ("Synchronized", "False", "DeploymentFailed"),
            ]),
        ),
        (
            Pass::Existing,
            None,
            rows(&[("Synchronized", "False", "ExistingDeployment")]),
        ),
        (
            Pass::Deleting,
            Some("Deleting"),
            rows(&[
                ("Available", "False", "DeletionInProgress"),
                ("Progressing", "False", "DeletionInProgress"),
                ("Degraded", "True", "DeletionInProgress"),
            ]),
        ),
        (Pass::Deleted, Some("Deleted"), Vec::new()),
    ];
    for (pass, phase, conditions) in cases {
        let status = decided(&cr, &pass, 0);
        assert_eq!(status.phase.as_deref(), phase, "{pass:?}");
        assert_eq!(summary(&status), conditions, "{pass:?}");
    }
}

#[test]
fn messages_are_upstreams() {
    let cr = kubevirt(KubeVirtSpec::default());
    let message = |status: &KubeVirtStatus, t: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.condition_type == t)
            .and_then(|c| c.message.clone())
            .unwrap_or_default()
    };
    let deploying = decided(&cr, &applied(false, false), 0);
    assert_eq!(
        message(&deploying, AVAILABLE),
        "Deploying version latest with registry localhost/kubevirt-rs"
    );
    assert_eq!(message(&deploying, CREATED), "All resources were created.");
    let deployed = decided(&cr, &applied(false, true), 0);
    assert_eq!(message(&deployed, AVAILABLE), "All components are ready.");
    let mut updated = kubevirt(KubeVirtSpec {
        image_tag: Some("v2".to_owned()),
        ..KubeVirtSpec::default()
    });
    updated.status = Some(deployed);
    let updating = decided(&updated, &applied(true, false), 0);
    assert_eq!(
        message(&updating, DEGRADED),
        "Transitioning from previous version latest with registry localhost/kubevirt-rs to target version v2 using registry localhost/kubevirt-rs"
    );
    let failed = decided(&cr, &Pass::Failed("no uid".to_owned()), 0);
    assert_eq!(
        message(&failed, DEGRADED),
        "An error occurred during deployment: no uid"
    );
    assert_eq!(
        message(&decided(&cr, &Pass::Existing, 0), SYNCHRONIZED),
        "There is an active KubeVirt deployment"
    );
    assert_eq!(
        message(&decided(&cr, &Pass::Deleting, 0), AVAILABLE),
        "Deletion was triggered"
    );
}

#[test]
fn targets_are_set_on_every_pass_and_observed_ones_once_ready() {
    let mut cr = kubevirt(KubeVirtSpec::default());
    let deploying = decided(&cr, &applied(false, false), 0);
    assert_eq!(deploying.target_kube_virt_version.as_deref(), Some("latest"));
    assert_eq!(
        deploying.target_kube_virt_registry.as_deref(),
        Some("localhost/kubevirt-rs")
    );
    assert_eq!(deploying.operator_version.as_deref(), Some("1.0.0"));
    assert!(deploying.target_deployment_id.is_some() && deploying.target_deployment_config.is_some());
    assert_eq!(deploying.observed_kube_virt_version, None);
    assert_eq!(deploying.observed_deployment_id, None);
    assert_eq!(deploying.observed_generation, None);
    cr.status = Some(deploying);
    let generations = vec![GenerationStatus {
        group: "apps".to_owned(),
        resource: "daemonsets".to_owned(),
        namespace: Some("kubevirt".to_owned()),
        name: "virt-handler".to_owned(),
        last_generation: 4,
        hash: None,
    }];
    let ready = Pass::Applied {
        updating: false,
        ready: true,
        generations: generations.clone(),
    };
    let deployed = decided(&cr, &ready, 1);
    assert_eq!(deployed.observed_kube_virt_version.as_deref(), Some("latest"));
    assert_eq!(
        deployed.observed_kube_virt_registry.as_deref(),
        Some("localhost/kubevirt-rs")
    );
    assert_eq!(deployed.observed_deployment_id, deployed.target_deployment_id);
    assert_eq!(deployed.observed_deployment_config, deployed.target_deployment_config);
    assert_eq!(deployed.observed_generation, Some(1));
    assert_eq!(deployed.generations, generations);
}

#[test]
fn a_condition_keeps_its_times_until_it_changes() {
    let mut cr = kubevirt(KubeVirtSpec::default());
    let first = decided(&cr, &applied(false, true), 0);
    cr.status = Some(first.clone());
    let again = decided(&cr, &applied(false, true), 30);
    assert_eq!(again, first, "a pass that changes nothing writes nothing new");
    cr.status = Some(again);
    let failed = decided(&cr, &Pass::Failed("x".to_owned()), 60);
    let available = failed
        .conditions
        .iter()
        .find(|c| c.condition_type == AVAILABLE)
        .expect("Available");
    assert_eq!(available.last_transition_time, Some(at(60)));
    let created = failed
        .conditions
        .iter()
        .find(|c| c.condition_type == CREATED)
        .expect("Created stays");
    assert_eq!(created.last_transition_time, Some(at(0)));
    assert_eq!(failed.phase.as_deref(), Some("Deployed"), "a failure keeps the phase");
}
