//! Phase 1 of pod networking, inside the pod's network namespace: observe the pod interface, then
//! build the plan's bridge, tap and NAT rules (upstream's virt-handler does this part; the launcher's
//! local mode does it for the namespace it made).

use std::path::Path;

use serde::Deserialize;
use tracing::{info, instrument};

use crate::commands::{CommandError, NetworkCommands};
use crate::plan::render::{ip_batch, nft_ruleset};
use crate::plan::{Binding, InterfacePlan, Ipv4Cidr, PodInterface, parse_mac};

/// The pod's network interface, as the CNI plugin names it in a pod (and local mode in its namespace).
pub const POD_INTERFACE: &str = "eth0";

/// Why the pod network could not be observed or set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A command failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// `ip -j` printed something unexpected.
    #[error("cannot read the pod interface {interface}: {reason}")]
    Observe {
        /// The interface.
        interface: String,
        /// What was wrong.
        reason: String,
    },
}

#[derive(Deserialize)]
struct IpLink {
    ifname: String,
    mtu: u32,
    address: Option<String>,
    #[serde(default)]
    addr_info: Vec<IpAddress>,
}

#[derive(Deserialize)]
struct IpAddress {
    family: String,
    local: Option<String>,
    prefixlen: Option<u8>,
}

#[derive(Deserialize)]
struct IpRoute {
    gateway: Option<String>,
    dev: Option<String>,
}

/// Reads the output of `ip -j address show dev <name>` and `ip -j -4 route show default`.
///
/// # Errors
/// [`SetupError::Observe`] when the interface is missing or the JSON does not parse.
pub fn parse_pod_interface(name: &str, address_json: &str, routes_json: &str) -> Result<PodInterface, SetupError> {
    let observe = |reason: String| SetupError::Observe {
        interface: name.to_owned(),
        reason,
    };
    let links: Vec<IpLink> = serde_json::from_str(address_json).map_err(|e| observe(e.to_string()))?;
    let link = links
        .into_iter()
        .find(|l| l.ifname == name)
        .ok_or_else(|| observe("no such interface".to_owned()))?;
    let mac = link
        .address
        .as_deref()
        .and_then(parse_mac)
        .ok_or_else(|| observe("it has no Ethernet address".to_owned()))?;
    let address = link.addr_info.iter().filter(|a| a.family == "inet").find_map(|a| {
        Some(Ipv4Cidr {
            address: a.local.as_deref()?.parse().ok()?,
            prefix: a.prefixlen?,
        })
    });
    let routes: Vec<IpRoute> = serde_json::from_str(routes_json).map_err(|e| observe(e.to_string()))?;
    let gateway = routes
        .iter()
        .filter(|r| r.dev.as_deref().is_none_or(|d| d == name))
        .find_map(|r| r.gateway.as_deref()?.parse().ok());
    Ok(PodInterface {
        name: name.to_owned(),
        mac,
        mtu: u16::try_from(link.mtu).unwrap_or(u16::MAX),
        address,
        gateway,
    })
}

/// Observes the pod interface `name` in `netns`.
///
/// # Errors
/// [`SetupError`] when `ip` fails or its output is unexpected.
pub fn observe_pod_interface(
    commands: &dyn NetworkCommands,
    netns: &Path,
    name: &str,
) -> Result<PodInterface, SetupError> {
    let addresses = commands.run(netns, "ip", &["-j", "address", "show", "dev", name], None)?;
    let routes = commands.run(netns, "ip", &["-j", "-4", "route", "show", "default"], None)?;
    parse_pod_interface(name, &addresses, &routes)
}

/// The sysctl that lets an unprivileged launcher's DHCP server bind port 67 in its pod's network
/// namespace (and only there: the setting belongs to the namespace).
pub const UNPRIVILEGED_PORTS_FROM_0: &str = "net.ipv4.ip_unprivileged_port_start=0";

/// Builds `plan` in `netns`: forwarding on (masquerade), ports below 1024 open to an unprivileged
/// launcher, the bridge, the tap and the addresses, then the nftables rules.
///
/// # Errors
/// [`SetupError::Command`] naming the command that failed.
#[instrument(skip_all, fields(interface = %plan.name, binding = ?plan.binding, netns = %netns.display()))]
pub fn set_up_pod_network(
    commands: &dyn NetworkCommands,
    netns: &Path,
    plan: &InterfacePlan,
) -> Result<(), SetupError> {
    if plan.binding == Binding::Masquerade {
        commands.run(netns, "sysctl", &["-q", "-w", "net.ipv4.ip_forward=1"], None)?;
    }
    if plan.tap_owner.is_some() {
        commands.run(netns, "sysctl", &["-q", "-w", UNPRIVILEGED_PORTS_FROM_0], None)?;
    }
    commands.run(netns, "ip", &["-batch", "-"], Some(&ip_batch(plan)))?;
    commands.run(netns, "nft", &["-f", "-"], Some(&nft_ruleset(plan)))?;
    info!(guest = %plan.lease.address, tap = %plan.tap, "pod network ready");
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::commands::RecordingCommands;

    const ADDRESSES: &str = r#"[{"ifindex":2,"ifname":"eth0","flags":["BROADCAST","MULTICAST","UP","LOWER_UP"],"mtu":1450,"link_type":"ether","address":"0a:58:0a:f4:00:05","broadcast":"ff:ff:ff:ff:ff:ff","addr_info":[{"family":"inet","local":"10.244.0.5","prefixlen":24,"scope":"global","label":"eth0"},{"family":"inet6","local":"fe80::858:aff:fef4:5","prefixlen":64,"scope":"link"}]}]"#;
    const ROUTES: &str = r#"[{"dst":"default","gateway":"10.244.0.1","dev":"eth0","flags":[]}]"#;

    #[test]
    fn the_pod_interface_is_read_from_ip_json() {
        let pod = parse_pod_interface("eth0", ADDRESSES, ROUTES).expect("parse");
        assert_eq!(pod.mac, [0x0a, 0x58, 0x0a, 0xf4, 0x00, 0x05]);
        assert_eq!(pod.mtu, 1450);
        assert_eq!(pod.address.map(|a| a.to_string()).as_deref(), Some("10.244.0.5/24"));
        assert_eq!(pod.gateway, Some(Ipv4Addr::new(10, 244, 0, 1)));
        let no_route = parse_pod_interface("eth0", ADDRESSES, "[]").expect("parse");
        assert_eq!(no_route.gateway, None);
    }

    #[test]
    fn a_missing_interface_or_bad_json_is_an_error_naming_it() {
        let missing = parse_pod_interface("eth1", ADDRESSES, ROUTES).expect_err("missing");
        assert!(missing.to_string().contains("eth1"), "{missing}");
        assert!(parse_pod_interface("eth0", "not json", ROUTES).is_err());
        assert!(parse_pod_interface("eth0", ADDRESSES, "{").is_err());
    }

    fn masquerade_plan() -> InterfacePlan {
        let vmi: kubevirt_api::v1::VirtualMachineInstance = serde_saphyr::from_str(
            "apiVersion: kubevirt.io/v1\nkind: VirtualMachineInstance\nmetadata:\n  name: v\nspec:\n  domain:\n    devices:\n      interfaces:\n      - name: default\n        masquerade: {}\n  networks:\n  - name: default\n    pod: {}\n",
        )
        .expect("vmi");
        let pod = parse_pod_interface("eth0", ADDRESSES, ROUTES).expect("pod");
        crate::plan::plan(&vmi, &pod, &crate::plan::Resolv::default())
            .expect("plan")
            .pod
            .expect("pod plan")
    }

    #[test]
    fn setup_runs_sysctl_then_ip_then_nft_in_the_pods_namespace() {
        let commands = RecordingCommands::default();
        let netns = Path::new("/proc/42/ns/net");
        let plan = masquerade_plan();
        set_up_pod_network(&commands, netns, &plan).expect("setup");
        let recorded = commands.recorded();
        let argv: Vec<String> = recorded.iter().map(|r| r.argv.join(" ")).collect();
        assert_eq!(argv, ["sysctl -q -w net.ipv4.ip_forward=1", "ip -batch -", "nft -f -"]);
        assert!(recorded.iter().all(|r| r.netns == netns));
        assert_eq!(recorded[1].stdin.as_deref(), Some(ip_batch(&plan).as_str()));
        assert_eq!(recorded[2].stdin, Some(nft_ruleset(&plan)));
    }

    #[test]
    fn an_unprivileged_launchers_pod_opens_port_67_to_it() {
        let commands = RecordingCommands::default();
        let mut plan = masquerade_plan();
        plan.tap_owner = Some(107);
        set_up_pod_network(&commands, Path::new("/proc/42/ns/net"), &plan).expect("setup");
        let argv: Vec<String> = commands.recorded().iter().map(|r| r.argv.join(" ")).collect();
        assert_eq!(
            argv,
            [
                "sysctl -q -w net.ipv4.ip_forward=1",
                "sysctl -q -w net.ipv4.ip_unprivileged_port_start=0",
                "ip -batch -",
                "nft -f -"
            ]
        );
    }

    #[test]
    fn a_failing_command_stops_the_setup_and_is_named() {
        let commands = RecordingCommands::default().reply("ip -batch", Err("RTNETLINK answers: File exists"));
        let error = set_up_pod_network(&commands, Path::new("/proc/42/ns/net"), &masquerade_plan()).expect_err("fails");
        assert!(error.to_string().contains("File exists"), "{error}");
        assert_eq!(commands.recorded().len(), 2, "nft is not run after ip failed");
    }
}
