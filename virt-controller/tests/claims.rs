//! Launcher pods and PersistentVolumeClaims through the event loop and the in-memory API server's
//! watches: a VMI whose claim is missing gets no pod, shows upstream's `FailedPvcNotFound` wait,
//! and gets its pod once the claim appears, with the block claim as a device and the filesystem
//! claim as a mount.

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use serde_json::json;
use virt_controller::cluster_api::{FakeControllerApi, Write};

#[path = "support/event_loop.rs"]
mod event_loop;

use event_loop::{start, wait_for};

fn claim(name: &str, mode: &str) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"volumeMode": mode, "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}}
    }))
    .expect("claim")
}

#[tokio::test]
async fn a_pod_waits_for_its_claims_and_gets_each_in_its_mode() {
    let api = FakeControllerApi::new();
    api.apply_claim(claim("fast-block", "Block"));
    let vmi: VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "db", "namespace": "default", "uid": "vmi-uid",
                     "finalizers": ["foregroundDeleteVirtualMachine"]},
        "spec": {
            "domain": {"resources": {"requests": {"memory": "128Mi"}},
                       "devices": {"disks": [{"name": "fast", "disk": {}}, {"name": "home", "disk": {}}]}},
            "volumes": [
                {"name": "fast", "persistentVolumeClaim": {"claimName": "fast-block"}},
                {"name": "home", "dataVolume": {"name": "home-dv"}}
            ]
        }
    }))
    .expect("VMI");
    api.apply_vmi(vmi);
    let (stop, task) = start(&api);

    let message = "PVC default/home-dv does not exist, waiting for it to appear";
    let status = wait_for("the wait for the claim", || {
        let status = api.vmi("default/db")?.status?;
        status
            .conditions
            .iter()
            .any(|c| c.condition_type == "Synchronized" && c.reason.as_deref() == Some("FailedPvcNotFound"))
            .then_some(status)
    })
    .await;
    assert_eq!(status.phase, Some(Phase::Pending));
    for condition in &status.conditions {
        assert_eq!(condition.status, "False");
        assert_eq!(condition.message.as_deref(), Some(message));
    }
    let scheduled = status.conditions.iter().find(|c| c.condition_type == "PodScheduled");
    assert_eq!(scheduled.and_then(|c| c.reason.as_deref()), Some("Unschedulable"));
    assert!(api.pod_keys().is_empty(), "no pod while a claim is missing");
    assert!(
        api.writes()
            .contains(&Write::Event("default/db".to_owned(), "FailedPvcNotFound".to_owned())),
        "{:?}",
        api.writes()
    );

    api.apply_claim(claim("home-dv", "Filesystem"));
    let pod = wait_for("the launcher pod", || api.pod_keys().into_iter().next()).await;
    let compute = api
        .pod(&pod)
        .and_then(|p| p.spec?.containers.into_iter().find(|c| c.name == "compute"))
        .expect("compute container");
    let devices: Vec<(String, String)> = compute
        .volume_devices
        .unwrap_or_default()
        .into_iter()
        .map(|d| (d.name, d.device_path))
        .collect();
    assert_eq!(devices, vec![("fast".to_owned(), "/dev/fast".to_owned())]);
    let mounts: Vec<String> = compute
        .volume_mounts
        .unwrap_or_default()
        .into_iter()
        .filter(|m| m.name == "fast" || m.name == "home")
        .map(|m| m.mount_path)
        .collect();
    assert_eq!(mounts, vec!["/var/run/kubevirt-private/vmi-disks/home".to_owned()]);
    let status = wait_for("Scheduling", || {
        let status = api.vmi("default/db")?.status?;
        (status.phase == Some(Phase::Scheduling)).then_some(status)
    })
    .await;
    assert!(
        status.conditions.is_empty(),
        "the wait's conditions go: {:?}",
        status.conditions
    );
    stop.cancel();
    task.await.expect("runner");
}
