//! Live migration through two whole virt-handlers on real launchers, libvirt and QEMU. Two
//! network namespaces joined by a veth pair are the nodes; each has a kubelet pods directory with
//! one unprivileged launcher pod (in its own pod cgroup, its emptyDirs at the same paths inside
//! the pod as every launcher pod has them) and its own virt-handler, run in the node's namespace
//! over one in-memory API server. The test plays virt-controller: it schedules the VMI on node-a,
//! then hands the migration off to node-b as virt-controller does. Everything after that is the
//! handlers' and launchers' own: the target prepares its pod and opens its proxy on its node's
//! address, the source migrates over TCP between the namespaces, the target takes the VMI over,
//! and the guest's ticker goes on.

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

use super::fixture::{PodDirs, Stopper, open_pod_dirs, processes_under, spawn_pod_launcher, testguest, wait_until};
use super::migration_rig::{Nodes, OWNER, ticks};

const NAME: &str = "wanderer";
const UID: &str = "3c4d5e6f-7a8b-4c9d-8e0f-1a2b3c4d5e6f";
const SOURCE_POD: &str = "5a1e0c4d-0000-4000-8000-0000000000aa";
const TARGET_POD: &str = "5a1e0c4d-0000-4000-8000-0000000000bb";

/// One node: its directories, its launcher pod and its virt-handler.
struct Node {
    name: &'static str,
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
    fn start(name: &'static str, pod: &str, netns: &Path) -> Self {
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
        let launcher = spawn_pod_launcher(&dirs, NAME, UID, netns, OWNER);
        cgroup.add(launcher.id()).expect("the launcher into its pod's cgroup");
        let stopper = Stopper(launcher.id());
        Self {
            name,
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
        self.dirs.private.join(UID).join("virt-serial0-log")
    }
}

/// The test guest with its ticker, as virt-controller leaves it scheduled on node-a.
fn scheduled() -> VirtualMachineInstance {
    let mut vmi = testguest(NAME, UID);
    if let Some(kernel_boot) = vmi.spec.domain.firmware.as_mut().and_then(|f| f.kernel_boot.as_mut()) {
        kernel_boot.kernel_args = Some("console=ttyS0 quiet panic=-1 kubevirt_rs.ticker".to_owned());
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

#[tokio::test]
async fn two_virt_handlers_move_a_running_guest_between_nodes() {
    let nodes = Nodes::new(3);
    let api = FakeClusterApi::new();
    let mut source = Node::start("node-a", SOURCE_POD, &nodes.path(0));
    let mut target = Node::start("node-b", TARGET_POD, &nodes.path(1));
    let vmi = scheduled();
    let key = vmi.key();
    api.apply(vmi);
    source.start_handler(&nodes.path(0), nodes.addresses[0], &api);
    target.start_handler(&nodes.path(1), nodes.addresses[1], &api);
    let phase = || api.vmi(&key).and_then(|v| v.status?.phase);
    wait_until("Running on node-a", Duration::from_secs(120), async || {
        (phase() == Some(Phase::Running)).then_some(())
    })
    .await;
    let source_log = source.serial_log();
    wait_until("the guest's ticker", Duration::from_secs(90), async || {
        (ticks(&source_log).len() > 20).then_some(())
    })
    .await;

    hand_off(&api, &key);
    let moved = wait_until("the take-over by node-b", Duration::from_secs(180), async || {
        let vmi = api.vmi(&key)?;
        let state = vmi.status.as_ref()?.migration_state.as_ref()?;
        assert_ne!(state.failed, Some(true), "the migration failed: {state:?}");
        (state.completed == Some(true) && vmi.status.as_ref()?.node_name.as_deref() == Some("node-b")).then_some(vmi)
    })
    .await;
    let state = moved
        .status
        .as_ref()
        .and_then(|s| s.migration_state.clone())
        .expect("state");
    assert_eq!(
        state.target_node_address.as_deref(),
        Some(nodes.addresses[1].to_string().as_str()),
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

    // The counter goes on on the target, from where it stopped on the source, and the guest's
    // uptime did not reset.
    let target_log = target.serial_log();
    let before = ticks(&source_log);
    let last_on_source = *before.last().expect("ticks on the source");
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
    assert_eq!(phase(), Some(Phase::Running));

    // The source's launcher ends once its handler deleted the migrated domain.
    let exited = wait_until("the source launcher's exit", Duration::from_secs(60), async || {
        source.launcher.try_wait().expect("wait")
    })
    .await;
    assert!(exited.success(), "the source launcher exits cleanly: {exited:?}");
    assert!(
        !source
            .dirs
            .share
            .join("sockets")
            .join(cmd_protocol::sockets::READY_SOCKET)
            .exists(),
        "its socket is gone"
    );
    drop(source.handler.take());
    drop(target.handler.take());
    assert!(
        target.launcher.try_wait().expect("wait").is_none(),
        "the guest runs on node-b"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(target.launcher.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let stopped = wait_until("the target launcher's exit", Duration::from_secs(45), async || {
        target.launcher.try_wait().expect("wait")
    })
    .await;
    assert!(stopped.success(), "the target launcher exits cleanly: {stopped:?}");
    let left = processes_under(Path::new(&format!("default_{NAME}")));
    assert!(left.is_empty(), "processes left behind: {left:?}");
}
