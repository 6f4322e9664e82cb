//! The handlers' mutual TLS for migrations, read from virt-handler's certificate, key and CA
//! files, and read again when one of them changed: the Secret behind them is updated in place
//! when its certificate is rotated, and the next migration then uses the new one without a
//! restart. A change that cannot be read (a half-written update) keeps the last good
//! certificates, with a warning, until the files are whole again.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use control_loop::tls::{CertSource, TlsError, client_tls, server_tls_verifying};

use crate::migration_proxy::{HANDLER_NAME, Security};

/// What identifies one version of a file: its modification time, length and inode (a Secret
/// update swaps a symbolic link to new files).
type Stamp = Option<(SystemTime, u64, u64)>;

fn stamp(path: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len(), meta.ino()))
}

/// The files, and the security last built from them.
pub struct MigrationTls {
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    loaded: Mutex<([Stamp; 3], Security)>,
}

impl std::fmt::Debug for MigrationTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MigrationTls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

impl MigrationTls {
    /// Reads the files once.
    ///
    /// # Errors
    /// When a file cannot be read or holds no usable certificate, key or CA.
    pub fn new(cert: PathBuf, key: PathBuf, ca: PathBuf) -> Result<Self, TlsError> {
        let stamps = [stamp(&cert), stamp(&key), stamp(&ca)];
        let security = Self::build(&cert, &key, &ca)?;
        Ok(Self {
            cert,
            key,
            ca,
            loaded: Mutex::new((stamps, security)),
        })
    }

    fn build(cert: &Path, key: &Path, ca: &Path) -> Result<Security, TlsError> {
        let source = CertSource::Files {
            cert: cert.to_owned(),
            key: key.to_owned(),
        };
        Ok(Security::Tls {
            server: server_tls_verifying(&source, Some(ca))?.config,
            client: client_tls(ca, Some((cert, key)))?,
            server_name: rustls_pki_types::ServerName::try_from(HANDLER_NAME).map_err(|e| TlsError::Pem {
                origin: "the handlers' certificate name".to_owned(),
                message: e.to_string(),
            })?,
        })
    }

    /// The security for the next migration: rebuilt when a file changed since the last read.
    #[must_use]
    pub fn current(&self) -> Security {
        let stamps = [stamp(&self.cert), stamp(&self.key), stamp(&self.ca)];
        let mut loaded = self.loaded.lock().unwrap_or_else(PoisonError::into_inner);
        if loaded.0 != stamps {
            match Self::build(&self.cert, &self.key, &self.ca) {
                Ok(security) => {
                    tracing::info!(cert = %self.cert.display(), "migration certificates read again");
                    *loaded = (stamps, security);
                }
                Err(error) => {
                    tracing::warn!(%error, "the changed migration certificates cannot be used yet; keeping the last ones");
                }
            }
        }
        loaded.1.clone()
    }
}

#[cfg(test)]
mod tests;
