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

pub(super) fn check_interfaces(
    spec: &VirtualMachineInstanceSpec,
    base: &str,
    config: &ClusterConfig,
    causes: &mut Vec<Cause>,
) {
    let pod_networks: HashSet<&str> = spec
        .networks
        .iter()
        .filter(|n| n.pod.is_some())
        .map(|n| n.name.as_str())
        .collect();
    for (i, iface) in spec.domain.devices.interfaces.iter().enumerate() {
        let here = format!("{base}.domain.devices.interfaces[{i}]");
        if let Some(mac) = iface.mac_address.as_deref().filter(|m| !m.is_empty())
            && parse_mac_address(mac).is_none()
        {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.macAddress"),
                format!("interface {} has malformed MAC address ({mac}).", iface.name),
            ));
        }
        if let Some(model) = iface.model.as_deref().filter(|m| !m.is_empty() && !MODELS.contains(m)) {
            causes.push(cause(
                CauseType::NotSupported,
                format!("{here}.model"),
                format!("interface {here}.name uses model {model} that is not supported."),
            ));
        }
        let on_pod = pod_networks.contains(iface.name.as_str());
        if iface.bridge.is_some() && on_pod && !config.permit_bridge_interface_on_pod_network {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.name"),
                "Bridge on pod network configuration is not enabled under kubevirt-config".to_owned(),
            ));
        }
        if iface.slirp.is_some() {
            causes.push(cause(
                CauseType::Invalid,
                format!("{here}.name"),
                "Slirp interface support has been discontinued since v1.3".to_owned(),
            ));
        }
        let mut names = HashSet::new();
        for (j, port) in iface.ports.iter().enumerate() {
            let at = format!("{here}.ports[{j}]");
            if port.port == 0 {
                causes.push(cause(
                    CauseType::Required,
                    at.clone(),
                    "Port field is mandatory.".to_owned(),
                ));
            } else if !(1..65536).contains(&port.port) {
                causes.push(cause(
                    CauseType::Invalid,
                    at.clone(),
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
