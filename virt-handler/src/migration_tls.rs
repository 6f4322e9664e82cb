//! The handlers' mutual TLS for migrations. The target's proxy serves with the handler's server
//! certificate and admits only the handlers' migration client certificate
//! (`kubevirt.io:system:client:migration`); the source's proxy presents that client certificate
//! and accepts only a server named `virt-handler`. Every file is read again when it changed: the
//! Secrets behind them are updated in place when a certificate is renewed, and the next
//! migration uses the new one without a restart. A change that cannot be read (a half-written
//! update) keeps the last good certificates, with a warning, until the files are whole again.

use std::path::PathBuf;

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

/// The files, and the security last built from them.
#[derive(Debug)]
pub struct MigrationTls(Reloading<Security>);

impl MigrationTls {
    /// Reads the files once.
    ///
    /// # Errors
    /// When a file cannot be read or holds no usable certificate, key or CA.
    pub fn new(files: &MigrationFiles) -> Result<Self, TlsError> {
        let paths = vec![
            files.server_cert.clone(),
            files.server_key.clone(),
            files.client_cert.clone(),
            files.client_key.clone(),
            files.ca.clone(),
        ];
        Ok(Self(Reloading::new(paths, |paths| match paths {
            [server_cert, server_key, client_cert, client_key, ca] => build(&MigrationFiles {
                server_cert: server_cert.clone(),
                server_key: server_key.clone(),
                client_cert: client_cert.clone(),
                client_key: client_key.clone(),
                ca: ca.clone(),
            }),
            _ => Err(TlsError::Pem {
                origin: "the migration TLS files".to_owned(),
                message: "five files are needed".to_owned(),
            }),
        })?))
    }

    /// The security for the next migration: rebuilt when a file changed since the last read.
    #[must_use]
    pub fn current(&self) -> Security {
        self.0.current()
    }
}

fn build(files: &MigrationFiles) -> Result<Security, TlsError> {
    let source = CertSource::Files {
        cert: files.server_cert.clone(),
        key: files.server_key.clone(),
    };
    Ok(Security::Tls {
        server: server_tls_for(&source, Some(&migration_clients(files.ca.clone())))?.config,
        client: client_tls(&files.ca, Some((&files.client_cert, &files.client_key)))?,
        server_name: rustls_pki_types::ServerName::try_from(HANDLER_NAME).map_err(|e| TlsError::Pem {
            origin: "the handlers' certificate name".to_owned(),
            message: e.to_string(),
        })?,
    })
}

#[cfg(test)]
mod tests;
