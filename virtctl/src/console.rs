//! `virtctl console`: a websocket to virt-api's console subresource (subprotocol
//! `plain.kubevirt.io`, raw bytes both ways), with the terminal in raw mode. `Ctrl+]` detaches.

use std::os::fd::AsFd as _;
use std::time::{Duration, Instant};

use futures::{SinkExt as _, StreamExt as _};
use hyper_util::rt::TokioIo;
use nix::sys::termios::{self, SetArg, Termios};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::client::generate_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::SUBRESOURCES;
use crate::VirtctlError;

/// The byte `Ctrl+]` sends.
pub const ESCAPE: u8 = 0x1d;
/// The subprotocol of KubeVirt's console.
pub const SUBPROTOCOL: &str = "plain.kubevirt.io";

type Socket = WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// Opens the console websocket, retrying while the VMI is not ready, for up to `timeout`.
pub async fn open(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<Socket, VirtctlError> {
    let deadline = Instant::now() + timeout;
    loop {
        match try_open(client, namespace, name).await {
            Ok(socket) => return Ok(socket),
            Err((retry, error)) if retry && Instant::now() < deadline => {
                tracing::debug!(%error, "console not ready; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err((_, error)) => return Err(error),
        }
    }
}

async fn try_open(client: &kube::Client, namespace: &str, name: &str) -> Result<Socket, (bool, VirtctlError)> {
    let path = format!("{SUBRESOURCES}/namespaces/{namespace}/virtualmachineinstances/{name}/console");
    let request = http::Request::get(path)
        .header(http::header::CONNECTION, "Upgrade")
        .header(http::header::UPGRADE, "websocket")
        .header(http::header::SEC_WEBSOCKET_VERSION, "13")
        .header(http::header::SEC_WEBSOCKET_KEY, generate_key())
        .header(http::header::SEC_WEBSOCKET_PROTOCOL, SUBPROTOCOL)
        .body(kube::client::Body::empty())
        .map_err(|e| (false, VirtctlError::Console(e.to_string())))?;
    let response = client
        .send(request)
        .await
        .map_err(|e| (false, VirtctlError::Console(e.to_string())))?;
    let status = response.status();
    if status != http::StatusCode::SWITCHING_PROTOCOLS {
        let body = http_body_util::BodyExt::collect(response.into_body())
            .await
            .map(http_body_util::Collected::to_bytes)
            .unwrap_or_default();
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_owned))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
        let retry = matches!(status.as_u16(), 400 | 503);
        return Err((
            retry,
            VirtctlError::Refused {
                context: "Can't access VMI".to_owned(),
                message,
                code: status.as_u16(),
            },
        ));
    }
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|e| (false, VirtctlError::Console(e.to_string())))?;
    Ok(WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Client, None).await)
}

/// Puts the terminal on stdin in raw mode until dropped.
struct RawTerminal(Option<Termios>);

impl RawTerminal {
    fn enter() -> Self {
        let stdin = std::io::stdin();
        let Ok(saved) = termios::tcgetattr(stdin.as_fd()) else {
            return Self(None);
        };
        let mut raw = saved.clone();
        termios::cfmakeraw(&mut raw);
        if termios::tcsetattr(stdin.as_fd(), SetArg::TCSANOW, &raw).is_err() {
            return Self(None);
        }
        Self(Some(saved))
    }
}

impl Drop for RawTerminal {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, saved);
        }
    }
}

/// Pipes stdin and stdout to the console until `Ctrl+]`, end of input, or the console closes.
pub async fn attach(socket: Socket, name: &str) -> Result<(), VirtctlError> {
    eprint!("Successfully connected to {name} console. The escape sequence is ^]\r\n");
    let _raw = RawTerminal::enter();
    let (mut sink, mut source) = socket.split();
    let mut stdin = tokio::io::stdin();
    let mut stdout = tokio::io::stdout();
    let mut buffer = [0_u8; 1024];
    loop {
        tokio::select! {
            read = stdin.read(&mut buffer) => {
                let n = read.map_err(|e| VirtctlError::Console(e.to_string()))?;
                if n == 0 {
                    break;
                }
                let (keys, escaped) = match buffer[..n].iter().position(|b| *b == ESCAPE) {
                    Some(at) => (&buffer[..at], true),
                    None => (&buffer[..n], false),
                };
                if !keys.is_empty() {
                    sink.send(Message::Binary(keys.to_vec().into())).await.map_err(|e| VirtctlError::Console(e.to_string()))?;
                }
                if escaped {
                    break;
                }
            }
            message = source.next() => match message {
                Some(Ok(Message::Binary(bytes))) => {
                    stdout.write_all(&bytes).await.map_err(|e| VirtctlError::Console(e.to_string()))?;
                    stdout.flush().await.map_err(|e| VirtctlError::Console(e.to_string()))?;
                }
                Some(Ok(Message::Text(text))) => {
                    stdout.write_all(text.as_bytes()).await.map_err(|e| VirtctlError::Console(e.to_string()))?;
                    stdout.flush().await.map_err(|e| VirtctlError::Console(e.to_string()))?;
                }
                Some(Ok(Message::Close(_))) | None => break,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(VirtctlError::Console(e.to_string())),
            },
        }
    }
    let _ = sink.close().await;
    Ok(())
}
