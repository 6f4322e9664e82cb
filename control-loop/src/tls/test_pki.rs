//! A CA for tests: certificates with any holder, use and validity, to show what a server admits
//! and refuses. Built only for tests (the `testing` feature).

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};

/// A test CA.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestCa").finish_non_exhaustive()
    }
}

/// A certificate and key, PEM.
#[derive(Clone, Debug)]
pub struct TestPair {
    /// The certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
}

fn params(common_name: &str, names: &[&str]) -> CertificateParams {
    let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = CertificateParams::new(names).unwrap_or_default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, common_name);
    params
}

fn days_from_now(days: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc() + time::Duration::days(days)
}

impl TestCa {
    /// A CA named `name`, valid from yesterday for a year.
    ///
    /// # Panics
    /// When rcgen cannot make it (tests only).
    #[must_use]
    pub fn new(name: &str) -> Self {
        let mut ca = params(name, &[]);
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.not_before = days_from_now(-1);
        ca.not_after = days_from_now(365);
        let key = KeyPair::generate().expect("CA key");
        Self {
            issuer: CertifiedIssuer::self_signed(ca, key).expect("CA"),
        }
    }

    /// The CA certificate, PEM.
    #[must_use]
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A client certificate for `common_name`, valid from yesterday for a year.
    #[must_use]
    pub fn client(&self, common_name: &str) -> TestPair {
        self.leaf(common_name, &[], ExtendedKeyUsagePurpose::ClientAuth, (-1, 365))
    }

    /// A server certificate for `common_name` and the DNS `names`, valid from yesterday for a
    /// year.
    #[must_use]
    pub fn server(&self, common_name: &str, names: &[&str]) -> TestPair {
        self.leaf(common_name, names, ExtendedKeyUsagePurpose::ServerAuth, (-1, 365))
    }

    /// A client certificate for `common_name` that expired yesterday.
    #[must_use]
    pub fn expired_client(&self, common_name: &str) -> TestPair {
        self.leaf(common_name, &[], ExtendedKeyUsagePurpose::ClientAuth, (-3, -1))
    }

    /// A certificate valid between the two day offsets from now.
    ///
    /// # Panics
    /// When rcgen cannot make it (tests only).
    #[must_use]
    pub fn leaf(
        &self,
        common_name: &str,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
        days: (i64, i64),
    ) -> TestPair {
        let mut leaf = params(common_name, names);
        leaf.extended_key_usages = vec![usage];
        leaf.not_before = days_from_now(days.0);
        leaf.not_after = days_from_now(days.1);
        let key = KeyPair::generate().expect("key");
        let cert = leaf.signed_by(&key, &self.issuer).expect("certificate");
        TestPair {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// One TLS handshake over an in-memory pipe, to the server name `name`: `Ok` when both sides
/// completed it, else the side's error that refused it (the server's first).
///
/// # Errors
/// The refusing side's error, as text.
pub async fn handshake(
    server: std::sync::Arc<rustls::ServerConfig>,
    client: std::sync::Arc<rustls::ClientConfig>,
    name: &str,
) -> Result<(), String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let (a, b) = tokio::io::duplex(16 * 1024);
    let name = rustls_pki_types::ServerName::try_from(name.to_owned()).map_err(|e| e.to_string())?;
    let serve = async {
        let mut stream = tokio_rustls::TlsAcceptor::from(server).accept(a).await?;
        // TLS 1.3 checks the client's certificate after the client thinks it is done: one
        // byte each way shows that both sides accepted.
        let mut byte = [0_u8; 1];
        stream.read_exact(&mut byte).await?;
        stream.write_all(&byte).await?;
        stream.flush().await
    };
    let call = async {
        let mut stream = tokio_rustls::TlsConnector::from(client).connect(name, b).await?;
        stream.write_all(b"x").await?;
        stream.flush().await?;
        let mut byte = [0_u8; 1];
        stream.read_exact(&mut byte).await.map(|_| ())
    };
    let (server_side, client_side) = tokio::join!(serve, call);
    server_side.map_err(|e| format!("server: {e}"))?;
    client_side.map_err(|e| format!("client: {e}"))
}

/// Writes `text` to `path` as the kubelet updates a Secret volume: a new file, then a swap.
///
/// # Panics
/// When the file cannot be written (tests only).
pub fn write_atomically(path: &std::path::Path, text: &str) {
    let temporary = path.with_extension("new");
    std::fs::write(&temporary, text).expect("write");
    std::fs::rename(&temporary, path).expect("rename");
}

/// An answer to [`https_request`].
#[derive(Debug)]
pub struct Answer {
    /// The status.
    pub status: u16,
    /// The headers.
    pub headers: hyper::HeaderMap,
    /// The body, as text.
    pub body: String,
}

/// One HTTPS request to `address` (as `localhost`) with `config`: `method` on `path` with
/// `headers` and `body`; `Err` when the connection or handshake fails.
///
/// # Errors
/// The connection's, the handshake's or the exchange's failure, as text.
pub async fn https_request<B>(
    config: std::sync::Arc<rustls::ClientConfig>,
    address: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: B,
) -> Result<Answer, String>
where
    B: hyper::body::Body<Data = hyper::body::Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        exchange(config, address, method, path, headers, body),
    )
    .await
    .map_err(|_| format!("{method} {path}: no answer within 120 s"))?
}

async fn exchange<B>(
    config: std::sync::Arc<rustls::ClientConfig>,
    address: std::net::SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: B,
) -> Result<Answer, String>
where
    B: hyper::body::Body<Data = hyper::body::Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt as _;
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls_pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(body).map_err(|e| e.to_string())?;
    let response = crate::https_client::exchange(hyper_util::rt::TokioIo::new(tls), request).await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
