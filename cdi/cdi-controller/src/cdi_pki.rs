//! CDI's certificates and token key, kept in its namespace as upstream's operator keeps them,
//! made by cdi-controller at start until cdi-operator does it:
//!
//! | CA (Secret, bundle ConfigMap) | signs | trusted by |
//! | --- | --- | --- |
//! | `cdi-uploadserver-signer` | each upload server's serving certificate ([`ServingCertificates`]) | cdi-uploadproxy |
//! | `cdi-uploadserver-client-signer` | `cdi-uploadserver-client-cert`, the proxy's client certificate | upload servers |
//! | `cdi-apiserver-signer` | `cdi-apiserver-server-cert` | the API server (the APIService's `caBundle`) |
//! | `cdi-uploadproxy-signer` | `cdi-uploadproxy-server-cert` | clients of the proxy |
//!
//! and `cdi-api-signing-key`, the Ed25519 key cdi-apiserver signs upload tokens with. What is
//! missing, unreadable or due within a year is made again ([`decide`]); a certificate is also
//! made again when its CA is new or did not sign it. Renewal happens when cdi-controller starts.

use control_loop::tls::CertFacts;
use control_loop::tls::issue::{self, Pair, Usage};

pub mod kube;

/// How long a CA or a component's certificate lives.
pub const LIFETIME_SECONDS: i64 = 2 * 365 * 24 * 60 * 60;
/// A CA or certificate with less than this left is made again at start.
pub const RENEW_WITHIN_SECONDS: i64 = 365 * 24 * 60 * 60;
/// How long an upload server's certificate lives (upstream's server default); its server ends
/// well before ([`crate::import_plan`]'s deadline).
pub const SERVER_LIFETIME_SECONDS: i64 = 24 * 60 * 60;
/// Certificates are valid from a little before they are made, for clocks a little behind.
pub const CLOCK_SKEW_SECONDS: i64 = 5 * 60;

/// A CA and what it signs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The CA's Secret.
    pub ca_secret: &'static str,
    /// The ConfigMap with its bundle.
    pub bundle: &'static str,
    /// The certificate it signs and its Secret, if it signs a fixed one.
    pub leaf: Option<Leaf>,
}

/// A certificate of a component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// Its Secret.
    pub secret: &'static str,
    /// Its common name.
    pub common_name: String,
    /// Its use.
    pub usage: Usage,
}

/// CDI's chains, for its namespace.
#[must_use]
pub fn chains(namespace: &str) -> Vec<Chain> {
    use cdi_api::components as c;
    use cdi_api::upload as u;
    let service_names = |service: &str| {
        vec![
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.cluster.local"),
            format!("{service}.{namespace}"),
            service.to_owned(),
        ]
    };
    vec![
        Chain {
            ca_secret: u::SERVER_SIGNER_SECRET,
            bundle: u::SERVER_SIGNER_BUNDLE,
            leaf: None,
        },
        Chain {
            ca_secret: u::CLIENT_SIGNER_SECRET,
            bundle: u::CLIENT_SIGNER_BUNDLE,
            leaf: Some(Leaf {
                secret: u::CLIENT_CERT_SECRET,
                common_name: u::PROXY_CLIENT_NAME.to_owned(),
                usage: Usage::Client,
            }),
        },
        Chain {
            ca_secret: c::APISERVER_SIGNER_SECRET,
            bundle: c::APISERVER_SIGNER_BUNDLE,
            leaf: Some(Leaf {
                secret: c::APISERVER_CERT_SECRET,
                common_name: format!("{}.{namespace}.svc", c::APISERVER_SERVICE),
                usage: Usage::Server(service_names(c::APISERVER_SERVICE)),
            }),
        },
        Chain {
            ca_secret: c::UPLOADPROXY_SIGNER_SECRET,
            bundle: c::UPLOADPROXY_SIGNER_BUNDLE,
            leaf: Some(Leaf {
                secret: c::UPLOADPROXY_CERT_SECRET,
                common_name: format!("{}.{namespace}.svc", c::UPLOADPROXY_SERVICE),
                usage: Usage::Server(service_names(c::UPLOADPROXY_SERVICE)),
            }),
        },
    ]
}

/// What one chain has stored.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// The CA.
    pub ca: Option<Pair>,
    /// The certificate it signs.
    pub leaf: Option<Pair>,
}

/// What one chain needs made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// A new CA.
    pub ca: bool,
    /// A new certificate.
    pub leaf: bool,
}

fn facts(pair: Option<&Pair>) -> Option<CertFacts> {
    let pair = pair?;
    rcgen::KeyPair::from_pem(&pair.key).ok()?;
    CertFacts::from_pem(&pair.cert)?.into_iter().next()
}

fn due(facts: Option<&CertFacts>, now: i64) -> bool {
    facts.is_none_or(|f| f.not_after - now < RENEW_WITHIN_SECONDS || f.not_before > now + CLOCK_SKEW_SECONDS)
}

/// What a chain with `stored` needs at `now` (`has_leaf`: it signs a fixed certificate).
#[must_use]
pub fn decide(stored: &Stored, has_leaf: bool, now: i64) -> Needs {
    let ca = facts(stored.ca.as_ref());
    let new_ca = due(ca.as_ref(), now);
    let leaf = facts(stored.leaf.as_ref());
    let signed_by_ca = matches!(
        (&leaf, &ca),
        (Some(leaf), Some(ca)) if leaf.issuer_common_name == ca.common_name
    );
    Needs {
        ca: new_ca,
        leaf: has_leaf && (new_ca || !signed_by_ca || due(leaf.as_ref(), now)),
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
        now + LIFETIME_SECONDS,
    )
}

/// `leaf`, signed by `ca`.
///
/// # Errors
/// rcgen's, or a CA certificate that cannot be read.
pub fn sign_leaf(ca: &Pair, leaf: &Leaf, now: i64) -> Result<Pair, rcgen::Error> {
    sign(ca, &leaf.common_name, &leaf.usage, now, LIFETIME_SECONDS)
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

/// A clone source pod's client certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientIssued {
    /// Its certificate.
    pub cert: String,
    /// Its key.
    pub key: String,
    /// The CA that signs the upload servers' certificates, which the client trusts.
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

/// The upload servers' CA and the clients' CA, read or made at start, with the public key that
/// checks cdi-apiserver's tokens.
#[derive(Clone, Debug)]
pub struct UploadPki {
    /// The upload servers' CA.
    pub server_ca: Pair,
    /// The CA of the upload servers' clients (cdi-uploadproxy, clone source pods).
    pub client_ca: Pair,
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
            client_ca: self.client_ca.cert.clone(),
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
            server_ca: self.server_ca.cert.clone(),
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
