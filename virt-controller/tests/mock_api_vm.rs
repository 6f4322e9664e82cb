//! The VM controller against kube-rs's client on a `tower-test` mock API server: the finalizer
//! patch, the VMI create, the VM status update and the VMI delete, with their paths and bodies.

mod support;

use std::collections::VecDeque;
use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::ManualClock;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstance};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::{api_server, taken};
use virt_controller::cluster_api::KubeControllerApi;
use virt_controller::vm_controller::VmController;
use virt_controller::vm_status::vmi_from_vm;

fn vm(strategy: &str, finalizers: &[&str]) -> VirtualMachine {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "web", "namespace": "default", "uid": "vm-uid", "generation": 2,
                     "resourceVersion": "5", "finalizers": finalizers},
        "spec": {"runStrategy": strategy, "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {}}}
        }}
    }))
    .expect("VM")
}

fn controller(client: kube::Client) -> VmController<KubeControllerApi, Arc<ManualClock>> {
    let clock = Arc::new(ManualClock::new(
        "2026-11-21T10:00:00Z".parse::<Timestamp>().expect("time"),
    ));
    VmController::new(KubeControllerApi::new(client), clock)
}

#[tokio::test]
async fn an_always_vm_gets_its_finalizer_its_vmi_and_its_status() {
    let fresh = vm("Always", &[]);
    let finalized = vm("Always", &["kubevirt.io/virtualMachineControllerFinalize"]);
    let (client, log) = api_server(VecDeque::from([serde_json::to_value(&finalized).expect("json")]));
    let controller = controller(client);
    controller.on_vm_event(Event::Apply(fresh.clone()));
    controller.reconcile("default/web").await;
    let sent = taken(&log);
    assert_eq!(
        sent[0],
        (
            "PATCH".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/web".to_owned(),
            json!({"metadata": {"finalizers": ["kubevirt.io/virtualMachineControllerFinalize"], "resourceVersion": "5"}})
        )
    );
    let expected_vmi = serde_json::to_value(vmi_from_vm(&fresh, false)).expect("json");
    assert_eq!(
        sent[1],
        (
            "POST".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances".to_owned(),
            expected_vmi
        )
    );
    assert_eq!(expected_vmi_fields(&sent[1].2), ("web", "2", "vm-uid"));
    assert_eq!(
        (sent[2].0.as_str(), sent[2].1.as_str()),
        (
            "PUT",
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/web/status"
        )
    );
    assert_eq!(sent[2].2["status"]["printableStatus"], json!("Starting"));
    assert_eq!(sent[2].2["status"]["runStrategy"], json!("Always"));
    assert_eq!(sent[2].2["status"]["created"], json!(false));
    assert_eq!(sent.len(), 3);
}

fn expected_vmi_fields(vmi: &Value) -> (&str, &str, &str) {
    (
        vmi["metadata"]["labels"]["app"].as_str().unwrap_or_default(),
        vmi["metadata"]["annotations"]["kubevirt.io/vm-generation"]
            .as_str()
            .unwrap_or_default(),
        vmi["metadata"]["ownerReferences"][0]["uid"]
            .as_str()
            .unwrap_or_default(),
    )
}

#[tokio::test]
async fn a_halted_vm_deletes_its_vmi() {
    let halted = vm("Halted", &["kubevirt.io/virtualMachineControllerFinalize"]);
    let (client, log) = api_server(VecDeque::from([json!({"kind": "Status", "status": "Success"})]));
    let controller = controller(client);
    controller.on_vm_event(Event::Apply(halted.clone()));
    let mut vmi: VirtualMachineInstance = vmi_from_vm(&halted, false);
    vmi.metadata.uid = Some("vmi-uid".to_owned());
    controller.on_vmi_event(Event::Apply(vmi));
    controller.reconcile("default/web").await;
    let sent = taken(&log);
    assert_eq!(
        (sent[0].0.as_str(), sent[0].1.as_str()),
        (
            "DELETE",
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/web"
        )
    );
    assert_eq!(sent[1].0, "PUT");
    assert_eq!(sent[1].2["status"]["printableStatus"], json!("Stopping"));
}

#[tokio::test]
async fn a_started_halted_vm_switches_to_always_and_a_final_vmi_is_released() {
    let mut halted = vm("Halted", &["kubevirt.io/virtualMachineControllerFinalize"]);
    halted.status =
        Some(serde_json::from_value(json!({"stateChangeRequests": [{"action": "Start"}]})).expect("status"));
    let switched = serde_json::to_value(vm("Always", &["kubevirt.io/virtualMachineControllerFinalize"])).expect("json");
    let (client, log) = api_server(VecDeque::from([switched]));
    let first = controller(client);
    first.on_vm_event(Event::Apply(halted));
    first.reconcile("default/web").await;
    let sent = taken(&log);
    assert_eq!(
        sent[0],
        (
            "PATCH".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachines/web".to_owned(),
            json!({"metadata": {"resourceVersion": "5"}, "spec": {"runStrategy": "Always", "running": null}})
        )
    );

    // A final VMI of a Manual VM: the VM controller's finalizer on it is released.
    let manual = vm("Manual", &["kubevirt.io/virtualMachineControllerFinalize"]);
    let mut done = vmi_from_vm(&manual, false);
    done.metadata.uid = Some("vmi-uid".to_owned());
    done.metadata.resource_version = Some("9".to_owned());
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
    let (client, log) = api_server(VecDeque::from([serde_json::to_value(&done).expect("json")]));
    let second = controller(client);
    second.on_vm_event(Event::Apply(manual));
    second.on_vmi_event(Event::Apply(done));
    second.reconcile("default/web").await;
    let sent = taken(&log);
    assert_eq!(
        sent[0],
        (
            "PATCH".to_owned(),
            "/apis/kubevirt.io/v1/namespaces/default/virtualmachineinstances/web".to_owned(),
            json!({"metadata": {"finalizers": [], "resourceVersion": "9"}})
        )
    );
}
