//! Live migration through two whole virt-handlers on real launchers, libvirt and QEMU. Two
//! network namespaces joined by a veth pair are the nodes; each has a kubelet pods directory with
//! one unprivileged launcher pod (in its own pod cgroup, its emptyDirs at the same paths inside
//! the pod as every launcher pod has them) and its own virt-handler, run in the node's namespace
//! over one in-memory API server. The test plays virt-controller: it schedules the VMI on node-a,
//! then hands the migration off to node-b as virt-controller does. Everything after that is the
//! handlers' and launchers' own: the target prepares its pod and opens its proxy on its node's
//! address, the source migrates over TCP between the namespaces, the target takes the VMI over,
//! and the guest's ticker goes on. With masquerade on the pod network, the launchers run in pods
//! of their own (a network namespace each, reached from the host), virt-handler wires both, and
//! the guest answers at the target pod's address afterwards and gets its lease from the target
//! pod's launcher when it asks again.

use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use kubevirt_api::v1::{VirtualMachineInstance, VirtualMachineInstancePhase as Phase};
use kubevirt_api::well_known::labels;
use tokio_util::sync::CancellationToken;
use virt_handler::cluster_api::FakeClusterApi;
use virt_handler::node::NodeConfig;
use virt_handler::pod_process::pod_cgroup::PodCgroup;
use virt_handler::reconciler::{MigrationNetwork, ReconcilerConfig};
use virt_handler::runner::RunOptions;

use super::fixture::example_vmi;
use super::fixture::{PodDirs, Stopper, open_pod_dirs, processes_under, spawn_pod_launcher, testguest, wait_until};
use super::migration_rig::{Nodes, OWNER, ticks};
use super::pod_network::FakePod;
use super::with_handler::http_get;

const SOURCE_POD: &str = "5a1e0c4d-0000-4000-8000-0000000000aa";
const TARGET_POD: &str = "5a1e0c4d-0000-4000-8000-0000000000bb";

/// One node: its directories, its launcher pod and its virt-handler.
struct Node {
    name: &'static str,
    /// The VMI's UID.
    uid: String,
    root: tempfile::TempDir,
    dirs: PodDirs,
    _cgroup: PodCgroup,
    launcher: std::process::Child,
    _stopper: Stopper,
    handler: Option<HandlerThread>,
}

/// A virt-handler on a thread of its own in the node's network namespace (a namespace is a
/// thread's, and the runtime's threads are started from that one), until dropped.
struct HandlerThread {
    stop: CancellationToken,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for HandlerThread {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Node {
    /// Node `name` with the launcher pod `pod` of the VMI `vmi`, in the network namespace `netns`.
    fn start(name: &'static str, pod: &str, netns: &Path, vmi: &VirtualMachineInstance) -> Self {
        let (vmi_name, uid) = (
            vmi.metadata.name.clone().unwrap_or_default(),
            vmi.metadata.uid.clone().unwrap_or_default(),
        );
        let root = tempfile::Builder::new()
            .prefix("k2h")
            .tempdir_in("/tmp")
            .expect("tempdir");
        let empty_dirs = root
            .path()
            .join("pods")
            .join(pod)
            .join("volumes/kubernetes.io~empty-dir");
        let dirs = PodDirs::in_empty_dirs(&empty_dirs);
        open_pod_dirs(root.path());
        let cgroup = PodCgroup::create(pod).expect("the pod's cgroup (needs root)");
        let launcher = spawn_pod_launcher(&dirs, &vmi_name, &uid, netns, OWNER);
        cgroup.add(launcher.id()).expect("the launcher into its pod's cgroup");
        let stopper = Stopper(launcher.id());
        Self {
            name,
            uid,
            root,
            dirs,
            _cgroup: cgroup,
            launcher,
            _stopper: stopper,
            handler: None,
        }
    }

    fn config(&self, address: Ipv4Addr) -> NodeConfig {
        let mut reconciler = ReconcilerConfig::for_node(self.name);
        reconciler.migration = MigrationNetwork {
            address: Some(IpAddr::V4(address)),
            tls: None,
        };
        NodeConfig {
            graceful_shutdown: std::time::Duration::from_secs(5),
            node: self.name.to_owned(),
            share_dir: self.root.path().join("h"),
            pods_dir: self.root.path().join("pods"),
            cpu_manager_state: self.root.path().join("cpu_manager_state"),
            listen: None,
            endpoint_tls: None,
            max_metric_requests: virt_handler::metrics::CONCURRENT_STATS_REQUESTS,
            heartbeat: Duration::from_secs(60),
            run: RunOptions::default(),
            reconciler,
            console: None,
            node_process: PathBuf::from("/proc/1"),
            mount_helper: PathBuf::from("/nonexistent/the-images-are-in-place"),
            device_plugin_dir: None,
        }
    }

    fn start_handler(&mut self, netns: &Path, address: Ipv4Addr, api: &FakeClusterApi) {
        let netns = std::fs::File::open(netns).expect("the node's namespace");
        let (config, api) = (self.config(address), api.clone());
        let stop = CancellationToken::new();
        let token = stop.clone();
        let thread = std::thread::spawn(move || {
            nix::sched::setns(netns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                virt_handler::node::run(config, api, token).await.expect("virt-handler");
            });
        });
        self.handler = Some(HandlerThread {
            stop,
            thread: Some(thread),
        });
    }

    fn serial_log(&self) -> PathBuf {
        self.dirs.private.join(&self.uid).join("virt-serial0-log")
    }
}

/// `example` named `name` with `uid` and the guest's ticker (and `guest_args`), as virt-controller
/// leaves it scheduled on node-a.
fn scheduled(example: &str, name: &str, uid: &str, guest_args: &str) -> VirtualMachineInstance {
    let mut vmi = if example == "vmi-testguest.yaml" {
        testguest(name, uid)
    } else {
        example_vmi(example, name, uid)
    };
    if let Some(kernel_boot) = vmi.spec.domain.firmware.as_mut().and_then(|f| f.kernel_boot.as_mut()) {
        kernel_boot.kernel_args = Some(format!("console=ttyS0 quiet panic=-1 kubevirt_rs.ticker {guest_args}"));
    }
    vmi.metadata
        .labels
        .get_or_insert_default()
        .insert(labels::NODE_NAME.to_owned(), "node-a".to_owned());
    let status = vmi.status.get_or_insert_default();
    status.phase = Some(Phase::Scheduled);
    status.node_name = Some("node-a".to_owned());
    status.runtime_user = Some(u64::from(OWNER));
    status.active_pods.insert(SOURCE_POD.to_owned(), "node-a".to_owned());
    vmi
}

/// virt-controller's part once the target pod runs: the target pod among the active pods, the
/// migration state naming both nodes and the settings, and the target node's label.
fn hand_off(api: &FakeClusterApi, key: &str) {
    api.modify(key, |vmi| {
        vmi.metadata
            .labels
            .get_or_insert_default()
            .insert(labels::MIGRATION_TARGET_NODE_NAME.to_owned(), "node-b".to_owned());
        let status = vmi.status.get_or_insert_default();
        status.active_pods.insert(TARGET_POD.to_owned(), "node-b".to_owned());
        status.migration_state = Some(
            serde_json::from_value(serde_json::json!({
                "migrationUid": "mig-whole", "sourceNode": "node-a", "targetNode": "node-b",
                "sourcePod": "virt-launcher-wanderer-aaaaa", "targetPod": "virt-launcher-wanderer-bbbbb",
                "migrationConfiguration": {"completionTimeoutPerGiB": 150, "progressTimeout": 150,
                                           "bandwidthPerMigration": "0", "disableTLS": true}
            }))
            .expect("migration state"),
        );
    });
}

/// Both nodes, their handlers and the shared API server.
struct Cluster {
    nodes: Nodes,
    api: FakeClusterApi,
    key: String,
    source: Node,
    target: Node,
}

impl Cluster {
    /// The nodes of `slot`, the launcher pods in the network namespaces `pods` (the nodes' own
    /// when `None`), the handlers, and `vmi` running on node-a with its ticker going.
    async fn running(slot: u32, pods: Option<[PathBuf; 2]>, vmi: VirtualMachineInstance) -> Self {
        let nodes = Nodes::new(slot);
        let pods = pods.unwrap_or_else(|| [nodes.path(0), nodes.path(1)]);
        let api = FakeClusterApi::new();
        let mut source = Node::start("node-a", SOURCE_POD, &pods[0], &vmi);
        let mut target = Node::start("node-b", TARGET_POD, &pods[1], &vmi);
        let key = vmi.key();
        api.apply(vmi);
        source.start_handler(&nodes.path(0), nodes.addresses[0], &api);
        target.start_handler(&nodes.path(1), nodes.addresses[1], &api);
        let cluster = Self {
            nodes,
            api,
            key,
            source,
            target,
        };
        wait_until("Running on node-a", Duration::from_secs(120), async || {
            (cluster.phase() == Some(Phase::Running)).then_some(())
        })
        .await;
        let source_log = cluster.source.serial_log();
        wait_until("the guest's ticker", Duration::from_secs(90), async || {
            (ticks(&source_log).len() > 20).then_some(())
        })
        .await;
        cluster
    }

    fn phase(&self) -> Option<Phase> {
        self.api.vmi(&self.key).and_then(|v| v.status?.phase)
    }

    /// Hands the migration off and waits for node-b's take-over; checks the migration state,
    /// and that the ticker goes on on the target from where it stopped, uptime included.
    async fn migrate(&self) -> VirtualMachineInstance {
        hand_off(&self.api, &self.key);
        let moved = wait_until("the take-over by node-b", Duration::from_secs(180), async || {
            let vmi = self.api.vmi(&self.key)?;
            let state = vmi.status.as_ref()?.migration_state.as_ref()?;
            assert_ne!(state.failed, Some(true), "the migration failed: {state:?}");
            (state.completed == Some(true) && vmi.status.as_ref()?.node_name.as_deref() == Some("node-b"))
                .then_some(vmi)
        })
        .await;
        let state = moved
            .status
            .as_ref()
            .and_then(|s| s.migration_state.clone())
            .expect("state");
        assert_eq!(
            state.target_node_address.as_deref(),
            Some(self.nodes.addresses[1].to_string().as_str()),
            "the target's proxy listens on its node's address"
        );
        assert!(state.start_timestamp.is_some() && state.end_timestamp.is_some());
        assert_eq!(state.target_node_domain_detected, Some(true));
        assert_eq!(
            moved
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::NODE_NAME))
                .map(String::as_str),
            Some("node-b")
        );
        let target_log = self.target.serial_log();
        let last_on_source = *ticks(&self.source.serial_log()).last().expect("ticks on the source");
        wait_until("the ticker on the target", Duration::from_secs(60), async || {
            ticks(&target_log)
                .iter()
                .any(|&(count, _)| count > last_on_source.0 + 20)
                .then_some(())
        })
        .await;
        let after = ticks(&target_log);
        let first_on_target = after
            .iter()
            .find(|&&(count, _)| count > last_on_source.0)
            .expect("ticks after the source's last");
        assert!(
            first_on_target.1 >= last_on_source.1,
            "uptime went on: {last_on_source:?} then {first_on_target:?}"
        );
        assert_eq!(self.phase(), Some(Phase::Running));
        moved
    }

    /// The source launcher ended by itself once its handler deleted the migrated domain; the
    /// target's runs the guest until stopped, then exits cleanly; nothing is left behind.
    async fn end(mut self) {
        let exited = wait_until("the source launcher's exit", Duration::from_secs(60), async || {
            self.source.launcher.try_wait().expect("wait")
        })
        .await;
        assert!(exited.success(), "the source launcher exits cleanly: {exited:?}");
        assert!(
            !self
                .source
                .dirs
                .share
                .join("sockets")
                .join(cmd_protocol::sockets::READY_SOCKET)
                .exists(),
            "its socket is gone"
        );
        drop(self.source.handler.take());
        drop(self.target.handler.take());
        assert!(
            self.target.launcher.try_wait().expect("wait").is_none(),
            "the guest runs on node-b"
        );
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(self.target.launcher.id()).expect("pid")),
            nix::sys::signal::Signal::SIGTERM,
        )
        .expect("SIGTERM");
        let stopped = wait_until("the target launcher's exit", Duration::from_secs(45), async || {
            self.target.launcher.try_wait().expect("wait")
        })
        .await;
        assert!(stopped.success(), "the target launcher exits cleanly: {stopped:?}");
        let name = self.key.replace('/', "_");
        let left = processes_under(Path::new(&name));
        assert!(left.is_empty(), "processes left behind: {left:?}");
    }
}

#[tokio::test]
async fn two_virt_handlers_move_a_running_guest_between_nodes() {
    let vmi = scheduled(
        "vmi-testguest.yaml",
        "wanderer",
        "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f",
        "",
    );
    let cluster = Cluster::running(4, None, vmi).await;
    cluster.migrate().await;
    cluster.end().await;
}

#[tokio::test]
async fn a_masquerade_guest_answers_at_the_target_pods_address_after_moving() {
    let pods = [FakePod::new(4), FakePod::new(5)];
    let cluster = Cluster::running(
        5,
        Some([pods[0].path(), pods[1].path()]),
        scheduled(
            "vmi-testguest-masquerade.yaml",
            "nomad",
            "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e70",
            "kubevirt_rs.dhcp_loop",
        ),
    )
    .await;
    let guest_answers = async |pod: &FakePod| {
        let (_, body) = tokio::time::timeout(Duration::from_secs(20), http_get((pod.address, 80).into(), "/"))
            .await
            .expect("the guest answers in time");
        assert_eq!(body.trim(), "KUBEVIRT-RS-GUEST-HTTP");
    };
    let source_log = cluster.source.serial_log();
    wait_until("the guest's web server", Duration::from_secs(60), async || {
        std::fs::read_to_string(&source_log)
            .ok()
            .filter(|log| log.contains("KUBEVIRT-RS-GUEST-GATEWAY-REACHED"))
    })
    .await;
    guest_answers(&pods[0]).await;
    // The guest asks for its lease again and again; the source pod's launcher serves it.
    let lease = "KUBEVIRT-RS-GUEST-LEASE eth0 10.0.2.2 gateway 10.0.2.1";
    wait_until("the lease asked for again", Duration::from_secs(30), async || {
        std::fs::read_to_string(&source_log)
            .ok()
            .filter(|log| log.contains(lease))
    })
    .await;
    cluster.migrate().await;
    // The guest kept its address inside the pod (10.0.2.2): the target pod's masquerade reaches
    // it, and the VMI reports the target pod's address.
    guest_answers(&pods[1]).await;
    wait_until(
        "the target pod's address in the status",
        Duration::from_secs(30),
        async || {
            let vmi = cluster.api.vmi(&cluster.key)?;
            let address = vmi.status?.interfaces.first()?.ip_address.clone()?;
            (address == pods[1].address.to_string()).then_some(())
        },
    )
    .await;
    // After the move, the target pod's launcher serves the same lease.
    let target_log = cluster.target.serial_log();
    wait_until("the lease from the target pod", Duration::from_secs(30), async || {
        std::fs::read_to_string(&target_log)
            .ok()
            .filter(|log| log.contains(lease))
    })
    .await;
    cluster.end().await;
}
