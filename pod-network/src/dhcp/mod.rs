//! The launcher's DHCP server: it answers only its own guest, on the guest's tap, with the address
//! the network binding gives it (10.0.2.2/24 behind gateway 10.0.2.1 for masquerade, the pod's own
//! address for bridge), the DNS servers and search domains of the pod's resolv.conf, the hostname
//! and the MTU, as upstream's `pkg/network/dhcp` does. [`respond`] decides, [`server`] serves.

pub mod packet;
pub mod server;

use std::net::Ipv4Addr;

use packet::{MessageType, Packet, code, encode_search_list};

/// How long a lease lasts: upstream's server effectively never lets a lease expire.
pub const LEASE_SECONDS: u32 = 999 * 24 * 60 * 60;

/// What the guest with `mac` is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The guest's MAC address; other clients get no answer.
    pub mac: [u8; 6],
    /// Its address.
    pub address: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
    /// The default gateway.
    pub gateway: Option<Ipv4Addr>,
    /// The server's own address (option 54).
    pub server: Ipv4Addr,
    /// DNS servers.
    pub dns: Vec<Ipv4Addr>,
    /// Search domains.
    pub search: Vec<String>,
    /// The guest's hostname.
    pub hostname: Option<String>,
    /// The interface MTU.
    pub mtu: Option<u16>,
    /// Classless static routes (option 121); when present the guest ignores the router option, so
    /// they include the default route.
    pub routes: Vec<StaticRoute>,
    /// Further options, from the interface's `dhcpOptions`: code and value.
    pub extra: Vec<(u8, Vec<u8>)>,
}

/// One classless static route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticRoute {
    /// The destination network.
    pub destination: Ipv4Addr,
    /// Its prefix length.
    pub prefix: u8,
    /// The next hop; 0.0.0.0 for a route on the link itself.
    pub gateway: Ipv4Addr,
}

/// RFC 3442's encoding: for each route, the prefix length, the significant octets of the
/// destination, then the gateway.
#[must_use]
pub fn encode_routes(routes: &[StaticRoute]) -> Vec<u8> {
    let mut out = Vec::new();
    for route in routes {
        let prefix = route.prefix.min(32);
        out.push(prefix);
        out.extend_from_slice(&route.destination.octets()[..usize::from(prefix.div_ceil(8))]);
        out.extend_from_slice(&route.gateway.octets());
    }
    out
}

impl Lease {
    fn mask(&self) -> Ipv4Addr {
        let bits = if self.prefix == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix.min(32)))
        };
        Ipv4Addr::from(bits)
    }

    fn broadcast(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.address) | !u32::from(self.mask()))
    }

    fn reply(&self, request: &Packet, kind: MessageType) -> Packet {
        let mut reply = Packet {
            op: packet::BOOT_REPLY,
            xid: request.xid,
            secs: 0,
            flags: request.flags,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: if kind == MessageType::Nak {
                Ipv4Addr::UNSPECIFIED
            } else {
                self.address
            },
            siaddr: Ipv4Addr::UNSPECIFIED,
            giaddr: request.giaddr,
            chaddr: request.chaddr,
            options: Vec::new(),
        };
        reply.set_message_type(kind);
        reply.options.push((code::SERVER_ID, self.server.octets().to_vec()));
        if kind == MessageType::Nak {
            return reply;
        }
        reply
            .options
            .push((code::LEASE_TIME, LEASE_SECONDS.to_be_bytes().to_vec()));
        reply.options.push((code::SUBNET_MASK, self.mask().octets().to_vec()));
        reply
            .options
            .push((code::BROADCAST, self.broadcast().octets().to_vec()));
        if let Some(gateway) = self.gateway {
            reply.options.push((code::ROUTER, gateway.octets().to_vec()));
        }
        if !self.dns.is_empty() {
            reply
                .options
                .push((code::DNS, self.dns.iter().flat_map(Ipv4Addr::octets).collect()));
        }
        if let Some(first) = self.search.first() {
            reply
                .options
                .push((code::DOMAIN_NAME, first.trim_end_matches('.').as_bytes().to_vec()));
            reply
                .options
                .push((code::DOMAIN_SEARCH, encode_search_list(&self.search)));
        }
        if let Some(hostname) = &self.hostname {
            reply.options.push((code::HOSTNAME, hostname.as_bytes().to_vec()));
        }
        if let Some(mtu) = self.mtu {
            reply.options.push((code::MTU, mtu.to_be_bytes().to_vec()));
        }
        if !self.routes.is_empty() {
            reply
                .options
                .push((code::CLASSLESS_ROUTES, encode_routes(&self.routes)));
        }
        reply.options.extend(self.extra.iter().cloned());
        reply
    }
}

/// The answer to `request`, or `None` when it is not for this guest or needs none.
#[must_use]
pub fn respond(lease: &Lease, request: &Packet) -> Option<Packet> {
    if request.op != packet::BOOT_REQUEST || request.mac() != lease.mac {
        return None;
    }
    match request.message_type()? {
        MessageType::Discover => Some(lease.reply(request, MessageType::Offer)),
        MessageType::Request => {
            // Selecting (server id + requested address), or renewing/rebinding (ciaddr).
            if let Some(server) = request.ipv4_option(code::SERVER_ID)
                && server != lease.server
            {
                return None;
            }
            let wanted = request.ipv4_option(code::REQUESTED_IP).unwrap_or(request.ciaddr);
            let kind = if wanted == lease.address {
                MessageType::Ack
            } else {
                MessageType::Nak
            };
            Some(lease.reply(request, kind))
        }
        MessageType::Inform => {
            let mut ack = lease.reply(request, MessageType::Ack);
            ack.yiaddr = Ipv4Addr::UNSPECIFIED;
            ack.options.retain(|(c, _)| *c != code::LEASE_TIME);
            Some(ack)
        }
        MessageType::Offer | MessageType::Decline | MessageType::Ack | MessageType::Nak | MessageType::Release => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x12, 0x34, 0x56];

    fn lease() -> Lease {
        Lease {
            mac: MAC,
            address: Ipv4Addr::new(10, 0, 2, 2),
            prefix: 24,
            gateway: Some(Ipv4Addr::new(10, 0, 2, 1)),
            server: Ipv4Addr::new(10, 0, 2, 1),
            dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
            search: vec!["default.svc.cluster.local".to_owned(), "svc.cluster.local".to_owned()],
            hostname: Some("testguest".to_owned()),
            mtu: Some(1450),
            routes: Vec::new(),
            extra: vec![(code::BOOT_FILE_NAME, b"pxelinux.0".to_vec())],
        }
    }

    #[test]
    fn static_routes_use_rfc_3442_significant_octets() {
        let routes = [
            StaticRoute {
                destination: Ipv4Addr::new(169, 254, 1, 1),
                prefix: 32,
                gateway: Ipv4Addr::UNSPECIFIED,
            },
            StaticRoute {
                destination: Ipv4Addr::UNSPECIFIED,
                prefix: 0,
                gateway: Ipv4Addr::new(169, 254, 1, 1),
            },
            StaticRoute {
                destination: Ipv4Addr::new(10, 17, 0, 0),
                prefix: 12,
                gateway: Ipv4Addr::new(10, 0, 0, 1),
            },
        ];
        assert_eq!(
            encode_routes(&routes),
            [
                32, 169, 254, 1, 1, 0, 0, 0, 0, //
                0, 169, 254, 1, 1, //
                12, 10, 17, 10, 0, 0, 1
            ]
        );
        let mut lease = lease();
        lease.routes = routes.to_vec();
        let offer = respond(&lease, &request(MessageType::Discover, MAC, vec![])).expect("offer");
        assert_eq!(offer.option(code::CLASSLESS_ROUTES), Some(&encode_routes(&routes)[..]));
    }

    fn request(kind: MessageType, mac: [u8; 6], extra: Vec<(u8, Vec<u8>)>) -> Packet {
        let mut chaddr = [0_u8; 16];
        chaddr[..6].copy_from_slice(&mac);
        let mut p = Packet {
            op: packet::BOOT_REQUEST,
            xid: 0xdead_beef,
            secs: 0,
            flags: 0x8000,
            ciaddr: Ipv4Addr::UNSPECIFIED,
            yiaddr: Ipv4Addr::UNSPECIFIED,
            siaddr: Ipv4Addr::UNSPECIFIED,
            giaddr: Ipv4Addr::UNSPECIFIED,
            chaddr,
            options: Vec::new(),
        };
        p.set_message_type(kind);
        p.options.extend(extra);
        p
    }

    #[test]
    fn discover_gets_an_offer_with_every_option_and_survives_the_wire() {
        let bytes = request(MessageType::Discover, MAC, vec![]).to_bytes();
        let offer = respond(&lease(), &Packet::parse(&bytes).expect("parse")).expect("offer");
        let offer = Packet::parse(&offer.to_bytes()).expect("reply parses");
        assert_eq!(offer.message_type(), Some(MessageType::Offer));
        assert_eq!(
            (offer.op, offer.xid, offer.yiaddr),
            (packet::BOOT_REPLY, 0xdead_beef, Ipv4Addr::new(10, 0, 2, 2))
        );
        assert_eq!(offer.option(code::SUBNET_MASK), Some(&[255, 255, 255, 0][..]));
        assert_eq!(offer.option(code::ROUTER), Some(&[10, 0, 2, 1][..]));
        assert_eq!(offer.option(code::BROADCAST), Some(&[10, 0, 2, 255][..]));
        assert_eq!(offer.option(code::DNS), Some(&[10, 96, 0, 10][..]));
        assert_eq!(offer.option(code::HOSTNAME), Some(&b"testguest"[..]));
        assert_eq!(offer.option(code::DOMAIN_NAME), Some(&b"default.svc.cluster.local"[..]));
        assert_eq!(offer.option(code::MTU), Some(&1450_u16.to_be_bytes()[..]));
        assert_eq!(offer.option(code::BOOT_FILE_NAME), Some(&b"pxelinux.0"[..]));
        assert_eq!(offer.option(code::CLASSLESS_ROUTES), None, "no routes, no option 121");
        let search = offer.option(code::DOMAIN_SEARCH).expect("search");
        assert_eq!(&search[..9], b"\x07default\x03", "RFC 3397 labels");
    }

    #[test]
    fn requests_are_acked_for_the_lease_and_refused_otherwise() {
        let server = (code::SERVER_ID, vec![10, 0, 2, 1]);
        let good = request(
            MessageType::Request,
            MAC,
            vec![server.clone(), (code::REQUESTED_IP, vec![10, 0, 2, 2])],
        );
        assert_eq!(
            respond(&lease(), &good).and_then(|r| r.message_type()),
            Some(MessageType::Ack)
        );
        let wrong = request(
            MessageType::Request,
            MAC,
            vec![server, (code::REQUESTED_IP, vec![10, 0, 2, 9])],
        );
        let nak = respond(&lease(), &wrong).expect("nak");
        assert_eq!(
            (nak.message_type(), nak.yiaddr),
            (Some(MessageType::Nak), Ipv4Addr::UNSPECIFIED)
        );
        let other_server = request(MessageType::Request, MAC, vec![(code::SERVER_ID, vec![192, 168, 1, 1])]);
        assert_eq!(
            respond(&lease(), &other_server),
            None,
            "a request to another server is not ours"
        );
        let mut renew = request(MessageType::Request, MAC, vec![]);
        renew.ciaddr = Ipv4Addr::new(10, 0, 2, 2);
        assert_eq!(
            respond(&lease(), &renew).and_then(|r| r.message_type()),
            Some(MessageType::Ack)
        );
    }

    #[test]
    fn other_clients_and_other_messages_get_nothing() {
        assert_eq!(
            respond(&lease(), &request(MessageType::Discover, [2, 0, 0, 0, 0, 1], vec![])),
            None
        );
        assert_eq!(respond(&lease(), &request(MessageType::Release, MAC, vec![])), None);
        let mut reply = request(MessageType::Discover, MAC, vec![]);
        reply.op = packet::BOOT_REPLY;
        assert_eq!(respond(&lease(), &reply), None);
    }

    #[test]
    fn malformed_bytes_are_errors_not_panics() {
        assert_eq!(Packet::parse(&[0; 10]), Err(packet::PacketError::Short(10)));
        let mut bytes = request(MessageType::Discover, MAC, vec![]).to_bytes();
        bytes[236] = 0;
        assert_eq!(Packet::parse(&bytes), Err(packet::PacketError::Cookie));
        let mut bytes = request(MessageType::Discover, MAC, vec![]).to_bytes();
        bytes.truncate(240);
        bytes.extend_from_slice(&[code::HOSTNAME, 40, b'x']);
        assert_eq!(
            Packet::parse(&bytes),
            Err(packet::PacketError::Truncated(code::HOSTNAME))
        );
    }

    proptest::proptest! {
        #[test]
        // The same properties as the `decode_dhcp` fuzz target (fuzz/), on stable.
        fn any_bytes_parse_or_fail_cleanly(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
            if let Ok(p) = Packet::parse(&bytes) {
                let again = Packet::parse(&p.to_bytes());
                proptest::prop_assert_eq!(again.as_ref(), Ok(&p));
                let _ = respond(&lease(), &p);
            }
        }

        #[test]
        fn any_request_from_the_guest_gets_an_answer_that_decodes(
            options in proptest::collection::vec(
                (1_u8..255, proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40)), 0..12),
            kind in 1_u8..9,
        ) {
            let mut bytes = vec![0_u8; 236];
            bytes[0] = packet::BOOT_REQUEST;
            bytes[28..34].copy_from_slice(&MAC);
            bytes.extend_from_slice(&[99, 130, 83, 99, code::MESSAGE_TYPE, 1, kind]);
            for (code, value) in &options {
                bytes.push(*code);
                bytes.push(u8::try_from(value.len()).unwrap_or(0));
                bytes.extend_from_slice(value);
            }
            bytes.push(code::END);
            let request = Packet::parse(&bytes).expect("a well-formed request");
            let again = Packet::parse(&request.to_bytes());
            proptest::prop_assert_eq!(again.as_ref(), Ok(&request));
            if let Some(reply) = respond(&lease(), &request) {
                proptest::prop_assert!(Packet::parse(&reply.to_bytes()).is_ok());
            }
        }
    }
}
