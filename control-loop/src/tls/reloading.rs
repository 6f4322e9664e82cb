//! Certificates that change while a server runs. A mounted Secret is updated in place when its
//! certificate is renewed (the kubelet swaps a symbolic link to new files), so a server built
//! from files looks at them again at each handshake and uses the new ones from then on; a
//! connection already open keeps the certificate it was made with. A change that cannot be read
//! (a half-written update) keeps the last good version, with a warning, until the files are
//! whole again. A server whose certificate lives in memory (virt-api's, read from a Secret) gets
//! a [`HeldCert`] its owner replaces.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::SystemTime;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::PrivateKeyDer;
use rustls_pki_types::pem::PemObject as _;

use super::{TlsError, chain_from_pem, pem_error, read_chain};

/// What identifies one version of a file: its modification time, length and inode.
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}

type Build<T> = Box<dyn Fn(&[PathBuf]) -> Result<T, TlsError> + Send + Sync>;

/// A value built from files, built again when one of them changed since the last look.
pub struct Reloading<T> {
    paths: Vec<PathBuf>,
    build: Build<T>,
    loaded: Mutex<(Vec<Stamp>, T)>,
}

impl<T> std::fmt::Debug for Reloading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloading")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl<T: Clone> Reloading<T> {
    /// Builds the value once from `paths`.
    ///
    /// # Errors
    /// What `build` returns for the files as they are now.
    pub fn new(
        paths: Vec<PathBuf>,
        build: impl Fn(&[PathBuf]) -> Result<T, TlsError> + Send + Sync + 'static,
    ) -> Result<Self, TlsError> {
        let stamps = paths.iter().map(|p| stamp(p)).collect();
        let value = build(&paths)?;
        Ok(Self {
            paths,
            build: Box::new(build),
            loaded: Mutex::new((stamps, value)),
        })
    }

    /// The value for the files as they are now: built again when one of them changed, or the
    /// last good one when the change cannot be used yet.
    pub fn current(&self) -> T {
        let stamps: Vec<Stamp> = self.paths.iter().map(|p| stamp(p)).collect();
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if loaded.0 != stamps {
            match (self.build)(&self.paths) {
                Ok(value) => {
                    let file = self.paths.first().map(|p| p.display().to_string());
                    tracing::info!(file = file.unwrap_or_default(), "certificates read again");
                    *loaded = (stamps, value);
                }
                Err(error) => {
                    tracing::warn!(%error, "the changed certificates cannot be used yet; keeping the last ones");
                }
            }
        }
        loaded.1.clone()
    }
}

/// A certificate chain and key as rustls signs with them.
pub(super) fn certified_key(
    chain: Vec<rustls_pki_types::CertificateDer<'static>>,
    key: &PrivateKeyDer<'_>,
    origin: &str,
) -> Result<Arc<CertifiedKey>, TlsError> {
    let signer = rustls::crypto::ring::sign::any_supported_type(key).map_err(|e| pem_error(origin, e))?;
    let certified = CertifiedKey::new(chain, signer);
    certified.keys_match().map_err(|e| pem_error(origin, e))?;
    Ok(Arc::new(certified))
}

/// The serving certificate from a certificate file and a key file, read again when they change.
#[derive(Debug)]
pub struct FileCert(Reloading<Arc<CertifiedKey>>);

impl FileCert {
    /// Reads the files once.
    ///
    /// # Errors
    /// When a file cannot be read or the certificate and key do not fit.
    pub fn new(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let (cert_file, key_file) = (cert.to_owned(), key.to_owned());
        Ok(Self(Reloading::new(
            vec![cert.to_owned(), key.to_owned()],
            move |_| {
                let chain = read_chain(&cert_file)?;
                let private = PrivateKeyDer::from_pem_file(&key_file).map_err(|e| TlsError::Key {
                    path: key_file.clone(),
                    message: e.to_string(),
                })?;
                certified_key(chain, &private, &cert_file.display().to_string())
            },
        )?))
    }
}

impl ResolvesServerCert for FileCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.current())
    }
}

/// A serving certificate held in memory, which its owner replaces when it is renewed.
#[derive(Debug)]
pub struct HeldCert(RwLock<(Arc<CertifiedKey>, String)>);

impl HeldCert {
    /// A certificate from PEM text; `origin` names it in errors.
    ///
    /// # Errors
    /// When the text is not a certificate and a key that fit together.
    pub fn from_pem(origin: &str, cert: &str, key: &str) -> Result<Self, TlsError> {
        Ok(Self(RwLock::new((Self::parse(origin, cert, key)?, cert.to_owned()))))
    }

    fn parse(origin: &str, cert: &str, key: &str) -> Result<Arc<CertifiedKey>, TlsError> {
        let chain = chain_from_pem(origin, cert)?;
        let private = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|e| pem_error(origin, e))?;
        certified_key(chain, &private, origin)
    }

    /// Serves `cert` and `key` from the next handshake on; the old ones stay when they do not
    /// parse.
    ///
    /// # Errors
    /// When the text is not a certificate and a key that fit together.
    pub fn replace(&self, origin: &str, cert: &str, key: &str) -> Result<(), TlsError> {
        let parsed = Self::parse(origin, cert, key)?;
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = (parsed, cert.to_owned());
        Ok(())
    }

    /// The certificate served now, PEM.
    #[must_use]
    pub fn cert_pem(&self) -> String {
        self.0.read().unwrap_or_else(PoisonError::into_inner).1.clone()
    }
}

impl ResolvesServerCert for HeldCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(PoisonError::into_inner).0.clone())
    }
}
