//! What the certificates need, decided from what is stored and the time: a pure function, so
//! that every case is a table row in the tests. A certificate is renewed once 80 % of its
//! lifetime has passed (upstream's default: `renewBefore` is a fifth of the duration); a new CA
//! renews every certificate it signs, and the bundle every component trusts keeps the previous
//! CA until it expires, so that peers still holding a certificate of the old CA are admitted
//! while the kubelet brings them the new one.

use control_loop::tls::CertFacts;

/// The CA's lifetime: upstream's default, 7 days.
pub const CA_LIFETIME_SECONDS: i64 = 7 * 24 * 3600;
/// Every other certificate's lifetime: upstream's default, 24 hours.
pub const LEAF_LIFETIME_SECONDS: i64 = 24 * 3600;

/// How a certificate is used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Usage {
    /// A server's, for these DNS names.
    Server(Vec<String>),
    /// A client's.
    Client,
}

/// One certificate the CA signs, and the Secret it is kept in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// The Secret (`tls.crt`, `tls.key`, and `ca.crt`, the CA bundle).
    pub secret: &'static str,
    /// Its subject common name: who holds it.
    pub common_name: String,
    /// How it is used.
    pub usage: Usage,
}

/// A signed certificate as stored: its facts and the CA bundle stored beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredLeaf {
    /// The certificate's facts.
    pub facts: CertFacts,
    /// The Secret's `ca.crt`.
    pub ca_bundle: String,
}

/// What to do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Make a new CA first.
    pub new_ca: bool,
    /// The Secrets whose certificate is signed again.
    pub reissue: Vec<&'static str>,
}

impl Plan {
    /// Whether there is nothing to do.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.new_ca && self.reissue.is_empty()
    }
}

/// When a certificate is due for renewal: 80 % into its lifetime.
#[must_use]
pub fn renew_at(facts: &CertFacts) -> i64 {
    facts.not_before + (facts.not_after - facts.not_before) * 4 / 5
}

fn leaf_is_due(now: i64, wanted: &Wanted, stored: Option<&StoredLeaf>, ca: &CertFacts, bundle: &str) -> bool {
    let Some(stored) = stored else { return true };
    let facts = &stored.facts;
    let names_differ = match &wanted.usage {
        Usage::Server(names) => &facts.dns_names != names,
        Usage::Client => !facts.dns_names.is_empty(),
    };
    facts.common_name != wanted.common_name
        || names_differ
        || facts.issuer_common_name != ca.common_name
        || now >= renew_at(facts)
        || stored.ca_bundle != bundle
}

/// The plan for `now`, given the stored CA (`None` when missing or unreadable), the bundle
/// stored with it, and each wanted certificate with what is stored for it.
#[must_use]
pub fn decide(now: i64, ca: Option<&CertFacts>, bundle: &str, leaves: &[(Wanted, Option<StoredLeaf>)]) -> Plan {
    let Some(ca) = ca.filter(|ca| now < renew_at(ca)) else {
        return Plan {
            new_ca: true,
            reissue: leaves.iter().map(|(wanted, _)| wanted.secret).collect(),
        };
    };
    Plan {
        new_ca: false,
        reissue: leaves
            .iter()
            .filter(|(wanted, stored)| leaf_is_due(now, wanted, stored.as_ref(), ca, bundle))
            .map(|(wanted, _)| wanted.secret)
            .collect(),
    }
}

/// The CAs a new bundle keeps besides the new one: the previous bundle's CAs that have not
/// expired, as (facts, PEM) pairs.
#[must_use]
pub fn still_valid(now: i64, previous: Vec<(CertFacts, String)>) -> Vec<String> {
    previous
        .into_iter()
        .filter(|(facts, _)| now < facts.not_after)
        .map(|(_, pem)| pem)
        .collect()
}

/// When to look again: the earliest renewal among the stored certificates, and at the latest
/// `cap` seconds from now (a Secret deleted by hand is then made again).
#[must_use]
pub fn next_look(now: i64, ca: Option<&CertFacts>, leaves: &[(Wanted, Option<StoredLeaf>)], cap: i64) -> i64 {
    let earliest = ca
        .into_iter()
        .chain(
            leaves
                .iter()
                .filter_map(|(_, stored)| stored.as_ref().map(|s| &s.facts)),
        )
        .map(renew_at)
        .min()
        .unwrap_or(now);
    earliest.clamp(now, now + cap)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
