//! The state-claim decision as a full matrix, and the choices a new claim is made with.

use super::*;

fn claim(phase: Option<&str>) -> StateClaim {
    StateClaim {
        name: "persistent-state-for-vm-x1".to_owned(),
        phase: phase.map(str::to_owned),
        storage_class: Some("hostpath-csi".to_owned()),
        labelled: true,
    }
}

#[test]
fn every_need_claim_and_binding_has_one_step() {
    let phases = [None, Some("Pending"), Some("Bound"), Some("Lost")];
    let bindings = [
        ClassBinding::NotNeeded,
        ClassBinding::WaitsForFirstConsumer,
        ClassBinding::Immediate,
        ClassBinding::Unknown("storage class gone not found".to_owned()),
    ];
    let ready = StateStep::Ready("persistent-state-for-vm-x1".to_owned());
    let not_ready = StateStep::Wait {
        reason: REASON_NOT_READY,
        message: "the VM state PVC persistent-state-for-vm-x1 is not bound yet".to_owned(),
    };
    for needed in [false, true] {
        for binding in &bindings {
            let without = decide(needed, None, binding);
            assert_eq!(
                without,
                if needed { StateStep::Create } else { StateStep::Nothing },
                "no claim, needed {needed}, {binding:?}"
            );
            for phase in phases {
                let step = decide(needed, Some(&claim(phase)), binding);
                let expected = match (needed, phase, binding) {
                    (false, _, _) => StateStep::Delete("persistent-state-for-vm-x1".to_owned()),
                    (true, Some("Lost"), _) => StateStep::Wait {
                        reason: REASON_PROBE_FAILED,
                        message: "backend storage PVC lost".to_owned(),
                    },
                    (true, Some("Bound"), _) | (true, _, ClassBinding::WaitsForFirstConsumer) => ready.clone(),
                    (true, _, ClassBinding::Unknown(why)) => StateStep::Wait {
                        reason: REASON_PROBE_FAILED,
                        message: why.clone(),
                    },
                    (true, _, ClassBinding::Immediate | ClassBinding::NotNeeded) => not_ready.clone(),
                };
                assert_eq!(step, expected, "needed {needed}, phase {phase:?}, {binding:?}");
            }
        }
    }
}

fn class(name: &str, default_for_virt: bool, default: bool) -> ClassFacts {
    ClassFacts {
        name: name.to_owned(),
        default_for_virt,
        default,
    }
}

#[test]
fn the_class_is_the_configured_one_then_the_virt_default_then_the_cluster_default() {
    let classes = [
        class("plain", false, false),
        class("cluster-default", false, true),
        class("virt-default", true, false),
    ];
    assert_eq!(choose_class(Some("mine"), &classes), Ok("mine".to_owned()));
    assert_eq!(choose_class(None, &classes), Ok("virt-default".to_owned()));
    assert_eq!(choose_class(Some(""), &classes[..2]), Ok("cluster-default".to_owned()));
    assert_eq!(
        choose_class(None, &classes[..1]),
        Err("no default storage class found".to_owned())
    );
}

#[test]
fn the_access_mode_prefers_shared_filesystems_from_the_profile() {
    let fs = |modes: &[&str]| {
        (
            Some("Filesystem".to_owned()),
            modes.iter().map(|m| (*m).to_owned()).collect::<Vec<_>>(),
        )
    };
    let block_rwx = (Some("Block".to_owned()), vec!["ReadWriteMany".to_owned()]);
    assert_eq!(
        access_mode(false, &[fs(&["ReadWriteOnce"]), fs(&["ReadWriteMany"])]),
        "ReadWriteMany"
    );
    assert_eq!(
        access_mode(true, &[fs(&["ReadWriteOnce"]), block_rwx.clone()]),
        "ReadWriteOnce"
    );
    assert_eq!(
        access_mode(true, std::slice::from_ref(&block_rwx)),
        "ReadWriteMany",
        "configured class"
    );
    assert_eq!(access_mode(false, &[block_rwx]), "ReadWriteOnce", "a default class");
    assert_eq!(access_mode(false, &[]), "ReadWriteOnce");
}

#[test]
fn a_claim_belongs_to_the_vm_or_else_to_the_vmi() {
    let mut vmi: VirtualMachineInstance = serde_json::from_value(serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "ns", "uid": "vmi-uid"},
        "spec": {"domain": {"devices": {"tpm": {"persistent": true}}}}
    }))
    .expect("vmi");
    let bare = claim_for(&vmi, "hostpath-csi", "ReadWriteOnce", &ClaimPurpose::Vmi);
    assert_eq!(bare.metadata.generate_name.as_deref(), Some("persistent-state-for-vm-"));
    assert_eq!(bare.metadata.namespace.as_deref(), Some("ns"));
    let labels = bare.metadata.labels.clone().expect("labels");
    assert_eq!(labels["persistent-state-for"], "vm");
    assert_eq!(labels["cdi.kubevirt.io/applyStorageProfile"], "true");
    let owner = &bare.metadata.owner_references.clone().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("VirtualMachineInstance", "vmi-uid")
    );
    let spec = bare.spec.expect("spec");
    assert_eq!(spec.access_modes, Some(vec!["ReadWriteOnce".to_owned()]));
    assert_eq!(spec.storage_class_name.as_deref(), Some("hostpath-csi"));
    assert_eq!(spec.volume_mode.as_deref(), Some("Filesystem"));
    assert_eq!(
        spec.resources.and_then(|r| r.requests).expect("requests")["storage"],
        Quantity("10Mi".to_owned())
    );
    vmi.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "kubevirt.io/v1".to_owned(),
        kind: "VirtualMachine".to_owned(),
        name: "vm".to_owned(),
        uid: "vm-uid".to_owned(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }]);
    let for_migration = claim_for(
        &vmi,
        "hostpath-csi",
        "ReadWriteOnce",
        &ClaimPurpose::MigrationTarget("m1".to_owned()),
    );
    assert_eq!(
        for_migration.metadata.owner_references.expect("owner")[0].kind,
        "VirtualMachine"
    );
    let labels = for_migration.metadata.labels.expect("labels");
    assert_eq!(labels.get("kubevirt.io/migrationName").map(String::as_str), Some("m1"));
    assert!(
        !labels.contains_key("persistent-state-for"),
        "not the VMI's until handed over"
    );
}
