//! What the lease carries besides the address: classless static routes and `dhcpOptions`.

use std::net::Ipv4Addr;

use kubevirt_api::v1::Interface;

use super::Ipv4Cidr;
use crate::dhcp::StaticRoute;
use crate::dhcp::packet::code;

/// A gateway outside the pod's subnet (a /32 pod address behind 169.254.1.1, as Calico does) is
/// reachable only through a route to it on the link: RFC 3442 routes carry that route and the
/// default route (a client that gets them ignores the router option).
pub(super) fn routes_to_gateway(address: Ipv4Cidr, gateway: Option<Ipv4Addr>) -> Vec<StaticRoute> {
    let Some(gateway) = gateway else {
        return Vec::new();
    };
    let subnet = Ipv4Cidr {
        address: gateway,
        prefix: address.prefix,
    };
    if subnet.host(0) == address.host(0) && address.prefix < 32 {
        return Vec::new();
    }
    vec![
        StaticRoute {
            destination: gateway,
            prefix: 32,
            gateway: Ipv4Addr::UNSPECIFIED,
        },
        StaticRoute {
            destination: Ipv4Addr::UNSPECIFIED,
            prefix: 0,
            gateway,
        },
    ]
}

/// The interface's `dhcpOptions` as DHCP options (checked by [`super::check_interfaces`]).
pub(super) fn extra_options(iface: &Interface) -> Vec<(u8, Vec<u8>)> {
    let Some(options) = &iface.dhcp_options else {
        return Vec::new();
    };
    let mut extra = Vec::new();
    let ntp: Vec<u8> = options
        .ntp_servers
        .iter()
        .filter_map(|s| s.parse::<Ipv4Addr>().ok())
        .flat_map(|a| a.octets())
        .collect();
    if !ntp.is_empty() {
        extra.push((code::NTP_SERVERS, ntp));
    }
    if let Some(name) = options.tftp_server_name.as_deref().filter(|n| !n.is_empty()) {
        extra.push((code::TFTP_SERVER_NAME, name.as_bytes().to_vec()));
    }
    if let Some(file) = options.boot_file_name.as_deref().filter(|n| !n.is_empty()) {
        extra.push((code::BOOT_FILE_NAME, file.as_bytes().to_vec()));
    }
    for private in &options.private_options {
        if let Ok(option) = u8::try_from(private.option) {
            extra.push((option, private.value.as_bytes().to_vec()));
        }
    }
    extra
}
