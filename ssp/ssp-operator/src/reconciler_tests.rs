use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use operator_kit::objects::fake::FakeObjects;
use operator_kit::objects::{Desired, parse};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::api::SSPStatus;
use crate::render::tests::{settings, ssp};

const NOW: i64 = 1_796_000_000;

fn now() -> Time {
    Time(Timestamp::from_second(NOW).expect("a time"))
}

fn put(fake: &FakeObjects, cr: &SSP) {
    fake.put(&Desired::from_typed(cr).expect("an SSP"));
}

/// The SSP as the fake holds it now.
fn stored(fake: &FakeObjects, name: &str) -> SSP {
    let key = format!("SSP kubevirt/{name}");
    let object = fake.state().objects.get(&key).cloned().expect("the SSP is there");
    parse(&object, &key).expect("an SSP")
}

fn status(fake: &FakeObjects, name: &str) -> SSPStatus {
    stored(fake, name).status.unwrap_or_default()
}

fn writes(fake: &FakeObjects) -> Vec<String> {
    std::mem::take(&mut fake.state().writes)
}

fn ready_deployment(fake: &FakeObjects) {
    let key = "Deployment kubevirt/virt-template-validator";
    let mut state = fake.state();
    let object = state.objects.get_mut(key).expect("the Deployment was applied");
    object.metadata.generation = Some(1);
    object.data["status"] = json!({ "observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1 });
}

#[tokio::test]
async fn an_ssp_is_finalized_certified_applied_and_deployed_once_its_pods_run() {
    let fake = FakeObjects::default();
    let cr = ssp(None);
    put(&fake, &cr);
    let next = reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert_eq!(next, Next::LookAgain, "the validator does not run yet");
    assert_eq!(
        writes(&fake),
        [
            "finalize ssp.kubevirt.io/finalizer SSP kubevirt/ssp",
            "apply Secret kubevirt/virt-template-validator-ca",
            "apply Secret kubevirt/virt-template-validator-certs",
            "apply ConfigMap kubevirt/virt-template-validator-ca-bundle",
            "apply ClusterRole template:view",
            "apply ServiceAccount kubevirt/template-validator",
            "apply ClusterRoleBinding template-validator",
            "apply Service kubevirt/virt-template-validator",
            "apply Service kubevirt/template-validator-metrics",
            "apply Deployment kubevirt/virt-template-validator",
            "apply ValidatingWebhookConfiguration virt-template-validator",
            "status SSP kubevirt/ssp",
        ]
    );
    let first = status(&fake, "ssp");
    assert_eq!(first.phase.as_deref(), Some("Deploying"));
    assert_eq!(first.observed_generation, Some(3));
    let available = &first.conditions[0];
    assert_eq!(
        (available.status.as_str(), available.message.as_deref()),
        (
            "False",
            Some(
                "Deployment kubevirt/virt-template-validator: No pods for deployment kubevirt/virt-template-validator are running. Expected: 1"
            )
        )
    );

    ready_deployment(&fake);
    let cr = stored(&fake, "ssp");
    let next = reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert_eq!(
        next,
        Next::RestUntil(NOW + 12 * 3600),
        "the serving certificate is due in 12 hours"
    );
    let deployed = status(&fake, "ssp");
    assert_eq!(deployed.phase.as_deref(), Some("Deployed"));
    assert_eq!(deployed.observed_version.as_deref(), Some("1.2.3"));
    assert!(conditions::serves(&deployed.conditions));
    let written = writes(&fake);
    assert!(
        !written.iter().any(|w| w.starts_with("finalize")),
        "the finalizer is on already: {written:?}"
    );

    // Nothing changed: the status is not written again.
    let cr = stored(&fake, "ssp");
    reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert!(!writes(&fake).iter().any(|w| w.starts_with("status")));
}

#[tokio::test]
async fn a_second_ssp_gets_an_error_and_no_objects() {
    let fake = FakeObjects::default();
    let mut first = ssp(None);
    first.metadata.creation_timestamp = Some(Time(Timestamp::from_second(NOW - 60).expect("a time")));
    put(&fake, &first);
    let mut second = ssp(None);
    second.metadata.name = Some("second".to_owned());
    second.metadata.uid = Some("uid-2".to_owned());
    second.metadata.creation_timestamp = Some(now());
    put(&fake, &second);
    let next = reconcile(&fake, &second, &settings(), &now()).await.expect("a pass");
    assert_eq!(next, Next::LookAgain, "it takes over when the first goes");
    assert_eq!(
        writes(&fake),
        [
            "finalize ssp.kubevirt.io/finalizer SSP kubevirt/second",
            "status SSP kubevirt/second",
        ]
    );
    let status = status(&fake, "second");
    assert_eq!(status.phase.as_deref(), Some("Deploying"));
    let degraded = &status.conditions[2];
    assert_eq!(
        (
            degraded.condition_type.as_str(),
            degraded.status.as_str(),
            degraded.reason.as_deref(),
            degraded.message.as_deref()
        ),
        (
            "Degraded",
            "True",
            Some("Degraded"),
            Some("Error: there should be a single SSP: kubevirt/ssp is the one in use")
        )
    );
}

#[tokio::test]
async fn a_refused_apply_is_the_ssps_error() {
    let fake = FakeObjects::default();
    let cr = ssp(None);
    put(&fake, &cr);
    fake.state().refuse_apply = Some((
        "Deployment kubevirt/virt-template-validator".to_owned(),
        "quota exceeded".to_owned(),
    ));
    let next = reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert_eq!(next, Next::LookAgain);
    let status = status(&fake, "ssp");
    assert_eq!(
        status.conditions[0].message.as_deref(),
        Some("Error: applying Deployment kubevirt/virt-template-validator failed: quota exceeded")
    );
}

#[tokio::test]
async fn a_paused_ssp_says_so_and_is_left_alone() {
    let fake = FakeObjects::default();
    let mut cr = ssp(None);
    cr.metadata.annotations = Some([(crate::api::PAUSED_ANNOTATION.to_owned(), "true".to_owned())].into());
    put(&fake, &cr);
    assert_eq!(
        reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass"),
        Next::Rest
    );
    assert_eq!(writes(&fake), ["status SSP kubevirt/ssp"]);
    assert_eq!(status(&fake, "ssp").paused, Some(true));
}

#[tokio::test]
async fn deleting_an_ssp_removes_its_cluster_scoped_objects_then_its_finalizer() {
    let fake = FakeObjects::default();
    let cr = ssp(None);
    put(&fake, &cr);
    reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    // A ClusterRole of that name made by someone else stays.
    let mut foreign = ssp(None);
    foreign.metadata.name = Some("other".to_owned());
    let foreign_role = render::render(&foreign, &settings(), "PEM").expect("renders").remove(0);
    assert_eq!(foreign_role.describe(), "ClusterRole template:view");
    fake.put(&foreign_role);
    writes(&fake);

    let mut deleting = stored(&fake, "ssp");
    deleting.metadata.deletion_timestamp = Some(now());
    assert_eq!(
        reconcile(&fake, &deleting, &settings(), &now()).await.expect("a pass"),
        Next::LookAgain,
        "the status comes first, in a pass of its own"
    );
    assert_eq!(writes(&fake), ["status SSP kubevirt/ssp"]);
    assert_eq!(status(&fake, "ssp").phase.as_deref(), Some("Deleting"));

    let mut deleting = stored(&fake, "ssp");
    deleting.metadata.deletion_timestamp = Some(now());
    assert_eq!(
        reconcile(&fake, &deleting, &settings(), &now()).await.expect("a pass"),
        Next::Rest
    );
    assert_eq!(
        writes(&fake),
        [
            "delete ValidatingWebhookConfiguration virt-template-validator",
            "delete ClusterRoleBinding template-validator",
            "unfinalize ssp.kubevirt.io/finalizer SSP kubevirt/ssp",
        ]
    );
    assert!(
        get_typed::<ClusterRole, _>(&fake, None, "template:view")
            .await
            .expect("read")
            .is_some()
    );
    assert_eq!(stored(&fake, "ssp").metadata.finalizers, Some(Vec::new()));

    // Without the finalizer there is nothing left to do.
    let gone = SSP {
        metadata: ObjectMeta {
            finalizers: None,
            ..deleting.metadata.clone()
        },
        ..deleting
    };
    assert_eq!(
        reconcile(&fake, &gone, &settings(), &now()).await.expect("a pass"),
        Next::Rest
    );
    assert_eq!(writes(&fake), Vec::<String>::new());
    assert!(
        get_typed::<Deployment, _>(&fake, Some("kubevirt"), "virt-template-validator")
            .await
            .expect("read")
            .is_some(),
        "the garbage collector removes the namespaced ones"
    );
}

#[tokio::test]
async fn a_finalizer_is_not_set_on_an_ssp_that_changed_since_it_was_read() {
    let fake = FakeObjects::default();
    let mut cr = ssp(None);
    cr.metadata.resource_version = Some("2".to_owned());
    put(&fake, &cr);
    cr.metadata.resource_version = Some("1".to_owned());
    let error = reconcile(&fake, &cr, &settings(), &now())
        .await
        .expect_err("a stale read");
    assert!(error.to_string().contains("has been modified"), "{error}");
    assert_eq!(stored(&fake, "ssp").metadata.finalizers, None);
}

#[tokio::test]
async fn the_disruption_budget_goes_when_one_validator_is_left() {
    let fake = FakeObjects::default();
    let mut cr = ssp(Some(crate::api::TemplateValidator {
        replicas: Some(2),
        placement: None,
    }));
    put(&fake, &cr);
    reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert!(writes(&fake).contains(&"apply PodDisruptionBudget kubevirt/virt-template-validator".to_owned()));
    cr = stored(&fake, "ssp");
    cr.spec.template_validator = None;
    reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert!(writes(&fake).contains(&"delete PodDisruptionBudget kubevirt/virt-template-validator".to_owned()));
    // Nothing to delete the next time.
    reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert!(!writes(&fake).iter().any(|w| w.starts_with("delete")));
}
