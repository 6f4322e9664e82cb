//! One HTTP/1.1 request over TCP or TLS, with a streamed body: what virtctl's uploads and CDI's
//! clone source pods send. Each request has a connection of its own.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt as _, StreamBody};
use hyper::body::Frame;

/// A request's body.
pub type RequestBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;

/// A body is read and sent in pieces of this size.
const CHUNK: usize = 256 * 1024;

/// An answer: status and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

/// Sends one request to `url` (`http` or `https`, trusting what `tls` trusts and presenting its
/// client certificate, if it has one) and reads the whole answer.
///
/// # Errors
/// A URL that cannot be used, or a connection, TLS or HTTP failure, as text.
pub async fn send(
    tls: &Arc<rustls::ClientConfig>,
    method: &str,
    url: &str,
    headers: &[(&str, String)],
    body: RequestBody,
) -> Result<Answer, String> {
    let uri: hyper::Uri = url.parse().map_err(|e| format!("{url}: {e}"))?;
    let host = uri.host().ok_or_else(|| format!("{url}: no host"))?.to_owned();
    let https = uri.scheme_str() == Some("https");
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
        .await
        .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let mut request = hyper::Request::builder().method(method).uri(path).header(
        hyper::header::HOST,
        uri.authority().map_or(host.as_str(), |a| a.as_str()),
    );
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(body).map_err(|e| e.to_string())?;
    let response = if https {
        let name = rustls_pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS with {host}: {e}"))?;
        exchange(hyper_util::rt::TokioIo::new(stream), request).await?
    } else {
        exchange(hyper_util::rt::TokioIo::new(tcp), request).await?
    };
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Answer {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Sends `request` on the connection `io` (HTTP/1.1), driving the connection on a task.
pub(crate) async fn exchange<S, B>(
    io: S,
    request: hyper::Request<B>,
) -> Result<hyper::Response<hyper::body::Incoming>, String>
where
    S: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(connection);
    sender.send_request(request).await.map_err(|e| e.to_string())
}

/// What `reader` reads, as a request body read on a blocking thread, counting what is read into
/// `sent`. A read error ends the body with that error.
pub fn reader_body<R: Read + Send + 'static>(mut reader: R, sent: Arc<AtomicU64>) -> RequestBody {
    let (chunks, mut receiver) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(4);
    tokio::task::spawn_blocking(move || {
        let mut buffer = vec![0_u8; CHUNK];
        loop {
            let read = match reader.read(&mut buffer) {
                Ok(0) => return,
                Ok(n) => Ok(Frame::data(Bytes::copy_from_slice(&buffer[..n]))),
                Err(e) => Err(e),
            };
            if let Ok(frame) = &read
                && let Some(data) = frame.data_ref()
            {
                sent.fetch_add(data.len() as u64, Ordering::Relaxed);
            }
            let failed = read.is_err();
            if chunks.blocking_send(read).is_err() || failed {
                return;
            }
        }
    });
    StreamBody::new(futures::stream::poll_fn(move |context| receiver.poll_recv(context))).boxed()
}
