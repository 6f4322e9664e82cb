//! What the certificates need, decided from what is stored and the time: a pure function, so
//! that every case is a table row in the tests. A certificate is renewed when a fifth of its
//! lifetime is left (upstream's default `renewBefore`). A new CA is made alone: the next look
//! puts the bundle with both CAs beside every certificate, which stay signed by the old CA until
//! the bundle has had [`PROPAGATION_SECONDS`] to reach every component (the kubelet updates a
//! mounted Secret within a minute or two); only then are they signed again by the new one. So no
//! component is ever shown a certificate its peers cannot verify yet. The bundle keeps the
//! previous CA until it expires.

use control_loop::tls::CertFacts;

/// The CA's lifetime: upstream's default, 7 days.
pub const CA_LIFETIME_SECONDS: i64 = 7 * 24 * 3600;
/// Every other certificate's lifetime: upstream's default, 24 hours.
pub const LEAF_LIFETIME_SECONDS: i64 = 24 * 3600;
/// How long a new CA's bundle is given to reach every component before certificates it signed
/// are used.
pub const PROPAGATION_SECONDS: i64 = 10 * 60;
/// How far back a certificate's validity starts, for peers whose clock is a little behind.
pub const CLOCK_SKEW_SECONDS: i64 = 5 * 60;

pub use control_loop::tls::issue::Usage;

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
    /// Make a new CA (and nothing else this time).
    pub new_ca: bool,
    /// The Secrets whose certificate is signed again.
    pub reissue: Vec<&'static str>,
    /// The Secrets that keep their certificate and get the current bundle.
    pub rebundle: Vec<&'static str>,
}

impl Plan {
    /// Whether there is nothing to do.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        !self.new_ca && self.reissue.is_empty() && self.rebundle.is_empty()
    }
}

/// When a certificate made for `lifetime` seconds is due for renewal: a fifth of it before it
/// expires.
#[must_use]
pub fn renew_at(facts: &CertFacts, lifetime: i64) -> i64 {
    facts.not_after - lifetime / 5
}

/// When certificates signed by `ca` may be used: once its bundle has had time to spread.
#[must_use]
pub fn usable_from(ca: &CertFacts) -> i64 {
    ca.not_before + CLOCK_SKEW_SECONDS + PROPAGATION_SECONDS
}

/// The stored CA and bundle as the decision sees them.
#[derive(Clone, Copy, Debug)]
pub struct Trust<'a> {
    /// The current CA.
    pub ca: &'a CertFacts,
    /// The common names of the CAs in the bundle (the current one and the previous one).
    pub bundle_cas: &'a [String],
    /// The bundle's text, as stored beside the CA.
    pub bundle: &'a str,
}

enum LeafStep {
    Keep,
    Reissue,
    Rebundle,
}

fn leaf_step(now: i64, wanted: &Wanted, stored: Option<&StoredLeaf>, trust: Trust<'_>) -> LeafStep {
    let Some(stored) = stored else { return LeafStep::Reissue };
    let facts = &stored.facts;
    let names_differ = match &wanted.usage {
        Usage::Server(names) => &facts.dns_names != names,
        Usage::Client => !facts.dns_names.is_empty(),
    };
    let signed_by_current = facts.issuer_common_name == trust.ca.common_name;
    let reissue = facts.common_name != wanted.common_name
        || names_differ
        || now >= renew_at(facts, LEAF_LIFETIME_SECONDS)
        || !trust.bundle_cas.contains(&facts.issuer_common_name)
        || (!signed_by_current && now >= usable_from(trust.ca));
    if reissue {
        LeafStep::Reissue
    } else if stored.ca_bundle != trust.bundle {
        LeafStep::Rebundle
    } else {
        LeafStep::Keep
    }
}

/// The plan for `now`, given the stored CA and bundle (`None` when the CA is missing or
/// unusable) and each wanted certificate with what is stored for it.
#[must_use]
pub fn decide(now: i64, trust: Option<Trust<'_>>, leaves: &[(Wanted, Option<StoredLeaf>)]) -> Plan {
    let Some(trust) = trust.filter(|t| now < renew_at(t.ca, CA_LIFETIME_SECONDS)) else {
        return Plan {
            new_ca: true,
            ..Plan::default()
        };
    };
    let mut plan = Plan::default();
    for (wanted, stored) in leaves {
        match leaf_step(now, wanted, stored.as_ref(), trust) {
            LeafStep::Keep => {}
            LeafStep::Reissue => plan.reissue.push(wanted.secret),
            LeafStep::Rebundle => plan.rebundle.push(wanted.secret),
        }
    }
    plan
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

/// When to look again: the earliest renewal among the stored certificates, or the moment
/// certificates of a new CA may be used while some are still the old one's; at the latest `cap`
/// seconds from now (a Secret deleted by hand is then made again).
#[must_use]
pub fn next_look(now: i64, ca: Option<&CertFacts>, leaves: &[(Wanted, Option<StoredLeaf>)], cap: i64) -> i64 {
    let stored = || {
        leaves
            .iter()
            .filter_map(|(_, stored)| stored.as_ref().map(|s| &s.facts))
    };
    let switch = ca
        .filter(|ca| stored().any(|leaf| leaf.issuer_common_name != ca.common_name))
        .map(usable_from);
    let earliest = ca
        .map(|ca| renew_at(ca, CA_LIFETIME_SECONDS))
        .into_iter()
        .chain(stored().map(|leaf| renew_at(leaf, LEAF_LIFETIME_SECONDS)))
        .chain(switch)
        .min()
        .unwrap_or(now);
    earliest.clamp(now, now + cap)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
