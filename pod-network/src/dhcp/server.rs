//! Serving DHCP on one interface: a UDP socket on port 67 bound to the guest's tap (so it answers
//! nobody else and coexists with other DHCP servers on the host), replies broadcast to port 68.

use std::net::{Ipv4Addr, SocketAddrV4};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use super::packet::Packet;
use super::{Lease, respond};

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The socket could not be set up on the interface.
    #[error("cannot serve DHCP on {interface}: {source}")]
    Socket {
        /// The interface.
        interface: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A UDP socket on port 67 of `interface` only.
pub fn bind(interface: &str) -> Result<UdpSocket, ServerError> {
    let error = |source| ServerError::Socket {
        interface: interface.to_owned(),
        source,
    };
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(error)?;
    socket.set_reuse_address(true).map_err(error)?;
    socket.set_broadcast(true).map_err(error)?;
    socket.bind_device(Some(interface.as_bytes())).map_err(error)?;
    socket
        .bind(&SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 67).into())
        .map_err(error)?;
    socket.set_nonblocking(true).map_err(error)?;
    UdpSocket::from_std(socket.into()).map_err(error)
}

/// Answers the guest's DHCP messages on `socket` until `stop` is cancelled; returns how many
/// replies were sent. Malformed messages are skipped.
pub async fn serve(socket: UdpSocket, lease: Lease, stop: CancellationToken) -> usize {
    let mut buffer = vec![0_u8; 1500];
    let mut replies = 0;
    loop {
        let received = tokio::select! {
            () = stop.cancelled() => return replies,
            received = socket.recv_from(&mut buffer) => received,
        };
        let Ok((len, from)) = received else { continue };
        let request = match Packet::parse(&buffer[..len]) {
            Ok(request) => request,
            Err(e) => {
                tracing::debug!(%from, error = %e, "not a DHCP message");
                continue;
            }
        };
        let Some(reply) = respond(&lease, &request) else {
            continue;
        };
        let to = SocketAddrV4::new(Ipv4Addr::BROADCAST, 68);
        match socket.send_to(&reply.to_bytes(), to).await {
            Ok(_) => {
                replies += 1;
                tracing::debug!(kind = ?reply.message_type(), address = %lease.address, "DHCP reply sent");
            }
            Err(e) => tracing::warn!(error = %e, "cannot send a DHCP reply"),
        }
    }
}
