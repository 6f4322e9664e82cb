//! A watch that expired lists everything again and sends no deletions: the controllers drop what
//! the new list left out and look again at what it belonged to.

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::SystemClock;
use kubevirt_api::v1::VirtualMachineInstance;
use serde_json::json;
use virt_controller::cluster_api::FakeControllerApi;
use virt_controller::pod::PodConfig;
use virt_controller::vm_controller::VmController;
use virt_controller::vmi_controller::VmiController;

fn vmi(name: &str) -> VirtualMachineInstance {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid")},
        "spec": {"domain": {"devices": {}}}
    }))
    .expect("vmi")
}

fn launcher_pod(vmi: &str, name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": format!("{vmi}-uid")},
                     "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                          "name": vmi, "uid": format!("{vmi}-uid"), "controller": true}]},
        "spec": {"containers": []}
    }))
    .expect("pod")
}

#[test]
fn a_vmi_deleted_while_the_watch_was_down_wakes_its_vm() {
    let controller = VmController::new(FakeControllerApi::new(), SystemClock);
    controller.on_vmi_event(Event::Apply(vmi("gone")));
    controller.on_vmi_event(Event::Apply(vmi("kept")));
    controller.on_vmi_event(Event::Init);
    controller.on_vmi_event(Event::InitApply(vmi("kept")));
    assert_eq!(controller.on_vmi_event(Event::InitDone), ["default/gone"]);
}

#[test]
fn a_vmi_or_pod_deleted_while_the_watch_was_down_is_forgotten() {
    let controller = VmiController::new(
        FakeControllerApi::new(),
        SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
    );
    controller.on_vmi_event(Event::Apply(vmi("gone")));
    controller.on_vmi_event(Event::Apply(vmi("kept")));
    controller.on_vmi_event(Event::Init);
    controller.on_vmi_event(Event::InitApply(vmi("kept")));
    assert_eq!(controller.on_vmi_event(Event::InitDone), ["default/gone"]);
    assert_eq!(
        controller.phase_counts().values().sum::<u64>(),
        1,
        "only the kept VMI counts"
    );

    controller.on_pod_event(Event::Apply(launcher_pod("kept", "virt-launcher-kept-a")));
    controller.on_pod_event(Event::Apply(launcher_pod("kept", "virt-launcher-kept-b")));
    controller.on_pod_event(Event::Init);
    controller.on_pod_event(Event::InitApply(launcher_pod("kept", "virt-launcher-kept-b")));
    assert_eq!(
        controller.on_pod_event(Event::InitDone),
        ["default/kept"],
        "the VMI whose pod went is looked at again"
    );
}
