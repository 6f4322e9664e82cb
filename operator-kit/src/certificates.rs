//! Certificates an operator keeps for its components: for each [`Chain`], a CA in a Secret, the
//! certificate it signs in another, and a ConfigMap with the CA bundle that clients trust.
//! What is missing, unreadable, due, or made for another lifetime is made again ([`decide`]); a
//! certificate also when neither its CA nor a CA of the bundle that outlives it signed it. A
//! bundle keeps the CAs it had until they expire ([`bundle`]), so that what an old CA signed stays
//! trusted while it is replaced, and a certificate is signed by the new CA only at its own
//! renewal. [`store`] reads and writes them through [`crate::objects::Objects`].
//!
//! The lifetimes are upstream operators' (CDI's, HCO's): a CA lives 48 hours and is made again 24
//! hours after it was made, a server or client certificate lives 24 hours and is made again after
//! 12. No certificate waits past 80 % of its life.

mod facts;
pub mod issue;
pub mod store;

pub use facts::CertFacts;
use issue::{Pair, Usage};

/// Certificates are valid from a little before they are made, for clocks a little behind.
pub const CLOCK_SKEW_SECONDS: i64 = 5 * 60;
/// Seconds in an hour.
pub const HOUR: i64 = 60 * 60;

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

/// A CA and what it signs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// The CA's Secret.
    pub ca_secret: String,
    /// The ConfigMap with its bundle.
    pub bundle: String,
    /// The certificate it signs and its Secret, if it signs a fixed one.
    pub leaf: Option<Leaf>,
}

/// A certificate of a component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Leaf {
    /// Its Secret.
    pub secret: String,
    /// Its common name.
    pub common_name: String,
    /// Its use.
    pub usage: Usage,
}

impl Leaf {
    /// Its lifetime among `lifetimes`.
    #[must_use]
    pub fn lifetime(&self, lifetimes: &Lifetimes) -> Lifetime {
        match self.usage {
            Usage::Server(_) => lifetimes.server,
            Usage::Client => lifetimes.client,
        }
    }
}

/// The names a Service answers to inside the cluster, for its serving certificate.
#[must_use]
pub fn service_names(service: &str, namespace: &str) -> Vec<String> {
    vec![
        format!("{service}.{namespace}.svc"),
        format!("{service}.{namespace}.svc.cluster.local"),
        format!("{service}.{namespace}"),
        service.to_owned(),
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
