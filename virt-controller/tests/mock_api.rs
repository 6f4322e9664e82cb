//! The VMI controller against kube-rs's client on a `tower-test` mock API server: every create,
//! patch and delete it sends is captured with its method, path and body.

mod support;

use std::collections::VecDeque;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::ManualClock;
use kubevirt_api::v1::VirtualMachineInstance;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{api_server, taken};
use virt_controller::claims::ClaimModes;
use virt_controller::cluster_api::KubeControllerApi;
use virt_controller::pod::{PodConfig, render_launcher_pod};
use virt_controller::vmi_controller::VmiController;

const UID: &str = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
const IMAGE: &str = "registry.example/virt-launcher:v0.1.0";

fn vmi(extra: &Value) -> VirtualMachineInstance {
    let mut value = json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachineInstance",
        "metadata": {"name": "testvmi", "namespace": "default", "uid": UID, "resourceVersion": "10",
                     "finalizers": ["foregroundDeleteVirtualMachine"]},
        "spec": {"domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {}}}
    });
    if let (Some(target), Some(extra)) = (value.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            target.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(value).expect("VMI")
}

fn controller(client: kube::Client) -> VmiController<KubeControllerApi, Arc<ManualClock>> {
    let clock = Arc::new(ManualClock::new(
        "2026-11-21T10:00:00Z".parse::<Timestamp>().expect("time"),
    ));
    VmiController::new(KubeControllerApi::new(client), clock, PodConfig::new(IMAGE))
}

/// The launcher pod of `vmi` (which has no claims), as JSON.
fn rendered(vmi: &VirtualMachineInstance) -> serde_json::Value {
    serde_json::to_value(render_launcher_pod(vmi, &PodConfig::new(IMAGE), &ClaimModes::default()).expect("pod"))
        .expect("json")
}

#[tokio::test]
async fn creating_the_pod_and_scheduling_the_vmi_send_these_requests() {
    let new = vmi(&json!({}));
    let mut created_pod = rendered(&new);
    created_pod["metadata"]["name"] = json!("virt-launcher-testvmi-x7k2p");
    created_pod["metadata"]["uid"] = json!("pod-1");
    let mut after_status = serde_json::to_value(&new).expect("json");
    after_status["metadata"]["resourceVersion"] = json!("11");
    let mut labelled = serde_json::to_value(&new).expect("json");
    labelled["metadata"]["labels"] = json!({"kubevirt.io/nodeName": "node01"});
    labelled["metadata"]["resourceVersion"] = json!("12");
    let (client, log) = api_server(VecDeque::from([created_pod.clone(), json!({}), after_status, labelled]));
    let controller = controller(client);
    controller.on_vmi_event(Event::Apply(new.clone()));
    assert_eq!(controller.reconcile("default/testvmi").await, None);
    let sent = taken(&log);
    // The pod is rendered for the user the status records: unprivileged, 107.
    let mut unprivileged = new.clone();
    unprivileged.status.get_or_insert_default().runtime_user = Some(107);
    let expected_pod = rendered(&unprivileged);
    assert_eq!(expected_pod["spec"]["securityContext"]["runAsUser"], json!(107));
    assert_eq!(
        sent[0],
        (
            "POST".to_owned(),
            "/api/v1/namespaces/default/pods".to_owned(),
            expected_pod
        )
    );
    assert_eq!(
        (sent[1].0.as_str(), sent[1].1.as_str()),
        ("POST", "/api/v1/namespaces/default/events")
    );
    assert_eq!(sent[1].2["reason"], json!("SuccessfulCreate"));
    assert_eq!(
        sent[1].2["message"],
        json!("Created virtual machine pod virt-launcher-testvmi-x7k2p")
    );
    assert_eq!(sent[1].2["source"], json!({"component": "virt-controller"}));
    let mut expected_status = serde_json::to_value(&new).expect("json");
    expected_status["status"] = json!({
        "phase": "Scheduling",
        "runtimeUser": 107,
        "phaseTransitionTimestamps": [
            {"phase": "Pending", "phaseTransitionTimestamp": "2026-11-21T10:00:00Z"},
            {"phase": "Scheduling", "phaseTransitionTimestamp": "2026-11-21T10:00:00Z"}
        ]
    });
    assert_eq!(
        sent[2],
        (
            "PUT".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/testvmi/status".to_owned(),
            expected_status.clone()
        )
    );
    assert_eq!(sent.len(), 3);

    // Placed on node01 and still starting: nothing is written until it runs (activePods goes
    // with the Scheduled write).
    let mut placed: k8s_openapi::api::core::v1::Pod = serde_json::from_value(created_pod.clone()).expect("pod");
    placed.spec.get_or_insert_default().node_name = Some("node01".to_owned());
    controller.on_pod_event(Event::Apply(placed));
    controller.on_vmi_event(Event::Apply(vmi(&json!({"status": expected_status["status"]}))));
    assert_eq!(controller.reconcile("default/testvmi").await, None);
    assert!(taken(&log).is_empty(), "no write while only the pod's node is new");

    // The pod runs on node01: the label goes on with a merge patch, then the status.
    let mut pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(created_pod).expect("pod");
    pod.spec.get_or_insert_default().node_name = Some("node01".to_owned());
    pod.status = Some(
        serde_json::from_value(json!({
            "phase": "Running",
            "containerStatuses": [{"name": "compute", "ready": true, "restartCount": 0, "image": IMAGE, "imageID": ""}]
        }))
        .expect("status"),
    );
    controller.on_pod_event(Event::Apply(pod));
    let scheduling = vmi(&json!({"status": {
        "phase": "Scheduling",
        "activePods": {"pod-1": "node01"},
        "phaseTransitionTimestamps": [
            {"phase": "Pending", "phaseTransitionTimestamp": "2026-11-21T10:00:00Z"},
            {"phase": "Scheduling", "phaseTransitionTimestamp": "2026-11-21T10:00:00Z"}
        ]
    }}));
    controller.on_vmi_event(Event::Apply(scheduling));
    assert_eq!(controller.reconcile("default/testvmi").await, None);
    let sent = taken(&log);
    assert_eq!(
        sent[0],
        (
            "PATCH".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/testvmi".to_owned(),
            json!({"metadata": {"labels": {"kubevirt.io/nodeName": "node01"}, "resourceVersion": "10"}})
        )
    );
    assert_eq!(sent[1].0, "PUT");
    assert_eq!(sent[1].2["status"]["phase"], json!("Scheduled"));
    assert_eq!(sent[1].2["status"]["nodeName"], json!("node01"));
    assert_eq!(
        sent[1].2["metadata"]["resourceVersion"],
        json!("12"),
        "written on the patched VMI"
    );
    assert_eq!(sent.len(), 2);
}

#[tokio::test]
async fn a_final_vmi_has_its_pod_deleted_then_its_finalizer_removed() {
    let done = vmi(&json!({"status": {"phase": "Succeeded"}}));
    let (client, log) = api_server(VecDeque::from([json!({"kind": "Status", "status": "Success"})]));
    let controller = controller(client);
    controller.on_vmi_event(Event::Apply(done.clone()));
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "virt-launcher-testvmi-x7k2p", "namespace": "default", "uid": "pod-1",
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "name": "testvmi", "uid": UID, "controller": true}]},
        "status": {"phase": "Running"}
    }))
    .expect("pod");
    controller.on_pod_event(Event::Apply(pod.clone()));
    controller.reconcile("default/testvmi").await;
    let sent = taken(&log);
    assert_eq!(
        (sent[0].0.as_str(), sent[0].1.as_str()),
        ("DELETE", "/api/v1/namespaces/default/pods/virt-launcher-testvmi-x7k2p")
    );
    assert_eq!(sent.len(), 1);

    controller.on_pod_event(Event::Delete(pod));
    controller.reconcile("default/testvmi").await;
    let sent = taken(&log);
    assert_eq!(
        sent,
        vec![(
            "PATCH".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/testvmi".to_owned(),
            json!({"metadata": {"finalizers": [], "resourceVersion": "10"}})
        )]
    );
}

/// A VMI whose claim is missing: one event and one status write say it waits, and nothing else is
/// sent; the claim's watch event wakes the VMI and its pod is created with the claim's device.
#[tokio::test]
async fn a_missing_claim_sends_the_wait_then_the_pod_once_the_claim_appears() {
    let with_claim = json!({"spec": {
        "domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {"disks": [{"name": "data", "disk": {}}]}},
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "db"}}]
    }});
    let new = vmi(&with_claim);
    let (client, log) = api_server(VecDeque::new());
    let controller = controller(client);
    controller.on_vmi_event(Event::Apply(new.clone()));
    assert_eq!(controller.reconcile("default/testvmi").await, None);
    let sent = taken(&log);
    let message = "PVC default/db does not exist, waiting for it to appear";
    assert_eq!(
        (sent[0].0.as_str(), sent[0].1.as_str()),
        ("POST", "/api/v1/namespaces/default/events")
    );
    assert_eq!(
        (&sent[0].2["type"], &sent[0].2["reason"], &sent[0].2["message"]),
        (&json!("Normal"), &json!("FailedPvcNotFound"), &json!(message))
    );
    let mut expected_status = serde_json::to_value(&new).expect("json");
    expected_status["status"] = json!({
        "phase": "Pending",
        "conditions": [
            {"type": "Synchronized", "status": "False", "lastTransitionTime": "2026-11-21T10:00:00Z",
             "reason": "FailedPvcNotFound", "message": message},
            {"type": "PodScheduled", "status": "False", "lastTransitionTime": "2026-11-21T10:00:00Z",
             "reason": "Unschedulable", "message": message}
        ],
        "phaseTransitionTimestamps": [{"phase": "Pending", "phaseTransitionTimestamp": "2026-11-21T10:00:00Z"}]
    });
    assert_eq!(
        sent[1],
        (
            "PUT".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/testvmi/status".to_owned(),
            expected_status.clone()
        )
    );
    assert_eq!(sent.len(), 2, "{sent:#?}");

    // The block claim appears: the VMI that uses it is looked at again, and its pod carries the
    // claim as a device.
    let claim: k8s_openapi::api::core::v1::PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "db", "namespace": "default"}, "spec": {"volumeMode": "Block"}
    }))
    .expect("claim");
    assert_eq!(controller.on_claim_event(&Event::Apply(claim)).1, ["default/testvmi"]);
    controller.on_vmi_event(Event::Apply(vmi(&json!({
        "spec": with_claim["spec"], "status": expected_status["status"]
    }))));
    controller.reconcile("default/testvmi").await;
    let sent = taken(&log);
    assert_eq!(
        (sent[0].0.as_str(), sent[0].1.as_str()),
        ("POST", "/api/v1/namespaces/default/pods")
    );
    assert_eq!(
        sent[0].2["spec"]["containers"][0]["volumeDevices"],
        json!([{"name": "data", "devicePath": "/dev/data"}])
    );
}

#[tokio::test]
async fn the_workload_updaters_eviction_and_count_send_these_requests_which_its_role_allows() {
    use virt_controller::cluster_api::ControllerApi as _;
    let kubevirt: kubevirt_api::v1::KubeVirt = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"}, "spec": {}
    }))
    .expect("KubeVirt");
    let mut patched = serde_json::to_value(&kubevirt).expect("json");
    patched["status"] = json!({"outdatedVirtualMachineInstanceWorkloads": 2});
    let (client, log) = api_server(VecDeque::from([
        json!({"kind": "Status", "status": "Success"}),
        patched,
    ]));
    let api = KubeControllerApi::new(client);
    api.evict_pod("default", "virt-launcher-testvmi-x7k2p")
        .await
        .expect("evicted");
    api.patch_kubevirt_status(&kubevirt, json!({"outdatedVirtualMachineInstanceWorkloads": 2}))
        .await
        .expect("patched");
    let sent = taken(&log);
    assert_eq!(
        (sent[0].0.as_str(), sent[0].1.as_str()),
        (
            "POST",
            "/api/v1/namespaces/default/pods/virt-launcher-testvmi-x7k2p/eviction"
        )
    );
    assert_eq!(sent[0].2["metadata"]["name"], json!("virt-launcher-testvmi-x7k2p"));
    assert_eq!(
        sent[1],
        (
            "PATCH".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt/status".to_owned(),
            json!({"status": {"outdatedVirtualMachineInstanceWorkloads": 2}})
        )
    );
    assert_eq!(sent.len(), 2);
}
