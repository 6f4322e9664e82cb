//! Cluster mode on real libvirt and QEMU: `virt-launcher` with virt-controller's flags serves its
//! command socket; a client acting as virt-handler syncs the test guest, reads the domain, shuts it
//! down and deletes it; SIGTERM ends the launcher with nothing left behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cmd_protocol::cmd::{Vmi, VmiRequest};
use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::notify::notify_info_server::{NotifyInfo, NotifyInfoServer};
use cmd_protocol::notify::notify_server::{Notify, NotifyServer};
use cmd_protocol::notify::{DomainEventRequest, K8sEventRequest, NotifyInfoRequest, NotifyInfoResponse, Response};
use cmd_protocol::sockets::READY_SOCKET;
use cmd_protocol::transport::CmdClient;
use kubevirt_api::Manifest;

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

fn store_file(path: &str) -> PathBuf {
    let store = std::env::var("KUBEVIRT_RS_IMAGE_STORE").unwrap_or_else(|_| "/var/lib/kubevirt-rs/images".to_owned());
    let file = Path::new(&store)
        .join("localhost/kubevirt-rs/testguest/latest")
        .join(path);
    assert!(
        file.exists(),
        "the test guest is missing ({}): run `make guest`",
        file.display()
    );
    file
}

fn vmi_request() -> VmiRequest {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples/vmi-testguest.yaml");
    let mut vmi = Manifest::from_path(&path)
        .and_then(|m| m.into_vmi(&path))
        .expect("example");
    vmi.metadata.uid = Some(UID.to_owned());
    VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(&vmi).expect("json"),
        }),
        options: None,
    }
}

async fn wait_until<T>(what: &str, timeout: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let begin = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(begin.elapsed() < timeout, "no {what} within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Ends the launcher this test started (by pid) if the test fails before it does.
struct Stopper(u32);

impl Drop for Stopper {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.0).unwrap_or(0));
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    }
}

/// Starts the launcher in cluster mode under `root`, with what the containerDisk and kernel-boot
/// sidecars would have mounted.
fn spawn_launcher(root: &Path) -> std::process::Child {
    let (share, private, ephemeral, disks) = (root.join("s"), root.join("p"), root.join("e"), root.join("c"));
    std::fs::create_dir_all(disks.join("kernel-boot")).expect("dirs");
    std::os::unix::fs::symlink(store_file("disk/testguest.qcow2"), disks.join("disk_0.img")).expect("disk");
    std::os::unix::fs::symlink(store_file("boot/vmlinuz"), disks.join("kernel-boot/vmlinuz")).expect("kernel");
    std::os::unix::fs::symlink(store_file("boot/initrd.img"), disks.join("kernel-boot/initrd.img")).expect("initrd");
    Command::new(env!("CARGO_BIN_EXE_virt-launcher"))
        .args([
            "--name",
            "testguest",
            "--namespace",
            "default",
            "--uid",
            UID,
            "--grace-period-seconds",
            "30",
        ])
        .arg("--force-emulation")
        .arg("--kubevirt-share-dir")
        .arg(&share)
        .arg("--private-dir")
        .arg(&private)
        .arg("--ephemeral-disk-dir")
        .arg(&ephemeral)
        .arg("--container-disk-dir")
        .arg(&disks)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start virt-launcher")
}

/// SIGTERM ends the launcher cleanly: exit 0, socket removed, no process left that mentions `root`.
fn assert_stops_cleanly(mut launcher: std::process::Child, root: &Path, socket: &Path) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(launcher.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let begin = Instant::now();
    let status = loop {
        if let Some(status) = launcher.try_wait().expect("wait") {
            break status;
        }
        assert!(begin.elapsed() < Duration::from_secs(30), "launcher did not exit");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut launcher.stderr.take().expect("stderr"), &mut stderr).expect("stderr");
    assert!(status.success(), "{stderr}");
    assert!(!socket.exists(), "the socket is removed");
    let root_text = root.to_string_lossy().into_owned();
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(Result::ok)
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&root_text))
        .collect();
    assert!(left.is_empty(), "processes left behind: {left:?}");
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
    let launcher = spawn_launcher(root.path());
    let _stopper = Stopper(launcher.id());
    let socket = share.join("sockets").join(READY_SOCKET);
    wait_until("launcher socket", Duration::from_secs(90), async || {
        socket.exists().then_some(())
    })
    .await;
    let mut client = CmdClient::connect(&socket).await.expect("connect");
    client.ping().await.expect("ping");

    client.sync(vmi_request()).await.expect("sync");
    let serial_log = private.join(UID).join("virt-serial0-log");
    wait_until("guest marker", Duration::from_secs(60), async || {
        std::fs::read_to_string(&serial_log)
            .ok()
            .filter(|log| log.contains("KUBEVIRT-RS-GUEST-READY"))
    })
    .await;
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
