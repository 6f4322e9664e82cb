//! virt-handler's core driving real launchers, libvirt and QEMU over the real sockets, with the
//! Kubernetes side replaced by the in-memory API server: a VMI turns Running, survives a handler
//! restart untouched, fails when QEMU is killed; a deleted VMI shuts down gracefully, succeeds
//! and is cleaned up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use cmd_protocol::sockets::{NOTIFY_PIPE, READY_SOCKET};
use cmd_protocol::transport::CmdClient;
use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use tokio_util::sync::CancellationToken;
use virt_handler::cluster_api::{FakeClusterApi, Write};
use virt_handler::node::NodeConfig;
use virt_handler::pod_process::pod_cgroup::PodCgroup;
use virt_handler::reconciler::ReconcilerConfig;
use virt_handler::runner::RunOptions;

use super::fixture::{
    PodDirs, Stopper, assert_stops_cleanly, processes_under, spawn_launcher, testguest, wait_for_guest_marker,
    wait_until,
};

pub(super) const NODE: &str = "node01";
/// The launcher pod's UID, which names its directory under the kubelet's pods directory and its
/// cgroup.
pub(super) const POD: &str = "5a1e0c4d-0000-4000-8000-00000000c0de";

/// One VMI's world: the kubelet pods directory with its launcher pod, and the handler's share dir.
pub(super) struct World {
    pub(super) root: tempfile::TempDir,
    /// The pod's cgroup: virt-handler acts on a launcher only inside it.
    pub(super) pod_cgroup: PodCgroup,
    pub(super) api: FakeClusterApi,
    pub(super) key: String,
}

impl World {
    pub(super) fn new(name: &str, uid: &str) -> (Self, PodDirs, VirtualMachineInstance) {
        let root = tempfile::Builder::new()
            .prefix("kh")
            .tempdir_in("/tmp")
            .expect("tempdir");
        // The pod's emptyDirs as the kubelet lays them out; `sockets` is mounted inside `public`.
        let empty_dirs = root
            .path()
            .join("pods")
            .join(POD)
            .join("volumes/kubernetes.io~empty-dir");
        let public = empty_dirs.join("public");
        std::fs::create_dir_all(public.join("sockets")).expect("pod dirs");
        std::os::unix::fs::symlink(public.join("sockets"), empty_dirs.join("sockets")).expect("sockets");
        let dirs = PodDirs::new(root.path(), public);
        // The private emptyDir as the handler sees it; the launcher writes it by a short path
        // (QEMU's socket paths must fit a sockaddr_un).
        std::fs::create_dir_all(&dirs.private).expect("private dir");
        std::os::unix::fs::symlink(&dirs.private, empty_dirs.join("private")).expect("private");
        // The images in place, as virt-handler mounts them from the sidecars in a cluster.
        std::os::unix::fs::symlink(&dirs.disks, empty_dirs.join("container-disks")).expect("container disks");
        let mut vmi = testguest(name, uid);
        vmi.metadata
            .labels
            .get_or_insert_default()
            .insert(kubevirt_api::well_known::labels::NODE_NAME.to_owned(), NODE.to_owned());
        let status = vmi.status.get_or_insert_default();
        status.phase = Some(Phase::Scheduled);
        status.node_name = Some(NODE.to_owned());
        status.active_pods.insert(POD.to_owned(), NODE.to_owned());
        let world = Self {
            root,
            pod_cgroup: PodCgroup::create(POD).expect("the pod's cgroup (needs root)"),
            api: FakeClusterApi::new(),
            key: vmi.key(),
        };
        (world, dirs, vmi)
    }

    pub(super) fn config(&self) -> NodeConfig {
        self.config_listening(None)
    }

    pub(super) fn config_listening(&self, listen: Option<std::net::SocketAddr>) -> NodeConfig {
        NodeConfig {
            graceful_shutdown: std::time::Duration::from_secs(5),
            node: NODE.to_owned(),
            share_dir: self.root.path().join("h"),
            pods_dir: self.root.path().join("pods"),
            cpu_manager_state: self.root.path().join("cpu_manager_state"),
            listen,
            endpoint_tls: None,
            max_metric_requests: virt_handler::metrics::CONCURRENT_STATS_REQUESTS,
            heartbeat: Duration::from_secs(60),
            run: RunOptions::default(),
            reconciler: ReconcilerConfig::for_node(NODE),
            console: None,
            node_process: PathBuf::from("/proc/1"),
            mount_helper: PathBuf::from("/nonexistent/the-images-are-in-place"),
            device_plugin_dir: None,
        }
    }

    /// Starts a handler; cancel the token and await the task to stop it.
    pub(super) fn start_handler(&self) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        self.start_handler_with(self.config())
    }

    pub(super) fn start_handler_with(&self, config: NodeConfig) -> (CancellationToken, tokio::task::JoinHandle<()>) {
        let stop = CancellationToken::new();
        let (api, token) = (self.api.clone(), stop.clone());
        let task = tokio::spawn(async move {
            virt_handler::node::run(config, api, token).await.expect("handler");
        });
        (stop, task)
    }

    pub(super) fn phase(&self) -> Option<Phase> {
        self.api.vmi(&self.key)?.status?.phase
    }

    pub(super) async fn wait_for_phase(&self, phase: Phase, timeout: Duration) -> VirtualMachineInstance {
        let begin = std::time::Instant::now();
        loop {
            if let Some(vmi) = self.api.vmi(&self.key).filter(|_| self.phase() == Some(phase)) {
                return vmi;
            }
            assert!(
                begin.elapsed() < timeout,
                "no phase {phase:?} within {timeout:?}; status {:#?}; writes {:#?}",
                self.api.vmi(&self.key).and_then(|v| v.status),
                self.api.writes()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(super) fn events(&self) -> Vec<String> {
        self.api
            .writes()
            .into_iter()
            .filter_map(|w| match w {
                Write::Event { event, .. } if event.reason == "SyncFailed" => panic!("sync failed: {}", event.message),
                Write::Event { event, .. } => Some(event.reason),
                _ => None,
            })
            .collect()
    }

    pub(super) fn socket(&self) -> PathBuf {
        self.root
            .path()
            .join("pods")
            .join(POD)
            .join("volumes/kubernetes.io~empty-dir/sockets")
            .join(READY_SOCKET)
    }

    pub(super) fn notify_pipe(&self) -> PathBuf {
        self.root
            .path()
            .join("pods")
            .join(POD)
            .join("volumes/kubernetes.io~empty-dir/public")
            .join(NOTIFY_PIPE)
    }
}

/// A free local port (bound, read and released).
pub(super) fn free_port() -> std::net::SocketAddr {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    probe.local_addr().expect("addr")
}

/// `GET path` over plain HTTP/1.1; the status line and the body.
pub(super) async fn http_get(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("response");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (head.lines().next().unwrap_or_default().to_owned(), body.to_owned())
}

fn qemu_pid(root: &Path) -> Option<i32> {
    processes_under(root)
        .into_iter()
        .find(|(_, cmdline)| cmdline.contains("qemu-system"))
        .map(|(pid, _)| pid)
}

/// A KubeVirt CR whose configuration must reach the launcher with the sync: the SMBIOS strings,
/// and no serial console log.
fn configure_cluster(world: &World) {
    world.api.set_kubevirt(Some(
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kubevirt.io/v1", "kind": "KubeVirt",
            "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
            "spec": {"configuration": {
                "smbios": {"manufacturer": "Tier3Corp"},
                "virtualMachineOptions": {"disableSerialConsoleLog": {}}
            }},
            "status": {"phase": "Deployed"}
        }))
        .expect("KubeVirt"),
    ));
}

/// QEMU `qemu` runs with [`configure_cluster`]'s settings.
fn assert_configured(qemu: i32) {
    let command_line = std::fs::read(format!("/proc/{qemu}/cmdline")).expect("QEMU's command line");
    let command_line = String::from_utf8_lossy(&command_line).replace('\0', " ");
    assert!(
        command_line.contains("manufacturer=Tier3Corp"),
        "the cluster's SMBIOS strings: {command_line}"
    );
    assert!(
        !command_line.contains("virt-serial0-log"),
        "the cluster turned the serial console log off: {command_line}"
    );
}

#[tokio::test]
async fn the_handler_runs_a_vmi_readopts_it_after_a_restart_and_fails_it_when_qemu_dies() {
    let uid = "0c1d2e3f-4a5b-4c6d-8e7f-901a2b3c4d5e";
    let (world, dirs, vmi) = World::new("handled", uid);
    let launcher = spawn_launcher(&dirs, "handled", uid);
    let _stopper = Stopper(launcher.id());
    world.api.apply(vmi);
    configure_cluster(&world);
    let endpoint = free_port();
    let (stop, handler) = world.start_handler_with(world.config_listening(Some(endpoint)));

    let running = world.wait_for_phase(Phase::Running, Duration::from_secs(120)).await;
    let (status_line, body) = http_get(endpoint, "/healthz").await;
    assert_eq!((status_line.as_str(), body.as_str()), ("HTTP/1.1 200 OK", "ok"));
    let (_, metrics) = http_get(endpoint, "/metrics").await;
    for series in [
        "kubevirt_vmi_phase_count{node=\"node01\",phase=\"running\"",
        "kubevirt_vmi_cpu_usage_seconds_total{node=\"node01\",namespace=\"default\",name=\"handled\"}",
        "kubevirt_vmi_vcpu_seconds_total{node=\"node01\",namespace=\"default\",name=\"handled\",id=\"0\",state=\"running\"}",
        "kubevirt_vmi_memory_actual_balloon_bytes{node=\"node01\",namespace=\"default\",name=\"handled\"} 268435456",
        "kubevirt_vmi_storage_read_traffic_bytes_total{node=\"node01\",namespace=\"default\",name=\"handled\",drive=\"containerdisk\"}",
    ] {
        assert!(metrics.contains(series), "no {series} in:\n{metrics}");
    }
    let status = running.status.expect("status");
    assert_eq!(status.node_name.as_deref(), Some(NODE));
    assert_eq!(
        status.machine.and_then(|m| m.machine_type).as_deref(),
        Some("pc-q35-7.2")
    );
    assert_eq!(
        status.launcher_container_image_version.as_deref(),
        Some("localhost/kubevirt-rs/virt-launcher:test")
    );
    let ready = status
        .conditions
        .iter()
        .find(|c| c.condition_type == "Ready")
        .expect("Ready");
    assert_eq!(ready.status, "True");
    assert!(
        status
            .phase_transition_timestamps
            .iter()
            .any(|t| t.phase == Some(Phase::Running))
    );
    assert_eq!(world.events(), ["Created", "Started"]);
    let qemu = qemu_pid(world.root.path()).expect("QEMU runs");
    assert_configured(qemu);

    // The handler restarts: the VM keeps running and the new handler adopts it quietly.
    stop.cancel();
    handler.await.expect("handler stopped");
    assert!(!world.notify_pipe().exists(), "the stopped handler removed its pipe");
    let last_beat = world.api.writes().into_iter().rev().find_map(|w| match w {
        Write::NodePatch { patch, .. } => Some(patch),
        _ => None,
    });
    assert_eq!(
        last_beat.map(|p| p["metadata"]["labels"]["kubevirt.io/schedulable"].clone()),
        Some(serde_json::json!("false")),
        "a stopping handler marks its node unschedulable"
    );
    let writes_before = world.api.write_count();
    let (stop, handler) = world.start_handler();
    wait_until("the new handler's notify pipe", Duration::from_secs(10), async || {
        world.notify_pipe().exists().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(qemu_pid(world.root.path()), Some(qemu), "QEMU was not disturbed");
    assert_eq!(world.phase(), Some(Phase::Running));
    let mut after = world.api.writes().split_off(writes_before);
    let beats = after.iter().filter(|w| matches!(w, Write::NodePatch { .. })).count();
    assert_eq!(beats, 1, "the new handler's first heartbeat");
    after.retain(|w| !matches!(w, Write::NodePatch { .. }));
    assert!(
        after.is_empty(),
        "nothing to write about the VMI after re-adoption: {after:#?}"
    );
    let mut client = CmdClient::connect(&world.socket()).await.expect("connect");
    let domain = client.domain().await.expect("GetDomain").expect("a domain");
    assert!(domain.contains("\"status\":\"Running\""), "{domain}");

    // QEMU dies: the re-adopting handler turns the VMI Failed.
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(qemu), nix::sys::signal::Signal::SIGKILL).expect("kill QEMU");
    let failed = world.wait_for_phase(Phase::Failed, Duration::from_secs(10)).await;
    let conditions = failed.status.expect("status").conditions;
    assert!(
        conditions
            .iter()
            .any(|c| c.condition_type == "Ready" && c.status == "False")
    );
    assert_eq!(world.events(), ["Created", "Started", "Stopped"]);

    // The VMI goes away: the dead domain is undefined.
    world.api.delete(&world.key);
    wait_until("the domain undefined", Duration::from_secs(10), async || {
        client.domain().await.ok().filter(Option::is_none)
    })
    .await;
    stop.cancel();
    handler.await.expect("handler stopped");
    assert_stops_cleanly(launcher, world.root.path(), &world.socket());
}

#[tokio::test]
async fn a_deleted_vmi_shuts_down_gracefully_succeeds_and_is_cleaned_up() {
    let uid = "1d2e3f4a-5b6c-4d7e-8f90-a1b2c3d4e5f6";
    let (world, dirs, vmi) = World::new("deleted", uid);
    let launcher = spawn_launcher(&dirs, "deleted", uid);
    let _stopper = Stopper(launcher.id());
    world.api.apply(vmi);
    let (stop, handler) = world.start_handler();
    world.wait_for_phase(Phase::Running, Duration::from_secs(120)).await;
    wait_for_guest_marker(&dirs.private, uid).await;

    // Deletion: the API server sets the deletion timestamp (a finalizer holds the object).
    world.api.modify(&world.key, |vmi| {
        vmi.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    });
    let succeeded = world.wait_for_phase(Phase::Succeeded, Duration::from_secs(30)).await;
    assert!(
        succeeded
            .status
            .expect("status")
            .phase_transition_timestamps
            .iter()
            .any(|t| t.phase == Some(Phase::Succeeded))
    );
    assert_eq!(world.events(), ["Created", "Started", "ShuttingDown", "Stopped"]);

    // The finalizer is released and the VMI is gone: the domain is undefined, the pipe removed.
    world.api.delete(&world.key);
    let mut client = CmdClient::connect(&world.socket()).await.expect("connect");
    wait_until("the domain undefined", Duration::from_secs(10), async || {
        client.domain().await.ok().filter(Option::is_none)
    })
    .await;
    wait_until("the notify pipe removed", Duration::from_secs(10), async || {
        (!world.notify_pipe().exists()).then_some(())
    })
    .await;
    stop.cancel();
    handler.await.expect("handler stopped");
    assert!(!world.root.path().join("h/domain-notify.sock").exists());
    assert_stops_cleanly(launcher, world.root.path(), &world.socket());
}

/// As on a real cluster, where virt-controller deletes the launcher pod as soon as the VMI is
/// deleted: the launcher gets SIGTERM together with the deletion, stops the guest, and stays until
/// the handler has written Succeeded and deleted the domain. Found on a real cluster, where the
/// launcher exited first and the VMI ended Failed.
#[tokio::test]
async fn a_vmi_deleted_together_with_its_pod_still_ends_succeeded() {
    let uid = "2e3f4a5b-6c7d-4e8f-9a0b-b1c2d3e4f5a6";
    let (world, dirs, vmi) = World::new("podgone", uid);
    let mut launcher = spawn_launcher(&dirs, "podgone", uid);
    let _stopper = Stopper(launcher.id());
    world.api.apply(vmi);
    let (stop, handler) = world.start_handler();
    world.wait_for_phase(Phase::Running, Duration::from_secs(120)).await;
    wait_for_guest_marker(&dirs.private, uid).await;

    // The API server is slow for a moment: the handler's next status writes fail and are retried
    // a second apart, so the guest is down well before the final phase can be written.
    world.api.fail_status_writes(3);
    world.api.modify(&world.key, |vmi| {
        vmi.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        ));
    });
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(launcher.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM, as the kubelet sends it");
    world.wait_for_phase(Phase::Succeeded, Duration::from_secs(30)).await;
    let succeeded_at = std::time::Instant::now();
    let exited = loop {
        if let Some(status) = launcher.try_wait().expect("wait") {
            break status;
        }
        assert!(
            succeeded_at.elapsed() < Duration::from_secs(8),
            "the launcher waits for the handler's Delete, not for its 10 s window"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(exited.success(), "{exited}");
    assert_ne!(world.phase(), Some(Phase::Failed));
    stop.cancel();
    handler.await.expect("handler stopped");
    let left = super::fixture::processes_under(world.root.path());
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
