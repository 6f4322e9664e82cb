//! `spec.domain.devices.interfaces` -> `<interface type='ethernet'>`.
//!
//! The core bindings (bridge, masquerade) look the same in the domain: a tap device the pod's
//! network setup creates. MAC, MTU and the tap name are filled in by the network setup; the
//! conversion renders what the spec says.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use kubevirt_api::v1::{Interface as SpecInterface, Network, VirtualMachineInstance};

use super::error::interface_field;
use super::{BootOrders, ConvertError, InterfaceLink, InterfaceTaps, pci_address, virtio_model};
use crate::model::{
    AcpiIndex, Alias, Boot, Domain, Interface, InterfaceDriver, InterfaceTarget, Mac, Mtu, Rom, State, TypeAttr,
};

/// NIC models libvirt and QEMU offer on x86_64.
const MODELS: [&str; 8] = [
    "virtio",
    "e1000",
    "e1000e",
    "igb",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio-net",
];
/// Upstream's cap on virtio-net queues.
const MAX_QUEUES: u32 = 256;

fn binding(iface: &SpecInterface, field: &str) -> Result<&'static str, ConvertError> {
    let bindings = [
        ("bridge", iface.bridge.is_some()),
        ("masquerade", iface.masquerade.is_some()),
        ("sriov", iface.sriov.is_some()),
        ("slirp", iface.slirp.is_some()),
        ("passt", iface.passt.is_some()),
        ("macvtap", iface.macvtap.is_some()),
        ("binding", iface.binding.is_some()),
    ];
    let set: Vec<&str> = bindings.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
    match set.as_slice() {
        [] => Err(ConvertError::invalid(
            field,
            "an interface needs exactly one binding method (bridge, masquerade, ...)",
        )),
        ["bridge"] => Ok("bridge"),
        ["masquerade"] => Ok("masquerade"),
        [other] => Err(ConvertError::unsupported(
            format!("{field}.{other}"),
            format!("the {other} interface binding"),
        )),
        several => Err(ConvertError::invalid(
            field,
            format!("only one binding method may be set, found {}", several.join(", ")),
        )),
    }
}

fn is_valid_mac(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split([':', '-']).collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The NIC model (virtio when unset), after checking the model, MAC address and ports.
fn checked_model<'a>(iface: &'a SpecInterface, field: &str) -> Result<&'a str, ConvertError> {
    let model = iface.model.as_deref().filter(|m| !m.is_empty()).unwrap_or("virtio");
    if !MODELS.contains(&model) {
        return Err(ConvertError::invalid(
            format!("{field}.model"),
            format!("interface model {model} is not supported"),
        ));
    }
    if let Some(mac) = iface
        .mac_address
        .as_deref()
        .filter(|m| !m.is_empty() && !is_valid_mac(m))
    {
        return Err(ConvertError::invalid(
            format!("{field}.macAddress"),
            format!("MAC address {mac} is malformed"),
        ));
    }
    for (j, port) in iface.ports.iter().enumerate() {
        if !(1..=65535).contains(&port.port) {
            return Err(ConvertError::invalid(
                format!("{field}.ports[{j}]"),
                format!("port {} must be between 1 and 65535", port.port),
            ));
        }
    }
    Ok(model)
}

/// Upstream's tap device name for an interface on `network`: `tap0` for the pod network or the
/// default Multus network, `tap` + the first 11 hex digits of SHA-256(network name) for a
/// secondary Multus network (`pkg/network/namescheme`, `pkg/network/link`).
#[must_use]
pub fn tap_name(network: &Network) -> String {
    use sha2::Digest as _;
    match &network.multus {
        Some(multus) if multus.default != Some(true) => {
            let digest = sha2::Sha256::digest(network.name.as_bytes());
            let mut name = String::from("tap");
            for byte in &digest[..6] {
                let _ = write!(name, "{byte:02x}");
            }
            name.truncate(3 + 11);
            name
        }
        Some(_) | None => "tap0".to_owned(),
    }
}

/// The interface's `state`: `up` (when unset), `down` or `absent`.
fn link_state<'a>(iface: &'a SpecInterface, field: &str) -> Result<&'a str, ConvertError> {
    match iface.state.as_deref().unwrap_or("up") {
        "" => Ok("up"),
        state @ ("up" | "down" | "absent") => Ok(state),
        other => Err(ConvertError::invalid(
            format!("{field}.state"),
            format!("state {other} is not one of up, down, absent"),
        )),
    }
}

/// Renders every interface that is not `state: absent`.
pub fn apply(
    vmi: &VirtualMachineInstance,
    vcpus: u32,
    taps: InterfaceTaps,
    links: &BTreeMap<String, InterfaceLink>,
    boot_orders: &mut BootOrders,
    domain: &mut Domain,
) -> Result<(), ConvertError> {
    let devices = &vmi.spec.domain.devices;
    let networks: BTreeMap<&str, usize> = vmi
        .spec
        .networks
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut used: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, iface) in devices.interfaces.iter().enumerate() {
        let field = interface_field(i);
        let Some(&network_index) = networks.get(iface.name.as_str()) else {
            let name_field = format!("{field}.name");
            return Err(ConvertError::invalid(
                &name_field,
                format!("{name_field} '{}' not found.", iface.name),
            ));
        };
        if let Some(first) = used.insert(iface.name.as_str(), i) {
            return Err(ConvertError::invalid(
                format!("{field}.name"),
                format!(
                    "Only one interface can be connected to one specific network (interfaces[{first}] uses {} too)",
                    iface.name
                ),
            ));
        }
        let kind = binding(iface, &field)?;
        if kind == "masquerade" && vmi.spec.networks[network_index].pod.is_none() {
            return Err(ConvertError::invalid(
                format!("{field}.masquerade"),
                "Masquerade interface only implemented with pod network",
            ));
        }
        let state = link_state(iface, &field)?;
        if state == "absent" {
            continue;
        }
        let model = checked_model(iface, &field)?;
        let is_virtio = model == "virtio";
        if let Some(order) = iface.boot_order {
            boot_orders.claim(order, &format!("{field}.bootOrder"))?;
        }
        let target = match taps {
            InterfaceTaps::PreCreated => Some(InterfaceTarget {
                dev: tap_name(&vmi.spec.networks[network_index]),
                managed: Some("no".to_owned()),
            }),
            InterfaceTaps::LibvirtManaged => None,
        };
        let mut out = Interface {
            interface_type: "ethernet".to_owned(),
            target,
            mac: iface
                .mac_address
                .clone()
                .filter(|m| !m.is_empty())
                .map(|address| Mac { address }),
            model: Some(TypeAttr {
                kind: if is_virtio {
                    virtio_model(devices)
                } else {
                    model.to_owned()
                },
            }),
            link: (state == "down").then(|| State {
                state: Some("down".to_owned()),
            }),
            boot: iface.boot_order.map(|order| Boot { order }),
            rom: iface.boot_order.is_none().then(|| Rom {
                enabled: Some("no".to_owned()),
            }),
            acpi: iface.acpi_index.map(|index| AcpiIndex { index }),
            alias: Some(Alias::user(&iface.name)),
            ..Interface::default()
        };
        if let Some(pci) = iface.pci_address.as_deref().filter(|p| !p.is_empty()) {
            out.address = Some(pci_address(pci, &format!("{field}.pciAddress"))?);
        }
        if is_virtio && devices.network_interface_multiqueue == Some(true) {
            out.driver = Some(InterfaceDriver {
                name: Some("vhost".to_owned()),
                queues: Some(vcpus.min(MAX_QUEUES)),
            });
        }
        domain.devices.interface.push(out);
    }
    apply_links(domain, links);
    Ok(())
}

/// Gives each interface the MAC and MTU the pod network's setup chose for it (by the interface's
/// name in the VMI): at render time, or on a domain rendered before the network was set up (local
/// mode renders once, before it creates anything). Interfaces without a link keep what they have.
pub fn apply_links(domain: &mut Domain, links: &BTreeMap<String, InterfaceLink>) {
    for (name, link) in links {
        let alias = Alias::user(name);
        for out in domain
            .devices
            .interface
            .iter_mut()
            .filter(|i| i.alias.as_ref() == Some(&alias))
        {
            out.mac = Some(Mac {
                address: link.mac.clone(),
            });
            out.mtu = Some(Mtu { size: link.mtu });
        }
    }
}
