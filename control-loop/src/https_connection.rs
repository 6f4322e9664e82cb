//! One HTTPS connection of a server that routes requests itself (CDI's upload server, upload
//! proxy and API server): the TLS handshake within a timeout, whether the client presented a
//! certificate the server's client policy admitted, then HTTP/1.1 requests, each answered by the
//! server's handler.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use hyper::body::{Body, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tracing::debug;

/// How long a client may take to finish the TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the handler knows of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    /// The client's address.
    pub address: SocketAddr,
    /// Whether it presented a certificate (one the server's client policy admitted: any other
    /// ends the handshake).
    pub certificate: bool,
}

/// Serves the connection `stream` from `address` with `acceptor`, each request answered by
/// `handler`; one request only when `keep_alive` is false (a server that ends after an answer
/// waits for that answer, not for idle clients).
pub async fn serve<H, F, B>(
    stream: TcpStream,
    address: SocketAddr,
    acceptor: tokio_rustls::TlsAcceptor,
    keep_alive: bool,
    handler: H,
) where
    H: Fn(Request<Incoming>, Peer) -> F + Send + Sync + Clone + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => return debug!(%address, error = %error, "TLS handshake failed"),
        Err(_) => return debug!(%address, "TLS handshake timed out"),
    };
    let peer = Peer {
        address,
        certificate: stream.get_ref().1.peer_certificates().is_some_and(|c| !c.is_empty()),
    };
    let service = service_fn(move |request: Request<Incoming>| {
        let handler = handler.clone();
        async move { Ok::<_, Infallible>(handler(request, peer).await) }
    });
    if let Err(error) = http1::Builder::new()
        .keep_alive(keep_alive)
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        debug!(%address, error = %error, "connection ended with an error");
    }
}

/// Accepts connections on `listener` until `stop`, each served as [`serve`] with keep-alive.
pub async fn serve_all<H, F, B>(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    handler: H,
    stop: tokio_util::sync::CancellationToken,
) where
    H: Fn(Request<Incoming>, Peer) -> F + Send + Sync + Clone + 'static,
    F: Future<Output = Response<B>> + Send + 'static,
    B: Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    loop {
        let (stream, address) = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    debug!(error = %error, "accept failed");
                    continue;
                }
            },
        };
        tokio::spawn(serve(stream, address, acceptor.clone(), true, handler.clone()));
    }
}
