//! The VM controller with instance types and preferences, against the in-memory API server: the
//! objects are stored as ControllerRevisions owned by the VM and recorded in its status, the VMI
//! gets them applied, and a missing or conflicting instance type stops the start with upstream's
//! reason and message.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::ManualClock;
use kubevirt_api::instancetype::{
    KindNames, VirtualMachineClusterInstancetype, VirtualMachineClusterPreference, VirtualMachineInstancetype,
};
use kubevirt_api::v1::VirtualMachine;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use virt_controller::cluster_api::{FakeControllerApi, Write};
use virt_controller::vm_controller::VmController;

const KEY: &str = "default/testvm";

type Controller = VmController<FakeControllerApi, Arc<ManualClock>>;

fn vm(instancetype: Value, preference: Value, template_domain: &Value) -> VirtualMachine {
    let mut spec = json!({
        "runStrategy": "Always",
        "template": {"spec": {"domain": template_domain.clone()}}
    });
    if !instancetype.is_null() {
        spec["instancetype"] = instancetype;
    }
    if !preference.is_null() {
        spec["preference"] = preference;
    }
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "testvm", "namespace": "default", "uid": "vm-uid", "generation": 1},
        "spec": spec
    }))
    .expect("VM")
}

fn setup() -> (Controller, FakeControllerApi) {
    let api = FakeControllerApi::new();
    let clock = Arc::new(ManualClock::new(
        "2026-11-21T10:00:00Z".parse::<Timestamp>().expect("time"),
    ));
    (VmController::new(api.clone(), clock), api)
}

fn add(api: &FakeControllerApi, kind: &KindNames, name: &str, spec: &Value) {
    api.apply_instancetype_object(kind, "default", json!({"metadata": {"name": name}, "spec": spec}));
}

async fn settle(controller: &Controller, api: &FakeControllerApi) {
    for _ in 0..2 {
        if let Some(vmi) = api.vmi(KEY) {
            controller.on_vmi_event(Event::Apply(vmi));
        }
        if let Some(vm) = api.vm(KEY) {
            controller.on_vm_event(Event::Apply(vm));
        }
        controller.reconcile(KEY).await;
    }
}

fn failure(api: &FakeControllerApi) -> Option<(String, String)> {
    let status = api.vm(KEY)?.status?;
    let condition = status.conditions.into_iter().find(|c| c.condition_type == "Failure")?;
    Some((condition.reason?, condition.message?))
}

#[tokio::test]
async fn the_instance_type_and_preference_are_stored_as_revisions_and_applied_to_the_vmi() {
    let (controller, api) = setup();
    add(
        &api,
        &VirtualMachineClusterInstancetype::NAMES,
        "u1.medium",
        &json!({"cpu": {"guest": 2}, "memory": {"guest": "4Gi"}, "annotations": {"team": "db"}}),
    );
    add(
        &api,
        &VirtualMachineClusterPreference::NAMES,
        "fedora",
        &json!({"cpu": {"preferredCPUTopology": "cores"}, "devices": {"preferredDiskBus": "virtio"}}),
    );
    api.apply_vm(vm(
        json!({"name": "u1.medium", "kind": "VirtualMachineClusterInstancetype"}),
        json!({"name": "fedora"}),
        &json!({"devices": {"disks": [{"name": "root"}]}}),
    ));
    settle(&controller, &api).await;

    let revisions = api.revisions();
    let names: Vec<&String> = revisions.keys().collect();
    assert_eq!(
        names,
        [
            "default/testvm-fedora-v1beta1-virtualmachineclusterpreference-uid-2-1",
            "default/testvm-u1.medium-v1beta1-virtualmachineclusterinstancetype-uid-1-1"
        ]
    );
    let revision = &revisions["default/testvm-u1.medium-v1beta1-virtualmachineclusterinstancetype-uid-1-1"];
    let owner = &revision.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("VirtualMachine", "vm-uid", Some(true))
    );
    let labels = revision.metadata.labels.clone().expect("labels");
    assert_eq!(
        labels["instancetype.kubevirt.io/object-kind"],
        "VirtualMachineClusterInstancetype"
    );
    assert_eq!(labels["instancetype.kubevirt.io/object-name"], "u1.medium");
    assert_eq!(labels["instancetype.kubevirt.io/object-version"], "v1beta1");
    assert_eq!(labels["instancetype.kubevirt.io/object-generation"], "1");
    let data = &revision.data.as_ref().expect("data").0;
    assert_eq!(data["kind"], "VirtualMachineClusterInstancetype");
    assert_eq!(data["spec"]["cpu"]["guest"], 2);

    let status = api.vm(KEY).and_then(|v| v.status).expect("status");
    let it_ref = serde_json::to_value(status.instancetype_ref).expect("json");
    assert_eq!(
        it_ref,
        json!({"name": "u1.medium", "kind": "VirtualMachineClusterInstancetype",
               "controllerRevisionRef": {"name": "testvm-u1.medium-v1beta1-virtualmachineclusterinstancetype-uid-1-1"}})
    );
    assert!(status.preference_ref.and_then(|r| r.controller_revision_ref).is_some());
    assert!(
        api.vm(KEY)
            .expect("vm")
            .spec
            .instancetype
            .and_then(|m| m.revision_name)
            .is_none(),
        "spec untouched"
    );

    let vmi = api.vmi(KEY).expect("VMI created");
    let cpu = vmi.spec.domain.cpu.clone().expect("cpu");
    assert_eq!((cpu.sockets, cpu.cores, cpu.threads), (Some(1), Some(2), Some(1)));
    assert_eq!(
        vmi.spec.domain.memory.and_then(|m| m.guest).map(|q| q.0).as_deref(),
        Some("4Gi")
    );
    assert_eq!(
        vmi.spec.domain.devices.disks[0]
            .disk
            .as_ref()
            .and_then(|d| d.bus.clone())
            .as_deref(),
        Some("virtio")
    );
    let annotations = vmi.metadata.annotations.expect("annotations");
    assert_eq!(annotations["kubevirt.io/cluster-instancetype-name"], "u1.medium");
    assert_eq!(annotations["kubevirt.io/cluster-preference-name"], "fedora");
    assert_eq!(annotations["team"], "db");
}

#[tokio::test]
async fn a_changed_instance_type_does_not_change_a_vm_that_recorded_it() {
    let (controller, api) = setup();
    add(
        &api,
        &VirtualMachineInstancetype::NAMES,
        "small",
        &json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}),
    );
    api.apply_vm(vm(
        json!({"name": "small", "kind": "VirtualMachineInstancetype"}),
        Value::Null,
        &json!({"devices": {}}),
    ));
    settle(&controller, &api).await;
    add(
        &api,
        &VirtualMachineInstancetype::NAMES,
        "small",
        &json!({"cpu": {"guest": 8}, "memory": {"guest": "8Gi"}}),
    );
    let old = api.vmi(KEY).expect("VMI");
    api.finish_vmi_deletion(KEY);
    controller.on_vmi_event(Event::Delete(old));
    settle(&controller, &api).await;
    let vmi = api.vmi(KEY).expect("VMI recreated");
    assert_eq!(
        vmi.spec.domain.cpu.and_then(|c| c.sockets),
        Some(1),
        "the stored revision's vCPUs"
    );
    assert_eq!(
        vmi.metadata.annotations.expect("annotations")["kubevirt.io/instancetype-name"],
        "small"
    );
    assert_eq!(api.revisions().len(), 1);
}

#[tokio::test]
async fn a_missing_instance_type_stops_the_start_with_upstreams_reason() {
    let (controller, api) = setup();
    api.apply_vm(vm(json!({"name": "nowhere"}), Value::Null, &json!({"devices": {}})));
    settle(&controller, &api).await;
    assert!(api.vmi(KEY).is_none());
    assert_eq!(
        failure(&api),
        Some((
            "FailedFindInstancetype".to_owned(),
            "virtualmachineclusterinstancetypes.instancetype.kubevirt.io \"nowhere\" not found".to_owned()
        ))
    );
    assert!(!api.writes().iter().any(|w| matches!(w, Write::CreateVmi(_))));
}

#[tokio::test]
async fn a_template_that_conflicts_with_the_instance_type_is_not_started() {
    let (controller, api) = setup();
    add(
        &api,
        &VirtualMachineClusterInstancetype::NAMES,
        "u1.small",
        &json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}),
    );
    api.apply_vm(vm(
        json!({"name": "u1.small"}),
        Value::Null,
        &json!({"devices": {}, "cpu": {"sockets": 2}}),
    ));
    settle(&controller, &api).await;
    assert!(api.vmi(KEY).is_none());
    assert_eq!(
        failure(&api),
        Some((
            "FailedCreate".to_owned(),
            "VMI conflicts with instancetype spec in fields: [spec.domain.cpu.sockets]".to_owned()
        ))
    );
}

#[tokio::test]
async fn a_pinned_revision_is_used_and_a_foreign_revision_of_the_same_name_is_refused() {
    let (controller, api) = setup();
    add(
        &api,
        &VirtualMachineClusterInstancetype::NAMES,
        "u1.small",
        &json!({"cpu": {"guest": 1}, "memory": {"guest": "1Gi"}}),
    );
    api.apply_vm(vm(json!({"name": "u1.small"}), Value::Null, &json!({"devices": {}})));
    settle(&controller, &api).await;
    let stored = api.revisions().into_keys().next().expect("a revision");

    // A second VM pinned to the first one's revision gets its spec even after the object changes.
    add(
        &api,
        &VirtualMachineClusterInstancetype::NAMES,
        "u1.small",
        &json!({"cpu": {"guest": 4}, "memory": {"guest": "1Gi"}}),
    );
    let mut pinned = vm(
        json!({"name": "u1.small", "revisionName": stored.trim_start_matches("default/")}),
        Value::Null,
        &json!({"devices": {}}),
    );
    pinned.metadata.name = Some("pinned".to_owned());
    api.apply_vm(pinned.clone());
    controller.on_vm_event(Event::Apply(api.vm("default/pinned").expect("vm")));
    controller.reconcile("default/pinned").await;
    let vmi = api.vmi("default/pinned").expect("VMI");
    assert_eq!(vmi.spec.domain.cpu.and_then(|c| c.sockets), Some(1));
}

#[tokio::test]
async fn the_default_pod_interface_and_disks_get_the_preferences_model_and_bus() {
    let (controller, api) = setup();
    add(
        &api,
        &VirtualMachineClusterPreference::NAMES,
        "windows",
        &json!({"devices": {"preferredInterfaceModel": "e1000", "preferredDiskBus": "sata"}}),
    );
    let mut windows = vm(Value::Null, json!({"name": "windows"}), &json!({"devices": {}}));
    windows.spec.template.spec.as_mut().expect("template").volumes = serde_json::from_value(json!([
        {"name": "root", "persistentVolumeClaim": {"claimName": "disk-windows"}}
    ]))
    .expect("volumes");
    api.apply_vm(windows);
    settle(&controller, &api).await;
    let vmi = api.vmi(KEY).expect("VMI created");
    let devices = &vmi.spec.domain.devices;
    assert_eq!(
        (devices.interfaces.len(), devices.interfaces[0].name.as_str()),
        (1, "default"),
        "the default pod interface, added before the preference"
    );
    assert_eq!(devices.interfaces[0].model.as_deref(), Some("e1000"));
    assert!(devices.interfaces[0].bridge.is_some(), "upstream's default binding");
    assert_eq!(
        devices.disks[0].disk.as_ref().and_then(|d| d.bus.as_deref()),
        Some("sata"),
        "the volume's default disk takes the preferred bus"
    );

    let (controller, api) = setup();
    add(
        &api,
        &VirtualMachineClusterPreference::NAMES,
        "no-nic",
        &json!({"devices": {"preferredAutoattachPodInterface": false, "preferredInterfaceModel": "e1000"}}),
    );
    api.apply_vm(vm(Value::Null, json!({"name": "no-nic"}), &json!({"devices": {}})));
    settle(&controller, &api).await;
    let vmi = api.vmi(KEY).expect("VMI created");
    assert!(
        vmi.spec.domain.devices.interfaces.is_empty(),
        "the preference's autoattach choice counts before the default is added"
    );
}
