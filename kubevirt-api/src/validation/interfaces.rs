//! Interface rules of upstream's VMI admitter: MAC addresses, forwarded ports, bindings the
//! cluster permits, and NIC models.

use std::collections::HashSet;

use super::{Cause, CauseType, cause};
use crate::v1::{ClusterConfig, VirtualMachineInstanceSpec, parse_mac_address};

const MODELS: [&str; 7] = ["e1000", "e1000e", "igb", "ne2k_pci", "pcnet", "rtl8139", "virtio"];

/// An IANA service name: ≤ 15 lower-case letters, digits and single inner hyphens, one letter at least.
fn is_port_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 15
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.iter().any(u8::is_ascii_lowercase)
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-')
        && !name.contains("--")
}

/// Whether `mac` is a well-formed hardware address longer than six bytes (EUI-64, InfiniBand).
fn is_long_mac(mac: &str) -> bool {
    let groups: Vec<&str> = mac.split([':', '-']).collect();
    matches!(groups.len(), 8 | 20)
        && groups
            .iter()
            .all(|g| g.len() == 2 && g.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The binding methods set on an interface.
fn methods(iface: &crate::v1::Interface) -> usize {
    [
        iface.bridge.is_some(),
        iface.slirp.is_some(),
        iface.masquerade.is_some(),
        iface.sriov.is_some(),
        iface.passt.is_some(),
        iface.macvtap.is_some(),
        iface.passt_binding.is_some(),
    ]
    .into_iter()
    .filter(|set| *set)
    .count()
}

/// The MAC the in-pod bridge of a masquerade interface uses.
const POD_BRIDGE_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0];

pub(super) fn check_interfaces(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    // By name, the last network of a name winning, as upstream's map does.
    let networks: std::collections::HashMap<&str, &crate::v1::Network> =
        spec.networks.iter().map(|n| (n.name.as_str(), n)).collect();
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        let here = format!("{base}.domain.devices.interfaces[{i}]");
        let network = networks.get(iface.name.as_str());
        let on_pod = network.is_some_and(|n| n.pod.is_some());
        check_mac(iface, &here, causes);
        if let Some(model) = iface.model.as_deref().filter(|m| !m.is_empty() && !MODELS.contains(m)) {
            causes.push(cause(
                CauseType::NotSupported,
                format!("{here}.model"),
                format!("interface {here}.name uses model {model} that is not supported."),
            ));
        }
        if let Some(address) = iface.pci_address.as_deref().filter(|a| !a.is_empty())
            && !is_pci_address(address)
        {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.pciAddress"),
                format!("interface {here}.name has malformed PCI address ({address})."),
            ));
        }
        if iface.bridge.is_some() && on_pod && !config.permit_bridge_interface_on_pod_network {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.name"),
                "Bridge on pod network configuration is not enabled under kubevirt-config".to_owned(),
            ));
        }
        if iface.binding.is_some() && methods(iface) > 0 {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.binding"),
                format!(
                    "logical {} interface cannot have both binding plugin and interface binding method",
                    iface.name
                ),
            ));
        }
        for (set, key, what) in [
            (iface.slirp.is_some(), "slirp", "Slirp interface support"),
            (iface.passt.is_some(), "passt", "Passt network binding"),
            (iface.macvtap.is_some(), "macvtap", "Macvtap network binding"),
        ] {
            if set {
                causes.push(cause(
                    CauseType::Invalid,
                    format!("{here}.{key}"),
                    format!("{what} has been discontinued since v1.3"),
                ));
            }
        }
        check_state(iface, &here, on_pod, causes);
        // A masquerade interface off the pod network is refused as a whole (structure.rs).
        if iface.masquerade.is_none() || on_pod || network.is_none() {
            check_ports(iface, &here, causes);
        }
    }
    let mut macs: HashSet<[u8; 6]> = HashSet::new();
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        if let Some(mac) = iface.mac_address.as_deref()
            && parse_mac_address(mac).is_some_and(|parsed| !macs.insert(parsed))
        {
            causes.push(cause(
                CauseType::Duplicate,
                format!("{base}.domain.devices.interfaces[{i}].macAddress"),
                format!("interface {} has duplicate MAC address ({mac}).", iface.name),
            ));
        }
    }
}

fn check_mac(iface: &crate::v1::Interface, here: &str, causes: &mut Vec<Cause>) {
    let Some(mac) = iface.mac_address.as_deref().filter(|m| !m.is_empty()) else {
        return;
    };
    let field = format!("{here}.macAddress");
    match parse_mac_address(mac) {
        None if is_long_mac(mac) => causes.push(cause(
            CauseType::Invalid,
            field,
            format!("interface {here}.name has too long MAC address ({mac})."),
        )),
        None => causes.push(cause(
            CauseType::Invalid,
            field,
            format!("interface {here}.name has malformed MAC address ({mac})."),
        )),
        Some(parsed) if parsed == POD_BRIDGE_MAC && iface.masquerade.is_some() => causes.push(cause(
            CauseType::Invalid,
            field,
            "The requested MAC address is reserved for the in-pod bridge. Please choose another one.".to_owned(),
        )),
        Some(_) => {}
    }
}

/// `dddd:bb:ss.f` in hexadecimal.
fn is_pci_address(address: &str) -> bool {
    let hex = |part: &str, width: usize| part.len() == width && part.chars().all(|c| c.is_ascii_hexdigit());
    let Some((domain, rest)) = address.split_once(':') else {
        return false;
    };
    let Some((bus, rest)) = rest.split_once(':') else {
        return false;
    };
    let Some((slot, function)) = rest.split_once('.') else {
        return false;
    };
    hex(domain, 4)
        && hex(bus, 2)
        && hex(slot, 2)
        && u8::from_str_radix(slot, 16).is_ok_and(|s| s <= 0x1f)
        && function.len() == 1
        && function.chars().all(|c| ('0'..='7').contains(&c))
}

fn check_state(iface: &crate::v1::Interface, here: &str, on_pod: bool, causes: &mut Vec<Cause>) {
    let Some(state) = iface.state.as_deref().filter(|s| !s.is_empty()) else {
        return;
    };
    let field = format!("{here}.state");
    let name = &iface.name;
    let message = match state {
        "up" | "down" if iface.sriov.is_some() => Some(format!(
            "logical {name} interface state {state} is not supported on SR-IOV interfaces"
        )),
        "absent" if iface.bridge.is_none() => Some(format!(
            "logical {name} interface state absent is supported only on bridge binding"
        )),
        "absent" if on_pod => Some(format!(
            "\"{name}\" interface's state \"absent\" is not supported on default networks"
        )),
        "up" | "down" | "absent" => None,
        other => Some(format!("logical {name} interface state value is unsupported: {other}")),
    };
    if let Some(message) = message {
        causes.push(cause(CauseType::Invalid, field, message));
    }
}

fn check_ports(iface: &crate::v1::Interface, here: &str, causes: &mut Vec<Cause>) {
    let mut names = HashSet::new();
    for (j, port) in iface.ports.iter().enumerate() {
        let at = format!("{here}.ports[{j}]");
        if port.port == 0 {
            causes.push(cause(
                CauseType::Required,
                format!("{at}.port"),
                "Port field is mandatory.".to_owned(),
            ));
        } else if !(1..65536).contains(&port.port) {
            causes.push(cause(
                CauseType::Invalid,
                format!("{at}.port"),
                "Port field must be in range 0 < x < 65536.".to_owned(),
            ));
        }
        if let Some(protocol) = port.protocol.as_deref().filter(|p| !p.is_empty())
            && !["TCP", "UDP"].contains(&protocol.to_ascii_uppercase().as_str())
        {
            causes.push(cause(
                CauseType::Invalid,
                format!("{at}.protocol"),
                "Unknown protocol, only TCP or UDP allowed".to_owned(),
            ));
        }
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            if !names.insert(name) {
                causes.push(cause(
                    CauseType::Duplicate,
                    format!("{at}.name"),
                    format!("Duplicate name of the port: {name}"),
                ));
            }
            if !is_port_name(name) {
                causes.push(cause(
                    CauseType::Invalid,
                    format!("{at}.name"),
                    format!("Invalid name of the port: {name}"),
                ));
            }
        }
    }
}
