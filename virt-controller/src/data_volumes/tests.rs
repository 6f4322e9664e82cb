//! The DataVolume decisions: every phase against each rule, the templates plan and the VMI gate.

use cdi_api::{DataVolumeCondition, DataVolumeSpec, DataVolumeStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kubevirt_api::v1::{DataVolumeTemplateSpec, PersistentVolumeClaimSource, Volume};

use super::*;

const ALL_PHASES: [Phase; 23] = [
    Phase::Unset,
    Phase::Pending,
    Phase::PvcBound,
    Phase::ImportScheduled,
    Phase::ImportInProgress,
    Phase::CloneScheduled,
    Phase::CloneInProgress,
    Phase::SnapshotForSmartCloneInProgress,
    Phase::CloneFromSnapshotSourceInProgress,
    Phase::SmartClonePvcInProgress,
    Phase::CsiCloneInProgress,
    Phase::ExpansionInProgress,
    Phase::NamespaceTransferInProgress,
    Phase::UploadScheduled,
    Phase::UploadReady,
    Phase::WaitForFirstConsumer,
    Phase::PendingPopulation,
    Phase::Succeeded,
    Phase::Failed,
    Phase::Unknown,
    Phase::Paused,
    Phase::PrepClaimInProgress,
    Phase::RebindInProgress,
];

fn facts(phase: Phase) -> DataVolumeFacts {
    DataVolumeFacts {
        phase,
        ..DataVolumeFacts::default()
    }
}

fn condition_of(status: &str, reason: &str) -> ConditionFacts {
    ConditionFacts {
        status: status.to_owned(),
        reason: reason.to_owned(),
    }
}

#[test]
fn every_phase_against_each_rule() {
    for phase in ALL_PHASES {
        let unbound = facts(phase);
        let is_bound = DataVolumeFacts {
            bound: Some(condition_of("True", "Bound")),
            ..facts(phase)
        };
        let done = matches!(phase, Phase::Succeeded | Phase::PendingPopulation);
        assert_eq!(
            unbound.lets_vm_start(),
            done || phase == Phase::WaitForFirstConsumer,
            "{phase:?}"
        );
        assert_eq!(unbound.has_error(), phase == Phase::Failed, "{phase:?}");
        assert_eq!(
            unbound.is_provisioning(),
            !done && phase != Phase::WaitForFirstConsumer,
            "{phase:?} unbound"
        );
        assert_eq!(is_bound.is_provisioning(), !done, "{phase:?} bound");
        let quota = DataVolumeFacts {
            bound: Some(condition_of("False", "ErrExceededQuota")),
            ..facts(phase)
        };
        assert_eq!(quota.exceeds_quota(), phase == Phase::Pending, "{phase:?}");
    }
}

#[test]
fn a_failing_pod_is_an_error_whatever_the_phase() {
    for reason in ["Error", "ImagePullFailed"] {
        let running = DataVolumeFacts {
            running: Some(condition_of("False", reason)),
            ..facts(Phase::ImportInProgress)
        };
        assert!(running.has_error(), "{reason}");
    }
    let other = DataVolumeFacts {
        running: Some(condition_of("False", "Completed")),
        ..facts(Phase::Succeeded)
    };
    assert!(!other.has_error());
}

fn data_volume(name: &str, phase: Phase, owner: Option<&str>, ready: Option<&str>) -> DataVolume {
    let mut dv = DataVolume::new(name, DataVolumeSpec::default());
    dv.metadata.namespace = Some("ns".to_owned());
    dv.metadata.owner_references = owner.map(|uid| {
        vec![OwnerReference {
            api_version: "kubevirt.io/v1".to_owned(),
            kind: "VirtualMachine".to_owned(),
            name: "vm".to_owned(),
            uid: uid.to_owned(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]
    });
    dv.status = Some(DataVolumeStatus {
        phase,
        conditions: ready
            .map(|status| {
                vec![DataVolumeCondition {
                    condition_type: "Ready".to_owned(),
                    state: cdi_api::data_volume::ConditionState {
                        status: status.to_owned(),
                        ..cdi_api::data_volume::ConditionState::default()
                    },
                }]
            })
            .unwrap_or_default(),
        ..DataVolumeStatus::default()
    });
    dv
}

fn vm_with_templates(names: &[&str]) -> VirtualMachine {
    let mut vm = VirtualMachine::default();
    vm.metadata.namespace = Some("ns".to_owned());
    vm.spec.data_volume_templates = names
        .iter()
        .map(|name| DataVolumeTemplateSpec {
            metadata: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some((*name).to_owned()),
                ..Default::default()
            }),
            ..DataVolumeTemplateSpec::default()
        })
        .collect();
    vm
}

#[test]
fn the_templates_plan_creates_adopts_and_waits() {
    let store = DataVolumeStore::default();
    store.on_event(&Event::Apply(data_volume(
        "owned",
        Phase::ImportInProgress,
        Some("u"),
        None,
    )));
    store.on_event(&Event::Apply(data_volume("orphan", Phase::Succeeded, None, None)));
    store.on_event(&Event::Apply(data_volume("broken", Phase::Failed, Some("u"), None)));
    let vm = vm_with_templates(&["owned", "orphan", "missing", "broken"]);
    let plan = plan_templates(&vm, |name| store.get("ns", name));
    assert_eq!(
        plan,
        TemplatesPlan {
            create: vec![2],
            adopt: vec![Orphan {
                name: "orphan".to_owned(),
                uid: None,
                owners: vec![],
            }],
            failed: vec!["broken".to_owned()],
            over_quota: vec![],
            ready: false,
        }
    );
    store.on_event(&Event::Apply(data_volume("owned", Phase::Succeeded, Some("u"), None)));
    store.on_event(&Event::Apply(data_volume(
        "missing",
        Phase::PendingPopulation,
        Some("u"),
        None,
    )));
    let vm = vm_with_templates(&["owned", "orphan", "missing"]);
    assert!(plan_templates(&vm, |name| store.get("ns", name)).ready);
    assert!(
        plan_templates(&vm_with_templates(&[]), |_| None).ready,
        "no templates, nothing to wait for"
    );
}

fn vmi_with(volumes: Vec<Volume>) -> VirtualMachineInstance {
    let mut vmi = VirtualMachineInstance::default();
    vmi.metadata.namespace = Some("ns".to_owned());
    vmi.spec.volumes = volumes;
    vmi
}

fn dv_volume(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        data_volume: Some(kubevirt_api::v1::DataVolumeSource {
            name: name.to_owned(),
            ..kubevirt_api::v1::DataVolumeSource::default()
        }),
        ..Volume::default()
    }
}

fn pvc_volume(name: &str) -> Volume {
    Volume {
        name: name.to_owned(),
        persistent_volume_claim: Some(PersistentVolumeClaimSource {
            claim_name: name.to_owned(),
            ..PersistentVolumeClaimSource::default()
        }),
        ..Volume::default()
    }
}

#[test]
fn the_vmi_gate_waits_for_the_data_volumes_that_fill_its_claims() {
    let store = DataVolumeStore::default();
    let vmi = vmi_with(vec![dv_volume("root"), pvc_volume("plain"), pvc_volume("filled")]);
    // root and filled are DataVolumes' claims; plain is a user's.
    let filled = |name: &str| Some(name != "plain");
    let gate = vmi_gate(&vmi, filled, |name| store.get("ns", name));
    assert_eq!(
        gate.wait,
        Some(DataVolumeWait::Unknown(
            "Error determining if volume is ready: DataVolume ns/root not found".to_owned()
        ))
    );
    assert_eq!(gate.condition, None, "no DataVolume is there to sum up");
    store.on_event(&Event::Apply(data_volume("filled", Phase::Succeeded, None, None)));
    assert_eq!(
        vmi_gate(&vmi, filled, |name| store.get("ns", name))
            .condition
            .map(|c| c.0),
        Some("Unknown"),
        "one without a Ready condition"
    );
    store.on_event(&Event::Apply(data_volume(
        "root",
        Phase::ImportInProgress,
        None,
        Some("False"),
    )));
    store.on_event(&Event::Apply(data_volume(
        "filled",
        Phase::Succeeded,
        None,
        Some("True"),
    )));
    let gate = vmi_gate(&vmi, filled, |name| store.get("ns", name));
    assert_eq!(gate.wait, Some(DataVolumeWait::Populating));
    assert_eq!(gate.condition.map(|c| (c.0, c.1)), Some(("False", "NotAllDVsReady")));
    store.on_event(&Event::Apply(data_volume(
        "root",
        Phase::WaitForFirstConsumer,
        None,
        Some("False"),
    )));
    assert_eq!(
        vmi_gate(&vmi, filled, |name| store.get("ns", name)).wait,
        Some(DataVolumeWait::WaitForFirstConsumer),
        "a claim waiting for its first consumer gets a temporary pod"
    );
    store.on_event(&Event::Apply(data_volume("root", Phase::Failed, None, Some("False"))));
    assert!(vmi_gate(&vmi, filled, |name| store.get("ns", name)).failed);
    store.on_event(&Event::Apply(data_volume(
        "root",
        Phase::PendingPopulation,
        None,
        Some("True"),
    )));
    let gate = vmi_gate(&vmi, filled, |name| store.get("ns", name));
    assert_eq!(gate.wait, None);
    assert_eq!(gate.condition.map(|c| c.1), Some("AllDVsReady"));
    let unclaimed = vmi_with(vec![dv_volume("early")]);
    store.on_event(&Event::Apply(data_volume("early", Phase::Failed, None, Some("False"))));
    let gate = vmi_gate(&unclaimed, |_| None, |name| store.get("ns", name));
    assert!(
        gate.failed,
        "a DataVolume that failed before making its claim fails the VMI too"
    );
    let plain_only = vmi_with(vec![pvc_volume("plain")]);
    assert_eq!(
        vmi_gate(&plain_only, filled, |_| None),
        VmiGate::default(),
        "no DataVolumes, no condition"
    );
}

#[test]
fn a_claim_waiting_for_its_consumer_gets_a_temporary_pod_only_once_the_others_are_filled() {
    let store = DataVolumeStore::default();
    let vmi = vmi_with(vec![dv_volume("root"), dv_volume("data")]);
    let filled = |_: &str| Some(true);
    let gate = |store: &DataVolumeStore| vmi_gate(&vmi, filled, |name| store.get("ns", name)).wait;
    for (root, data, wanted) in [
        (
            Phase::WaitForFirstConsumer,
            Phase::ImportInProgress,
            DataVolumeWait::Populating,
        ),
        (
            Phase::ImportInProgress,
            Phase::WaitForFirstConsumer,
            DataVolumeWait::Populating,
        ),
        (
            Phase::WaitForFirstConsumer,
            Phase::Succeeded,
            DataVolumeWait::WaitForFirstConsumer,
        ),
        (
            Phase::Succeeded,
            Phase::WaitForFirstConsumer,
            DataVolumeWait::WaitForFirstConsumer,
        ),
        (
            Phase::WaitForFirstConsumer,
            Phase::WaitForFirstConsumer,
            DataVolumeWait::WaitForFirstConsumer,
        ),
    ] {
        store.on_event(&Event::Apply(data_volume("root", root, None, None)));
        store.on_event(&Event::Apply(data_volume("data", data, None, None)));
        assert_eq!(gate(&store), Some(wanted.clone()), "{root:?} {data:?}");
    }
    store.on_event(&Event::Apply(data_volume("root", Phase::Succeeded, None, None)));
    store.on_event(&Event::Apply(data_volume("data", Phase::Succeeded, None, None)));
    assert_eq!(gate(&store), None);
    let missing = DataVolumeStore::default();
    missing.on_event(&Event::Apply(data_volume(
        "root",
        Phase::WaitForFirstConsumer,
        None,
        None,
    )));
    assert!(
        matches!(gate(&missing), Some(DataVolumeWait::Unknown(_))),
        "a DataVolume not there holds the pod back"
    );
}
