//! The launcher's command service over a real unix socket, with the fake domain manager: what each
//! RPC does to the domain, idempotent sync, and errors that name the volume.

use std::path::Path;
use std::sync::Arc;

use cmd_protocol::cmd::cmd_server::CmdServer;
use cmd_protocol::cmd::{Vmi, VmiRequest};
use cmd_protocol::cmd_info::cmd_info_server::CmdInfoServer;
use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::transport::{CmdClient, listen};
use virt_launcher::cluster::service::{LauncherInfo, LauncherService};
use virt_launcher::domain::{ConvertContext, DomainType, PathLayout};
use virt_launcher::libvirt::{AcpiBehaviour, FakeDomainManager};
use virt_launcher::supervisor::reaper::DirectRunner;

fn layout(root: &Path) -> PathLayout {
    let under = |d: &str| root.join(d).to_string_lossy().into_owned();
    PathLayout {
        private_dir: under("private"),
        ephemeral_disk_dir: under("ephemeral"),
        container_disk_dir: under("container-disks"),
        empty_disk_dir: under("empty"),
        ..PathLayout::default()
    }
}

async fn serve(root: &Path) -> (Arc<FakeDomainManager>, CmdClient) {
    // Nobody listens to the fake's lifecycle events here; it ignores a closed channel.
    let (events, _) = tokio::sync::mpsc::unbounded_channel();
    let manager = Arc::new(FakeDomainManager::new(AcpiBehaviour::PowerOff, events));
    let base = ConvertContext {
        domain_type: DomainType::Qemu,
        layout: layout(root),
        ..ConvertContext::default()
    };
    let service = LauncherService::new(manager.clone(), DirectRunner, base);
    let socket = root.join("sockets/launcher-sock");
    let incoming = listen(&socket).expect("listen");
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(CmdServer::new(service))
            .add_service(CmdInfoServer::new(LauncherInfo))
            .serve_with_incoming(incoming)
            .await
            .expect("serve");
    });
    let client = CmdClient::connect(&socket).await.expect("connect");
    (manager, client)
}

fn request(volumes: &serde_json::Value, phase: Option<&str>) -> VmiRequest {
    let mut vmi = serde_json::json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "web", "namespace": "prod", "uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
        "spec": {
            "terminationGracePeriodSeconds": 20,
            "domain": {"memory": {"guest": "64Mi"}, "features": {"acpi": {}},
                       "devices": {"disks": [{"name": "scratch", "disk": {"bus": "virtio"}}]}},
            "volumes": volumes
        }
    });
    if let Some(phase) = phase {
        vmi["status"] = serde_json::json!({"phase": phase});
    }
    VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&vmi).expect("json"),
        }),
        options: None,
    }
}

fn scratch() -> serde_json::Value {
    serde_json::json!([{"name": "scratch", "emptyDisk": {"capacity": "16Mi"}}])
}

async fn snapshot(client: &mut CmdClient) -> Option<DomainSnapshot> {
    client
        .domain()
        .await
        .expect("GetDomain")
        .map(|json| serde_json::from_str(&json).expect("snapshot JSON"))
}

/// The events libvirt sends while the domain is defined and started are named from the VMI the
/// launcher remembers: it must remember the VMI before it defines the domain, not once the start
/// has worked. Otherwise they went out with no name and virt-handler filed them under
/// `default/`, and the VMI stayed Scheduled. A start that fails shows it deterministically.
#[tokio::test]
async fn the_domain_is_named_after_the_vmi_from_its_definition_on_even_when_the_start_fails() {
    let root = tempfile::tempdir().expect("tempdir");
    let (manager, mut client) = serve(root.path()).await;
    manager.fail_start("QEMU exited while starting");
    let error = client
        .sync(request(&scratch(), Some("Scheduled")))
        .await
        .expect_err("the start fails");
    assert!(error.to_string().contains("QEMU exited while starting"), "{error}");
    assert_eq!(manager.calls(), ["define", "start"]);
    let domain = snapshot(&mut client).await.expect("the defined domain");
    assert_eq!(domain.metadata.name, "prod_web");
    assert_eq!(domain.metadata.namespace, "prod");
    assert_eq!(domain.metadata.uid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
}

#[tokio::test]
async fn sync_defines_and_starts_once_and_get_domain_reports_it() {
    let root = tempfile::tempdir().expect("tempdir");
    let (manager, mut client) = serve(root.path()).await;
    assert_eq!(snapshot(&mut client).await, None, "no domain before the first sync");
    client.sync(request(&scratch(), Some("Scheduled"))).await.expect("sync");
    client
        .sync(request(&scratch(), Some("Scheduled")))
        .await
        .expect("sync again");
    assert_eq!(manager.calls(), ["define", "start"], "sync is idempotent");
    assert!(
        root.path().join("empty/scratch.qcow2").exists(),
        "the empty disk was created with qemu-img"
    );
    let domain = snapshot(&mut client).await.expect("a domain");
    assert_eq!(domain.metadata.name, "prod_web");
    assert_eq!(domain.metadata.uid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
    assert_eq!(domain.metadata.grace_period_seconds, Some(20));
    assert!(domain.spec.has_acpi);
    assert_eq!(
        (domain.status.status.as_str(), domain.status.reason.as_str()),
        ("Running", "Unknown")
    );
}

#[tokio::test]
async fn shutdown_kill_and_delete_do_what_they_say() {
    let root = tempfile::tempdir().expect("tempdir");
    let (manager, mut client) = serve(root.path()).await;
    client.sync(request(&scratch(), None)).await.expect("sync");
    client
        .shutdown(request(&scratch(), Some("Running")))
        .await
        .expect("shutdown");
    let domain = snapshot(&mut client).await.expect("a domain");
    assert_eq!(
        (domain.status.status.as_str(), domain.status.reason.as_str()),
        ("Shutoff", "Shutdown")
    );
    assert!(
        domain.metadata.graceful_shutdown_started.is_some(),
        "the first ACPI press is recorded"
    );
    client
        .sync(request(&scratch(), Some("Running")))
        .await
        .expect("sync after shutdown");
    assert_eq!(
        manager.calls().iter().filter(|c| **c == "start").count(),
        1,
        "a VM that ran is not restarted"
    );
    client
        .kill(request(&scratch(), Some("Running")))
        .await
        .expect("kill of a stopped domain is a no-op");
    client
        .delete(request(&scratch(), Some("Succeeded")))
        .await
        .expect("delete");
    assert_eq!(snapshot(&mut client).await, None);
    assert_eq!(manager.calls().last(), Some(&"undefine"));
}

#[tokio::test]
async fn kill_destroys_a_running_domain() {
    let root = tempfile::tempdir().expect("tempdir");
    let (manager, mut client) = serve(root.path()).await;
    client.sync(request(&scratch(), None)).await.expect("sync");
    client.kill(request(&scratch(), Some("Running"))).await.expect("kill");
    assert_eq!(manager.calls().last(), Some(&"destroy"));
    let domain = snapshot(&mut client).await.expect("a domain");
    assert_eq!(domain.status.reason, "Destroyed");
}

#[tokio::test]
async fn an_unmounted_container_disk_is_refused_by_volume_and_nothing_is_defined() {
    let root = tempfile::tempdir().expect("tempdir");
    let (manager, mut client) = serve(root.path()).await;
    let volumes = serde_json::json!([{"name": "scratch", "containerDisk": {"image": "quay.io/x"}}]);
    let err = client
        .sync(request(&volumes, None))
        .await
        .expect_err("image not mounted");
    assert!(err.to_string().contains("spec.volumes[0].containerDisk"), "{err}");
    assert!(manager.calls().is_empty(), "{:?}", manager.calls());
}

#[tokio::test]
async fn a_request_without_valid_vmi_json_is_invalid() {
    let root = tempfile::tempdir().expect("tempdir");
    let (_manager, mut client) = serve(root.path()).await;
    let bad = VmiRequest {
        vmi: Some(Vmi {
            vmi_json: b"{not json".to_vec(),
        }),
        options: None,
    };
    let err = client.sync(bad).await.expect_err("invalid JSON");
    assert!(err.to_string().contains("invalid VMI JSON"), "{err}");
}

#[tokio::test]
async fn get_domain_stats_reports_a_running_domain_and_nothing_without_one() {
    let root = tempfile::tempdir().expect("tempdir");
    let (_manager, mut client) = serve(root.path()).await;
    assert_eq!(client.domain_stats().await.expect("stats"), None, "no domain, no stats");
    client.sync(request(&scratch(), None)).await.expect("sync");
    let json = client
        .domain_stats()
        .await
        .expect("stats")
        .expect("stats of a running domain");
    let stats: cmd_protocol::stats::DomainStats = serde_json::from_str(&json).expect("stats JSON");
    assert_eq!(stats.vcpus, 1);
}

#[tokio::test]
async fn a_stop_presses_the_power_button_only_for_a_domain_with_acpi() {
    use cmd_protocol::cmd::cmd_server::Cmd as _;
    for (features, has_acpi) in [
        (serde_json::json!({"acpi": {}}), true),
        (serde_json::json!({"acpi": {"enabled": false}}), false),
    ] {
        let root = tempfile::tempdir().expect("tempdir");
        let (events, _) = tokio::sync::mpsc::unbounded_channel();
        let manager = Arc::new(FakeDomainManager::new(AcpiBehaviour::PowerOff, events));
        let base = ConvertContext {
            domain_type: DomainType::Qemu,
            layout: layout(root.path()),
            ..ConvertContext::default()
        };
        let service = LauncherService::new(manager, DirectRunner, base);
        let mut sync = request(&scratch(), None);
        let mut vmi: serde_json::Value =
            serde_json::from_slice(&sync.vmi.as_ref().expect("vmi").vmi_json).expect("json");
        vmi["spec"]["domain"]["features"] = features;
        sync.vmi = Some(Vmi {
            vmi_json: serde_json::to_vec(&vmi).expect("json"),
        });
        service
            .sync_virtual_machine(tonic::Request::new(sync))
            .await
            .expect("sync");
        let policy = service.stop_policy(std::time::Duration::from_secs(20)).await;
        assert_eq!(
            policy.has_acpi, has_acpi,
            "features {}",
            vmi["spec"]["domain"]["features"]
        );
        assert_eq!(policy.grace, std::time::Duration::from_secs(20));
    }
}
