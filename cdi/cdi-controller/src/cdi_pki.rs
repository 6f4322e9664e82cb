//! The upload path's certificates as cdi-controller uses them: it signs each upload server's
//! serving certificate with the upload servers' CA, and each clone source pod's client
//! certificate with their clients' CA. cdi-operator makes the CAs and keeps them
//! (`cdi/cdi-operator/src/certificates.rs`); [`kube::load`] reads them at start and [`kube::keep`]
//! reads them again every minute into a [`SharedPki`], so a CA made again signs from then on
//! (the one it replaced stays in the bundles until it expires).

use control_loop::tls::issue::{self, Pair, Usage};

pub mod kube;

/// How long an upload server's certificate lives (upstream's server default); its server ends
/// well before ([`crate::import_plan`]'s deadline).
pub const SERVER_LIFETIME_SECONDS: i64 = 24 * 60 * 60;
/// Certificates are valid from a little before they are made, for clocks a little behind.
pub const CLOCK_SKEW_SECONDS: i64 = 5 * 60;

fn sign(ca: &Pair, common_name: &str, usage: &Usage, now: i64, lifetime: i64) -> Result<Pair, rcgen::Error> {
    issue::sign_by(ca, common_name, usage, now - CLOCK_SKEW_SECONDS, now + lifetime)
}

/// An upload server's certificate Secret's contents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Issued {
    /// Its serving certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
    /// The CA bundle that signs the proxy's client certificate.
    pub client_ca: String,
}

/// A clone source pod's client certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIssued {
    /// Its certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
    /// The bundle of the CAs that sign the upload servers' certificates, which the client trusts.
    pub server_ca: String,
}

/// Issues upload servers' certificates, and clone source pods' client certificates.
pub trait ServingCertificates: Send + Sync {
    /// A serving certificate for `dns_names` (the first is its common name).
    ///
    /// # Errors
    /// rcgen's.
    fn issue(&self, dns_names: &[String]) -> Result<Issued, rcgen::Error>;

    /// A client certificate for `common_name`, signed by the CA the upload servers trust.
    ///
    /// # Errors
    /// rcgen's.
    fn issue_client(&self, common_name: &str) -> Result<ClientIssued, rcgen::Error>;
}

/// The upload servers' CA and the clients' CA with their bundles, read at start, with the public
/// key that checks cdi-apiserver's tokens.
#[derive(Clone, Debug)]
pub struct UploadPki {
    /// The upload servers' CA.
    pub server_ca: Pair,
    /// Its bundle: the CA and the ones it replaced that still live.
    pub server_bundle: String,
    /// The CA of the upload servers' clients (cdi-uploadproxy, clone source pods).
    pub client_ca: Pair,
    /// Its bundle.
    pub client_bundle: String,
    /// The token signing key's public half.
    pub token_public_key: Vec<u8>,
}

impl ServingCertificates for UploadPki {
    fn issue(&self, dns_names: &[String]) -> Result<Issued, rcgen::Error> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let common_name = dns_names.first().cloned().unwrap_or_default();
        let pair = sign(
            &self.server_ca,
            &common_name,
            &Usage::Server(dns_names.to_vec()),
            now,
            SERVER_LIFETIME_SECONDS,
        )?;
        Ok(Issued {
            cert: pair.cert,
            key: pair.key,
            client_ca: self.client_bundle.clone(),
        })
    }

    fn issue_client(&self, common_name: &str) -> Result<ClientIssued, rcgen::Error> {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let pair = sign(
            &self.client_ca,
            common_name,
            &Usage::Client,
            now,
            SERVER_LIFETIME_SECONDS,
        )?;
        Ok(ClientIssued {
            cert: pair.cert,
            key: pair.key,
            server_ca: self.server_bundle.clone(),
        })
    }
}

/// The upload path's CAs as they are now: replaced when cdi-operator makes them again.
#[derive(Debug)]
pub struct SharedPki(std::sync::RwLock<UploadPki>);

impl SharedPki {
    /// Holds `pki`.
    #[must_use]
    pub fn new(pki: UploadPki) -> Self {
        Self(std::sync::RwLock::new(pki))
    }

    fn current(&self) -> UploadPki {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Replaces what it holds with `pki`; whether that changed anything.
    pub fn replace(&self, pki: UploadPki) -> bool {
        let mut held = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let changed = held.server_ca != pki.server_ca
            || held.client_ca != pki.client_ca
            || held.server_bundle != pki.server_bundle
            || held.client_bundle != pki.client_bundle;
        *held = pki;
        changed
    }
}

impl ServingCertificates for SharedPki {
    fn issue(&self, dns_names: &[String]) -> Result<Issued, rcgen::Error> {
        self.current().issue(dns_names)
    }

    fn issue_client(&self, common_name: &str) -> Result<ClientIssued, rcgen::Error> {
        self.current().issue_client(common_name)
    }
}

/// Certificates that are fixed text, for tests of the controller's steps.
#[cfg(any(test, feature = "testing"))]
#[derive(Clone, Copy, Debug, Default)]
pub struct FixedCertificates;

#[cfg(any(test, feature = "testing"))]
impl ServingCertificates for FixedCertificates {
    fn issue(&self, dns_names: &[String]) -> Result<Issued, rcgen::Error> {
        Ok(Issued {
            cert: format!("CERT for {}", dns_names.join(",")),
            key: "KEY".to_owned(),
            client_ca: "CLIENT CA".to_owned(),
        })
    }

    fn issue_client(&self, common_name: &str) -> Result<ClientIssued, rcgen::Error> {
        Ok(ClientIssued {
            cert: format!("CLIENT CERT for {common_name}"),
            key: "CLIENT KEY".to_owned(),
            server_ca: "SERVER CA".to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
