//! Untrusted bytes from a guest on the DHCP server's socket: the decoder must never panic, a
//! message it accepts must survive being written and read again unchanged, and the answer to it
//! must be a message the decoder reads back.
#![no_main]

use std::net::Ipv4Addr;

use pod_network::dhcp::packet::Packet;
use pod_network::dhcp::{Lease, respond};

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(request) = Packet::parse(data) else { return };
    assert_eq!(Packet::parse(&request.to_bytes()).as_ref(), Ok(&request), "a decoded message round-trips");
    // A lease for whichever client sent it, so the answer paths are reached.
    let lease = Lease {
        mac: request.mac(),
        address: Ipv4Addr::new(10, 0, 2, 2),
        prefix: 24,
        gateway: Some(Ipv4Addr::new(10, 0, 2, 1)),
        server: Ipv4Addr::new(10, 0, 2, 1),
        dns: vec![Ipv4Addr::new(10, 96, 0, 10)],
        search: vec!["default.svc.cluster.local".to_owned()],
        hostname: Some("guest".to_owned()),
        mtu: Some(1500),
        routes: Vec::new(),
        extra: Vec::new(),
    };
    if let Some(reply) = respond(&lease, &request) {
        assert!(Packet::parse(&reply.to_bytes()).is_ok(), "the answer decodes");
    }
});
