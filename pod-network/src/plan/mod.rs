//! The network plan: what the pod's network namespace and the guest get, decided from the VMI and
//! what was observed of the pod, with no side effects. [`plan`] decides; [`render`] turns a plan
//! into the `ip -batch` script and the nftables ruleset that build it.
//!
//! Upstream's two bindings for the pod network (its `pkg/network`):
//! - **masquerade**: the guest sits behind NAT on a private subnet (`vmNetworkCIDR`, default
//!   10.0.2.0/24: gateway 10.0.2.1 on the in-pod bridge `k6t-eth0`, guest 10.0.2.2); the pod's
//!   ports are forwarded to it, all of them when `ports` is empty.
//! - **bridge**: the pod interface joins the bridge and the guest takes over its address and MAC;
//!   the pod interface gets a new MAC and the bridge a link-local address to serve DHCP from.

mod checks;
mod lease_options;
pub mod render;

use std::net::Ipv4Addr;

use kubevirt_api::v1::{Interface, VirtualMachineInstance};

pub use checks::{CheckedInterfaces, check_interfaces};
use lease_options::{extra_options, routes_to_gateway};

use crate::dhcp::Lease;

/// Upstream's in-pod bridge name prefix (`k6t-` + the pod interface name).
pub const BRIDGE_PREFIX: &str = "k6t-";
/// The tap device behind the pod network's interface.
pub const POD_TAP: &str = "tap0";
/// Upstream's default masquerade subnet (`DefaultVMCIDR`).
pub const DEFAULT_VM_CIDR: &str = "10.0.2.0/24";
/// The link-local address upstream gives the bridge of a bridge binding, to serve DHCP from.
pub const BRIDGE_FAKE_ADDRESS: Ipv4Addr = Ipv4Addr::new(169, 254, 75, 10);
/// The nftables table that holds a masquerade binding's rules.
pub const NAT_TABLE: &str = "kubevirt_nat";
/// The nftables table (bridge family) that keeps a bridge binding's DHCP inside the pod.
pub const DHCP_TABLE: &str = "kubevirt_dhcp";

/// An IPv4 address with its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ipv4Cidr {
    /// The address.
    pub address: Ipv4Addr,
    /// The prefix length, 0–32.
    pub prefix: u8,
}

impl std::fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix)
    }
}

impl Ipv4Cidr {
    /// Parses `a.b.c.d/n`.
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        let (address, prefix) = text.split_once('/')?;
        let prefix: u8 = prefix.parse().ok()?;
        (prefix <= 32).then_some(())?;
        Some(Self {
            address: address.parse().ok()?,
            prefix,
        })
    }

    /// The `n`-th address of this network (0 is the network address itself).
    #[must_use]
    pub fn host(&self, n: u32) -> Ipv4Addr {
        let mask = if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix))
        };
        Ipv4Addr::from((u32::from(self.address) & mask).wrapping_add(n))
    }
}

/// What was observed of the pod's network interface.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodInterface {
    /// Its name, `eth0` in a pod.
    pub name: String,
    /// Its MAC address.
    pub mac: [u8; 6],
    /// Its MTU.
    pub mtu: u16,
    /// Its IPv4 address.
    pub address: Option<Ipv4Cidr>,
    /// The default gateway through it.
    pub gateway: Option<Ipv4Addr>,
}

/// The pod's resolv.conf, as far as the guest needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resolv {
    /// IPv4 name servers.
    pub nameservers: Vec<Ipv4Addr>,
    /// Search domains.
    pub search: Vec<String>,
}

impl Resolv {
    /// Reads `nameserver` and `search` lines; anything else is ignored.
    #[must_use]
    pub fn parse(text: &str) -> Self {
        let mut resolv = Self::default();
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => resolv
                    .nameservers
                    .extend(words.next().and_then(|w| w.parse::<Ipv4Addr>().ok())),
                Some("search" | "domain") => resolv.search = words.map(str::to_owned).collect(),
                _ => {}
            }
        }
        resolv
    }
}

/// The pod network's binding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binding {
    /// NAT behind the bridge.
    Masquerade,
    /// The guest takes over the pod's address.
    Bridge,
}

/// A port forwarded to the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ForwardedPort {
    /// `tcp` or `udp`.
    pub protocol: &'static str,
    /// The port.
    pub port: u16,
}

/// How the pod network's interface is wired.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfacePlan {
    /// The VMI interface's name.
    pub name: String,
    /// Its binding.
    pub binding: Binding,
    /// The pod interface.
    pub pod_interface: String,
    /// The in-pod bridge.
    pub bridge: String,
    /// The bridge's own address.
    pub bridge_address: Ipv4Cidr,
    /// The tap device QEMU uses.
    pub tap: String,
    /// Queues of a multi-queue tap, when the interface is multi-queue.
    pub tap_queues: Option<u32>,
    /// The uid and gid the tap belongs to when the launcher runs unprivileged (the VMI's
    /// `status.runtimeUser`), so that its QEMU can open it without `CAP_NET_ADMIN`; `None` for a
    /// root launcher.
    pub tap_owner: Option<u32>,
    /// The pod interface's new MAC (bridge binding: the guest took the old one).
    pub pod_new_mac: Option<[u8; 6]>,
    /// MTU of the tap and bridge, from the pod interface.
    pub mtu: u16,
    /// Forwarded ports (masquerade); empty forwards everything.
    pub ports: Vec<ForwardedPort>,
    /// What the DHCP server tells the guest.
    pub lease: Lease,
}

impl InterfacePlan {
    /// The guest's MAC address (the one its lease is for).
    #[must_use]
    pub fn guest_mac(&self) -> [u8; 6] {
        self.lease.mac
    }

    /// The pod address a bridge binding moves to the guest.
    #[must_use]
    pub fn moved_pod_address(&self) -> Option<Ipv4Cidr> {
        (self.binding == Binding::Bridge).then_some(Ipv4Cidr {
            address: self.lease.address,
            prefix: self.lease.prefix,
        })
    }
}

/// The pod network's wiring; `None` when the VMI does not use the pod network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkPlan {
    /// The interface on the pod network.
    pub pod: Option<InterfacePlan>,
}

/// A spec the network setup cannot build.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PlanError {
    /// The field path, e.g. `spec.domain.devices.interfaces[0].ports[1]`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> PlanError {
    PlanError {
        field: field.into(),
        message: message.into(),
    }
}

/// Parses `aa:bb:cc:dd:ee:ff` (or with dashes), as `macAddress` takes it.
pub use kubevirt_api::v1::parse_mac_address as parse_mac;

/// `aa:bb:cc:dd:ee:ff`.
#[must_use]
pub fn format_mac(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// A stable, locally administered unicast MAC derived from `seed`.
#[must_use]
pub fn derived_mac(seed: &str) -> [u8; 6] {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(seed.as_bytes());
    [0x02, digest[0], digest[1], digest[2], digest[3], digest[4]]
}

/// The names of `vmi`'s networks of the pod kind.
#[must_use]
pub fn pod_network_names(vmi: &VirtualMachineInstance) -> Vec<&str> {
    vmi.spec
        .networks
        .iter()
        .filter(|n| n.pod.is_some())
        .map(|n| n.name.as_str())
        .collect()
}

/// `vmi`'s interfaces on the pod network (whatever their state).
pub fn pod_network_interfaces(vmi: &VirtualMachineInstance) -> impl Iterator<Item = &Interface> {
    let names = pod_network_names(vmi);
    vmi.spec
        .domain
        .devices
        .interfaces
        .iter()
        .filter(move |i| names.contains(&i.name.as_str()))
}

fn forwarded_ports(iface: &Interface) -> Vec<ForwardedPort> {
    let mut ports: Vec<ForwardedPort> = iface
        .ports
        .iter()
        .filter_map(|p| {
            let protocol = if p.protocol.as_deref().is_some_and(|p| p.eq_ignore_ascii_case("udp")) {
                "udp"
            } else {
                "tcp"
            };
            Some(ForwardedPort {
                protocol,
                port: u16::try_from(p.port).ok()?,
            })
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// Whether `vmi` has an interface (not `state: absent`) on the pod network.
#[must_use]
pub fn uses_pod_network(vmi: &VirtualMachineInstance) -> bool {
    pod_network_interfaces(vmi).any(|i| i.state.as_deref() != Some("absent"))
}

/// The gateway and guest addresses of a masquerade binding on `spec.networks[index]`.
fn masquerade_subnet(vmi: &VirtualMachineInstance, index: usize) -> Result<(Ipv4Cidr, Ipv4Cidr), PlanError> {
    let cidr_text = vmi.spec.networks[index]
        .pod
        .as_ref()
        .and_then(|p| p.vm_network_cidr.clone())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| DEFAULT_VM_CIDR.to_owned());
    let cidr = Ipv4Cidr::parse(&cidr_text).filter(|c| c.prefix <= 30).ok_or_else(|| {
        invalid(
            format!("spec.networks[{index}].pod.vmNetworkCIDR"),
            format!("{cidr_text} is not an IPv4 CIDR with room for a gateway and a guest"),
        )
    })?;
    let at = |n| Ipv4Cidr {
        address: cidr.host(n),
        prefix: cidr.prefix,
    };
    Ok((at(1), at(2)))
}

/// Decides the pod network's wiring for `vmi`, given its pod interface and resolv.conf.
///
/// # Errors
/// A [`PlanError`] naming the field when the interfaces cannot be built: a bridge or masquerade
/// binding off the pod network, a port out of range, an unknown protocol, a malformed or duplicate
/// MAC, a `vmNetworkCIDR` that is not an IPv4 CIDR, or a bridge binding on a pod interface with no
/// IPv4 address.
pub fn plan(vmi: &VirtualMachineInstance, pod: &PodInterface, resolv: &Resolv) -> Result<NetworkPlan, PlanError> {
    plan_checked(check_interfaces(vmi)?, vmi, pod, resolv)
}

/// [`plan`] for a VMI whose interfaces [`check_interfaces`] already passed (`checked`), as local
/// mode does before it creates anything: the checks are not made twice.
///
/// # Errors
/// A [`PlanError`] naming the field, for what only the pod interface can tell: a bridge binding
/// on a pod interface with no IPv4 address, a `vmNetworkCIDR` that is not an IPv4 CIDR.
pub fn plan_checked(
    _checked: CheckedInterfaces,
    vmi: &VirtualMachineInstance,
    pod: &PodInterface,
    resolv: &Resolv,
) -> Result<NetworkPlan, PlanError> {
    let pod_network = vmi.spec.networks.iter().position(|n| n.pod.is_some());
    let Some((index, iface)) = pod_network.and_then(|n| {
        let name = &vmi.spec.networks[n].name;
        vmi.spec
            .domain
            .devices
            .interfaces
            .iter()
            .enumerate()
            .find(|(_, i)| &i.name == name && i.state.as_deref() != Some("absent"))
    }) else {
        return Ok(NetworkPlan::default());
    };
    let here = format!("spec.domain.devices.interfaces[{index}]");
    let binding = match (iface.masquerade.is_some(), iface.bridge.is_some()) {
        (true, false) => Binding::Masquerade,
        (false, true) => Binding::Bridge,
        _ => {
            return Err(invalid(
                &here,
                "the pod network's interface needs the masquerade or the bridge binding",
            ));
        }
    };
    let spec_mac = iface.mac_address.as_deref().and_then(parse_mac);
    let uid = vmi
        .metadata
        .uid
        .as_deref()
        .or(vmi.metadata.name.as_deref())
        .unwrap_or("");
    let tap_queues = (vmi.spec.domain.devices.network_interface_multiqueue == Some(true)
        && iface.model.as_deref().is_none_or(|m| m.is_empty() || m == "virtio"))
    .then(|| kubevirt_api::guest::vcpus(&vmi.spec).clamp(1, 256));
    let bridge = format!("{BRIDGE_PREFIX}{}", pod.name);
    let common = |lease: Lease, bridge_address: Ipv4Cidr| InterfacePlan {
        name: iface.name.clone(),
        binding,
        pod_interface: pod.name.clone(),
        bridge: bridge.clone(),
        bridge_address,
        tap: POD_TAP.to_owned(),
        tap_queues,
        tap_owner: vmi.is_non_root().then(|| vmi.runtime_user()),
        pod_new_mac: None,
        mtu: pod.mtu,
        ports: forwarded_ports(iface),
        lease,
    };
    let lease = |mac, address: Ipv4Cidr, gateway, server| Lease {
        mac,
        address: address.address,
        prefix: address.prefix,
        gateway,
        server,
        dns: resolv.nameservers.clone(),
        search: resolv.search.clone(),
        hostname: Some(kubevirt_api::guest::hostname(vmi)).filter(|h| !h.is_empty()),
        mtu: Some(pod.mtu),
        routes: Vec::new(),
        extra: extra_options(iface),
    };
    let plan = match binding {
        Binding::Masquerade => {
            let (gateway, guest) = masquerade_subnet(vmi, pod_network.unwrap_or_default())?;
            let mac = spec_mac.unwrap_or_else(|| derived_mac(&format!("{uid}/{}", iface.name)));
            common(lease(mac, guest, Some(gateway.address), gateway.address), gateway)
        }
        Binding::Bridge => {
            let address = pod.address.ok_or_else(|| {
                invalid(
                    format!("{here}.bridge"),
                    format!(
                        "the pod interface {} has no IPv4 address to hand to the guest",
                        pod.name
                    ),
                )
            })?;
            let mac = spec_mac.unwrap_or(pod.mac);
            let fake = Ipv4Cidr {
                address: BRIDGE_FAKE_ADDRESS,
                prefix: 32,
            };
            let mut lease = lease(mac, address, pod.gateway, BRIDGE_FAKE_ADDRESS);
            lease.routes = routes_to_gateway(address, pod.gateway);
            let mut out = common(lease, fake);
            out.pod_new_mac = Some(derived_mac(&format!("{uid}/{}/pod", iface.name)));
            out.ports = Vec::new();
            out
        }
    };
    Ok(NetworkPlan { pod: Some(plan) })
}

#[cfg(test)]
mod tests;
