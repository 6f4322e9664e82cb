//! The handlers' mutual TLS for migrations. The target's proxy serves with the handler's server
//! certificate and admits only the handlers' migration client certificate
//! (`kubevirt.io:system:client:migration`); the source's proxy presents that client certificate
//! and accepts only a server named `virt-handler`. Every file is read again when it changed: the
//! Secrets behind them are updated in place when a certificate is renewed, and the next
//! migration uses the new one without a restart. A change that cannot be read (a half-written
//! update) keeps the last good certificates, with a warning, until the files are whole again.

use std::path::PathBuf;
use std::sync::Arc;

use control_loop::tls::{
    CertSource, ClientCa, ClientPolicy, Identities, MIGRATION_CLIENT, Reloading, TlsError, client_tls, server_tls_for,
};

use crate::migration_proxy::{HANDLER_NAME, Security};

/// The files of the migration TLS.
#[derive(Clone, Debug)]
pub struct MigrationFiles {
    /// The handler's server certificate (`--tls-cert-file` of upstream's handler).
    pub server_cert: PathBuf,
    /// Its key.
    pub server_key: PathBuf,
    /// The migration client certificate (`--migration-client-cert-file`).
    pub client_cert: PathBuf,
    /// Its key.
    pub client_key: PathBuf,
    /// The KubeVirt CA bundle.
    pub ca: PathBuf,
}

/// Who a migration proxy admits: the handlers' migration client, signed by the CA in `ca`.
#[must_use]
pub fn migration_clients(ca: PathBuf) -> ClientPolicy {
    ClientPolicy {
        ca: ClientCa::File(ca),
        identities: Identities::Only(vec![MIGRATION_CLIENT.to_owned()]),
        required: true,
    }
}

/// The target side's server configuration (which reads its own files again when they change)
/// and the source side's client configuration, built again when its files change.
pub struct MigrationTls {
    server: Arc<rustls::ServerConfig>,
    client: Reloading<Arc<rustls::ClientConfig>>,
    server_name: rustls_pki_types::ServerName<'static>,
}

impl std::fmt::Debug for MigrationTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MigrationTls")
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

impl MigrationTls {
    /// Reads the files once.
    ///
    /// # Errors
    /// When a file cannot be read or holds no usable certificate, key or CA.
    pub fn new(files: &MigrationFiles) -> Result<Self, TlsError> {
        let source = CertSource::Files {
            cert: files.server_cert.clone(),
            key: files.server_key.clone(),
        };
        let server = server_tls_for(&source, Some(&migration_clients(files.ca.clone())))?.config;
        let (ca, cert, key) = (files.ca.clone(), files.client_cert.clone(), files.client_key.clone());
        let paths = vec![ca.clone(), cert.clone(), key.clone()];
        let client = Reloading::new(paths, move |_| client_tls(&ca, Some((&cert, &key))))?;
        let server_name = rustls_pki_types::ServerName::try_from(HANDLER_NAME).map_err(|e| TlsError::Pem {
            origin: "the handlers' certificate name".to_owned(),
            message: e.to_string(),
        })?;
        Ok(Self {
            server,
            client,
            server_name,
        })
    }

    /// The security for the next migration, with the files as they are now.
    #[must_use]
    pub fn current(&self) -> Security {
        Security::Tls {
            server: self.server.clone(),
            client: self.client.current(),
            server_name: self.server_name.clone(),
        }
    }
}

#[cfg(test)]
mod tests;
