//! The `http` source: a GET of the DataVolume's URL, as upstream's importer makes it. Redirects
//! are followed (up to ten, as Go's client does); an `https` URL is checked against the system's
//! roots and the certificates of `certConfigMap`; `secretRef` gives basic auth; `extraHeaders` are
//! sent as given, and none of these credentials follows a redirect to another host (as Go's client
//! drops them). The body reaches the importer's blocking pipeline as a [`std::io::Read`], with
//! the bytes it has read counted for progress. The registry source makes its requests here too.

use std::io::{self, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::{Request, StatusCode, Uri};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;

use crate::body_pipe::{self, ChannelReader};

/// How many redirects are followed.
pub const MAX_REDIRECTS: usize = 10;
/// How long a connection may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// The size of each read from the connection: fixed, so that the buffer is read into again once
/// [`body_pipe`] has copied its chunks out, rather than a new one faulted in for every read.
const READ_BUFFER: usize = 256 * 1024;

/// Why the download failed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The URL (or a redirect's) is not one we can fetch.
    #[error("bad URL {url:?}: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The connection failed.
    #[error("connecting to {authority}: {source}")]
    Connect {
        /// Host and port.
        authority: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The request failed.
    #[error("GET {url}: {reason}")]
    Request {
        /// The URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The server answered with an error.
    #[error("GET {url}: HTTP {status}")]
    Status {
        /// The URL.
        url: String,
        /// Its answer.
        status: StatusCode,
    },
    /// Too many redirects.
    #[error("GET {url}: more than {MAX_REDIRECTS} redirects")]
    TooManyRedirects {
        /// The first URL.
        url: String,
    },
    /// A certificate could not be read.
    #[error("reading certificates: {0}")]
    Certificates(String),
}

/// How to reach the source.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HttpSource {
    /// The URL.
    pub url: String,
    /// Basic auth: user and password (the secret's `accessKeyId` and `secretKey`).
    pub basic_auth: Option<(String, String)>,
    /// Extra headers, each `Name: value`.
    pub extra_headers: Vec<String>,
    /// PEM certificates trusted besides the system's.
    pub extra_roots_pem: Vec<u8>,
    /// The server's certificate is not checked (a registry listed in CDIConfig's
    /// `insecureRegistries`).
    pub skip_tls_verify: bool,
    /// A redirect is given back as the answer rather than followed.
    pub no_redirects: bool,
}

/// Credentials and header values are not printed.
impl std::fmt::Debug for HttpSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self
            .extra_headers
            .iter()
            .map(|h| h.split_once(':').map_or("", |(name, _)| name.trim()))
            .collect();
        f.debug_struct("HttpSource")
            .field("url", &self.url)
            .field(
                "basic_auth",
                &self.basic_auth.as_ref().map(|(user, _)| (user, "<redacted>")),
            )
            .field("extra_headers", &header_names)
            .field("extra_roots_pem", &self.extra_roots_pem.len())
            .field("skip_tls_verify", &self.skip_tls_verify)
            .field("no_redirects", &self.no_redirects)
            .finish()
    }
}

/// Headers that carry credentials: sent to the first host only.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "cookie", "www-authenticate"];

/// A body being downloaded, read as a stream from a blocking thread (never from async code).
#[derive(Debug)]
pub struct Download {
    body: ChannelReader,
    /// The body's length, when the server said it.
    pub content_length: Option<u64>,
    /// The bytes read so far (shared with whoever reports progress).
    pub read: Arc<AtomicU64>,
}

impl Read for Download {
    fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
        let n = self.body.read(buffer)?;
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// The TLS settings of `source`.
///
/// # Errors
/// [`HttpError::Certificates`].
pub fn tls_config(source: &HttpSource) -> Result<Arc<rustls::ClientConfig>, HttpError> {
    control_loop::tls::public_client_tls(source.skip_tls_verify, &source.extra_roots_pem, "the certConfigMap")
        .map_err(|e| HttpError::Certificates(e.to_string()))
}

type Body = hyper::body::Incoming;

/// Sends one GET to `uri` and gives its response.
async fn get_once(
    source: &HttpSource,
    uri: &Uri,
    tls: &Arc<rustls::ClientConfig>,
) -> Result<hyper::Response<Body>, HttpError> {
    let url = uri.to_string();
    let bad = |reason: &str| HttpError::BadUrl {
        url: url.clone(),
        reason: reason.to_owned(),
    };
    let https = match uri.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => return Err(bad("the scheme must be http or https")),
    };
    let host = uri.host().ok_or_else(|| bad("no host"))?.to_owned();
    if uri.authority().is_some_and(|a| a.as_str().contains('@')) {
        return Err(bad("credentials in the URL are not sent: use the source's secretRef"));
    }
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    // The Host header: the host, and the port only when the URL gives one.
    let host_header = match uri.port_u16() {
        Some(port) => format!("{host}:{port}"),
        None => host.clone(),
    };
    let authority = format!("{host}:{port}");
    let connect_error = |source| HttpError::Connect {
        authority: authority.clone(),
        source,
    };
    let tcp = tokio::time::timeout(
        CONNECT_TIMEOUT,
        TcpStream::connect((host.trim_matches(['[', ']']), port)),
    )
    .await
    .map_err(|_| connect_error(io::Error::new(io::ErrorKind::TimedOut, "no connection within 30 s")))?
    .map_err(connect_error)?;
    let mut request = Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
        .header(hyper::header::HOST, host_header)
        .header(hyper::header::USER_AGENT, "cdi-importer");
    if let Some((user, password)) = &source.basic_auth {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        request = request.header(hyper::header::AUTHORIZATION, format!("Basic {token}"));
    }
    for header in &source.extra_headers {
        // The header's value may be a secret: the error never repeats it.
        let (name, value) = header.split_once(':').ok_or_else(|| HttpError::Request {
            url: url.clone(),
            reason: "an extra header is not `Name: value`".to_owned(),
        })?;
        request = request.header(name.trim(), value.trim());
    }
    let request = request
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| HttpError::Request {
            url: url.clone(),
            reason: e.to_string(),
        })?;
    let request_error = |e: hyper::Error| HttpError::Request {
        url: url.clone(),
        reason: e.to_string(),
    };
    if https {
        let name = ServerName::try_from(host.trim_matches(['[', ']']).to_owned()).map_err(|e| bad(&e.to_string()))?;
        let stream = tokio_rustls::TlsConnector::from(Arc::clone(tls))
            .connect(name, tcp)
            .await
            .map_err(connect_error)?;
        send(TokioIo::new(stream), request).await.map_err(request_error)
    } else {
        send(TokioIo::new(tcp), request).await.map_err(request_error)
    }
}

async fn send<T>(
    io: TokioIo<T>,
    request: Request<http_body_util::Empty<Bytes>>,
) -> Result<hyper::Response<Body>, hyper::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
        .read_buf_exact_size(Some(READ_BUFFER))
        .handshake(io)
        .await?;
    tokio::spawn(connection);
    sender.send_request(request).await
}

/// An answer, its body not read yet.
#[derive(Debug)]
pub struct Answer {
    /// Its status.
    pub status: StatusCode,
    /// Its headers.
    pub headers: hyper::HeaderMap,
    /// The URL that answered (after redirects).
    pub url: String,
    body: Body,
}

impl Answer {
    /// The body, read whole on the current runtime, refused past `limit` bytes.
    ///
    /// # Errors
    /// [`HttpError::Request`].
    pub async fn bytes(self, limit: usize) -> Result<Vec<u8>, HttpError> {
        let url = self.url;
        let limited = http_body_util::Limited::new(self.body, limit);
        let collected = limited.collect().await.map_err(|e| HttpError::Request {
            url: url.clone(),
            reason: format!("reading the body (at most {limit} bytes): {e}"),
        })?;
        Ok(collected.to_bytes().to_vec())
    }

    /// The body, streamed on the current tokio runtime to a blocking reader.
    #[must_use]
    pub fn download(self) -> Download {
        let content_length = self
            .headers
            .get(hyper::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok()?.parse().ok());
        // While the pipeline is behind, the body waits in the kernel: the back-pressure wanted.
        let (sender, body, _ended) = body_pipe::channel();
        tokio::spawn(body_pipe::forward(self.body, sender, io::Error::other));
        Download {
            body,
            content_length,
            read: Arc::new(AtomicU64::new(0)),
        }
    }
}

fn parse_url(url: &str) -> Result<Uri, HttpError> {
    url.parse::<Uri>().map_err(|e| HttpError::BadUrl {
        url: url.to_owned(),
        reason: e.to_string(),
    })
}

/// Sends a GET of `source`'s URL and follows its redirects; the final answer is given whatever
/// its status.
///
/// # Errors
/// [`HttpError`].
pub async fn get(source: &HttpSource, tls: &Arc<rustls::ClientConfig>) -> Result<Answer, HttpError> {
    let first = parse_url(&source.url)?;
    let mut uri = first.clone();
    let mut sent = source.clone();
    let mut redirects = 0;
    loop {
        let response = get_once(&sent, &uri, tls).await?;
        if !response.status().is_redirection() || source.no_redirects {
            let (parts, body) = response.into_parts();
            return Ok(Answer {
                status: parts.status,
                headers: parts.headers,
                url: uri.to_string(),
                body,
            });
        }
        redirects += 1;
        if redirects > MAX_REDIRECTS {
            return Err(HttpError::TooManyRedirects {
                url: source.url.clone(),
            });
        }
        let location = response
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|l| l.to_str().ok())
            .ok_or_else(|| HttpError::Status {
                url: uri.to_string(),
                status: response.status(),
            })?;
        uri = resolve(&uri, location, parse_url)?;
        if uri.host() != first.host() {
            sent.basic_auth = None;
            sent.extra_headers.retain(|header| {
                let name = header.split_once(':').map_or("", |(name, _)| name.trim());
                !CREDENTIAL_HEADERS.iter().any(|c| c.eq_ignore_ascii_case(name))
            });
        }
    }
}

/// Starts the download: follows redirects, checks the answer, and streams the body on the
/// current tokio runtime.
///
/// # Errors
/// [`HttpError`].
pub async fn open(source: &HttpSource) -> Result<Download, HttpError> {
    let tls = tls_config(source)?;
    let answer = get(source, &tls).await?;
    if !answer.status.is_success() {
        return Err(HttpError::Status {
            url: answer.url,
            status: answer.status,
        });
    }
    Ok(answer.download())
}

/// A redirect's `location`, absolute or relative to `base`.
fn resolve(base: &Uri, location: &str, parse: impl Fn(&str) -> Result<Uri, HttpError>) -> Result<Uri, HttpError> {
    let target = parse(location)?;
    if target.scheme().is_some() {
        return Ok(target);
    }
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority().map_or("", |a| a.as_str());
    let path = if location.starts_with('/') {
        location.to_owned()
    } else {
        let base_path = base.path();
        let directory = base_path.rsplit_once('/').map_or("", |(d, _)| d);
        format!("{directory}/{location}")
    };
    parse(&format!("{scheme}://{authority}{path}"))
}
