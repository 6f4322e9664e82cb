//! The protocol between virt-handler and virt-launcher: gRPC over unix sockets, as upstream.
//!
//! A crate of its own because both sides need it and the handler must not link libvirt, which the
//! launcher crate does. It holds the generated services, the socket names and where each side
//! finds them, version negotiation, the transport, and the JSON the launcher reports its domain in.

#[cfg(feature = "testing")]
pub mod access_check;
pub mod domain;
pub mod migration;
pub mod sockets;
pub mod stats;
pub mod transport;
pub mod version;

/// `kubevirt.cmd.v1`: the command API.
#[allow(clippy::pedantic, missing_debug_implementations, reason = "generated code")]
pub mod cmd {
    tonic::include_proto!("kubevirt.cmd.v1");
}

/// `kubevirt.cmd.info`: command API version negotiation.
#[allow(clippy::pedantic, missing_debug_implementations, reason = "generated code")]
pub mod cmd_info {
    tonic::include_proto!("kubevirt.cmd.info");
}

/// `kubevirt.notify.v1`: domain events to the handler, and their version negotiation.
#[allow(clippy::pedantic, missing_debug_implementations, reason = "generated code")]
pub mod notify {
    tonic::include_proto!("kubevirt.notify.v1");
}
