//! Local mode's pod network with the test guest, for each binding: the guest gets its address by
//! DHCP from the launcher and reaches its gateway, the host reaches the guest's web server (through
//! the forwarded pod port for masquerade, at the pod address for bridge), and after the run no
//! namespace, link, rule or process is left.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddrV4, TcpStream};
use std::process::Command;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::BOOT_TIMEOUT;
use crate::harness::{Launcher, example, require_test_guest, serial, testguest_variant};

/// The address the launcher says the VM is at.
fn pod_address(launcher: &Launcher) -> Ipv4Addr {
    let stderr = launcher.stderr();
    let line = stderr
        .lines()
        .find(|l| l.contains("virt-launcher: network:"))
        .unwrap_or_else(|| panic!("no network line:\n{stderr}"));
    let after = line.split("the VM is at ").nth(1).expect("an address");
    after
        .split(' ')
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("not an address: {line}"))
}

/// `GET path` from `address:80`; the body.
fn http_get(address: Ipv4Addr, path: &str) -> String {
    let mut stream = TcpStream::connect_timeout(&SocketAddrV4::new(address, 80).into(), Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("connect to {address}:80: {e}"));
    stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

fn host_link_exists(launcher_pid: u32) -> bool {
    Command::new("ip")
        .args(["link", "show", "dev", &format!("kv-{launcher_pid}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Stops the launcher and checks that its link, namespace and processes are gone.
fn stop_and_check_cleanup(mut launcher: Launcher) {
    let pid = launcher.pid();
    let namespace = std::fs::read_link(format!("/proc/{pid}/ns/net")).expect("the launcher's namespace");
    let host_namespace = std::fs::read_link("/proc/self/ns/net").expect("ours");
    assert_ne!(namespace, host_namespace, "the VM runs in a namespace of its own");
    let status = launcher.stop_with(Signal::SIGTERM);
    assert_eq!(status.code(), Some(0), "{}", launcher.stderr());
    assert!(!host_link_exists(pid), "the host link kv-{pid} is left");
    let in_namespace: Vec<u32> = crate::harness::processes()
        .into_iter()
        .filter(|p| std::fs::read_link(format!("/proc/{}/ns/net", p.pid)).is_ok_and(|n| n == namespace))
        .map(|p| p.pid)
        .collect();
    assert!(
        in_namespace.is_empty(),
        "processes left in the VM's namespace: {in_namespace:?}"
    );
    launcher.assert_nothing_left(&[]);
}

#[test]
fn masquerade_gives_the_guest_its_lease_and_forwards_the_pod_port() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = Launcher::spawn(&example("vmi-testguest-masquerade.yaml"));
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-GATEWAY-REACHED 10.0.2.1", BOOT_TIMEOUT);
    let stdout = launcher.stdout();
    assert!(
        stdout
            .contains("KUBEVIRT-RS-GUEST-IP eth0 10.0.2.2/24 gateway 10.0.2.1 mtu 1500 hostname testguest-masquerade"),
        "{stdout}"
    );
    let address = pod_address(&launcher);
    assert!(host_link_exists(launcher.pid()));
    assert_eq!(http_get(address, "/").trim(), "KUBEVIRT-RS-GUEST-HTTP");
    assert_eq!(http_get(address, "/cgi-bin/stream?1").len(), 1 << 20);
    stop_and_check_cleanup(launcher);
}

#[test]
fn masquerade_forwards_only_the_listed_ports() {
    let _serial = serial();
    require_test_guest();
    let dir = tempfile::tempdir().expect("tempdir");
    let manifest = testguest_variant(dir.path(), |_| {
        std::fs::read_to_string(example("vmi-testguest-masquerade.yaml"))
            .expect("example")
            .replace("port: 80", "port: 8080")
    });
    let mut launcher = Launcher::spawn(&manifest);
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-GATEWAY-REACHED", BOOT_TIMEOUT);
    let address = pod_address(&launcher);
    let refused = TcpStream::connect_timeout(&SocketAddrV4::new(address, 80).into(), Duration::from_secs(3));
    assert!(
        refused.is_err(),
        "port 80 is not listed, so the pod itself answers (and refuses) it"
    );
    stop_and_check_cleanup(launcher);
}

#[test]
fn bridge_hands_the_pod_address_to_the_guest() {
    let _serial = serial();
    require_test_guest();
    let mut launcher = Launcher::spawn(&example("vmi-testguest-bridge.yaml"));
    launcher.wait_for_console("KUBEVIRT-RS-GUEST-GATEWAY-REACHED", BOOT_TIMEOUT);
    let address = pod_address(&launcher);
    let gateway = Ipv4Addr::from(u32::from(address) - 1);
    let stdout = launcher.stdout();
    assert!(
        stdout.contains(&format!("KUBEVIRT-RS-GUEST-IP eth0 {address}/30 gateway {gateway}")),
        "{stdout}"
    );
    assert!(stdout.contains(&format!("KUBEVIRT-RS-GUEST-GATEWAY-REACHED {gateway}")));
    assert_eq!(http_get(address, "/").trim(), "KUBEVIRT-RS-GUEST-HTTP");
    stop_and_check_cleanup(launcher);
}

#[test]
fn a_bad_interface_spec_is_rejected_with_its_field_and_creates_nothing() {
    const PORTS: &str = "          ports:\n            - name: http\n              port: 80\n";
    const POD: &str = "    - name: default\n      pod: {}\n";
    let _serial = serial();
    require_test_guest();
    let with_multus = format!("{POD}    - name: blue\n      multus:\n        networkName: blue\n");
    let second = |binding: &str, mac: &str| format!("{PORTS}        - name: blue\n          {binding}: {{}}\n{mac}");
    let cases: Vec<(Vec<(&str, String)>, &str)> = vec![
        (
            vec![("port: 80", "port: 70000".to_owned())],
            "spec.domain.devices.interfaces[0].ports[0]",
        ),
        (
            vec![(
                "masquerade: {}",
                "masquerade: {}\n          macAddress: 02:00:00:00:00:zz".to_owned(),
            )],
            "spec.domain.devices.interfaces[0].macAddress",
        ),
        (
            vec![(
                POD,
                "    - name: default\n      multus:\n        networkName: blue\n".to_owned(),
            )],
            // Multus networks are refused before any binding is looked at.
            "spec.networks[0].multus: Multus networks is not supported by kubevirt-rs",
        ),
        (
            vec![(PORTS, second("bridge", "")), (POD, with_multus.clone())],
            "spec.networks[1].multus: Multus networks is not supported by kubevirt-rs",
        ),
    ];
    for (edits, field) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        let manifest = testguest_variant(dir.path(), |_| {
            let mut text = std::fs::read_to_string(example("vmi-testguest-masquerade.yaml")).expect("example");
            for (from, to) in &edits {
                assert!(text.contains(from), "{from}");
                text = text.replacen(from, to, 1);
            }
            text
        });
        let mut launcher = Launcher::spawn(&manifest);
        let status = launcher.wait_exit(Duration::from_secs(20));
        assert_eq!(status.code(), Some(2), "{field}: {}", launcher.stderr());
        assert!(launcher.stderr().contains(field), "{field}: {}", launcher.stderr());
        assert!(!host_link_exists(launcher.pid()));
        launcher.assert_nothing_left(&[]);
    }
}
