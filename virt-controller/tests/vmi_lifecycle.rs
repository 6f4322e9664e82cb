//! The VMI controller against the in-memory API server: a VMI goes Pending -> Scheduling ->
//! Scheduled with four API writes and one event; its pod failing or a deletion ends it, and the
//! finalizer goes once its pods are gone.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodStatus;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::ManualClock;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use pretty_assertions::assert_eq;
use serde_json::json;
use virt_controller::cluster_api::{FakeControllerApi, Write};
use virt_controller::pod::PodConfig;
use virt_controller::vmi_controller::VmiController;

const KEY: &str = "default/testvmi";

fn vmi() -> VirtualMachineInstance {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {
            "name": "testvmi", "namespace": "default", "uid": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d",
            "finalizers": ["foregroundDeleteVirtualMachine"]
        },
        "spec": {
            "domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {"disks": [{"name": "root", "disk": {"bus": "virtio"}}]}},
            "volumes": [{"name": "root", "containerDisk": {"image": "quay.io/containerdisks/fedora:40"}}]
        }
    }))
    .expect("VMI")
}

type Controller = VmiController<FakeControllerApi, Arc<ManualClock>>;

fn controller() -> (Controller, FakeControllerApi) {
    let (controller, api, _clock) = controller_and_clock();
    (controller, api)
}

/// The controller, the fake API server and the clock the controller reads.
fn controller_and_clock() -> (Controller, FakeControllerApi, Arc<ManualClock>) {
    let api = FakeControllerApi::new();
    let clock = Arc::new(ManualClock::new(
        "2026-11-21T10:00:00Z".parse::<Timestamp>().expect("time"),
    ));
    let controller = VmiController::new(
        api.clone(),
        clock.clone(),
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
    );
    (controller, api, clock)
}

/// Applies what the fake API server's watches would deliver, then reconciles.
async fn settle(controller: &Controller, api: &FakeControllerApi) {
    if let Some(vmi) = api.vmi(KEY) {
        controller.on_vmi_event(Event::Apply(vmi));
    }
    for key in api.pod_keys() {
        if let Some(pod) = api.pod(&key) {
            controller.on_pod_event(Event::Apply(pod));
        }
    }
    controller.reconcile(KEY).await;
}

fn phase(api: &FakeControllerApi) -> Option<Phase> {
    api.vmi(KEY)?.status?.phase
}

#[tokio::test]
async fn a_vmi_is_scheduled_with_four_writes_and_one_event() {
    let (controller, api) = controller();
    api.apply_vmi(vmi());
    settle(&controller, &api).await;
    assert_eq!(phase(&api), Some(Phase::Scheduling));
    let pods = api.pod_keys();
    assert_eq!(pods.len(), 1);
    assert!(pods[0].starts_with("default/virt-launcher-testvmi-"));

    // Nothing changes until the pod runs: no second pod, no write.
    settle(&controller, &api).await;
    assert_eq!(api.pod_keys().len(), 1, "expectations: the pod is never created twice");
    assert_eq!(api.writes().len(), 3);

    api.run_pod(&pods[0], "node01");
    settle(&controller, &api).await;
    let scheduled = api.vmi(KEY).expect("VMI");
    let status = scheduled.status.clone().expect("status");
    assert_eq!(status.phase, Some(Phase::Scheduled));
    assert_eq!(status.node_name.as_deref(), Some("node01"));
    assert_eq!(
        scheduled
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("kubevirt.io/nodeName"))
            .map(String::as_str),
        Some("node01")
    );
    let phases: Vec<_> = status.phase_transition_timestamps.iter().map(|t| t.phase).collect();
    assert_eq!(
        phases,
        [Some(Phase::Pending), Some(Phase::Scheduling), Some(Phase::Scheduled)]
    );
    settle(&controller, &api).await;
    let writes = api.writes();
    assert_eq!(
        writes,
        vec![
            Write::CreatePod(pods[0].clone()),
            Write::Event(KEY.to_owned(), "SuccessfulCreate".to_owned()),
            Write::VmiStatus(KEY.to_owned()),
            Write::PatchVmi(
                KEY.to_owned(),
                json!({"metadata": {"labels": {"kubevirt.io/nodeName": "node01"}}})
            ),
            Write::VmiStatus(KEY.to_owned()),
        ]
    );
    let object_writes = writes.iter().filter(|w| !matches!(w, Write::Event(..))).count();
    assert_eq!(object_writes, 4, "at most 4 API writes per VMI start");
}

#[tokio::test]
async fn a_failed_pod_fails_the_vmi_then_the_pod_goes_and_so_does_the_finalizer() {
    let (controller, api) = controller();
    api.apply_vmi(vmi());
    settle(&controller, &api).await;
    let pod = api.pod_keys().remove(0);
    api.modify_pod(&pod, |p| {
        p.status = Some(PodStatus {
            phase: Some("Failed".to_owned()),
            ..PodStatus::default()
        });
    });
    settle(&controller, &api).await;
    assert_eq!(phase(&api), Some(Phase::Failed));
    assert_eq!(
        api.vmi(KEY).and_then(|v| v.status?.reason).as_deref(),
        Some("PodFailed")
    );
    settle(&controller, &api).await;
    assert!(
        api.writes().contains(&Write::DeletePod(pod.clone())),
        "the final VMI's pod is deleted"
    );
    api.remove_pod(&pod);
    controller.on_pod_event(Event::Delete(api_pod_stub(&pod)));
    settle(&controller, &api).await;
    let finalizers = api.vmi(KEY).and_then(|v| v.metadata.finalizers).unwrap_or_default();
    assert!(finalizers.is_empty(), "{finalizers:?}");
}

/// A deleted pod as its last watch event carries it: only the identity matters here.
fn api_pod_stub(key: &str) -> k8s_openapi::api::core::v1::Pod {
    let (namespace, name) = key.split_once('/').expect("key");
    serde_json::from_value(json!({
        "metadata": {
            "name": name, "namespace": namespace,
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "testvmi", "uid": "u", "controller": true}]
        }
    }))
    .expect("pod")
}

#[tokio::test]
async fn a_deleted_vmi_loses_its_pod_and_then_its_finalizer() {
    let (controller, api) = controller();
    api.apply_vmi(vmi());
    settle(&controller, &api).await;
    let pod = api.pod_keys().remove(0);
    api.run_pod(&pod, "node01");
    settle(&controller, &api).await;
    api.modify_vmi(KEY, |v| {
        v.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::UNIX_EPOCH,
        ));
    });
    settle(&controller, &api).await;
    assert!(api.writes().contains(&Write::DeletePod(pod.clone())));
    // The handler finishes the VMI; the kubelet removes the pod.
    api.modify_vmi(KEY, |v| v.status.get_or_insert_default().phase = Some(Phase::Succeeded));
    api.remove_pod(&pod);
    controller.on_pod_event(Event::Delete(api_pod_stub(&pod)));
    let writes_before = api.writes().len();
    settle(&controller, &api).await;
    assert!(api.vmi(KEY).is_none(), "finalizer released, the VMI is gone");
    let stop_writes = api.writes().len() - writes_before;
    assert_eq!(
        stop_writes, 1,
        "stopping costs the pod delete (above) and one finalizer patch"
    );
}

/// The controller looks at a final VMI again before the watch shows its pod terminating (the
/// handler's status write and the controller's own arrive first): the pod is deleted once, and
/// the finalizer goes once the pod is gone. On a real cluster the pod was deleted twice, the
/// second deletion was never observed, and the VMI kept its finalizer for the expectations'
/// five minutes.
#[tokio::test]
async fn a_final_vmis_pod_is_deleted_once_even_when_the_controller_looks_again_first() {
    let (controller, api) = controller();
    api.apply_vmi(vmi());
    settle(&controller, &api).await;
    let pod = api.pod_keys().remove(0);
    api.run_pod(&pod, "node01");
    settle(&controller, &api).await;
    api.modify_vmi(KEY, |v| v.status.get_or_insert_default().phase = Some(Phase::Succeeded));
    for _ in 0..2 {
        controller.on_vmi_event(Event::Apply(api.vmi(KEY).expect("VMI")));
        controller.reconcile(KEY).await;
    }
    let deletes = |api: &FakeControllerApi| {
        api.writes()
            .iter()
            .filter(|w| **w == Write::DeletePod(pod.clone()))
            .count()
    };
    assert_eq!(deletes(&api), 1, "the pod is deleted once");
    settle(&controller, &api).await;
    api.remove_pod(&pod);
    controller.on_pod_event(Event::Delete(api_pod_stub(&pod)));
    settle(&controller, &api).await;
    assert_eq!(deletes(&api), 1);
    let finalizers = api.vmi(KEY).and_then(|v| v.metadata.finalizers).unwrap_or_default();
    assert!(finalizers.is_empty(), "the finalizer is released: {finalizers:?}");
}

/// Expectations read time from the controller's clock: a pod deletion whose watch event never
/// arrives holds the VMI for upstream's five minutes on that clock, then the deletion is sent again.
#[tokio::test]
async fn a_pod_deletion_the_watch_never_shows_is_sent_again_once_the_expectations_expire() {
    let (controller, api, clock) = controller_and_clock();
    api.apply_vmi(vmi());
    settle(&controller, &api).await;
    let pod = api.pod_keys().remove(0);
    api.run_pod(&pod, "node01");
    settle(&controller, &api).await;
    api.modify_vmi(KEY, |v| v.status.get_or_insert_default().phase = Some(Phase::Succeeded));
    controller.on_vmi_event(Event::Apply(api.vmi(KEY).expect("VMI")));
    let deletes = |api: &FakeControllerApi| {
        api.writes()
            .iter()
            .filter(|w| **w == Write::DeletePod(pod.clone()))
            .count()
    };
    controller.reconcile(KEY).await;
    assert_eq!(deletes(&api), 1);
    clock.advance(std::time::Duration::from_secs(299));
    controller.reconcile(KEY).await;
    assert_eq!(deletes(&api), 1, "the deletion is still expected after 299 s");
    clock.advance(std::time::Duration::from_secs(1));
    controller.reconcile(KEY).await;
    assert_eq!(
        deletes(&api),
        2,
        "after 300 s the expectation expired and the pod is deleted again"
    );
}
