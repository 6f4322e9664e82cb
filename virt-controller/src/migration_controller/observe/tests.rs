use kube::runtime::watcher::Event;
use kubevirt_api::clock::SystemClock;
use kubevirt_api::v1::VirtualMachineInstanceMigration;

use crate::cluster_api::FakeControllerApi;
use crate::migration_controller::MigrationController;
use crate::pod::PodConfig;

fn migration(name: &str) -> VirtualMachineInstanceMigration {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "uid": format!("{name}-uid")},
        "spec": {"vmiName": "vm1"}
    }))
    .expect("migration")
}

#[test]
fn a_relist_drops_what_was_deleted_during_the_gap() {
    let controller = MigrationController::new(
        FakeControllerApi::new(),
        SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
        std::sync::Arc::default(),
    );
    controller.on_migration_event(Event::Apply(migration("gone")));
    controller.on_migration_event(Event::Apply(migration("kept")));
    // The watch expired; the list that follows names only one of them.
    controller.on_migration_event(Event::Init);
    controller.on_migration_event(Event::InitApply(migration("kept")));
    let known = controller.on_migration_event(Event::InitDone);
    assert_eq!(known, ["default/kept"]);
    // A list done without having started keeps everything.
    assert_eq!(controller.on_migration_event(Event::InitDone), ["default/kept"]);
}

fn target_pod(resource_version: &str, unschedulable: bool) -> k8s_openapi::api::core::v1::Pod {
    let conditions = if unschedulable {
        serde_json::json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
    } else {
        serde_json::json!([])
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": "virt-launcher-vm1-target", "namespace": "default", "resourceVersion": resource_version,
            "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
                                 "name": "vm1", "uid": "vm1-uid", "controller": true}]
        },
        "status": {"phase": "Pending", "conditions": conditions}
    }))
    .expect("pod")
}

/// Regression (#31): the scheduler's unschedulable mark can reach the watch before the creation's
/// answer reaches the controller; the older answer must not hide it, or the migration waits out
/// the 15-minute pending timeout instead of the unschedulable one.
#[test]
fn a_created_target_pod_never_hides_a_newer_state_the_watch_showed() {
    let controller = MigrationController::new(
        FakeControllerApi::new(),
        SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
        std::sync::Arc::default(),
    );
    let unschedulable = |c: &MigrationController<FakeControllerApi, SystemClock>| {
        c.known().pods["default/vm1"]["virt-launcher-vm1-target"]
            .unschedulable
            .is_some()
    };
    controller.on_pod_event(Event::Apply(target_pod("12", true)));
    controller.on_pod_created(&target_pod("11", false));
    assert!(unschedulable(&controller), "the watch's newer pod is kept");
    // The answer first, then the watch: the watch's state wins as always.
    let controller = MigrationController::new(
        FakeControllerApi::new(),
        SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
        std::sync::Arc::default(),
    );
    controller.on_pod_created(&target_pod("11", false));
    assert!(!unschedulable(&controller));
    controller.on_pod_event(Event::Apply(target_pod("12", true)));
    assert!(unschedulable(&controller));
}

/// A migration waiting for settings it could not use is looked at again when they change (#31).
#[test]
fn a_changed_configuration_looks_at_every_migration_again() {
    let pods = PodConfig::new("registry.example/virt-launcher:v0.1.0");
    let controller = MigrationController::new(
        FakeControllerApi::new(),
        SystemClock,
        pods.clone(),
        std::sync::Arc::default(),
    );
    controller.on_migration_event(Event::Apply(migration("waiting")));
    assert!(
        controller.set_cluster_configuration(None, pods.clone()).is_empty(),
        "nothing changed"
    );
    let kubevirt: kubevirt_api::v1::KubeVirt = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
        "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
        "spec": {"configuration": {"migrations": {"parallelMigrationsPerCluster": 9}}}
    }))
    .expect("KubeVirt");
    assert_eq!(
        controller.set_cluster_configuration(Some(&kubevirt), pods.clone()),
        ["default/waiting"]
    );
    assert!(controller.set_cluster_configuration(Some(&kubevirt), pods).is_empty());
}
