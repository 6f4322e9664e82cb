//! VM state claims (persistent TPM and EFI) through the event loop and the in-memory API server:
//! the claim is made before the launcher pod, in the class upstream would pick, owned by the VM;
//! the pod waits while a claim of an immediately-binding class is unbound, then mounts the claim's
//! subdirectories where libvirt keeps the state, and the status names the claim.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::api::storage::v1::StorageClass;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use serde_json::json;
use virt_controller::cluster_api::{FakeControllerApi, Write};

#[path = "support/event_loop.rs"]
mod event_loop;

use event_loop::{start, wait_for};

fn class(name: &str, binding: &str, annotations: &serde_json::Value) -> StorageClass {
    serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": "example.com/csi", "volumeBindingMode": binding
    }))
    .expect("class")
}

fn vmi(spec_domain: &serde_json::Value) -> VirtualMachineInstance {
    serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "win", "namespace": "default", "uid": "vmi-uid",
                     "finalizers": ["foregroundDeleteVirtualMachine"],
                     "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                                          "name": "win", "uid": "vm-uid", "controller": true}]},
        "spec": {"domain": spec_domain}
    }))
    .expect("VMI")
}

fn the_claim(api: &FakeControllerApi) -> Option<PersistentVolumeClaim> {
    api.writes().iter().find_map(|w| match w {
        Write::CreateClaim(key) => api.claim(key),
        _ => None,
    })
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one VMI from its claim to its pod, step by step")]
async fn a_persistent_tpm_gets_its_claim_before_its_pod_and_the_pod_mounts_it() {
    let api = FakeControllerApi::new();
    api.add_storage_class(class("plain", "Immediate", &json!({})));
    api.add_storage_class(class(
        "virt",
        "Immediate",
        &json!({"storageclass.kubevirt.io/is-default-virt-class": "true"}),
    ));
    api.add_storage_class(class(
        "cluster-default",
        "Immediate",
        &json!({"storageclass.kubernetes.io/is-default-class": "true"}),
    ));
    api.set_storage_profile(
        "virt",
        vec![(Some("Filesystem".to_owned()), vec!["ReadWriteMany".to_owned()])],
    );
    api.apply_vmi(vmi(&json!({"resources": {"requests": {"memory": "128Mi"}},
                             "devices": {"tpm": {"persistent": true}}})));
    let (stop, task) = start(&api);

    let claim = wait_for("the VM state claim", || the_claim(&api)).await;
    let name = claim.metadata.name.clone().expect("name");
    assert!(name.starts_with("persistent-state-for-win-"), "{name}");
    let spec = claim.spec.clone().expect("spec");
    assert_eq!(
        spec.storage_class_name.as_deref(),
        Some("virt"),
        "the virt default wins"
    );
    assert_eq!(
        spec.access_modes,
        Some(vec!["ReadWriteMany".to_owned()]),
        "from the profile"
    );
    assert_eq!(
        claim.metadata.owner_references.clone().expect("owners")[0].kind,
        "VirtualMachine",
        "it outlives the VMI"
    );

    let status = wait_for("the wait for the claim", || {
        let status = api.vmi("default/win")?.status?;
        status
            .conditions
            .iter()
            .any(|c| c.reason.as_deref() == Some("BackendStorageNotReady"))
            .then_some(status)
    })
    .await;
    assert_eq!(status.phase, Some(Phase::Pending));
    assert!(api.pod_keys().is_empty(), "no pod while the claim is unbound");

    let mut bound = claim;
    bound.status = Some(serde_json::from_value(json!({"phase": "Bound"})).expect("status"));
    api.apply_claim(bound);
    let pod = wait_for("the launcher pod", || api.pod_keys().into_iter().next()).await;
    let pod = api.pod(&pod).expect("pod");
    let spec = pod.spec.expect("pod spec");
    let volume = spec
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "vm-state")
        .expect("the vm-state volume");
    assert_eq!(volume.persistent_volume_claim.expect("claim").claim_name, name);
    let compute = spec
        .containers
        .into_iter()
        .find(|c| c.name == "compute")
        .expect("compute");
    let mounts: Vec<(String, Option<String>)> = compute
        .volume_mounts
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.name == "vm-state")
        .map(|m| (m.mount_path, m.sub_path))
        .collect();
    assert_eq!(
        mounts,
        [
            ("/run/kubevirt-private/backend-storage-meta", "meta"),
            ("/var/run/kubevirt-private/libvirt/qemu/swtpm", "swtpm"),
            ("/var/run/kubevirt-private/var/lib/swtpm-localca", "swtpm-localca"),
        ]
        .map(|(path, sub)| (path.to_owned(), Some(sub.to_owned())))
    );
    let status = wait_for("Scheduling", || {
        let status = api.vmi("default/win")?.status?;
        (status.phase == Some(Phase::Scheduling)).then_some(status)
    })
    .await;
    assert!(
        status.conditions.is_empty(),
        "the wait's condition goes: {:?}",
        status.conditions
    );
    let creations = api
        .writes()
        .iter()
        .filter(|w| matches!(w, Write::CreateClaim(_)))
        .count();
    assert_eq!(creations, 1, "one claim");
    stop.cancel();
    task.await.expect("runner");
}

#[tokio::test]
async fn without_a_class_the_vmi_waits_and_a_class_that_waits_for_its_consumer_lets_the_pod_go() {
    let api = FakeControllerApi::new();
    api.apply_vmi(vmi(
        &json!({"resources": {"requests": {"memory": "128Mi"}}, "devices": {},
                             "firmware": {"bootloader": {"efi": {"persistent": true}}}}),
    ));
    let (stop, task) = start(&api);
    let status = wait_for("the refusal", || {
        let status = api.vmi("default/win")?.status?;
        status
            .conditions
            .iter()
            .any(|c| c.reason.as_deref() == Some("FailedBackendStorageCreate"))
            .then_some(status)
    })
    .await;
    let condition = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "Synchronized")
        .expect("Synchronized");
    assert_eq!(condition.message.as_deref(), Some("no default storage class found"));
    assert!(api.pod_keys().is_empty());

    // A default class that appears later is found: the VMI is looked at again.
    api.add_storage_class(class(
        "local",
        "WaitForFirstConsumer",
        &json!({"storageclass.kubernetes.io/is-default-class": "true"}),
    ));
    let pod = wait_for("the launcher pod", || api.pod_keys().into_iter().next()).await;
    let refusals = api
        .writes()
        .iter()
        .filter(|w| matches!(w, Write::Event(_, reason) if reason == "FailedBackendStorageCreate"))
        .count();
    assert_eq!(refusals, 1, "the refusal is said once");
    let claim = the_claim(&api).expect("claim");
    assert_eq!(
        claim.spec.expect("spec").access_modes,
        Some(vec!["ReadWriteOnce".to_owned()]),
        "a default class without a profile"
    );
    let mounts: Vec<String> = api
        .pod(&pod)
        .and_then(|p| p.spec?.containers.into_iter().find(|c| c.name == "compute"))
        .and_then(|c| c.volume_mounts)
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.name == "vm-state")
        .map(|m| m.mount_path)
        .collect();
    assert_eq!(
        mounts,
        [
            "/run/kubevirt-private/backend-storage-meta",
            "/var/run/kubevirt-private/libvirt/qemu/nvram"
        ]
    );
    stop.cancel();
    task.await.expect("runner");
}
