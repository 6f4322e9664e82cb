//! CDI's certificates and token key, kept in its namespace as upstream's operator keeps them:
//!
//! | CA (Secret, bundle ConfigMap) | signs | trusted by |
//! | --- | --- | --- |
//! | `cdi-uploadserver-signer` | each upload server's serving certificate (cdi-controller) | cdi-uploadproxy, clone source pods |
//! | `cdi-uploadserver-client-signer` | `cdi-uploadserver-client-cert`, the proxy's client certificate | upload servers |
//! | `cdi-apiserver-signer` | `cdi-apiserver-server-cert` | the API server (the APIService's and webhook's `caBundle`) |
//! | `cdi-uploadproxy-signer` | `cdi-uploadproxy-server-cert` | clients of the proxy |
//!
//! and `cdi-api-signing-key`, the Ed25519 key cdi-apiserver signs upload and clone tokens with.
//! Lifetimes are the CDI CR's `certConfig`, else upstream's: a CA lives 48 hours and is made
//! again 24 hours after it was made, a server or client certificate lives 24 hours and is made
//! again after 12. As upstream's, `renewBefore` counts back from the end (the renewal comes
//! `duration - renewBefore` after the start), a `duration` alone keeps the default time to
//! renewal, and no certificate waits past 80 % of its life. What is missing, unreadable, due, or
//! made for another lifetime is made again ([`decide`]); a certificate also when neither its CA
//! nor a CA of the bundle that outlives it signed it. A bundle keeps the CAs it had until they
//! expire ([`bundle`]), so that what an old CA signed stays trusted while it is replaced, and a
//! certificate is signed by the new CA only at its own renewal.

use cdi_api::cdi::{CDICertConfig, CertConfig};
use control_loop::tls::CertFacts;
use control_loop::tls::issue::{self, Pair, Usage};

use crate::duration::{self, DurationError};

pub mod store;

/// Certificates are valid from a little before they are made, for clocks a little behind.
pub const CLOCK_SKEW_SECONDS: i64 = 5 * 60;
const HOUR: i64 = 60 * 60;

/// How long a certificate lives and how long after its start it is made again, in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime {
    /// `duration`.
    pub duration: i64,
    /// Time to renewal: `duration - renewBefore`, else the default's, at most 80 % of `duration`.
    pub refresh: i64,
}

/// The lifetimes of CAs, servers' and clients' certificates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetimes {
    /// CAs'.
    pub ca: Lifetime,
    /// Serving certificates'.
    pub server: Lifetime,
    /// Client certificates'.
    pub client: Lifetime,
}

impl Default for Lifetimes {
    /// Upstream's defaults.
    fn default() -> Self {
        Self {
            ca: Lifetime {
                duration: 48 * HOUR,
                refresh: 24 * HOUR,
            },
            server: Lifetime {
                duration: 24 * HOUR,
                refresh: 12 * HOUR,
            },
            client: Lifetime {
                duration: 24 * HOUR,
                refresh: 12 * HOUR,
            },
        }
    }
}

/// Why `certConfig` gives no lifetimes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CertConfigError {
    /// A duration that does not read.
    #[error(transparent)]
    Duration(#[from] DurationError),
    /// A renewal at or before the start, or a certificate that lives no time.
    #[error(
        "{field}: renewBefore ({renew_before}s) must be shorter than duration ({duration}s), which must be positive"
    )]
    Order {
        /// `spec.certConfig.<kind>`.
        field: String,
        /// Its duration, in seconds.
        duration: i64,
        /// Its renewBefore, in seconds.
        renew_before: i64,
    },
}

fn lifetime(field: &str, config: Option<&CertConfig>, default: Lifetime) -> Result<Lifetime, CertConfigError> {
    let read = |name: &str, value: Option<&String>, default: i64| {
        value.map_or(Ok(default), |v| duration::seconds(&format!("{field}.{name}"), v))
    };
    let duration = read("duration", config.and_then(|c| c.duration.as_ref()), default.duration)?;
    let renew_before = config
        .and_then(|c| c.renew_before.as_ref())
        .map(|v| duration::seconds(&format!("{field}.renewBefore"), v))
        .transpose()?;
    let refresh = renew_before.map_or(default.refresh, |before| duration - before);
    if duration <= 0 || refresh <= 0 {
        return Err(CertConfigError::Order {
            field: field.to_owned(),
            duration,
            renew_before: renew_before.unwrap_or(duration - default.refresh),
        });
    }
    // No later than 80 % of the way, as upstream's rotation.
    Ok(Lifetime {
        duration,
        refresh: refresh.min(duration * 4 / 5),
    })
}

/// The lifetimes the CR's `certConfig` asks for, upstream's defaults for what it leaves out.
///
/// # Errors
/// [`CertConfigError`], naming the field.
pub fn lifetimes(config: Option<&CDICertConfig>) -> Result<Lifetimes, CertConfigError> {
    let defaults = Lifetimes::default();
    Ok(Lifetimes {
        ca: lifetime("spec.certConfig.ca", config.and_then(|c| c.ca.as_ref()), defaults.ca)?,
        server: lifetime(
            "spec.certConfig.server",
            config.and_then(|c| c.server.as_ref()),
            defaults.server,
        )?,
        client: lifetime(
            "spec.certConfig.client",
            config.and_then(|c| c.client.as_ref()),
            defaults.client,
        )?,
    })
}

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

impl Leaf {
    fn lifetime(&self, lifetimes: &Lifetimes) -> Lifetime {
        match self.usage {
            Usage::Server(_) => lifetimes.server,
            Usage::Client => lifetimes.client,
        }
    }
}

/// CDI's chains, for its namespace, in the table's order.
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
    /// The CA bundle (PEM).
    pub bundle: Option<String>,
}

/// What one chain needs made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Needs {
    /// A new CA.
    pub ca: bool,
    /// A new certificate.
    pub leaf: bool,
}

/// The facts of a pair whose key reads.
#[must_use]
pub fn facts(pair: Option<&Pair>) -> Option<CertFacts> {
    pair?.facts()
}

/// When a certificate with `facts` is to be made again.
#[must_use]
pub fn renewal_at(facts: &CertFacts, lifetime: Lifetime) -> i64 {
    facts.not_before + CLOCK_SKEW_SECONDS + lifetime.refresh
}

fn due(facts: Option<&CertFacts>, lifetime: Lifetime, now: i64) -> bool {
    facts.is_none_or(|f| {
        now >= renewal_at(f, lifetime)
            || f.not_before > now + CLOCK_SKEW_SECONDS
            || f.not_after - f.not_before != lifetime.duration + CLOCK_SKEW_SECONDS
    })
}

/// What `chain`, with `stored`, needs at `now`. A certificate stays while a CA that outlives it
/// signed it: the chain's own, or one its bundle still trusts (the CA it replaced).
#[must_use]
pub fn decide(stored: &Stored, chain: &Chain, lifetimes: &Lifetimes, now: i64) -> Needs {
    let ca = facts(stored.ca.as_ref());
    let new_ca = due(ca.as_ref(), lifetimes.ca, now);
    let leaf_facts = facts(stored.leaf.as_ref());
    let mut issuers: Vec<CertFacts> = stored
        .bundle
        .as_deref()
        .and_then(CertFacts::from_pem)
        .unwrap_or_default();
    issuers.extend(ca);
    let trusted = leaf_facts.as_ref().is_some_and(|leaf| {
        issuers
            .iter()
            .any(|issuer| issuer.common_name == leaf.issuer_common_name && issuer.not_after >= leaf.not_after)
    });
    Needs {
        ca: new_ca,
        leaf: chain
            .leaf
            .as_ref()
            .is_some_and(|leaf| !trusted || due(leaf_facts.as_ref(), leaf.lifetime(lifetimes), now)),
    }
}

/// A new CA named `<name>@<now>`.
///
/// # Errors
/// rcgen's.
pub fn new_ca(name: &str, lifetime: Lifetime, now: i64) -> Result<Pair, rcgen::Error> {
    issue::new_ca(
        &format!("{name}@{now}"),
        now - CLOCK_SKEW_SECONDS,
        now + lifetime.duration,
    )
}

/// `leaf`, signed by `ca`.
///
/// # Errors
/// rcgen's, or a CA certificate that cannot be read.
pub fn sign_leaf(ca: &Pair, leaf: &Leaf, lifetimes: &Lifetimes, now: i64) -> Result<Pair, rcgen::Error> {
    issue::sign_by(
        ca,
        &leaf.common_name,
        &leaf.usage,
        now - CLOCK_SKEW_SECONDS,
        now + leaf.lifetime(lifetimes).duration,
    )
}

const END: &str = "-----END CERTIFICATE-----";

/// The PEM blocks of `pem`, each with its end line.
fn blocks(pem: &str) -> Vec<String> {
    pem.split_inclusive(END)
        .filter(|b| b.contains("-----BEGIN CERTIFICATE-----"))
        .map(|b| format!("{}\n", b.trim()))
        .collect()
}

/// The bundle for a chain whose CA is `ca` (PEM): `ca` first, then each certificate of the bundle
/// it had (`old`) that is another one and not expired at `now`.
#[must_use]
pub fn bundle(ca: &str, old: Option<&str>, now: i64) -> String {
    let ca_block = blocks(ca).into_iter().next().unwrap_or_else(|| ca.to_owned());
    let mut out = vec![ca_block];
    for block in old.map(blocks).unwrap_or_default() {
        let live = CertFacts::from_pem(&block)
            .and_then(|f| f.into_iter().next())
            .is_some_and(|f| f.not_after > now);
        if live && !out.contains(&block) {
            out.push(block);
        }
    }
    out.concat()
}

#[cfg(test)]
mod tests;
