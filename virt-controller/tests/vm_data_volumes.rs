//! A VM's DataVolume templates against the fake API server, as upstream's VM controller handles
//! them: each DataVolume is created owned by the VM, the VMI waits (Provisioning) until the
//! DataVolume is far enough along, a failed one shows as DataVolumeError, orphans are adopted,
//! and a `sourceRef` is resolved through its DataSource, cloning from another namespace only when
//! the VM's service account may.

use std::sync::Arc;

use cdi_api::{DataSource, DataSourceSpec, DataVolumePhase};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use kubevirt_api::clock::ManualClock;
use kubevirt_api::v1::VirtualMachine;
use pretty_assertions::assert_eq;
use serde_json::json;
use virt_controller::claims::ClaimStore;
use virt_controller::cluster_api::{FakeControllerApi, ResourceAccess, Write};
use virt_controller::data_volumes::DataVolumeStore;
use virt_controller::vm_controller::VmController;

const KEY: &str = "default/testvm";
const DV: &str = "default/testvm-root";

fn vm(source: &serde_json::Value) -> VirtualMachine {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1",
        "kind": "VirtualMachine",
        "metadata": {"name": "testvm", "namespace": "default", "uid": "vm-uid", "generation": 1},
        "spec": {
            "runStrategy": "Always",
            "dataVolumeTemplates": [{
                "metadata": {"name": "testvm-root", "labels": {"os": "debian"}},
                "spec": {"storage": {"resources": {"requests": {"storage": "1Gi"}}}}
            }],
            "template": {
                "spec": {
                    "priorityClassName": "vms",
                    "domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {"disks": [{"name": "root", "disk": {}}]}},
                    "volumes": [{"name": "root", "dataVolume": {"name": "testvm-root"}}]
                }
            }
        }
    }))
    .map(|mut vm: VirtualMachine| {
        let spec = vm.spec.data_volume_templates[0].spec.as_object_mut().expect("spec");
        for (key, value) in source.as_object().expect("source").clone() {
            spec.insert(key, value);
        }
        vm
    })
    .expect("VM")
}

struct Rig {
    controller: VmController<FakeControllerApi, Arc<ManualClock>>,
    api: FakeControllerApi,
    data_volumes: Arc<DataVolumeStore>,
    clock: Arc<ManualClock>,
}

impl Rig {
    fn new(vm: VirtualMachine) -> Self {
        let api = FakeControllerApi::new();
        let clock = Arc::new(ManualClock::new(
            "2026-11-29T10:00:00Z".parse::<Timestamp>().expect("time"),
        ));
        let data_volumes = Arc::new(DataVolumeStore::default());
        let controller = VmController::new(api.clone(), clock.clone())
            .with_storage(Arc::new(ClaimStore::default()), data_volumes.clone());
        api.apply_vm(vm);
        Self {
            controller,
            api,
            data_volumes,
            clock,
        }
    }

    /// One pass, after the watches showed what the API server holds.
    async fn settle(&self) {
        if let Some(data_volume) = self.api.data_volume(DV) {
            self.data_volumes.on_event(&Event::Apply(data_volume));
        }
        if let Some(vmi) = self.api.vmi(KEY) {
            self.controller.on_vmi_event(Event::Apply(vmi));
        }
        if let Some(vm) = self.api.vm(KEY) {
            self.controller.on_vm_event(Event::Apply(vm));
        }
        self.controller.reconcile(KEY).await;
    }

    fn printable(&self) -> Option<String> {
        self.api.vm(KEY)?.status?.printable_status
    }

    fn set_phase(&self, phase: DataVolumePhase) {
        self.api
            .modify_data_volume(DV, |dv| dv.status.get_or_insert_default().phase = phase);
    }

    fn vm_events(&self) -> Vec<(String, String)> {
        self.api
            .writes()
            .into_iter()
            .filter_map(|w| match w {
                Write::VmEvent(_, reason, message) => Some((reason, message)),
                _ => None,
            })
            .collect()
    }
}

#[tokio::test]
async fn a_template_becomes_an_owned_data_volume_and_the_vmi_waits_for_it() {
    let rig = Rig::new(vm(&json!({"source": {"blank": {}}})));
    rig.settle().await;
    let dv = rig.api.data_volume(DV).expect("the DataVolume was created");
    let owner = &dv.metadata.owner_references.as_ref().expect("owners")[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.uid.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("VirtualMachine", "vm-uid", Some(true), Some(true))
    );
    let labels = dv.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("kubevirt.io/created-by").map(String::as_str), Some("vm-uid"));
    assert_eq!(
        labels.get("os").map(String::as_str),
        Some("debian"),
        "the template's labels stay"
    );
    let annotations = dv.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations
            .get("cdi.kubevirt.io/allowClaimAdoption")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        dv.spec.priority_class_name.as_deref(),
        Some("vms"),
        "the VM's priority class"
    );
    assert_eq!(
        rig.vm_events(),
        [(
            "SuccessfulDataVolumeCreate".to_owned(),
            "Created DataVolume testvm-root".to_owned()
        )]
    );
    assert!(rig.api.vmi(KEY).is_none(), "no VMI before the DataVolume is done");
    rig.settle().await;
    assert_eq!(rig.printable().as_deref(), Some("Provisioning"));
    assert!(rig.api.vmi(KEY).is_none());

    rig.set_phase(DataVolumePhase::ImportInProgress);
    rig.settle().await;
    assert_eq!(rig.printable().as_deref(), Some("Provisioning"));
    rig.set_phase(DataVolumePhase::Failed);
    rig.settle().await;
    assert_eq!(rig.printable().as_deref(), Some("DataVolumeError"));
    assert!(rig.api.vmi(KEY).is_none());
    assert!(rig.vm_events().contains(&(
        "FailedDataVolumeImport".to_owned(),
        "DataVolume testvm-root failed to import disk image".to_owned()
    )));

    rig.set_phase(DataVolumePhase::Succeeded);
    rig.settle().await;
    assert!(rig.api.vmi(KEY).is_some(), "the DataVolume is done: the VMI is created");
    let creates = rig
        .api
        .writes()
        .into_iter()
        .filter(|w| matches!(w, Write::CreateDataVolume(_)))
        .count();
    assert_eq!(creates, 1, "the DataVolume is created once");
}

fn orphan() -> cdi_api::DataVolume {
    let mut orphan = cdi_api::DataVolume::new("testvm-root", cdi_api::DataVolumeSpec::default());
    orphan.metadata.namespace = Some("default".to_owned());
    orphan.metadata.uid = Some("orphan-uid".to_owned());
    orphan.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        api_version: "v1".to_owned(),
        kind: "ConfigMap".to_owned(),
        name: "keeper".to_owned(),
        uid: "keeper-uid".to_owned(),
        controller: None,
        block_owner_deletion: None,
    }]);
    orphan
}

fn later(strategy: &str) -> VirtualMachine {
    let mut vm = vm(&json!({"source": {"blank": {}}}));
    vm.spec.run_strategy = Some(strategy.to_owned());
    vm.metadata.annotations = Some(
        [(
            "kubevirt.io/immediate-data-volume-creation".to_owned(),
            "false".to_owned(),
        )]
        .into(),
    );
    vm
}

/// An orphan is adopted on every pass, even by a VM that makes its DataVolumes only when it
/// starts, keeping its other owners; the patch names the orphan's uid, so one made again since is
/// not taken.
#[tokio::test]
async fn an_orphan_of_a_template_is_adopted_with_its_owners() {
    let rig = Rig::new(later("Halted"));
    rig.api.apply_data_volume(orphan());
    rig.settle().await;
    let dv = rig.api.data_volume(DV).expect("the DataVolume");
    let owners = dv.metadata.owner_references.unwrap_or_default();
    assert_eq!(
        owners
            .iter()
            .map(|o| (o.uid.as_str(), o.controller))
            .collect::<Vec<_>>(),
        [("keeper-uid", None), ("vm-uid", Some(true))]
    );
    let patch = rig.api.writes().into_iter().find_map(|w| match w {
        Write::PatchDataVolume(_, patch) => Some(patch),
        _ => None,
    });
    assert_eq!(patch.map(|p| p["metadata"]["uid"].clone()), Some(json!("orphan-uid")));
}

/// A VM that makes its DataVolumes at its start makes none while Halted (Stopped); one that
/// makes them at once does so whatever its strategy, and shows Provisioning while they fill.
#[tokio::test]
async fn data_volumes_are_made_at_once_unless_the_vm_waits_for_its_start() {
    let rig = Rig::new(later("Halted"));
    rig.settle().await;
    assert!(rig.api.data_volume(DV).is_none());
    assert_eq!(rig.printable().as_deref(), Some("Stopped"));

    let rig = Rig::new(later("Always"));
    rig.settle().await;
    assert!(rig.api.data_volume(DV).is_some(), "made when the VM starts");
    assert!(rig.api.vmi(KEY).is_none(), "and the VMI waits for it");

    let mut at_once = vm(&json!({"source": {"blank": {}}}));
    at_once.spec.run_strategy = Some("Halted".to_owned());
    let rig = Rig::new(at_once);
    rig.settle().await;
    assert!(rig.api.data_volume(DV).is_some(), "made at once, whatever the strategy");
    rig.settle().await;
    assert_eq!(
        rig.printable().as_deref(),
        Some("Provisioning"),
        "a stopped VM's DataVolume still fills"
    );
    assert!(rig.api.vmi(KEY).is_none());
}

/// The same failure on later passes writes nothing again (its transition time stays), and a
/// DataVolume made meanwhile by someone else is no failure and no event.
#[tokio::test]
async fn a_repeated_failure_writes_once_and_a_lost_race_is_no_failure() {
    let rig = Rig::new(vm(&json!({"sourceRef": {"kind": "DataSource", "name": "missing"}})));
    rig.settle().await;
    let status_writes = |rig: &Rig| {
        rig.api
            .writes()
            .iter()
            .filter(|w| matches!(w, Write::VmStatus(_)))
            .count()
    };
    let after_first = status_writes(&rig);
    rig.clock.advance(std::time::Duration::from_secs(30));
    rig.settle().await;
    rig.clock.advance(std::time::Duration::from_secs(30));
    rig.settle().await;
    assert_eq!(
        status_writes(&rig),
        after_first,
        "the same Failure is not written again"
    );

    let rig = Rig::new(vm(&json!({"source": {"blank": {}}})));
    // Someone made it; the watch has not shown it yet.
    let mut theirs = cdi_api::DataVolume::new("testvm-root", cdi_api::DataVolumeSpec::default());
    theirs.metadata.namespace = Some("default".to_owned());
    rig.api.apply_data_volume(theirs);
    rig.controller.on_vm_event(Event::Apply(rig.api.vm(KEY).expect("VM")));
    rig.controller.reconcile(KEY).await;
    assert!(rig.vm_events().is_empty(), "{:?}", rig.vm_events());
    let failure = rig
        .api
        .vm(KEY)
        .and_then(|vm| vm.status)
        .and_then(|s| s.conditions.into_iter().find(|c| c.condition_type == "Failure"));
    assert!(failure.is_none(), "{failure:?}");
}

fn data_source(namespace: &str) -> DataSource {
    let mut source = DataSource::new(
        "debian",
        serde_json::from_value::<DataSourceSpec>(
            json!({"source": {"pvc": {"namespace": "images", "name": "debian-12"}}}),
        )
        .expect("spec"),
    );
    source.metadata.namespace = Some(namespace.to_owned());
    source
}

#[tokio::test]
async fn a_source_ref_is_resolved_and_a_clone_from_elsewhere_needs_the_right() {
    let source_ref = json!({"sourceRef": {"kind": "DataSource", "name": "debian", "namespace": "images"}});
    let rig = Rig::new(vm(&source_ref));
    rig.settle().await;
    let failure = rig
        .api
        .vm(KEY)
        .and_then(|vm| vm.status)
        .and_then(|s| s.conditions.into_iter().find(|c| c.condition_type == "Failure"))
        .expect("a Failure condition");
    assert_eq!(failure.reason.as_deref(), Some("FailedCreate"));
    assert_eq!(
        failure.message.as_deref(),
        Some(
            "Error encountered while creating DataVolumes: DataVolume testvm-root: unable to create DataVolume manifest: \
             DataSource images/debian not found"
        )
    );
    assert!(rig.api.data_volume(DV).is_none());

    rig.api.apply_data_source(data_source("images"));
    rig.settle().await;
    assert!(rig.api.data_volume(DV).is_none(), "default may not clone from images");
    assert!(
        rig.vm_events().contains(&(
            "UnauthorizedDataVolumeCreate".to_owned(),
            "Not authorized to create DataVolume testvm-root: not authorized to create DataVolume: User \
         system:serviceaccount:default:default has insufficient permissions in clone source namespace images"
                .to_owned()
        ))
    );

    rig.api.allow(
        "system:serviceaccount:default:default",
        &ResourceAccess {
            namespace: "images".to_owned(),
            verb: "create".to_owned(),
            group: "cdi.kubevirt.io".to_owned(),
            resource: "datavolumes".to_owned(),
            subresource: "source".to_owned(),
        },
    );
    rig.settle().await;
    let dv = rig.api.data_volume(DV).expect("created once allowed");
    assert!(dv.spec.source_ref.is_none(), "resolved");
    let pvc = dv.spec.source.and_then(|s| s.pvc).expect("a PVC source");
    assert_eq!((pvc.namespace.as_str(), pvc.name.as_str()), ("images", "debian-12"));
    let failure = rig
        .api
        .vm(KEY)
        .and_then(|vm| vm.status)
        .and_then(|s| s.conditions.into_iter().find(|c| c.condition_type == "Failure"));
    assert!(failure.is_none(), "the Failure condition went: {failure:?}");
}
