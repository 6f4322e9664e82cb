//! Both controllers in their event loop, fed by the in-memory API server's watches: a VM with
//! `runStrategy: Always` gets a VMI, the VMI a launcher pod, and once the pod runs the VMI is
//! Scheduled on its node; the metrics count it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use kubevirt_api::clock::SystemClock;
use kubevirt_api::v1::{VirtualMachine, VirtualMachineInstancePhase as Phase};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use virt_controller::cluster_api::FakeControllerApi;
use virt_controller::pod::PodConfig;
use virt_controller::runner::{Controllers, metrics, run};

async fn wait_for<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let begin = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(begin.elapsed() < Duration::from_secs(5), "no {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_vm_becomes_a_scheduled_vmi_through_the_watches() {
    let api = FakeControllerApi::new();
    let vm: VirtualMachine = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "web", "namespace": "default", "uid": "vm-uid", "generation": 1},
        "spec": {"runStrategy": "Always", "template": {"spec": {
            "domain": {"resources": {"requests": {"memory": "128Mi"}}, "devices": {}}
        }}}
    }))
    .expect("VM");
    api.apply_vm(vm);
    api.apply_kubevirt(
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
            "spec": {"configuration": {"developerConfiguration": {"useEmulation": true}}}
        }))
        .expect("KubeVirt"),
    );
    let controllers = Arc::new(Controllers::new(
        &api,
        &SystemClock,
        PodConfig::new("registry.example/virt-launcher:v0.1.0"),
    ));
    let stop = CancellationToken::new();
    let (lead, leading) = tokio::sync::watch::channel(false);
    let task = {
        let (controllers, api, stop) = (controllers.clone(), api.clone(), stop.clone());
        tokio::spawn(async move { run(controllers, &api, 4, leading, stop).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        api.vmi("default/web").is_none(),
        "a replica that does not lead writes nothing"
    );
    lead.send(true).expect("leading");
    let pod = wait_for("launcher pod", || api.pod_keys().into_iter().next()).await;
    let args = api
        .pod(&pod)
        .and_then(|p| p.spec?.containers.first()?.args.clone())
        .unwrap_or_default();
    assert!(
        args.iter().any(|a| a == "--allow-emulation"),
        "the KubeVirt resource's useEmulation: {args:?}"
    );
    wait_for("Scheduling", || {
        (api.vmi("default/web")?.status?.phase == Some(Phase::Scheduling)).then_some(())
    })
    .await;
    api.run_pod(&pod, "node01");
    wait_for("Scheduled", || {
        (api.vmi("default/web")?.status?.phase == Some(Phase::Scheduled)).then_some(())
    })
    .await;
    wait_for("the VM's Starting status", || {
        (api.vm("default/web")?.status?.printable_status.as_deref() == Some("Starting")).then_some(())
    })
    .await;
    let text = metrics(&controllers, true);
    assert!(
        text.contains("kubevirt_vmi_phase_count{phase=\"scheduled\"} 1"),
        "{text}"
    );
    assert!(text.contains("kubevirt_virt_controller_leading_status 1"), "{text}");
    stop.cancel();
    task.await.expect("runner");
}
