//! The virt-handler of a node, as virt-api reaches it: pause and unpause a VMI, and open its
//! serial console. [`HandlerConnector`] speaks HTTPS with a client certificate to the handler's
//! port 8186, as upstream's virt-api does.

use std::future::Future;
use std::path::Path;
use std::sync::{Arc, PoisonError, RwLock};

use futures::{SinkExt as _, StreamExt as _};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;

use crate::certificates::Pair;
use crate::tls::{Reloading, TlsError};

/// A VMI operation carried out by the node's virt-handler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VmiAction {
    /// Pause the guest.
    Pause,
    /// Resume it.
    Unpause,
}

impl VmiAction {
    /// The path segment, `pause` or `unpause`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pause => "pause",
            Self::Unpause => "unpause",
        }
    }
}

/// A serial console connection: bytes to the guest and bytes from it. Dropping the sender
/// closes the connection.
#[derive(Debug)]
pub struct ConsoleStream {
    /// Keystrokes for the guest.
    pub to_guest: mpsc::Sender<Vec<u8>>,
    /// Console output; ends when the console closes.
    pub from_guest: mpsc::Receiver<Vec<u8>>,
}

/// Why the node's handler could not do it.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum NodeError {
    /// The handler could not be reached.
    #[error("cannot reach virt-handler at {address}: {message}")]
    Unreachable {
        /// `ip:port`.
        address: String,
        /// Why.
        message: String,
    },
    /// The handler answered with an error.
    #[error("virt-handler answered {code}: {message}")]
    Refused {
        /// HTTP status.
        code: u16,
        /// Its body.
        message: String,
    },
}

/// virt-handler's API, as virt-api uses it.
pub trait NodeConnector: Send + Sync + 'static {
    /// Asks the handler at `address` to pause or unpause `ns/name`.
    fn vmi_action(
        &self,
        address: &str,
        ns: &str,
        name: &str,
        action: VmiAction,
    ) -> impl Future<Output = Result<(), NodeError>> + Send;
    /// Opens the serial console of `ns/name` through the handler at `address`.
    fn console(
        &self,
        address: &str,
        ns: &str,
        name: &str,
    ) -> impl Future<Output = Result<ConsoleStream, NodeError>> + Send;
}

/// The TLS server name virt-handler's serving certificate carries; handlers are dialled by pod IP.
pub const HANDLER_SERVER_NAME: &str = "virt-handler";

/// Where virt-api's TLS for the handlers comes from.
#[derive(Clone)]
enum HandlerTls {
    /// Not configured: every call fails saying so.
    Missing,
    /// Files, read again when they change.
    Files(Arc<Reloading<Arc<rustls::ClientConfig>>>),
    /// PEM text from a Secret, replaced when virt-api renews it.
    Held(Arc<RwLock<Arc<rustls::ClientConfig>>>),
}

/// The real handler connection: HTTPS to `<pod IP>:<port>`, verifying the handler's certificate
/// against the KubeVirt CA and presenting virt-api's client certificate.
#[derive(Clone)]
pub struct HandlerConnector {
    port: u16,
    tls: HandlerTls,
}

impl std::fmt::Debug for HandlerConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandlerConnector")
            .field("port", &self.port)
            .field("tls", &!matches!(self.tls, HandlerTls::Missing))
            .finish()
    }
}

impl HandlerConnector {
    /// Handlers listen on `port`. Without `ca` virt-api cannot verify them, and every call fails
    /// saying so. The files are read again when they change.
    pub fn new(port: u16, ca: Option<&Path>, client: Option<(&Path, &Path)>) -> Result<Self, TlsError> {
        let Some(ca) = ca else {
            return Ok(Self {
                port,
                tls: HandlerTls::Missing,
            });
        };
        let mut paths = vec![ca.to_owned()];
        if let Some((cert, key)) = client {
            paths.extend([cert.to_owned(), key.to_owned()]);
        }
        let reloading = Reloading::new(paths, |paths| match paths {
            [ca, cert, key] => crate::tls::client_tls(ca, Some((cert, key))),
            [ca, ..] => crate::tls::client_tls(ca, None),
            [] => Err(TlsError::Pem {
                origin: "virt-api's handler TLS".to_owned(),
                message: "no CA file".to_owned(),
            }),
        })?;
        Ok(Self {
            port,
            tls: HandlerTls::Files(Arc::new(reloading)),
        })
    }

    /// Handlers listen on `port`; verified against `ca`, presenting `client`, all PEM text from
    /// `origin`.
    pub fn from_pem(port: u16, origin: &str, ca: &str, client: &Pair) -> Result<Self, TlsError> {
        let tls = crate::tls::client_tls_pem(origin, ca, &client.cert, &client.key)?;
        Ok(Self {
            port,
            tls: HandlerTls::Held(Arc::new(RwLock::new(tls))),
        })
    }

    /// Uses `ca` and `client` for the next connections (a renewed certificate); a connector
    /// built from files reads its files instead.
    pub fn replace_pem(&self, origin: &str, ca: &str, client: &Pair) -> Result<(), TlsError> {
        if let HandlerTls::Held(held) = &self.tls {
            let tls = crate::tls::client_tls_pem(origin, ca, &client.cert, &client.key)?;
            *held.write().unwrap_or_else(PoisonError::into_inner) = tls;
        }
        Ok(())
    }

    fn client_tls(&self) -> Option<Arc<rustls::ClientConfig>> {
        match &self.tls {
            HandlerTls::Missing => None,
            HandlerTls::Files(files) => Some(files.current()),
            HandlerTls::Held(held) => Some(held.read().unwrap_or_else(PoisonError::into_inner).clone()),
        }
    }

    /// The handlers' console server port.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    async fn connect(&self, address: &str) -> Result<TlsStream<TcpStream>, NodeError> {
        let unreachable = |message: String| NodeError::Unreachable {
            address: format!("{address}:{}", self.port),
            message,
        };
        let Some(tls) = self.client_tls() else {
            return Err(unreachable("virt-api was started without --handler-ca-file".to_owned()));
        };
        let tcp = TcpStream::connect((address, self.port))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let name = ServerName::try_from(HANDLER_SERVER_NAME).map_err(|e| unreachable(e.to_string()))?;
        TlsConnector::from(tls)
            .connect(name, tcp)
            .await
            .map_err(|e| unreachable(e.to_string()))
    }
}

fn vmi_path(ns: &str, name: &str, what: &str) -> String {
    format!("/v1/namespaces/{ns}/virtualmachineinstances/{name}/{what}")
}

impl NodeConnector for HandlerConnector {
    async fn vmi_action(&self, address: &str, ns: &str, name: &str, action: VmiAction) -> Result<(), NodeError> {
        let stream = self.connect(address).await?;
        let unreachable = |message: String| NodeError::Unreachable {
            address: address.to_owned(),
            message,
        };
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        tokio::spawn(connection);
        let request = http::Request::put(vmi_path(ns, name, action.as_str()))
            .header(http::header::HOST, HANDLER_SERVER_NAME)
            .body(Full::new(Bytes::new()))
            .map_err(|e| unreachable(e.to_string()))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let code = response.status().as_u16();
        if response.status().is_success() {
            return Ok(());
        }
        let body = response
            .into_body()
            .collect()
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        Err(NodeError::Refused {
            code,
            message: String::from_utf8_lossy(&body).into_owned(),
        })
    }

    async fn console(&self, address: &str, ns: &str, name: &str) -> Result<ConsoleStream, NodeError> {
        let stream = self.connect(address).await?;
        let unreachable = |message: String| NodeError::Unreachable {
            address: address.to_owned(),
            message,
        };
        let mut request = format!("wss://{HANDLER_SERVER_NAME}{}", vmi_path(ns, name, "console"))
            .into_client_request()
            .map_err(|e| unreachable(e.to_string()))?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            http::HeaderValue::from_static(crate::subresources::CONSOLE_SUBPROTOCOL),
        );
        let (socket, _) = tokio_tungstenite::client_async(request, stream)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(pump(socket))
    }
}

/// Turns a websocket into the two byte channels of a [`ConsoleStream`].
pub fn pump<S>(socket: tokio_tungstenite::WebSocketStream<S>) -> ConsoleStream
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (to_guest, mut keystrokes) = mpsc::channel::<Vec<u8>>(64);
    let (output, from_guest) = mpsc::channel::<Vec<u8>>(64);
    let (mut sink, mut source) = socket.split();
    tokio::spawn(async move {
        while let Some(bytes) = keystrokes.recv().await {
            if sink.send(WsMessage::Binary(bytes.into())).await.is_err() {
                break;
            }
        }
        let _ = sink.close().await;
    });
    tokio::spawn(async move {
        while let Some(Ok(message)) = source.next().await {
            let bytes = match message {
                WsMessage::Binary(b) => b.to_vec(),
                WsMessage::Text(t) => t.as_bytes().to_vec(),
                WsMessage::Close(_) => break,
                _ => continue,
            };
            if output.send(bytes).await.is_err() {
                break;
            }
        }
    });
    ConsoleStream { to_guest, from_guest }
}
