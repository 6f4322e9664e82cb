use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kubevirt_api::v1::KubeVirtSpec;
use operator_kit::objects::fake::FakeObjects;
use operator_kit::objects::{Desired, parse};
use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::render::tests::{kubevirt, settings};

fn now() -> Time {
    Time(Timestamp::from_second(1_796_000_000).expect("a time"))
}

fn put(fake: &FakeObjects, cr: &KubeVirt) {
    fake.put(&Desired::from_typed(cr).expect("a KubeVirt"));
}

fn stored(fake: &FakeObjects, name: &str) -> KubeVirt {
    let key = format!("KubeVirt kubevirt/{name}");
    let object = fake.state().objects.get(&key).cloned().expect("the CR is there");
    parse(&object, &key).expect("a KubeVirt")
}

fn status(fake: &FakeObjects) -> KubeVirtStatus {
    stored(fake, "kubevirt").status.unwrap_or_default()
}

fn writes(fake: &FakeObjects) -> Vec<String> {
    std::mem::take(&mut fake.state().writes)
}

/// The writes other than the objects applied on every pass and the common instance types and
/// preferences (their own test below).
fn notable(fake: &FakeObjects) -> Vec<String> {
    writes(fake)
        .into_iter()
        .filter(|w| !w.starts_with("apply ") || w.contains("Deployment ") || w.contains("DaemonSet "))
        .filter(|w| !w.contains("VirtualMachineCluster"))
        .collect()
}

/// The writes to the common instance types and preferences.
fn common(fake: &FakeObjects) -> Vec<String> {
    writes(fake)
        .into_iter()
        .filter(|w| w.contains("VirtualMachineCluster"))
        .collect()
}

fn count(fake: &FakeObjects, kind: &str) -> usize {
    let prefix = format!("{kind} ");
    fake.state().objects.keys().filter(|k| k.starts_with(&prefix)).count()
}

async fn pass(fake: &FakeObjects) -> Next {
    let cr = stored(fake, "kubevirt");
    reconcile(fake, &cr, &settings(), &now()).await.expect("a pass")
}

/// Deployed: looked at again on a change or when the webhook's certificate is due.
fn deployed_rest(next: Next) -> bool {
    matches!(next, Next::RestUntil(_))
}

/// The kubelet and controllers' part: the workload rolled out.
fn roll_out(fake: &FakeObjects, component: Component) {
    let key = match component {
        Component::Handler => "DaemonSet kubevirt/virt-handler".to_owned(),
        _ => format!("Deployment kubevirt/{}", component.name()),
    };
    let mut state = fake.state();
    let object = state.objects.get_mut(&key).expect("the workload was applied");
    object.metadata.generation = Some(1);
    object.data["status"] = match component {
        Component::Handler => {
            json!({ "observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberReady": 2 })
        }
        _ => {
            json!({ "observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "readyReplicas": 2, "availableReplicas": 2 })
        }
    };
}

fn image(fake: &FakeObjects, key: &str) -> String {
    let state = fake.state();
    let object = state.objects.get(key).expect("the workload");
    object.data["spec"]["template"]["spec"]["containers"][0]["image"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// A fresh install, rolled out to Deployed.
async fn deployed(fake: &FakeObjects) {
    put(fake, &kubevirt(KubeVirtSpec::default()));
    for component in [Component::Api, Component::Controller, Component::Handler] {
        assert_eq!(pass(fake).await, Next::LookAgain);
        roll_out(fake, component);
    }
    assert!(deployed_rest(pass(fake).await));
    writes(fake);
}

#[tokio::test]
async fn a_fresh_install_goes_api_then_controller_then_handler_to_deployed() {
    let fake = FakeObjects::default();
    put(&fake, &kubevirt(KubeVirtSpec::default()));
    assert_eq!(pass(&fake).await, Next::LookAgain);
    assert_eq!(
        notable(&fake),
        [
            "finalize kubevirt.io/foregroundDeleteKubeVirt KubeVirt kubevirt/kubevirt",
            "apply Deployment kubevirt/virt-api",
            "status KubeVirt kubevirt/kubevirt",
        ]
    );
    assert_eq!(status(&fake).phase.as_deref(), Some("Deploying"));
    assert!(
        fake.state()
            .objects
            .contains_key("CustomResourceDefinition virtualmachines.kubevirt.io")
    );
    roll_out(&fake, Component::Api);
    assert_eq!(pass(&fake).await, Next::LookAgain);
    assert_eq!(
        notable(&fake),
        ["apply Deployment kubevirt/virt-controller"],
        "virt-api as it is is not applied again; the status did not change"
    );
    roll_out(&fake, Component::Controller);
    pass(&fake).await;
    assert_eq!(notable(&fake), ["apply DaemonSet kubevirt/virt-handler"]);
    roll_out(&fake, Component::Handler);
    assert!(deployed_rest(pass(&fake).await));
    let deployed = status(&fake);
    assert_eq!(deployed.phase.as_deref(), Some("Deployed"));
    assert_eq!(deployed.observed_kube_virt_version.as_deref(), Some("latest"));
    assert_eq!(deployed.generations.len(), 3);
    writes(&fake);
    assert!(deployed_rest(pass(&fake).await));
    assert!(
        !writes(&fake).iter().any(|w| w.starts_with("status")),
        "a deployed install writes no status"
    );
}

#[tokio::test]
async fn a_new_image_tag_rolls_handler_then_controller_then_api() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    let mut cr = stored(&fake, "kubevirt");
    cr.spec.image_tag = Some("v2".to_owned());
    put(&fake, &cr);
    assert_eq!(pass(&fake).await, Next::LookAgain);
    assert_eq!(
        notable(&fake),
        [
            "apply DaemonSet kubevirt/virt-handler",
            "status KubeVirt kubevirt/kubevirt"
        ]
    );
    assert_eq!(
        image(&fake, "DaemonSet kubevirt/virt-handler"),
        "localhost/kubevirt-rs/virt-handler:v2"
    );
    assert_eq!(
        image(&fake, "Deployment kubevirt/virt-api"),
        "localhost/kubevirt-rs/virt-api:latest"
    );
    let updating = status(&fake);
    assert_eq!(updating.phase.as_deref(), Some("Deploying"));
    assert_eq!(updating.target_kube_virt_version.as_deref(), Some("v2"));
    assert_eq!(updating.observed_kube_virt_version.as_deref(), Some("latest"));
    roll_out(&fake, Component::Handler);
    pass(&fake).await;
    assert_eq!(notable(&fake), ["apply Deployment kubevirt/virt-controller"]);
    roll_out(&fake, Component::Controller);
    pass(&fake).await;
    assert_eq!(
        image(&fake, "Deployment kubevirt/virt-api"),
        "localhost/kubevirt-rs/virt-api:v2"
    );
    roll_out(&fake, Component::Api);
    assert!(deployed_rest(pass(&fake).await));
    let done = status(&fake);
    assert_eq!(done.phase.as_deref(), Some("Deployed"));
    assert_eq!(done.observed_kube_virt_version.as_deref(), Some("v2"));
    assert_eq!(done.observed_deployment_id, done.target_deployment_id);
}

#[tokio::test]
async fn the_outdated_count_is_virt_controllers_and_never_written_or_compared() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    let mut cr = stored(&fake, "kubevirt");
    cr.status
        .get_or_insert_default()
        .outdated_virtual_machine_instance_workloads = Some(3);
    put(&fake, &cr);
    assert!(deployed_rest(pass(&fake).await));
    assert!(
        !writes(&fake).iter().any(|w| w.starts_with("status")),
        "a count the operator does not know is no reason to write"
    );
    cr.spec.image_tag = Some("v2".to_owned());
    put(&fake, &cr);
    pass(&fake).await;
    assert!(writes(&fake).iter().any(|w| w.starts_with("status")));
    // The fake replaces the status with what is sent: no count was sent, so the API server's
    // merge patch keeps virt-controller's.
    assert_eq!(status(&fake).outdated_virtual_machine_instance_workloads, None);
    assert_eq!(status(&fake).phase.as_deref(), Some("Deploying"));
}

#[tokio::test]
async fn a_manual_edit_of_a_workload_is_put_back() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    fake.state()
        .objects
        .get_mut("Deployment kubevirt/virt-api")
        .expect("virt-api")
        .data["spec"]["template"]["spec"]["containers"][0]["image"] = json!("evil/virt-api:1");
    pass(&fake).await;
    assert_eq!(
        image(&fake, "Deployment kubevirt/virt-api"),
        "localhost/kubevirt-rs/virt-api:latest"
    );
}

#[tokio::test]
async fn a_second_cr_gets_existing_deployment_and_nothing_else() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    let mut second = kubevirt(KubeVirtSpec::default());
    second.metadata.name = Some("second".to_owned());
    second.metadata.uid = Some("uid-2".to_owned());
    second.metadata.creation_timestamp = Some(now());
    put(&fake, &second);
    let next = reconcile(&fake, &stored(&fake, "second"), &settings(), &now())
        .await
        .expect("a pass");
    assert_eq!(next, Next::LookAgain);
    assert_eq!(writes(&fake), ["status KubeVirt kubevirt/second"]);
    let status = stored(&fake, "second").status.unwrap_or_default();
    assert_eq!(status.phase, None);
    assert_eq!(status.conditions.len(), 1);
    assert_eq!(status.conditions[0].reason.as_deref(), Some("ExistingDeployment"));
}

#[tokio::test]
async fn a_cr_that_does_not_render_fails_with_upstreams_reason() {
    let fake = FakeObjects::default();
    let mut cr = kubevirt(KubeVirtSpec::default());
    cr.metadata.uid = None;
    put(&fake, &cr);
    let next = reconcile(&fake, &cr, &settings(), &now()).await.expect("a pass");
    assert_eq!(next, Next::LookAgain);
    let failed = status(&fake);
    let degraded = failed
        .conditions
        .iter()
        .find(|c| c.condition_type == "Degraded")
        .expect("Degraded");
    assert_eq!(
        degraded.message.as_deref(),
        Some("An error occurred during deployment: the KubeVirt kubevirt has no uid")
    );
    assert!(!writes(&fake).iter().any(|w| w.starts_with("apply")));
}

#[tokio::test]
async fn a_refused_apply_is_the_crs_failure_and_is_tried_again() {
    let fake = FakeObjects::default();
    put(&fake, &kubevirt(KubeVirtSpec::default()));
    fake.state().refuse_apply = Some(("ClusterRole kubevirt-controller".to_owned(), "forbidden".to_owned()));
    assert_eq!(pass(&fake).await, Next::LookAgain);
    let failed = status(&fake);
    assert!(
        failed
            .conditions
            .iter()
            .any(|c| c.reason.as_deref() == Some("DeploymentFailed")
                && c.message.as_deref().is_some_and(|m| m.contains("forbidden"))),
        "{failed:?}"
    );
    assert!(!fake.state().objects.contains_key("Deployment kubevirt/virt-api"));
}

#[tokio::test]
async fn deletion_removes_crds_first_then_the_rest_then_the_finalizer() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    let mut cr = stored(&fake, "kubevirt");
    cr.metadata.deletion_timestamp = Some(now());
    put(&fake, &cr);
    assert_eq!(pass(&fake).await, Next::LookAgain);
    assert_eq!(writes(&fake), ["status KubeVirt kubevirt/kubevirt"]);
    assert_eq!(status(&fake).phase.as_deref(), Some("Deleting"));
    assert_eq!(pass(&fake).await, Next::LookAgain);
    let first = writes(&fake);
    assert!(
        !first.is_empty() && first.iter().all(|w| w.starts_with("delete CustomResourceDefinition ")),
        "{first:?}"
    );
    assert!(!first.contains(&"delete CustomResourceDefinition kubevirts.kubevirt.io".to_owned()));
    assert_eq!(pass(&fake).await, Next::LookAgain);
    let rest = writes(&fake);
    assert!(
        rest.contains(&"delete DaemonSet kubevirt/virt-handler".to_owned()),
        "{rest:?}"
    );
    assert!(
        rest.contains(&"delete ClusterRole kubevirt-controller".to_owned()),
        "{rest:?}"
    );
    assert!(
        rest.contains(&"delete APIService v1.subresources.kubevirt.io".to_owned()),
        "{rest:?}"
    );
    assert_eq!(
        rest.last().map(String::as_str),
        Some("status KubeVirt kubevirt/kubevirt")
    );
    assert_eq!(status(&fake).phase.as_deref(), Some("Deleted"));
    assert_eq!(pass(&fake).await, Next::Rest);
    assert_eq!(
        writes(&fake),
        ["unfinalize kubevirt.io/foregroundDeleteKubeVirt KubeVirt kubevirt/kubevirt"]
    );
    assert_eq!(stored(&fake, "kubevirt").metadata.finalizers, Some(Vec::new()));
}

#[tokio::test]
async fn a_customization_that_does_not_apply_fails_the_pass_but_not_the_deletion() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    let mut cr = stored(&fake, "kubevirt");
    cr.spec.customize_components = Some(
        serde_json::from_value(json!({"patches": [{
            "resourceName": "virt-api", "resourceType": "Deployment", "type": "json",
            "patch": r#"[{"op":"remove","path":"/spec/nothing"}]"#
        }]}))
        .expect("customizations"),
    );
    put(&fake, &cr);
    assert_eq!(pass(&fake).await, Next::LookAgain);
    let failed = status(&fake);
    assert!(
        failed
            .conditions
            .iter()
            .any(|c| c.reason.as_deref() == Some("DeploymentFailed")
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains("does not apply to Deployment virt-api"))),
        "{failed:?}"
    );
    let mut cr = stored(&fake, "kubevirt");
    cr.metadata.deletion_timestamp = Some(now());
    put(&fake, &cr);
    for _ in 0..3 {
        pass(&fake).await;
    }
    assert_eq!(status(&fake).phase.as_deref(), Some("Deleted"));
    assert_eq!(pass(&fake).await, Next::Rest);
    assert_eq!(stored(&fake, "kubevirt").metadata.finalizers, Some(Vec::new()));
}

#[tokio::test]
async fn deletion_leaves_cluster_scoped_objects_another_cr_made() {
    let fake = FakeObjects::default();
    deployed(&fake).await;
    fake.state()
        .objects
        .get_mut("ClusterRole kubevirt.io:view")
        .expect("the view role")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(render::OWNER_ANNOTATION.to_owned(), "other/kubevirt".to_owned());
    let mut cr = stored(&fake, "kubevirt");
    cr.metadata.deletion_timestamp = Some(now());
    put(&fake, &cr);
    for _ in 0..3 {
        pass(&fake).await;
    }
    assert!(fake.state().objects.contains_key("ClusterRole kubevirt.io:view"));
    assert!(!fake.state().objects.contains_key("ClusterRole kubevirt-controller"));
}

#[tokio::test]
async fn the_common_instancetypes_come_once_ready_stay_put_and_go_when_turned_off() {
    let fake = FakeObjects::default();
    put(&fake, &kubevirt(KubeVirtSpec::default()));
    pass(&fake).await;
    assert_eq!(
        common(&fake),
        Vec::<String>::new(),
        "not before the components are ready"
    );
    deployed(&fake).await;
    assert_eq!(count(&fake, "VirtualMachineClusterInstancetype"), 65);
    assert_eq!(count(&fake, "VirtualMachineClusterPreference"), 54);
    let small = fake.state().objects["VirtualMachineClusterInstancetype u1.small"].clone();
    assert_eq!(small.labels()[render::MANAGED_BY.0], "virt-operator");
    assert_eq!(small.labels()[render::COMPONENT.0], "kubevirt");
    assert_eq!(small.annotations()[render::VERSION_ANNOTATION], "latest");
    assert_eq!(small.annotations()[render::OWNER_ANNOTATION], "kubevirt/kubevirt");

    assert!(deployed_rest(pass(&fake).await));
    assert_eq!(common(&fake), Vec::<String>::new(), "nothing is written at rest");

    fake.state()
        .objects
        .get_mut("VirtualMachineClusterInstancetype u1.small")
        .expect("there")
        .data["spec"]["cpu"]["guest"] = json!(7);
    fake.state().objects.remove("VirtualMachineClusterPreference fedora");
    pass(&fake).await;
    assert_eq!(
        common(&fake),
        [
            "replace VirtualMachineClusterInstancetype u1.small",
            "apply VirtualMachineClusterPreference fedora",
        ]
    );
    assert_eq!(
        fake.state().objects["VirtualMachineClusterInstancetype u1.small"].data["spec"]["cpu"]["guest"],
        1
    );

    let mut cr = stored(&fake, "kubevirt");
    cr.spec.configuration = Some(kubevirt_api::v1::KubeVirtConfiguration {
        common_instancetypes_deployment: Some(kubevirt_api::v1::CommonInstancetypesDeployment { enabled: Some(false) }),
        ..Default::default()
    });
    put(&fake, &cr);
    pass(&fake).await;
    let deletes = common(&fake);
    assert_eq!(deletes.len(), 65 + 54);
    assert!(deletes.iter().all(|w| w.starts_with("delete ")), "{deletes:?}");
    assert_eq!(count(&fake, "VirtualMachineClusterInstancetype"), 0);
    assert_eq!(count(&fake, "VirtualMachineClusterPreference"), 0);
}

#[tokio::test]
async fn the_webhook_gets_its_certificate_and_ca_and_a_pass_at_rest_writes_nothing() {
    use base64::Engine as _;
    let fake = FakeObjects::default();
    deployed(&fake).await;
    {
        let state = fake.state();
        let secret = &state.objects["Secret kubevirt/kubevirt-operator-certs"];
        assert_eq!(secret.data["type"], "kubernetes.io/tls");
        assert_eq!(secret.labels()[render::MANAGED_BY.0], "virt-operator");
        let bundle = state.objects["ConfigMap kubevirt/kubevirt-operator-ca-bundle"].data["data"]["ca-bundle.crt"]
            .as_str()
            .expect("the bundle")
            .to_owned();
        let configuration = &state.objects["ValidatingWebhookConfiguration virt-operator-validator"];
        assert_eq!(
            configuration.data["webhooks"][0]["clientConfig"]["caBundle"],
            base64::engine::general_purpose::STANDARD.encode(bundle)
        );
        assert_eq!(
            configuration.data["webhooks"][0]["clientConfig"]["service"],
            json!({"namespace": "kubevirt", "name": "kubevirt-operator-webhook", "path": "/kubevirt-validate-delete"})
        );
        assert!(state.objects.contains_key("Service kubevirt/kubevirt-operator-webhook"));
    }
    let next = pass(&fake).await;
    let day = 24 * 60 * 60;
    assert!(
        matches!(next, Next::RestUntil(at) if at > now().0.as_second() && at <= now().0.as_second() + day),
        "looked at again when the certificate is due: {next:?}"
    );
    assert_eq!(writes(&fake), Vec::<String>::new(), "a pass at rest writes nothing");
}
