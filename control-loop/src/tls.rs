//! TLS for virt-api and virt-handler's console server: a certificate and key from PEM files (the
//! cluster's certificate secrets), or a self-signed one made at start for local use; optionally
//! requiring client certificates signed by a CA, as virt-handler requires of virt-api. rustls with
//! the ring provider only (docs/dependencies.md, "ring only").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Where the serving certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// PEM files: a chain and its private key.
    Files {
        /// `tls.crt`.
        cert: PathBuf,
        /// `tls.key`.
        key: PathBuf,
    },
    /// PEM text held in memory (for example read from a Secret); `origin` names it in errors.
    Pem {
        /// Where the text came from, e.g. `secret kubevirt/kubevirt-virt-api-certs`.
        origin: String,
        /// The certificate chain.
        cert: String,
        /// Its private key.
        key: String,
    },
    /// A certificate made now, for these DNS names and IP addresses.
    SelfSigned {
        /// Subject alternative names.
        names: Vec<String>,
    },
}

/// Why no TLS configuration could be built. Each variant names the file or step.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file could not be read or holds no certificate.
    #[error("cannot read the TLS certificate {path}: {message}")]
    Cert {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// The key file could not be read or holds no private key.
    #[error("cannot read the TLS private key {path}: {message}")]
    Key {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// PEM text in memory is not a certificate or key.
    #[error("{origin}: {message}")]
    Pem {
        /// Where the text came from.
        origin: String,
        /// What went wrong.
        message: String,
    },
    /// The self-signed certificate could not be made.
    #[error("cannot make a self-signed certificate: {0}")]
    SelfSigned(#[from] rcgen::Error),
    /// rustls refused the certificate and key.
    #[error("the TLS certificate and key do not fit together: {0}")]
    Rustls(#[from] rustls::Error),
}

/// A server configuration, and the certificate in PEM so that a local client can trust it.
#[derive(Debug)]
pub struct ServerTls {
    /// For the listener.
    pub config: Arc<ServerConfig>,
    /// The leaf certificate, PEM.
    pub cert_pem: String,
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let error = |message: String| TlsError::Cert {
        path: path.to_owned(),
        message,
    };
    let chain = CertificateDer::pem_file_iter(path)
        .map_err(|e| error(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| error(e.to_string()))?;
    if chain.is_empty() {
        return Err(error("no CERTIFICATE block".to_owned()));
    }
    Ok(chain)
}

/// Installs ring as rustls' process-wide provider; later calls change nothing.
pub fn install_crypto_provider() {
    // An error means a provider is already installed, which is what we want.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Builds the server configuration. HTTP/1.1 only: websocket upgrades need it.
pub fn server_tls(source: &CertSource) -> Result<ServerTls, TlsError> {
    server_tls_verifying(source, None)
}

/// Like [`server_tls`], and when `client_ca` is given, every client must present a certificate
/// signed by it.
pub fn server_tls_verifying(source: &CertSource, client_ca: Option<&Path>) -> Result<ServerTls, TlsError> {
    build_server_tls(source, client_ca, true)
}

/// Like [`server_tls`], and when `client_ca` is given, a client may present a certificate, which
/// must then be signed by it (Go's `VerifyClientCertIfGiven`): the caller learns from the
/// connection whether one was presented.
pub fn server_tls_verifying_optional(source: &CertSource, client_ca: Option<&Path>) -> Result<ServerTls, TlsError> {
    build_server_tls(source, client_ca, false)
}

fn build_server_tls(source: &CertSource, client_ca: Option<&Path>, required: bool) -> Result<ServerTls, TlsError> {
    let roots = client_ca
        .map(|ca| roots(ca).map(|r| (r, ca.display().to_string())))
        .transpose()?;
    build_server_tls_with(source, roots, required)
}

/// Like [`server_tls_verifying_optional`], with the client CA as PEM text (`origin` names it).
pub fn server_tls_verifying_optional_pem(
    source: &CertSource,
    client_ca: Option<(&str, &str)>,
) -> Result<ServerTls, TlsError> {
    let roots = client_ca
        .map(|(origin, pem)| roots_from_pem(origin, pem).map(|r| (r, origin.to_owned())))
        .transpose()?;
    build_server_tls_with(source, roots, false)
}

fn pem_error(origin: &str, message: impl std::fmt::Display) -> TlsError {
    TlsError::Pem {
        origin: origin.to_owned(),
        message: message.to_string(),
    }
}

fn chain_from_pem(origin: &str, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let chain = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem_error(origin, e))?;
    if chain.is_empty() {
        return Err(pem_error(origin, "no CERTIFICATE block"));
    }
    Ok(chain)
}

fn roots_from_pem(origin: &str, pem: &str) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in chain_from_pem(origin, pem)? {
        roots.add(cert).map_err(|e| pem_error(origin, e))?;
    }
    Ok(roots)
}

/// A client configuration from PEM text: trust `ca`, present `cert` with `key`.
pub fn client_tls_pem(origin: &str, ca: &str, cert: &str, key: &str) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    install_crypto_provider();
    let chain = chain_from_pem(origin, cert)?;
    let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| pem_error(origin, e))?;
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots_from_pem(origin, ca)?)
        .with_client_auth_cert(chain, key)?;
    Ok(Arc::new(config))
}

fn build_server_tls_with(
    source: &CertSource,
    client_ca: Option<(rustls::RootCertStore, String)>,
    required: bool,
) -> Result<ServerTls, TlsError> {
    install_crypto_provider();
    let (chain, key, cert_pem) = match source {
        CertSource::Files { cert, key } => {
            let chain = read_chain(cert)?;
            let private = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
                path: key.clone(),
                message: e.to_string(),
            })?;
            let pem = std::fs::read_to_string(cert).map_err(|e| TlsError::Cert {
                path: cert.clone(),
                message: e.to_string(),
            })?;
            (chain, private, pem)
        }
        CertSource::Pem { origin, cert, key } => {
            let chain = chain_from_pem(origin, cert)?;
            let private = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| pem_error(origin, e))?;
            (chain, private, cert.clone())
        }
        CertSource::SelfSigned { names } => {
            let made = rcgen::generate_simple_self_signed(names.clone())?;
            let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(made.signing_key.serialize_der()));
            (vec![made.cert.der().clone()], key, made.cert.pem())
        }
    };
    let builder = ServerConfig::builder();
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some((roots, origin)) => {
            let verifier = rustls::server::WebPkiClientVerifier::builder(Arc::new(roots));
            let verifier = if required {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier.build().map_err(|e| pem_error(&origin, e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        cert_pem,
    })
}

fn roots(ca: &Path) -> Result<rustls::RootCertStore, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in read_chain(ca)? {
        roots.add(cert).map_err(|e| TlsError::Cert {
            path: ca.to_owned(),
            message: e.to_string(),
        })?;
    }
    Ok(roots)
}

/// A client configuration that trusts the CA in `ca` and presents `client` (certificate, key).
pub fn client_tls(ca: &Path, client: Option<(&Path, &Path)>) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    install_crypto_provider();
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots(ca)?);
    let config = match client {
        Some((cert, key)) => {
            let chain = read_chain(cert)?;
            let private = PrivateKeyDer::from_pem_file(key).map_err(|e| TlsError::Key {
                path: key.to_owned(),
                message: e.to_string(),
            })?;
            builder.with_client_auth_cert(chain, private)?
        }
        None => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}
