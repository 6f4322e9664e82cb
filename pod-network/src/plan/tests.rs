use std::net::Ipv4Addr;

use kubevirt_api::v1::VirtualMachineInstance;
use pretty_assertions::assert_eq;

use super::render::{ip_batch, nft_ruleset};
use super::*;

fn vmi(interfaces: &str, networks: &str) -> VirtualMachineInstance {
    let yaml = format!(
        "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: testvmi\n  uid: 1234\nspec:\n  domain:\n    devices:\n      interfaces:\n{interfaces}\n  networks:\n{networks}\n"
    );
    serde_saphyr::from_str(&yaml).expect("test VMI")
}

const POD: &str = "  - name: default\n    pod: {}";

fn pod() -> PodInterface {
    PodInterface {
        name: "eth0".to_owned(),
        mac: [0x0a, 0x58, 0x0a, 0xf4, 0x00, 0x05],
        mtu: 1450,
        address: Some(Ipv4Cidr {
            address: Ipv4Addr::new(10, 244, 0, 5),
            prefix: 24,
        }),
        gateway: Some(Ipv4Addr::new(10, 244, 0, 1)),
    }
}

fn resolv() -> Resolv {
    Resolv::parse(
        "# pod\nsearch default.svc.cluster.local svc.cluster.local\nnameserver 10.96.0.10\nnameserver fd00::10\noptions ndots:5\n",
    )
}

#[test]
fn resolv_conf_gives_ipv4_servers_and_the_search_list() {
    let r = resolv();
    assert_eq!(r.nameservers, vec![Ipv4Addr::new(10, 96, 0, 10)]);
    assert_eq!(r.search, vec!["default.svc.cluster.local", "svc.cluster.local"]);
}

#[test]
fn masquerade_gets_upstreams_subnet_a_stable_mac_and_its_ports() {
    let vmi = vmi(
        "      - name: default\n        masquerade: {}\n        ports:\n          - port: 80\n          - port: 53\n            protocol: UDP",
        POD,
    );
    let plan = plan(&vmi, &pod(), &resolv()).expect("plan").pod.expect("pod interface");
    assert_eq!(plan.binding, Binding::Masquerade);
    assert_eq!(plan.bridge, "k6t-eth0");
    assert_eq!(plan.tap, "tap0");
    assert_eq!(plan.bridge_address.to_string(), "10.0.2.1/24");
    assert_eq!(plan.lease.address, Ipv4Addr::new(10, 0, 2, 2));
    assert_eq!(plan.lease.prefix, 24);
    assert_eq!(plan.lease.gateway, Some(Ipv4Addr::new(10, 0, 2, 1)));
    assert_eq!(plan.lease.server, Ipv4Addr::new(10, 0, 2, 1));
    assert_eq!(plan.lease.dns, vec![Ipv4Addr::new(10, 96, 0, 10)]);
    assert_eq!(plan.lease.hostname.as_deref(), Some("testvmi"));
    assert_eq!(plan.lease.mtu, Some(1450));
    assert_eq!(plan.guest_mac()[0], 0x02, "locally administered");
    assert_eq!(plan.guest_mac(), derived_mac("1234/default"), "stable across restarts");
    assert_eq!(
        plan.ports,
        vec![
            ForwardedPort {
                protocol: "tcp",
                port: 80
            },
            ForwardedPort {
                protocol: "udp",
                port: 53
            }
        ]
    );
    assert_eq!(
        ip_batch(&plan),
        "link add name k6t-eth0 type bridge\n\
         link set dev k6t-eth0 mtu 1450\n\
         tuntap add dev tap0 mode tap\n\
         link set dev tap0 mtu 1450 master k6t-eth0 up\n\
         address add 10.0.2.1/24 dev k6t-eth0\n\
         link set dev k6t-eth0 up\n"
    );
    let rules = nft_ruleset(&plan);
    assert!(
        rules.contains("iifname \"eth0\" tcp dport 80 dnat to 10.0.2.2\n"),
        "{rules}"
    );
    assert!(
        rules.contains("iifname \"eth0\" udp dport 53 dnat to 10.0.2.2\n"),
        "{rules}"
    );
    assert!(
        rules.contains("ip saddr 10.0.2.2 oifname \"eth0\" masquerade\n"),
        "{rules}"
    );
    assert!(
        !rules.contains("iifname \"eth0\" dnat"),
        "only the listed ports: {rules}"
    );
}

#[test]
fn masquerade_without_ports_forwards_everything_and_honours_mac_and_cidr() {
    let vmi = vmi(
        "      - name: default\n        masquerade: {}\n        macAddress: 02:00:00:aa:bb:cc",
        "  - name: default\n    pod:\n      vmNetworkCIDR: 192.168.50.0/28",
    );
    let plan = plan(&vmi, &pod(), &resolv()).expect("plan").pod.expect("pod");
    assert_eq!(plan.guest_mac(), [2, 0, 0, 0xaa, 0xbb, 0xcc]);
    assert_eq!(plan.lease.address, Ipv4Addr::new(192, 168, 50, 2));
    assert_eq!(plan.bridge_address.to_string(), "192.168.50.1/28");
    let rules = nft_ruleset(&plan);
    assert!(rules.contains("iifname \"eth0\" dnat to 192.168.50.2\n"), "{rules}");
}

#[test]
fn bridge_hands_the_pod_address_and_mac_to_the_guest() {
    let vmi = vmi("      - name: default\n        bridge: {}", POD);
    let plan = plan(&vmi, &pod(), &resolv()).expect("plan").pod.expect("pod");
    assert_eq!(plan.binding, Binding::Bridge);
    assert_eq!(plan.guest_mac(), pod().mac);
    assert_ne!(plan.pod_new_mac, Some(pod().mac));
    assert_eq!(plan.lease.address, Ipv4Addr::new(10, 244, 0, 5));
    assert_eq!(plan.lease.prefix, 24);
    assert_eq!(plan.lease.gateway, Some(Ipv4Addr::new(10, 244, 0, 1)));
    assert_eq!(plan.lease.server, BRIDGE_FAKE_ADDRESS);
    let rules = nft_ruleset(&plan);
    assert!(rules.contains("table bridge kubevirt_dhcp {"), "{rules}");
    assert!(
        rules.contains("iifname \"eth0\" udp dport 67 drop"),
        "requests from the pod network: {rules}"
    );
    assert!(
        rules.contains("iifname \"tap0\" oifname \"eth0\" udp dport 67 drop"),
        "the guest's requests: {rules}"
    );
    assert!(
        rules.contains("oifname \"eth0\" udp sport 67 drop"),
        "the server's replies: {rules}"
    );
    assert!(!rules.contains("dnat"), "{rules}");
    let new_mac = format_mac(plan.pod_new_mac.expect("new pod MAC"));
    assert_eq!(
        ip_batch(&plan),
        format!(
            "address del 10.244.0.5/24 dev eth0\n\
             link set dev eth0 down\n\
             link set dev eth0 address {new_mac}\n\
             link add name k6t-eth0 type bridge\n\
             link set dev k6t-eth0 mtu 1450\n\
             link set dev eth0 master k6t-eth0\n\
             tuntap add dev tap0 mode tap\n\
             link set dev tap0 mtu 1450 master k6t-eth0 up\n\
             address add 169.254.75.10/32 dev k6t-eth0\n\
             link set dev eth0 up\n\
             link set dev k6t-eth0 up\n"
        )
    );
}

#[test]
fn multiqueue_virtio_gets_a_multi_queue_tap() {
    let yaml = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: mq\nspec:\n  domain:\n    cpu:\n      cores: 4\n    devices:\n      networkInterfaceMultiqueue: true\n      interfaces:\n      - name: default\n        masquerade: {}\n  networks:\n  - name: default\n    pod: {}\n";
    let vmi: VirtualMachineInstance = serde_saphyr::from_str(yaml).expect("vmi");
    let plan = plan(&vmi, &pod(), &resolv()).expect("plan").pod.expect("pod");
    assert_eq!(plan.tap_queues, Some(4));
    assert!(ip_batch(&plan).contains("tuntap add dev tap0 mode tap multi_queue\n"));
}

#[test]
fn an_unprivileged_launchers_tap_belongs_to_its_user() {
    let yaml = "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: nr\nspec:\n  domain:\n    devices:\n      interfaces:\n      - name: default\n        masquerade: {}\n  networks:\n  - name: default\n    pod: {}\nstatus:\n  runtimeUser: 107\n";
    let vmi: VirtualMachineInstance = serde_saphyr::from_str(yaml).expect("vmi");
    let plan = plan(&vmi, &pod(), &resolv()).expect("plan").pod.expect("pod");
    assert_eq!(plan.tap_owner, Some(107));
    assert!(ip_batch(&plan).contains("tuntap add dev tap0 mode tap user 107 group 107\n"));
    let root = plan_of_bridge_on(&pod());
    assert_eq!(root.tap_owner, None, "a root launcher's tap stays root's");
    assert!(ip_batch(&root).contains("tuntap add dev tap0 mode tap\n"));
}

#[test]
fn no_pod_interface_needs_no_plan() {
    let vmi = vmi("        []", "    []");
    assert_eq!(plan(&vmi, &pod(), &resolv()), Ok(NetworkPlan::default()));
    let absent = self::vmi(
        "      - name: default\n        masquerade: {}\n        state: absent",
        POD,
    );
    assert_eq!(plan(&absent, &pod(), &resolv()), Ok(NetworkPlan::default()));
}

#[test]
fn bad_interface_specs_are_rejected_with_their_field_path() {
    let multus = "  - name: default\n    pod: {}\n  - name: blue\n    multus:\n      networkName: blue";
    let cases = [
        (
            "      - name: blue\n        bridge: {}",
            multus,
            "spec.domain.devices.interfaces[0].bridge",
        ),
        (
            "      - name: blue\n        masquerade: {}",
            multus,
            "spec.domain.devices.interfaces[0].masquerade",
        ),
        (
            "      - name: default\n        masquerade: {}\n        ports:\n          - port: 80\n          - port: 70000",
            POD,
            "spec.domain.devices.interfaces[0].ports[1]",
        ),
        (
            "      - name: default\n        masquerade: {}\n        ports:\n          - port: 0",
            POD,
            "spec.domain.devices.interfaces[0].ports[0]",
        ),
        (
            "      - name: default\n        masquerade: {}\n        ports:\n          - port: 80\n            protocol: SCTP",
            POD,
            "spec.domain.devices.interfaces[0].ports[0].protocol",
        ),
        (
            "      - name: default\n        masquerade: {}\n        macAddress: 02:00:00:00:00:01\n      - name: blue\n        sriov: {}\n        macAddress: 02-00-00-00-00-01",
            multus,
            "spec.domain.devices.interfaces[1].macAddress",
        ),
        (
            "      - name: default\n        masquerade: {}\n        macAddress: 02:00:00:00:00",
            POD,
            "spec.domain.devices.interfaces[0].macAddress",
        ),
        (
            "      - name: default\n        masquerade: {}",
            "  - name: default\n    pod:\n      vmNetworkCIDR: 10.0.2.0/31",
            "spec.networks[0].pod.vmNetworkCIDR",
        ),
        (
            "      - name: default\n        sriov: {}",
            POD,
            "spec.domain.devices.interfaces[0]",
        ),
    ];
    for (interfaces, networks, field) in cases {
        let error = plan(&vmi(interfaces, networks), &pod(), &resolv()).expect_err(field);
        assert_eq!(error.field, field, "{error}");
    }
    let no_address = PodInterface { address: None, ..pod() };
    let error = plan(
        &vmi("      - name: default\n        bridge: {}", POD),
        &no_address,
        &resolv(),
    )
    .expect_err("no address");
    assert_eq!(error.field, "spec.domain.devices.interfaces[0].bridge");
}

#[test]
fn macs_parse_and_format() {
    assert_eq!(parse_mac("02:AB:cd:00:11:ff"), Some([2, 0xab, 0xcd, 0, 0x11, 0xff]));
    assert_eq!(parse_mac("02-ab-cd-00-11-ff"), Some([2, 0xab, 0xcd, 0, 0x11, 0xff]));
    assert_eq!(parse_mac("02:ab:cd:00:11"), None);
    assert_eq!(parse_mac("02:ab:cd:00:11:fff"), None);
    assert_eq!(parse_mac("zz:ab:cd:00:11:ff"), None);
    assert_eq!(format_mac([2, 0xab, 0xcd, 0, 0x11, 0xff]), "02:ab:cd:00:11:ff");
}

#[test]
fn cidrs_parse_and_count_hosts() {
    let cidr = Ipv4Cidr::parse("10.0.2.7/24").expect("cidr");
    assert_eq!(cidr.host(1), Ipv4Addr::new(10, 0, 2, 1));
    assert_eq!(cidr.host(2), Ipv4Addr::new(10, 0, 2, 2));
    assert_eq!(Ipv4Cidr::parse("10.0.2.0/33"), None);
    assert_eq!(Ipv4Cidr::parse("10.0.2.0"), None);
    assert_eq!(Ipv4Cidr::parse("fd00::/64"), None);
}

#[test]
fn a_slash_32_pod_address_gets_routes_to_its_gateway() {
    let calico = PodInterface {
        address: Some(Ipv4Cidr {
            address: Ipv4Addr::new(10, 244, 3, 7),
            prefix: 32,
        }),
        gateway: Some(Ipv4Addr::new(169, 254, 1, 1)),
        ..pod()
    };
    let vmi = vmi("      - name: default\n        bridge: {}", POD);
    let plan = plan(&vmi, &calico, &resolv()).expect("plan").pod.expect("pod");
    assert_eq!(
        plan.lease.routes,
        vec![
            crate::dhcp::StaticRoute {
                destination: Ipv4Addr::new(169, 254, 1, 1),
                prefix: 32,
                gateway: Ipv4Addr::UNSPECIFIED
            },
            crate::dhcp::StaticRoute {
                destination: Ipv4Addr::UNSPECIFIED,
                prefix: 0,
                gateway: Ipv4Addr::new(169, 254, 1, 1)
            },
        ]
    );
    let on_link = plan_of_bridge_on(&pod());
    assert!(
        on_link.lease.routes.is_empty(),
        "a gateway in the subnet needs no routes"
    );
}

fn plan_of_bridge_on(pod: &PodInterface) -> InterfacePlan {
    let vmi = vmi("      - name: default\n        bridge: {}", POD);
    plan(&vmi, pod, &resolv()).expect("plan").pod.expect("pod")
}

#[test]
fn dhcp_options_become_extra_options() {
    let vmi = vmi(
        "      - name: default\n        masquerade: {}\n        dhcpOptions:\n          bootFileName: pxelinux.0\n          tftpServerName: tftp.example\n          ntpServers: [10.0.0.5, 10.0.0.6]\n          privateOptions:\n            - option: 240\n              value: extra",
        POD,
    );
    let plan = plan(&vmi, &pod(), &resolv()).expect("plan").pod.expect("pod");
    assert_eq!(
        plan.lease.extra,
        vec![
            (42, vec![10, 0, 0, 5, 10, 0, 0, 6]),
            (66, b"tftp.example".to_vec()),
            (67, b"pxelinux.0".to_vec()),
            (240, b"extra".to_vec()),
        ]
    );
}

#[test]
fn bad_dhcp_options_are_rejected_with_their_field_path() {
    let base = "      - name: default\n        masquerade: {}\n        dhcpOptions:\n";
    let long = "x".repeat(256);
    let cases = [
        (
            "          ntpServers: [10.0.0.5, ntp.example]".to_owned(),
            "spec.domain.devices.interfaces[0].dhcpOptions.ntpServers[1]",
        ),
        (
            "          privateOptions:\n            - option: 100\n              value: x".to_owned(),
            "spec.domain.devices.interfaces[0].dhcpOptions.privateOptions[0].option",
        ),
        (
            "          privateOptions:\n            - option: 240\n              value: x\n            - option: 240\n              value: y".to_owned(),
            "spec.domain.devices.interfaces[0].dhcpOptions.privateOptions[1].option",
        ),
        (
            format!("          bootFileName: {long}"),
            "spec.domain.devices.interfaces[0].dhcpOptions.bootFileName",
        ),
    ];
    for (options, field) in cases {
        let error = plan(&vmi(&format!("{base}{options}"), POD), &pod(), &resolv()).expect_err(field);
        assert_eq!(error.field, field, "{error}");
    }
}
