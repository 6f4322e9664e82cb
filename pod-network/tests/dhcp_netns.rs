//! The launcher's DHCP server against busybox's udhcpc (the test guest's client) across a veth
//! pair into a network namespace of this test's own: the client gets the lease's address, mask,
//! gateway, DNS, search domains, hostname, MTU and lease time, configures them, and reaches its
//! gateway. The namespace and links are removed afterwards, whatever happens.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

use pod_network::dhcp::packet::code;
use pod_network::dhcp::{LEASE_SECONDS, Lease, StaticRoute, server};
use tokio_util::sync::CancellationToken;

/// This test's namespace and veth pair, removed on drop.
struct Wire {
    namespace: String,
    host: String,
    guest: String,
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip").args(args).status().is_ok_and(|s| s.success())
}

impl Wire {
    fn new() -> Option<Self> {
        let id = std::process::id();
        let wire = Self {
            namespace: format!("kvrs-dhcp-{id}"),
            host: format!("kvd{id}h"),
            guest: format!("kvd{id}g"),
        };
        let ok = ip(&["netns", "add", &wire.namespace])
            && ip(&["link", "add", &wire.host, "type", "veth", "peer", "name", &wire.guest])
            && ip(&["link", "set", &wire.guest, "netns", &wire.namespace])
            && ip(&["addr", "add", "10.0.2.1/24", "dev", &wire.host])
            && ip(&["link", "set", &wire.host, "up"])
            && wire.exec(&["ip", "link", "set", &wire.guest, "address", "02:00:00:12:34:56"])
            && wire.exec(&["ip", "link", "set", &wire.guest, "up"]);
        ok.then_some(wire)
    }

    fn exec(&self, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["netns", "exec", &self.namespace])
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        // Deleting the namespace deletes the guest end, and with it the host end.
        let _ = Command::new("ip").args(["netns", "del", &self.namespace]).status();
        let _ = Command::new("ip").args(["link", "del", &self.host]).output();
    }
}

/// The test needs root and the tools `make deps` installs; without them it fails, saying so.
fn assert_usable() {
    assert!(
        nix::unistd::Uid::effective().is_root(),
        "the DHCP test needs root (network namespaces)"
    );
    for tool in ["ip", "busybox"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(found, "the DHCP test needs {tool}: run `make deps`");
    }
}

/// A lease with every option the server sends.
fn full_lease() -> Lease {
    Lease {
        mac: [0x02, 0x00, 0x00, 0x12, 0x34, 0x56],
        address: Ipv4Addr::new(10, 0, 2, 2),
        prefix: 24,
        gateway: Some(Ipv4Addr::new(10, 0, 2, 1)),
        server: Ipv4Addr::new(10, 0, 2, 1),
        dns: vec![Ipv4Addr::new(10, 96, 0, 10), Ipv4Addr::new(10, 96, 0, 11)],
        search: vec!["default.svc.cluster.local".to_owned(), "svc.cluster.local".to_owned()],
        hostname: Some("testguest".to_owned()),
        mtu: Some(1450),
        routes: vec![
            StaticRoute {
                destination: Ipv4Addr::new(10, 0, 2, 1),
                prefix: 32,
                gateway: Ipv4Addr::UNSPECIFIED,
            },
            StaticRoute {
                destination: Ipv4Addr::UNSPECIFIED,
                prefix: 0,
                gateway: Ipv4Addr::new(10, 0, 2, 1),
            },
        ],
        extra: vec![(code::NTP_SERVERS, vec![10, 96, 0, 123])],
    }
}

#[tokio::test]
async fn udhcpc_gets_the_whole_lease_and_reaches_its_gateway() {
    assert_usable();
    let wire = Wire::new().expect("the test's namespace and veth pair");
    let lease = full_lease();
    let socket = server::bind(&wire.host).expect("bind to the host end");
    let stop = CancellationToken::new();
    let served = tokio::spawn(server::serve(socket, lease, stop.clone()));

    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("lease.env");
    let script = dir.path().join("udhcpc.script");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n[ \"$1\" = bound ] || exit 0\nenv > {out}\nip addr add \"$ip/$mask\" dev \"$interface\"\nip link set \"$interface\" mtu \"$mtu\"\n",
            out = out.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let (namespace, guest, script_path) = (wire.namespace.clone(), wire.guest.clone(), script.display().to_string());
    let client = tokio::task::spawn_blocking(move || {
        Command::new("ip")
            .args([
                "netns", "exec", &namespace, "busybox", "udhcpc", "-i", &guest, "-q", "-n", "-t", "5", "-T", "1",
            ])
            .args([
                "-O",
                "mtu",
                "-O",
                "search",
                "-O",
                "staticroutes",
                "-O",
                "ntpsrv",
                "-s",
                &script_path,
            ])
            .output()
    })
    .await
    .expect("join")
    .expect("udhcpc runs");
    assert!(
        client.status.success(),
        "udhcpc: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    let env = std::fs::read_to_string(&out).expect("the bound script ran");
    let get = |key: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(get("ip"), "10.0.2.2");
    assert_eq!(get("subnet"), "255.255.255.0");
    assert_eq!(get("mask"), "24");
    assert_eq!(get("router"), "10.0.2.1");
    assert_eq!(get("dns"), "10.96.0.10 10.96.0.11");
    assert_eq!(get("hostname"), "testguest");
    assert_eq!(get("domain"), "default.svc.cluster.local");
    assert_eq!(get("search"), "default.svc.cluster.local svc.cluster.local");
    assert_eq!(get("mtu"), "1450");
    assert_eq!(get("lease"), LEASE_SECONDS.to_string());
    assert_eq!(get("serverid"), "10.0.2.1");
    assert_eq!(get("staticroutes"), "10.0.2.1/32 0.0.0.0 0.0.0.0/0 10.0.2.1");
    assert_eq!(get("ntpsrv"), "10.96.0.123");
    assert!(
        wire.exec(&["busybox", "ping", "-c", "1", "-W", "2", "10.0.2.1"]),
        "the guest reaches its gateway"
    );

    stop.cancel();
    let replies = tokio::time::timeout(Duration::from_secs(5), served)
        .await
        .expect("stops")
        .expect("join");
    assert_eq!(replies, 2, "one offer and one ack");
}
