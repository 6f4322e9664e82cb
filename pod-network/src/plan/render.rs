//! A plan as commands: an `ip -batch` script for links and addresses, and an nftables ruleset,
//! both run inside the pod's network namespace. Both are re-runnable: the ruleset replaces its own
//! table atomically.

use std::fmt::Write as _;

use super::{Binding, DHCP_TABLE, InterfacePlan, NAT_TABLE, format_mac};

/// The `ip -batch` script that builds the bridge, the tap and the addresses.
#[must_use]
pub fn ip_batch(plan: &InterfacePlan) -> String {
    let InterfacePlan {
        pod_interface: pod,
        bridge,
        tap,
        mtu,
        ..
    } = plan;
    let mut script = String::new();
    let mut line = |text: String| {
        script.push_str(&text);
        script.push('\n');
    };
    if plan.binding == Binding::Bridge {
        if let Some(address) = plan.moved_pod_address() {
            line(format!("address del {address} dev {pod}"));
        }
        line(format!("link set dev {pod} down"));
        if let Some(mac) = plan.pod_new_mac {
            line(format!("link set dev {pod} address {}", format_mac(mac)));
        }
    }
    line(format!("link add name {bridge} type bridge"));
    line(format!("link set dev {bridge} mtu {mtu}"));
    if plan.binding == Binding::Bridge {
        line(format!("link set dev {pod} master {bridge}"));
    }
    let multi_queue = if plan.tap_queues.is_some_and(|q| q > 1) {
        " multi_queue"
    } else {
        ""
    };
    let owner = plan
        .tap_owner
        .map(|uid| format!(" user {uid} group {uid}"))
        .unwrap_or_default();
    line(format!("tuntap add dev {tap} mode tap{multi_queue}{owner}"));
    line(format!("link set dev {tap} mtu {mtu} master {bridge} up"));
    line(format!("address add {} dev {bridge}", plan.bridge_address));
    if plan.binding == Binding::Bridge {
        line(format!("link set dev {pod} up"));
    }
    line(format!("link set dev {bridge} up"));
    script
}

/// The nftables ruleset of a binding.
///
/// - masquerade: the pod's ports are forwarded to the guest (all of them when the interface lists
///   none) and the guest's traffic leaves with the pod's address;
/// - bridge: DHCP stays between the guest and the launcher. The bridge also holds the pod
///   interface, so without these rules the guest's requests would reach the pod network and the
///   launcher's replies would leave through it, and anyone on the pod network could ask the
///   launcher for the guest's lease.
#[must_use]
pub fn nft_ruleset(plan: &InterfacePlan) -> String {
    match plan.binding {
        Binding::Masquerade => masquerade_rules(plan),
        Binding::Bridge => bridge_dhcp_rules(plan),
    }
}

fn masquerade_rules(plan: &InterfacePlan) -> String {
    let guest = plan.lease.address;
    let pod = &plan.pod_interface;
    let mut rules = String::new();
    // `add` then `delete` makes the load idempotent: an old table is replaced in one transaction.
    let _ = writeln!(rules, "add table ip {NAT_TABLE}");
    let _ = writeln!(rules, "delete table ip {NAT_TABLE}");
    let _ = writeln!(rules, "table ip {NAT_TABLE} {{");
    let _ = writeln!(rules, "\tchain prerouting {{");
    let _ = writeln!(rules, "\t\ttype nat hook prerouting priority dstnat; policy accept;");
    if plan.ports.is_empty() {
        let _ = writeln!(rules, "\t\tiifname \"{pod}\" dnat to {guest}");
    }
    for port in &plan.ports {
        let _ = writeln!(
            rules,
            "\t\tiifname \"{pod}\" {} dport {} dnat to {guest}",
            port.protocol, port.port
        );
    }
    let _ = writeln!(rules, "\t}}");
    let _ = writeln!(rules, "\tchain postrouting {{");
    let _ = writeln!(rules, "\t\ttype nat hook postrouting priority srcnat; policy accept;");
    let _ = writeln!(rules, "\t\tip saddr {guest} oifname \"{pod}\" masquerade");
    let _ = writeln!(rules, "\t}}");
    let _ = writeln!(rules, "}}");
    rules
}

fn bridge_dhcp_rules(plan: &InterfacePlan) -> String {
    let pod = &plan.pod_interface;
    let tap = &plan.tap;
    let mut rules = String::new();
    let _ = writeln!(rules, "add table bridge {DHCP_TABLE}");
    let _ = writeln!(rules, "delete table bridge {DHCP_TABLE}");
    let _ = writeln!(rules, "table bridge {DHCP_TABLE} {{");
    for (chain, rule) in [
        ("input", format!("iifname \"{pod}\" udp dport 67 drop")),
        (
            "forward",
            format!("iifname \"{tap}\" oifname \"{pod}\" udp dport 67 drop"),
        ),
        ("output", format!("oifname \"{pod}\" udp sport 67 drop")),
    ] {
        let _ = writeln!(rules, "\tchain {chain} {{");
        let _ = writeln!(rules, "\t\ttype filter hook {chain} priority filter; policy accept;");
        let _ = writeln!(rules, "\t\t{rule}");
        let _ = writeln!(rules, "\t}}");
    }
    let _ = writeln!(rules, "}}");
    rules
}
