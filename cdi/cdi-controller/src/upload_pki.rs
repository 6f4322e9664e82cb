//! The certificates of the upload path, as upstream's CDI keeps them in its namespace: a CA that
//! signs each upload server's serving certificate (its bundle trusted by cdi-uploadproxy), and a
//! CA that signs cdi-uploadproxy's client certificate (its bundle trusted by upload servers).
//! cdi-controller makes what is missing or due when it starts ([`decide`], applied by
//! [`kube::ensure`]) and issues a serving certificate for each upload server it makes
//! ([`ServingCertificates`]).

use control_loop::tls::CertFacts;
use control_loop::tls::issue::{self, Pair, Usage};

pub mod kube;

/// How long a CA lives.
pub const CA_LIFETIME_SECONDS: i64 = 2 * 365 * 24 * 60 * 60;
/// A CA or client certificate with less than this left is made again at start.
pub const RENEW_WITHIN_SECONDS: i64 = 365 * 24 * 60 * 60;
/// How long an upload server's certificate lives (upstream's server default); its server ends
/// well before ([`crate::import_plan`]'s deadline).
pub const SERVER_LIFETIME_SECONDS: i64 = 24 * 60 * 60;
/// Certificates are valid from a little before they are made, for clocks a little behind.
pub const CLOCK_SKEW_SECONDS: i64 = 5 * 60;

/// What is stored now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// The upload servers' CA.
    pub server_ca: Option<Pair>,
    /// The proxy's client CA.
    pub client_ca: Option<Pair>,
    /// The proxy's client certificate.
    pub client_cert: Option<Pair>,
}

/// What must be made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// A new upload servers' CA.
    pub server_ca: bool,
    /// A new client CA.
    pub client_ca: bool,
    /// A new client certificate.
    pub client_cert: bool,
}

fn facts(pair: Option<&Pair>) -> Option<CertFacts> {
    let pair = pair?;
    rcgen::KeyPair::from_pem(&pair.key).ok()?;
    CertFacts::from_pem(&pair.cert)?.into_iter().next()
}

fn due(facts: Option<&CertFacts>, now: i64) -> bool {
    facts.is_none_or(|f| f.not_after - now < RENEW_WITHIN_SECONDS || f.not_before > now + CLOCK_SKEW_SECONDS)
}

/// What must be made at `now`: anything missing, unreadable or due; and the client certificate
/// when its CA is new or is not the one that signed it.
#[must_use]
pub fn decide(stored: &Stored, now: i64) -> Needs {
    let client_ca = facts(stored.client_ca.as_ref());
    let needs_client_ca = due(client_ca.as_ref(), now);
    let client_cert = facts(stored.client_cert.as_ref());
    let signed_by_ca = matches!(
        (&client_cert, &client_ca),
        (Some(cert), Some(ca)) if cert.issuer_common_name == ca.common_name
    );
    Needs {
        server_ca: due(facts(stored.server_ca.as_ref()).as_ref(), now),
        client_ca: needs_client_ca,
        client_cert: needs_client_ca || !signed_by_ca || due(client_cert.as_ref(), now),
    }
}

/// A new CA named `<name>@<now>`.
///
/// # Errors
/// rcgen's.
pub fn new_ca(name: &str, now: i64) -> Result<Pair, rcgen::Error> {
    issue::new_ca(
        &format!("{name}@{now}"),
        now - CLOCK_SKEW_SECONDS,
        now + CA_LIFETIME_SECONDS,
    )
}

/// The proxy's client certificate, signed by `ca`.
///
/// # Errors
/// rcgen's, or a CA certificate that cannot be read.
pub fn client_cert(ca: &Pair, now: i64) -> Result<Pair, rcgen::Error> {
    sign(
        ca,
        cdi_api::upload::PROXY_CLIENT_NAME,
        &Usage::Client,
        now,
        CA_LIFETIME_SECONDS,
    )
}

fn sign(ca: &Pair, common_name: &str, usage: &Usage, now: i64, lifetime: i64) -> Result<Pair, rcgen::Error> {
    let ca_name = facts(Some(ca))
        .map(|f| f.common_name)
        .ok_or(rcgen::Error::CouldNotParseCertificate)?;
    issue::sign(
        ca,
        &ca_name,
        common_name,
        usage,
        now - CLOCK_SKEW_SECONDS,
        now + lifetime,
    )
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

/// Issues upload servers' certificates.
pub trait ServingCertificates: Send + Sync {
    /// A serving certificate for `dns_names` (the first is its common name).
    ///
    /// # Errors
    /// rcgen's.
    fn issue(&self, dns_names: &[String]) -> Result<Issued, rcgen::Error>;
}

/// The CAs read or made at start.
#[derive(Clone, Debug)]
pub struct UploadPki {
    /// The upload servers' CA.
    pub server_ca: Pair,
    /// The proxy's client CA's certificate.
    pub client_ca_cert: String,
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
            client_ca: self.client_ca_cert.clone(),
        })
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
}

#[cfg(test)]
mod tests;
