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
