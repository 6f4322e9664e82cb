//! The pod network in cluster mode, end to end: a network namespace of this test's own stands in
//! for the pod the CNI plugin made (eth0 with an address and a default route, a veth to the host);
//! the launcher runs inside it; virt-handler wires the binding there before its first Sync; the
//! launcher serves DHCP; the guest gets its lease, reaches its gateway, and the host reaches the
//! guest's web server. Afterwards nothing of it is left.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use cmd_protocol::access_check::{NOBODY, Refusal, connect_as};
use cmd_protocol::sockets::SOCKET_MODE;
use kubevirt_api::v1::VirtualMachineInstancePhase as Phase;
use nix::errno::Errno;

use super::fixture::{
    Stopper, assert_stops_cleanly, example_vmi, open_pod_dirs, processes_under, spawn_launcher_in,
    spawn_unprivileged_launcher_in, wait_until,
};
use super::migration_rig::ip;
use super::with_handler::{World, http_get};

/// The "pod": a named namespace with eth0 on a /30 whose other end is on the host.
pub(super) struct FakePod {
    name: String,
    host_interface: String,
    /// The pod's address.
    pub(super) address: Ipv4Addr,
    gateway: Ipv4Addr,
}

impl FakePod {
    /// A pod with eth0 on a /30 shared with the host end, MTU 1400; `slot` (0 to 7) is the
    /// test's own.
    pub(super) fn new(slot: u32) -> Self {
        let pod = Self::named(slot, false);
        ip(&[
            "address",
            "add",
            &format!("{}/30", pod.gateway),
            "dev",
            &pod.host_interface,
        ]);
        pod.inside(&["address", "add", &format!("{}/30", pod.address), "dev", "eth0"]);
        pod.inside(&["route", "add", "default", "via", &pod.gateway.to_string()]);
        pod
    }

    /// A pod as Calico makes them: a /32 address, the gateway 169.254.1.1 reachable only through
    /// a link route, answered by proxy ARP on the host end, which has no address.
    ///
    /// The kernel answers ARP by proxy only on an interface that forwards, so the host end gets
    /// forwarding of its own, as Calico sets it on its `cali*` links. Both settings belong to the
    /// host end and go with it; the host's `net.ipv4.ip_forward` is neither read nor changed.
    fn calico(slot: u32) -> Self {
        let pod = Self::named(slot, true);
        for setting in ["proxy_arp", "forwarding"] {
            let assignment = format!("net.ipv4.conf.{}.{setting}=1", pod.host_interface);
            let status = Command::new("sysctl")
                .args(["-q", "-w", &assignment])
                .status()
                .expect("sysctl");
            assert!(status.success(), "{assignment}");
        }
        ip(&[
            "route",
            "add",
            &format!("{}/32", pod.address),
            "dev",
            &pod.host_interface,
        ]);
        pod.inside(&["address", "add", &format!("{}/32", pod.address), "dev", "eth0"]);
        pod.inside(&["route", "add", &pod.gateway.to_string(), "dev", "eth0", "scope", "link"]);
        pod.inside(&[
            "route",
            "add",
            "default",
            "via",
            &pod.gateway.to_string(),
            "dev",
            "eth0",
        ]);
        pod
    }

    fn named(slot: u32, calico: bool) -> Self {
        let id = std::process::id();
        let base = u32::from(Ipv4Addr::new(10, 221, 0, 0)) + ((id % 2000) * 32 + slot * 4);
        let pod = Self {
            name: format!("kvrs-pod-{id}-{slot}"),
            host_interface: format!("kvp{id}{slot}"),
            address: Ipv4Addr::from(base + 2),
            gateway: if calico {
                Ipv4Addr::new(169, 254, 1, 1)
            } else {
                Ipv4Addr::from(base + 1)
            },
        };
        ip(&["netns", "add", &pod.name]);
        ip(&[
            "link",
            "add",
            &pod.host_interface,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            &pod.name,
        ]);
        ip(&["link", "set", &pod.host_interface, "up"]);
        pod.inside(&["link", "set", "lo", "up"]);
        // A CNI-like MTU below 1500, which the guest must get.
        pod.inside(&["link", "set", "eth0", "mtu", "1400", "up"]);
        pod
    }

    fn inside(&self, args: &[&str]) {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        ip(&all);
    }

    pub(super) fn path(&self) -> PathBuf {
        Path::new("/run/netns").join(&self.name)
    }
}

impl Drop for FakePod {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
        let _ = Command::new("ip").args(["link", "del", &self.host_interface]).output();
    }
}

/// Who the launcher runs as.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LauncherUser {
    Root,
    /// An unprivileged launcher pod's: this uid, no capabilities (the VMI's `status.runtimeUser`).
    Unprivileged(u32),
}

/// Runs `example` in `pod` under the real handler; the guest's console must show `lease` then
/// `marker`, and the host must reach the guest's web server at the pod address.
async fn run_binding(example: &str, pod: FakePod, uid: &str, lease: &str, marker: &str) {
    run_binding_as(LauncherUser::Root, example, pod, uid, lease, marker).await;
}

async fn run_binding_as(user: LauncherUser, example: &str, pod: FakePod, uid: &str, lease: &str, marker: &str) {
    let name = example.trim_start_matches("vmi-").trim_end_matches(".yaml");
    let host_ports = host_unprivileged_ports();
    let (world, dirs, mut vmi) = World::new(name, uid);
    let networked = example_vmi(example, name, uid);
    vmi.spec.networks = networked.spec.networks;
    vmi.spec.domain.devices.interfaces = networked.spec.domain.devices.interfaces;
    vmi.spec.domain.devices.autoattach_pod_interface = None;
    let before = match user {
        LauncherUser::Root => Vec::new(),
        LauncherUser::Unprivileged(owner) => processes_of_user(owner),
    };
    let launcher = match user {
        LauncherUser::Root => spawn_launcher_in(&dirs, name, uid, Some(&pod.path())),
        LauncherUser::Unprivileged(owner) => {
            vmi.status.get_or_insert_default().runtime_user = Some(u64::from(owner));
            open_pod_dirs(world.root.path());
            spawn_unprivileged_launcher_in(&dirs, name, uid, &pod.path(), owner)
        }
    };
    let _stopper = Stopper(launcher.id());
    world
        .pod_cgroup
        .add(launcher.id())
        .expect("the launcher into its pod's cgroup");
    world.api.apply(vmi);
    let (stop, handler) = world.start_handler();
    world.wait_for_phase(Phase::Running, Duration::from_secs(120)).await;

    let serial_log = dirs.private.join(uid).join("virt-serial0-log");
    let log = wait_until("the guest's lease", Duration::from_secs(60), async || {
        std::fs::read_to_string(&serial_log)
            .ok()
            .filter(|log| log.contains(marker))
    })
    .await;
    assert!(log.contains(lease), "expected {lease:?} in:\n{log}");
    let (_, body) = tokio::time::timeout(Duration::from_secs(20), http_get((pod.address, 80).into(), "/"))
        .await
        .expect("the guest answers in time");
    assert_eq!(body.trim(), "KUBEVIRT-RS-GUEST-HTTP");
    let reported = wait_until(
        "the pod address in the VMI status",
        Duration::from_secs(30),
        async || {
            world
                .api
                .vmi(&world.key)?
                .status?
                .interfaces
                .first()?
                .ip_address
                .clone()
        },
    )
    .await;
    assert_eq!(
        reported,
        pod.address.to_string(),
        "status.interfaces[0].ipAddress is the pod's"
    );
    let cache = dirs.private.join(uid).join(cmd_protocol::sockets::POD_INTERFACE_CACHE);
    let cached = std::fs::read_to_string(&cache).expect("the handler's cache");
    assert!(cached.contains(&pod.address.to_string()), "{cached}");
    if let LauncherUser::Unprivileged(owner) = user {
        assert_unprivileged(&world, &pod, launcher.id(), owner, &host_ports, &before);
        let private = std::fs::symlink_metadata(dirs.private.join(uid)).expect("private dir");
        assert_eq!(
            (
                std::os::unix::fs::MetadataExt::uid(&private),
                std::os::unix::fs::MetadataExt::gid(&private)
            ),
            (owner, owner),
            "the VMI's private directory, which virt-handler made, is the launcher's"
        );
    }

    stop.cancel();
    handler.await.expect("handler stopped");
    assert_stops_cleanly(launcher, world.root.path(), &world.socket());
    let host_interface = pod.host_interface.clone();
    drop(pod);
    let left = Command::new("ip")
        .args(["link", "show", "dev", &host_interface])
        .output()
        .expect("ip");
    assert!(!left.status.success(), "the pod's host link is gone with its namespace");
}

/// A field of `/proc/<pid>/status`.
fn status_field(pid: i32, field: &str) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
        .unwrap_or_default()
}

/// Everything the launcher pod runs is `owner`'s with no capability; virt-handler gave the pod's
/// devices, the tap and the notify pipe to `owner`, and let it bind the DHCP port, in the pod only.
/// `before` is what ran as `owner` before the launcher started.
fn assert_unprivileged(
    world: &World,
    pod: &FakePod,
    launcher: u32,
    owner: u32,
    host_ports: &str,
    before: &[(i32, String)],
) {
    use std::os::unix::fs::MetadataExt as _;
    let processes = processes_under(world.root.path());
    let programs = ["virt-launcher", "libvirtd", "qemu-system"];
    for program in programs {
        assert!(
            processes.iter().any(|(_, cmdline)| cmdline.contains(program)),
            "no {program} among {processes:?}"
        );
    }
    // Nothing else runs as the launcher's user, wherever it was started from: no virtlogd, which
    // QEMU's own stdio and serial log files replace. (What ran as that uid before the launcher
    // started, a host's own account perhaps, is not the pod's.)
    for (pid, cmdline) in processes_of_user(owner)
        .into_iter()
        .filter(|(pid, _)| !before.iter().any(|(earlier, _)| earlier == pid))
    {
        assert!(
            programs.iter().any(|program| cmdline.contains(program)),
            "the launcher's user runs {cmdline} (pid {pid})"
        );
    }
    for (pid, cmdline) in &processes {
        let ids = format!("{owner}\t{owner}\t{owner}\t{owner}");
        assert_eq!(status_field(*pid, "Uid"), ids, "uids of {cmdline}");
        assert_eq!(status_field(*pid, "Gid"), ids, "gids of {cmdline}");
        assert_eq!(
            status_field(*pid, "CapEff"),
            "0000000000000000",
            "effective capabilities of {cmdline}"
        );
        assert_eq!(
            status_field(*pid, "CapPrm"),
            "0000000000000000",
            "permitted capabilities of {cmdline}"
        );
        assert_eq!(status_field(*pid, "NoNewPrivs"), "1", "{cmdline} can gain no privilege");
    }
    for device in ["dev/kvm", "dev/net/tun"] {
        let inside = std::fs::metadata(format!("/proc/{launcher}/root/{device}")).expect("the pod's device");
        assert_eq!((inside.uid(), inside.gid()), (owner, owner), "the pod's {device}");
        let host = std::fs::metadata(format!("/{device}")).expect("the host's device");
        assert_eq!(host.uid(), 0, "the host's {device} stays root's");
    }
    // The launcher's command socket and the handler's notify pipe are the launcher's user's alone:
    // another uid that reaches them is refused, and their owner connects.
    for (what, socket) in [("command socket", world.socket()), ("notify pipe", world.notify_pipe())] {
        let meta = std::fs::symlink_metadata(&socket).unwrap_or_else(|e| panic!("the {what}: {e}"));
        assert_eq!((meta.uid(), meta.mode() & 0o777), (owner, SOCKET_MODE), "the {what}");
        assert_eq!(
            connect_as(NOBODY, &socket),
            Err(Refusal::Connect(Errno::EACCES)),
            "another uid connects to the {what}"
        );
        assert_eq!(
            connect_as(owner, &socket),
            Ok(()),
            "the launcher's user connects to the {what}"
        );
    }
    for attribute in ["owner", "group"] {
        let read = Command::new("ip")
            .args([
                "netns",
                "exec",
                &pod.name,
                "cat",
                &format!("/sys/class/net/tap0/{attribute}"),
            ])
            .output()
            .expect("ip netns exec");
        assert_eq!(
            String::from_utf8_lossy(&read.stdout).trim(),
            owner.to_string(),
            "the tap's {attribute}"
        );
    }
    let inside = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pod.name,
            "cat",
            "/proc/sys/net/ipv4/ip_unprivileged_port_start",
        ])
        .output()
        .expect("ip netns exec");
    assert_eq!(
        String::from_utf8_lossy(&inside.stdout).trim(),
        "0",
        "the pod binds any port"
    );
    assert_eq!(host_unprivileged_ports(), host_ports, "the host's setting is untouched");
}

/// Every live process whose real uid is `uid`, with its command line (a process that ends
/// meanwhile is left out).
fn processes_of_user(uid: u32) -> Vec<(i32, String)> {
    let real_uid = |status: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().next()?.parse::<u32>().ok())
    };
    std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|status| real_uid(&status) == Some(uid))
        })
        .filter_map(|pid| {
            // A zombie has no command line left to name it.
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .ok()
                .filter(|c| !c.is_empty())?;
            Some((pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

fn host_unprivileged_ports() -> String {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_unprivileged_port_start").expect("sysctl")
}

/// An unprivileged launcher pod, as virt-controller renders it by default: the launcher, its
/// libvirtd and QEMU run as uid 107 with no capability, and the guest still boots, gets its lease
/// and serves the host; everything stops cleanly.
#[tokio::test]
async fn an_unprivileged_launcher_runs_the_guest_with_no_capability() {
    run_binding_as(
        LauncherUser::Unprivileged(kubevirt_api::well_known::NON_ROOT_UID),
        "vmi-testguest-masquerade.yaml",
        FakePod::new(3),
        "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a804",
        "KUBEVIRT-RS-GUEST-IP eth0 10.0.2.2/24 gateway 10.0.2.1 mtu 1400",
        "KUBEVIRT-RS-GUEST-GATEWAY-REACHED 10.0.2.1",
    )
    .await;
}

#[tokio::test]
async fn the_handler_wires_masquerade_and_the_launcher_serves_the_lease() {
    run_binding(
        "vmi-testguest-masquerade.yaml",
        FakePod::new(0),
        "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a801",
        "KUBEVIRT-RS-GUEST-IP eth0 10.0.2.2/24 gateway 10.0.2.1 mtu 1400",
        "KUBEVIRT-RS-GUEST-GATEWAY-REACHED 10.0.2.1",
    )
    .await;
}

#[tokio::test]
async fn the_handler_wires_bridge_and_the_guest_takes_the_pod_address() {
    let pod = FakePod::new(1);
    let lease = format!(
        "KUBEVIRT-RS-GUEST-IP eth0 {}/30 gateway {} mtu 1400",
        pod.address, pod.gateway
    );
    let marker = format!("KUBEVIRT-RS-GUEST-GATEWAY-REACHED {}", pod.gateway);
    run_binding(
        "vmi-testguest-bridge.yaml",
        pod,
        "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a802",
        &lease,
        &marker,
    )
    .await;
}

/// With a /32 pod address the guest reaches its gateway only through the classless static routes
/// (option 121) the launcher sends; the host's request is answered only if the guest has them.
#[tokio::test]
async fn bridge_on_a_calico_like_slash_32_pod_routes_through_option_121() {
    let pod = FakePod::calico(2);
    let lease = format!(
        "KUBEVIRT-RS-GUEST-IP eth0 {}/32 gateway 169.254.1.1 mtu 1400",
        pod.address
    );
    run_binding(
        "vmi-testguest-bridge.yaml",
        pod,
        "5e6f7a8b-9c0d-4e1f-a2b3-c4d5e6f7a803",
        &lease,
        "KUBEVIRT-RS-GUEST-IP",
    )
    .await;
}
