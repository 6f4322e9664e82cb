//! TLS for KubeVirt's servers and their clients: a certificate and key from PEM files (the
//! cluster's certificate Secrets, read again when they change), PEM text, or a self-signed one
//! made at start for local use; optionally requiring client certificates signed by a CA and
//! naming an admitted identity ([`ClientPolicy`]), as virt-handler requires of virt-api. rustls
//! with the ring provider only (docs/dependencies.md, "ring only").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject as _;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

mod identity;
pub use operator_kit::certificates::issue;
mod public;
mod reloading;
#[cfg(any(test, feature = "testing"))]
pub mod test_pki;

use identity::IdentityVerifier;
pub use identity::{
    CertFacts, ClientCa, ClientPolicy, HANDLER_SERVER, Identities, MIGRATION_CLIENT, VIRT_API_CLIENT,
    subject_common_name,
};
pub use public::public_client_tls;
pub use reloading::{FileCert, HeldCert, Reloading};

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
    /// The leaf certificate as it was at start, PEM.
    pub cert_pem: String,
    /// The certificate, for its owner to replace, when it is held in memory rather than read
    /// from files.
    pub held: Option<Arc<HeldCert>>,
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

/// Builds the server configuration, without client certificates. HTTP/1.1 only: websocket
/// upgrades need it.
pub fn server_tls(source: &CertSource) -> Result<ServerTls, TlsError> {
    server_tls_for(source, None)
}

/// Builds the server configuration; with `clients`, client certificates are verified against
/// its CA and admitted only for its identities ([`ClientPolicy`]). A certificate from files is
/// read again when the files change.
pub fn server_tls_for(source: &CertSource, clients: Option<&ClientPolicy>) -> Result<ServerTls, TlsError> {
    install_crypto_provider();
    let (resolver, cert_pem, held): (Arc<dyn rustls::server::ResolvesServerCert>, _, _) = match source {
        CertSource::Files { cert, key } => {
            let pem = std::fs::read_to_string(cert).map_err(|e| TlsError::Cert {
                path: cert.clone(),
                message: e.to_string(),
            })?;
            (Arc::new(FileCert::new(cert, key)?), pem, None)
        }
        CertSource::Pem { origin, cert, key } => {
            let held = Arc::new(HeldCert::from_pem(origin, cert, key)?);
            (held.clone(), cert.clone(), Some(held))
        }
        CertSource::SelfSigned { names } => {
            let made = rcgen::generate_simple_self_signed(names.clone())?;
            let (cert, key) = (made.cert.pem(), made.signing_key.serialize_pem());
            let held = Arc::new(HeldCert::from_pem("the self-signed certificate", &cert, &key)?);
            (held.clone(), cert, Some(held))
        }
    };
    let builder = ServerConfig::builder();
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(policy) => builder.with_client_cert_verifier(Arc::new(IdentityVerifier::new(policy)?)),
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        cert_pem,
        held,
    })
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

#[cfg(test)]
mod tests;
