//! What the certificates need, decided from what is stored, the time and the lifetimes the
//! KubeVirt CR asks for ([`Rotation`]): a pure function, so that every case is a table row in
//! the tests. A certificate is renewed `renewBefore` before it expires (by default when a fifth of
//! its life is left). A new CA is made alone: the next look puts the bundle with both CAs beside
//! every certificate, which stay signed by the old CA until the bundle has had time to reach every
//! component ([`PROPAGATION_SECONDS`], the kubelet updates a mounted Secret within a minute or
//! two; at most half the CA's `renewBefore`, so the old CA still lasts); only then are they signed
//! again by the new one. So no component is ever shown a certificate its peers cannot verify yet.
//! The bundle keeps the previous CA until it expires. A certificate made for another lifetime
//! than the one asked for now is made again too: the CA at once, the others once the current CA
//! may be used.

use control_loop::tls::CertFacts;
pub use kubevirt_api::v1::{Renewal, Rotation};

/// How long a new CA's bundle is given to reach every component before certificates it signed
/// are used (at most half the CA's `renewBefore`).
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

/// When a certificate is due for renewal: `renewBefore` before it expires.
#[must_use]
pub fn renew_at(facts: &CertFacts, renewal: Renewal) -> i64 {
    facts.not_after - renewal.renew_before
}

/// Whether a certificate was made for the lifetime `renewal` asks for.
#[must_use]
pub fn made_for(facts: &CertFacts, renewal: Renewal) -> bool {
    facts.not_after - facts.not_before == renewal.duration + CLOCK_SKEW_SECONDS
}

/// When certificates signed by `ca` may be used: once its bundle has had time to spread, and
/// while the CA it replaces still has half its `renewBefore` to live.
#[must_use]
pub fn usable_from(ca: &CertFacts, renewal: Renewal) -> i64 {
    ca.not_before + CLOCK_SKEW_SECONDS + PROPAGATION_SECONDS.min(renewal.renew_before / 2)
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

fn leaf_step(
    now: i64,
    rotation: &Rotation,
    wanted: &Wanted,
    stored: Option<&StoredLeaf>,
    trust: Trust<'_>,
) -> LeafStep {
    let Some(stored) = stored else { return LeafStep::Reissue };
    let facts = &stored.facts;
    let names_differ = match &wanted.usage {
        Usage::Server(names) => &facts.dns_names != names,
        Usage::Client => !facts.dns_names.is_empty(),
    };
    // Not usable as it is: made again now, by the current CA.
    let broken = facts.common_name != wanted.common_name
        || names_differ
        || !trust.bundle_cas.contains(&facts.issuer_common_name);
    let ca_usable = usable_from(trust.ca, rotation.ca);
    let by_current = facts.issuer_common_name == trust.ca.common_name;
    // Due: made again now, unless the current CA's bundle is still spreading and the
    // certificate, another CA's, lasts until it has, with the clock skew to spare (then it
    // waits for the switch below).
    let lasts = facts.not_after > ca_usable + CLOCK_SKEW_SECONDS;
    let due = now >= renew_at(facts, rotation.server) && (by_current || now >= ca_usable || !lasts);
    // Usable, but not what is asked for now: made again once the current CA may be used.
    let outdated = !by_current || !made_for(facts, rotation.server);
    let reissue = broken || due || (outdated && now >= ca_usable);
    if reissue {
        LeafStep::Reissue
    } else if stored.ca_bundle != trust.bundle {
        LeafStep::Rebundle
    } else {
        LeafStep::Keep
    }
}

/// The plan for `now` and the lifetimes in `rotation`, given the stored CA and bundle (`None`
/// when the CA is missing or unusable) and each wanted certificate with what is stored for it.
#[must_use]
pub fn decide(
    now: i64,
    rotation: &Rotation,
    trust: Option<Trust<'_>>,
    leaves: &[(Wanted, Option<StoredLeaf>)],
) -> Plan {
    let current = |t: &Trust<'_>| now < renew_at(t.ca, rotation.ca) && made_for(t.ca, rotation.ca);
    let Some(trust) = trust.filter(current) else {
        return Plan {
            new_ca: true,
            ..Plan::default()
        };
    };
    let mut plan = Plan::default();
    for (wanted, stored) in leaves {
        match leaf_step(now, rotation, wanted, stored.as_ref(), trust) {
            LeafStep::Keep => {}
            LeafStep::Reissue => plan.reissue.push(wanted.secret),
            LeafStep::Rebundle => plan.rebundle.push(wanted.secret),
        }
    }
    plan
}

/// The most CAs a bundle holds, as upstream's: lifetimes that make CAs faster than they expire
/// cannot grow the bundle past what a Secret holds.
pub const MAX_BUNDLE_CAS: usize = 50;

/// The CAs a new bundle keeps besides the new one: the newest of the previous bundle's CAs
/// (newest first) that have not expired, as (facts, PEM) pairs, at most
/// [`MAX_BUNDLE_CAS`] with the new one.
#[must_use]
pub fn still_valid(now: i64, previous: Vec<(CertFacts, String)>) -> Vec<String> {
    previous
        .into_iter()
        .filter(|(facts, _)| now < facts.not_after)
        .map(|(_, pem)| pem)
        .take(MAX_BUNDLE_CAS - 1)
        .collect()
}

/// When to look again: the earliest renewal among the stored certificates, or the moment
/// certificates of a new CA may be used while some are still the old one's or made for another
/// lifetime; at the latest `cap` seconds from now (a Secret deleted by hand is then made again).
#[must_use]
pub fn next_look(
    now: i64,
    rotation: &Rotation,
    ca: Option<&CertFacts>,
    leaves: &[(Wanted, Option<StoredLeaf>)],
    cap: i64,
) -> i64 {
    let stored = || {
        leaves
            .iter()
            .filter_map(|(_, stored)| stored.as_ref().map(|s| &s.facts))
    };
    let switch = ca
        .filter(|ca| stored().any(|leaf| leaf.issuer_common_name != ca.common_name || !made_for(leaf, rotation.server)))
        .map(|ca| usable_from(ca, rotation.ca));
    // Another CA's certificate due before the current CA may be used waits for that moment.
    let renewal = |leaf: &CertFacts| match ca {
        Some(ca) if leaf.issuer_common_name != ca.common_name => {
            renew_at(leaf, rotation.server).max(usable_from(ca, rotation.ca).min(leaf.not_after))
        }
        _ => renew_at(leaf, rotation.server),
    };
    let earliest = ca
        .map(|ca| renew_at(ca, rotation.ca))
        .into_iter()
        .chain(stored().map(renewal))
        .chain(switch)
        .min()
        .unwrap_or(now);
    earliest.clamp(now, now + cap)
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
