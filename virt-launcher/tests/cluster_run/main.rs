//! Cluster mode on real libvirt and QEMU: `virt-launcher` with virt-controller's flags serves its
//! command socket; a client acting as virt-handler syncs the test guest, reads the domain, shuts it
//! down and deletes it; SIGTERM ends the launcher with nothing left behind.

mod fixture;
mod flags;
mod migration;
mod migration_rig;
mod pod_network;
mod through_virt_api;
mod two_handlers;
mod with_handler;

use std::path::Path;
use std::time::Duration;

use cmd_protocol::cmd::{Vmi, VmiRequest};
use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::notify::notify_info_server::{NotifyInfo, NotifyInfoServer};
use cmd_protocol::notify::notify_server::{Notify, NotifyServer};
use cmd_protocol::notify::{DomainEventRequest, K8sEventRequest, NotifyInfoRequest, NotifyInfoResponse, Response};
use cmd_protocol::sockets::READY_SOCKET;
use cmd_protocol::transport::CmdClient;
use fixture::{PodDirs, Stopper, assert_stops_cleanly, spawn_launcher, testguest, wait_for_guest_marker, wait_until};

const UID: &str = "6a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9";

/// virt-handler's notify server, as a double that records every event.
#[derive(Clone, Default)]
struct Handler {
    events: std::sync::Arc<std::sync::Mutex<Vec<(String, DomainSnapshot)>>>,
}

#[tonic::async_trait]
impl Notify for Handler {
    async fn handle_domain_event(
        &self,
        request: tonic::Request<DomainEventRequest>,
    ) -> Result<tonic::Response<Response>, tonic::Status> {
        let request = request.into_inner();
        let snapshot: DomainSnapshot =
            serde_json::from_slice(&request.domain_json).map_err(|e| tonic::Status::invalid_argument(e.to_string()))?;
        self.events.lock().expect("events").push((request.event_type, snapshot));
        Ok(tonic::Response::new(Response {
            success: true,
            message: String::new(),
        }))
    }

    async fn handle_k8s_event(
        &self,
        _request: tonic::Request<K8sEventRequest>,
    ) -> Result<tonic::Response<Response>, tonic::Status> {
        Ok(tonic::Response::new(Response {
            success: true,
            message: String::new(),
        }))
    }
}

#[tonic::async_trait]
impl NotifyInfo for Handler {
    async fn info(
        &self,
        _request: tonic::Request<NotifyInfoRequest>,
    ) -> Result<tonic::Response<NotifyInfoResponse>, tonic::Status> {
        Ok(tonic::Response::new(NotifyInfoResponse {
            supported_notify_versions: vec![1],
        }))
    }
}

impl Handler {
    fn serve(&self, socket: &Path) {
        let incoming = cmd_protocol::transport::listen(socket).expect("notify socket");
        let handler = self.clone();
        tokio::spawn(async move {
            tonic::transport::Server::builder()
                .add_service(NotifyServer::new(handler.clone()))
                .add_service(NotifyInfoServer::new(handler))
                .serve_with_incoming(incoming)
                .await
                .expect("notify server");
        });
    }

    fn saw(&self, event_type: &str, check: impl Fn(&DomainSnapshot) -> bool) -> Option<()> {
        self.events
            .lock()
            .expect("events")
            .iter()
            .any(|(kind, snapshot)| kind == event_type && check(snapshot))
            .then_some(())
    }
}

fn vmi_request() -> VmiRequest {
    VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&testguest("testguest", UID)).expect("json"),
        }),
        options: None,
    }
}

async fn domain(client: &mut CmdClient) -> Option<DomainSnapshot> {
    client
        .domain()
        .await
        .expect("GetDomain")
        .map(|json| serde_json::from_str(&json).expect("snapshot"))
}

#[tokio::test]
async fn a_handler_client_drives_the_test_guest_through_the_command_socket() {
    let root = tempfile::Builder::new()
        .prefix("kc")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let (share, private) = (root.path().join("s"), root.path().join("p"));
    let handler = Handler::default();
    handler.serve(&share.join("domain-notify-pipe.sock"));
    let launcher = spawn_launcher(&PodDirs::new(root.path(), share.clone()), "testguest", UID);
    let _stopper = Stopper(launcher.id());
    let socket = share.join("sockets").join(READY_SOCKET);
    wait_until("launcher socket", Duration::from_secs(90), async || {
        socket.exists().then_some(())
    })
    .await;
    let mut client = CmdClient::connect(&socket).await.expect("connect");
    client.ping().await.expect("ping");

    client.sync(vmi_request()).await.expect("sync");
    wait_for_guest_marker(&private, UID).await;
    let running = domain(&mut client).await.expect("a domain");
    assert_eq!(running.status.status, "Running");
    assert_eq!(running.metadata.name, "default_testguest");
    assert_eq!(running.metadata.uid, UID);
    let stats: cmd_protocol::stats::DomainStats = serde_json::from_str(
        &client
            .domain_stats()
            .await
            .expect("stats")
            .expect("stats of the running guest"),
    )
    .expect("stats JSON");
    assert!(stats.cpu_time_ns > 0 && stats.vcpus == 1, "{stats:?}");
    assert_eq!(stats.vcpu.len(), 1, "QEMU's one vCPU thread: {stats:?}");
    assert!(stats.vcpu[0].time_ns > 0, "{stats:?}");
    assert_eq!(stats.memory.actual_balloon_kib, Some(256 * 1024), "{stats:?}");
    let root_disk = stats
        .block
        .iter()
        .find(|b| b.name == "containerdisk")
        .expect("the containerDisk's counters");
    assert_eq!(root_disk.target, "vda");
    assert!(root_disk.read_bytes > 0, "the guest read its disk label: {root_disk:?}");

    wait_until(
        "an ADDED event of the running domain",
        Duration::from_secs(10),
        async || handler.saw("ADDED", |d| d.metadata.uid == UID),
    )
    .await;

    client.shutdown(vmi_request()).await.expect("shutdown");
    let off = wait_until("guest poweroff", Duration::from_secs(30), async || {
        domain(&mut client).await.filter(|d| d.status.status == "Shutoff")
    })
    .await;
    assert_eq!(off.status.reason, "Shutdown");
    assert!(off.metadata.graceful_shutdown_started.is_some());
    wait_until(
        "a MODIFIED event of the stopped domain",
        Duration::from_secs(10),
        async || {
            handler.saw("MODIFIED", |d| {
                d.status.status == "Shutoff" && d.status.reason == "Shutdown"
            })
        },
    )
    .await;
    client.delete(vmi_request()).await.expect("delete");
    assert_eq!(domain(&mut client).await, None);
    wait_until(
        "the final event of the deleted domain",
        Duration::from_secs(10),
        async || {
            handler.saw("MODIFIED", |d| {
                d.metadata.deletion_timestamp.is_some() && d.status.reason == "NonExistent"
            })
        },
    )
    .await;

    assert_stops_cleanly(launcher, root.path(), &socket);
}

/// Cluster mode's stop on SIGTERM follows the domain: a guest without ACPI cannot hear the power
/// button, so it is destroyed at once instead of after the 30 s grace period.
#[tokio::test]
async fn sigterm_destroys_a_domain_without_acpi_at_once() {
    const NO_ACPI_UID: &str = "7b2c3d4e-5f60-4182-93a4-b5c6d7e8f901";
    let root = tempfile::Builder::new()
        .prefix("kc")
        .tempdir_in("/tmp")
        .expect("tempdir");
    let (share, private) = (root.path().join("s"), root.path().join("p"));
    let launcher = spawn_launcher(&PodDirs::new(root.path(), share.clone()), "testguest", NO_ACPI_UID);
    let _stopper = Stopper(launcher.id());
    let socket = share.join("sockets").join(READY_SOCKET);
    wait_until("launcher socket", Duration::from_secs(90), async || {
        socket.exists().then_some(())
    })
    .await;
    let mut client = CmdClient::connect(&socket).await.expect("connect");
    let mut vmi = testguest("testguest", NO_ACPI_UID);
    vmi.spec.domain.features = Some(kubevirt_api::v1::Features {
        acpi: Some(kubevirt_api::v1::FeatureState { enabled: Some(false) }),
        ..kubevirt_api::v1::Features::default()
    });
    let request = VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&vmi).expect("json"),
        }),
        options: None,
    };
    client.sync(request).await.expect("sync");
    wait_for_guest_marker(&private, NO_ACPI_UID).await;
    let running = domain(&mut client).await.expect("a domain");
    assert!(!running.spec.has_acpi, "the domain has no ACPI: {:?}", running.spec);
    let begin = std::time::Instant::now();
    assert_stops_cleanly(launcher, root.path(), &socket);
    assert!(
        begin.elapsed() < Duration::from_secs(15),
        "stopped after {:?}: the launcher waited for a power button the guest cannot hear",
        begin.elapsed()
    );
}
