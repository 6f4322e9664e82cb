//! The spec checks the network setup relies on, each refusal naming its field.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use kubevirt_api::v1::{Interface, VirtualMachineInstance};

use super::{PlanError, invalid, parse_mac, pod_network_names};

/// Proof that [`check_interfaces`] passed: [`super::plan_checked`] takes it and does not check
/// again. Only [`check_interfaces`] makes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckedInterfaces {
    _made_by_check_interfaces: (),
}

/// Checks what the network setup relies on, before anything is created.
///
/// # Errors
/// A [`PlanError`] naming the first bad field.
pub fn check_interfaces(vmi: &VirtualMachineInstance) -> Result<CheckedInterfaces, PlanError> {
    let pod_networks = pod_network_names(vmi);
    // MACs first: a duplicate is the same mistake whatever binding the second interface has.
    let mut macs: BTreeMap<[u8; 6], usize> = BTreeMap::new();
    for (i, iface) in vmi.spec.domain.devices.interfaces.iter().enumerate() {
        let here = format!("spec.domain.devices.interfaces[{i}]");
        if let Some(text) = iface.mac_address.as_deref().filter(|m| !m.is_empty()) {
            let Some(mac) = parse_mac(text) else {
                return Err(invalid(
                    format!("{here}.macAddress"),
                    format!("interface {} has malformed MAC address ({text}).", iface.name),
                ));
            };
            if let Some(first) = macs.insert(mac, i) {
                return Err(invalid(
                    format!("{here}.macAddress"),
                    format!(
                        "interface {} has duplicate MAC address ({text}), already used by interfaces[{first}].",
                        iface.name
                    ),
                ));
            }
        }
    }
    for (i, iface) in vmi.spec.domain.devices.interfaces.iter().enumerate() {
        let here = format!("spec.domain.devices.interfaces[{i}]");
        let on_pod = pod_networks.contains(&iface.name.as_str());
        check_dhcp_options(iface, &here)?;
        if iface.bridge.is_some() && !on_pod {
            return Err(invalid(
                format!("{here}.bridge"),
                "the bridge binding needs the pod network (Multus networks are not supported)",
            ));
        }
        if iface.masquerade.is_some() && !on_pod {
            return Err(invalid(
                format!("{here}.masquerade"),
                "Masquerade interface only implemented with pod network",
            ));
        }
        for (j, port) in iface.ports.iter().enumerate() {
            if !(1..=65535).contains(&port.port) {
                return Err(invalid(
                    format!("{here}.ports[{j}]"),
                    format!("Port field must be in range 0 < x < 65536 (got {}).", port.port),
                ));
            }
            if let Some(protocol) = port.protocol.as_deref().filter(|p| !p.is_empty())
                && !["TCP", "UDP"].contains(&protocol.to_ascii_uppercase().as_str())
            {
                return Err(invalid(
                    format!("{here}.ports[{j}].protocol"),
                    "Unknown protocol, only TCP or UDP allowed",
                ));
            }
        }
    }
    Ok(CheckedInterfaces {
        _made_by_check_interfaces: (),
    })
}

/// `dhcpOptions` the server can send: private options 224–254, each once; IPv4 NTP servers;
/// values that fit an option (255 bytes).
fn check_dhcp_options(iface: &Interface, here: &str) -> Result<(), PlanError> {
    let Some(options) = &iface.dhcp_options else {
        return Ok(());
    };
    let here = format!("{here}.dhcpOptions");
    let too_long = |field: String, value: &str| {
        (value.len() > 255).then(|| invalid(field, "a DHCP option holds at most 255 bytes"))
    };
    for (field, value) in [
        ("tftpServerName", options.tftp_server_name.as_deref()),
        ("bootFileName", options.boot_file_name.as_deref()),
    ] {
        if let Some(error) = value.and_then(|v| too_long(format!("{here}.{field}"), v)) {
            return Err(error);
        }
    }
    if options.ntp_servers.len() > 63 {
        return Err(invalid(
            format!("{here}.ntpServers"),
            "at most 63 NTP servers fit an option",
        ));
    }
    for (k, server) in options.ntp_servers.iter().enumerate() {
        if server.parse::<Ipv4Addr>().is_err() {
            return Err(invalid(
                format!("{here}.ntpServers[{k}]"),
                format!("{server} is not an IPv4 address"),
            ));
        }
    }
    let mut seen = Vec::new();
    for (k, private) in options.private_options.iter().enumerate() {
        let field = format!("{here}.privateOptions[{k}]");
        if !(224..=254).contains(&private.option) {
            return Err(invalid(
                format!("{field}.option"),
                "provided DHCPPrivateOptions are out of range, must be in range 224 to 254",
            ));
        }
        if seen.contains(&private.option) {
            return Err(invalid(
                format!("{field}.option"),
                format!("you have provided duplicate DHCPPrivateOptions ({})", private.option),
            ));
        }
        seen.push(private.option);
        if let Some(error) = too_long(format!("{field}.value"), &private.value) {
            return Err(error);
        }
    }
    Ok(())
}
