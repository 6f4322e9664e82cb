//! The rig of the live-migration tests and benchmark: two network namespaces as nodes joined by a
//! veth pair, an unprivileged launcher pod on each (its root at `/mnt`, as every pod has its
//! volumes at the same paths), virt-handler's migration proxies in each node's namespace, and the
//! test guest's ticker read from the serial logs.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cmd_protocol::cmd::{Vmi, VmiRequest};
use cmd_protocol::domain::DomainSnapshot;
use cmd_protocol::migration::{Channel, MigrationMetadata, socket_path};
use cmd_protocol::transport::CmdClient;
use kubevirt_api::v1::VirtualMachineInstance;
use virt_handler::migration_proxy::{Proxy, Security};
use virt_handler::pod_socket::PodSocket;

use super::fixture::{PodDirs, Stopper, open_pod_dirs, spawn_pod_launcher, testguest, wait_until};

pub const OWNER: u32 = kubevirt_api::well_known::NON_ROOT_UID;

pub fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().expect("ip runs");
    assert!(status.success(), "ip {}", args.join(" "));
}

/// Two network namespaces, the nodes, joined by a veth pair on a /30.
pub struct Nodes {
    names: [String; 2],
    /// The nodes' addresses.
    pub addresses: [Ipv4Addr; 2],
}

impl Nodes {
    /// The pair `slot` (0 to 7, each test its own) of this test process.
    pub fn new(slot: u32) -> Self {
        let id = std::process::id();
        let base = u32::from(Ipv4Addr::new(10, 224, 0, 0)) + ((id % 2000) * 8 + slot) * 4;
        let nodes = Self {
            names: [format!("kvrs-node-{id}-{slot}a"), format!("kvrs-node-{id}-{slot}b")],
            addresses: [Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2)],
        };
        for name in &nodes.names {
            ip(&["netns", "add", name]);
            ip(&["-n", name, "link", "set", "lo", "up"]);
        }
        ip(&[
            "-n",
            &nodes.names[0],
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &nodes.names[1],
        ]);
        for (name, address) in nodes.names.iter().zip(nodes.addresses) {
            ip(&["-n", name, "address", "add", &format!("{address}/30"), "dev", "eth0"]);
            ip(&["-n", name, "link", "set", "eth0", "up"]);
        }
        nodes
    }

    pub fn path(&self, node: usize) -> PathBuf {
        Path::new("/run/netns").join(&self.names[node])
    }
}

impl Drop for Nodes {
    fn drop(&mut self) {
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// A proxy running in a node's network namespace, on a thread of its own (a namespace is a
/// thread's), until dropped.
pub struct NodeProxy {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The TCP port of each channel (target side).
    pub ports: BTreeMap<Channel, u16>,
}

impl NodeProxy {
    pub fn start<F>(netns: &Path, make: F) -> Self
    where
        F: FnOnce() -> std::pin::Pin<Box<dyn std::future::Future<Output = Proxy>>> + Send + 'static,
    {
        let netns = std::fs::File::open(netns).expect("the node's namespace");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ports_tx, ports_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            nix::sched::setns(netns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let proxy = make().await;
                ports_tx.send(proxy.ports().clone()).expect("ports");
                let _ = stopped.await;
                drop(proxy);
            });
        });
        let ports = ports_rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the proxy started");
        Self {
            stop: Some(stop),
            thread: Some(thread),
            ports,
        }
    }
}

impl Drop for NodeProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// One launcher pod on a node.
pub struct Pod {
    /// The pod's directories on the node.
    pub dirs: PodDirs,
    /// The launcher process.
    pub launcher: std::process::Child,
    _stopper: Stopper,
}

impl Pod {
    pub fn start(root: &Path, netns: &Path, name: &str, uid: &str) -> Self {
        std::fs::create_dir_all(root).expect("pod root");
        let dirs = PodDirs::new(root, root.join("share"));
        std::fs::create_dir_all(dirs.share.join("sockets")).expect("share");
        open_pod_dirs(root);
        let launcher = spawn_pod_launcher(&dirs, name, uid, netns, OWNER);
        let stopper = Stopper(launcher.id());
        Self {
            dirs,
            launcher,
            _stopper: stopper,
        }
    }

    pub async fn client(&self) -> CmdClient {
        let socket = self
            .dirs
            .share
            .join("sockets")
            .join(cmd_protocol::sockets::READY_SOCKET);
        wait_until("the launcher's socket", Duration::from_secs(60), async || {
            CmdClient::connect(&socket).await.ok()
        })
        .await
    }

    pub fn serial_log(&self, uid: &str) -> PathBuf {
        self.dirs.private.join(uid).join("virt-serial0-log")
    }

    /// `path` (under the pod's root) as virt-handler reaches it: below the pod's root, following
    /// no link.
    pub fn pod_socket(&self, path: &Path) -> PodSocket {
        let root = self.dirs.private.parent().expect("the pod's root");
        PodSocket::new(root, path.strip_prefix(root).expect("under the pod's root"))
    }

    /// The session libvirtd's socket, as the node sees it.
    pub fn libvirt_socket(&self) -> PathBuf {
        cmd_protocol::migration::libvirt_socket(&self.dirs.private)
    }

    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.launcher.id()).expect("pid"));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
        let begin = std::time::Instant::now();
        loop {
            if let Some(status) = self.launcher.try_wait().expect("wait") {
                return status;
            }
            if begin.elapsed() > Duration::from_secs(45) {
                let _ = self.launcher.kill();
                let _ = self.launcher.wait();
                let mut stderr = String::new();
                if let Some(mut pipe) = self.launcher.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                panic!("the launcher did not exit:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

pub fn request(vmi: &VirtualMachineInstance) -> VmiRequest {
    VmiRequest {
        vmi: Some(Vmi {
            vmi_json: serde_json::to_vec(vmi).expect("json"),
        }),
        options: None,
    }
}

pub async fn snapshot(client: &mut CmdClient) -> Option<DomainSnapshot> {
    let json = client.domain().await.expect("GetDomain")?;
    Some(serde_json::from_str(&json).expect("snapshot JSON"))
}

/// The ticks in a serial log: `(counter, uptime in seconds)`.
pub fn ticks(log: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| {
            let mut fields = line.trim().strip_prefix("KUBEVIRT-RS-TICK ")?.split_whitespace();
            Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
        })
        .collect()
}

/// The proxies for migrating the VMI `uid` from `source` on node 0 to `target` on node 1.
pub fn proxies(nodes: &Nodes, source: &Pod, target: &Pod, uid: &str) -> (NodeProxy, NodeProxy) {
    let target_sockets = BTreeMap::from([
        (Channel::Libvirt, target.pod_socket(&target.libvirt_socket())),
        (
            Channel::Stream,
            target.pod_socket(&socket_path(&target.dirs.share, uid, Channel::Stream)),
        ),
        (
            Channel::Disks,
            target.pod_socket(&socket_path(&target.dirs.share, uid, Channel::Disks)),
        ),
    ]);
    let address = IpAddr::V4(nodes.addresses[1]);
    let target_proxy = NodeProxy::start(&nodes.path(1), move || {
        Box::pin(async move {
            Proxy::target(address, target_sockets, &Security::Plain)
                .await
                .expect("target proxy")
        })
    });
    let ports = target_proxy.ports.clone();
    let source_sockets: BTreeMap<Channel, PodSocket> = Channel::ALL
        .into_iter()
        .map(|channel| {
            (
                channel,
                source.pod_socket(&socket_path(&source.dirs.share, uid, channel)),
            )
        })
        .collect();
    let source_proxy = NodeProxy::start(&nodes.path(0), move || {
        Box::pin(async move {
            Proxy::source(address, &ports, source_sockets, Some(OWNER), &Security::Plain).expect("source proxy")
        })
    });
    (source_proxy, target_proxy)
}

pub fn options(uid: &str, bandwidth: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "migrationUid": uid, "completionTimeoutPerGib": 150, "progressTimeoutSeconds": 150,
        "bandwidthMibPerSecond": bandwidth
    }))
    .expect("json")
}

pub async fn migration_over(client: &mut CmdClient) -> MigrationMetadata {
    wait_until("the end of the migration", Duration::from_secs(120), async || {
        snapshot(client)
            .await
            .and_then(|s| s.metadata.migration)
            .filter(|m| m.completed || m.failed)
    })
    .await
}

/// The source and target pods running, the guest ticking on the source, the proxies up.
pub async fn ready_to_migrate(
    root: &Path,
    nodes: &Nodes,
    name: &str,
    uid: &str,
) -> (Pod, Pod, VirtualMachineInstance, (NodeProxy, NodeProxy)) {
    ready_to_migrate_with(root, nodes, name, uid, "kubevirt_rs.ticker").await
}

/// [`ready_to_migrate`] with `guest_args` on the guest kernel's command line.
pub async fn ready_to_migrate_with(
    root: &Path,
    nodes: &Nodes,
    name: &str,
    uid: &str,
    guest_args: &str,
) -> (Pod, Pod, VirtualMachineInstance, (NodeProxy, NodeProxy)) {
    let mut vmi = testguest(name, uid);
    if let Some(kernel_boot) = vmi.spec.domain.firmware.as_mut().and_then(|f| f.kernel_boot.as_mut()) {
        kernel_boot.kernel_args = Some(format!("console=ttyS0 quiet panic=-1 {guest_args}"));
    }
    vmi.status.get_or_insert_default().runtime_user = Some(u64::from(OWNER));
    let source = Pod::start(&root.join("a"), &nodes.path(0), name, uid);
    let target = Pod::start(&root.join("b"), &nodes.path(1), name, uid);
    source
        .client()
        .await
        .sync(request(&vmi))
        .await
        .expect("sync the source");
    let log = source.serial_log(uid);
    wait_until("the guest's ticker", Duration::from_secs(90), async || {
        (ticks(&log).len() > 20).then_some(())
    })
    .await;
    target
        .client()
        .await
        .sync_migration_target(request(&vmi))
        .await
        .expect("prepare the target");
    assert!(
        target.dirs.share.join(cmd_protocol::migration::PROXY_DIR).is_dir(),
        "the target made its migration socket directory"
    );
    let proxies = proxies(nodes, &source, &target, uid);
    (source, target, vmi, proxies)
}
