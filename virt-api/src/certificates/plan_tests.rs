//! The renewal decision, case by case.

use control_loop::tls::CertFacts;

use super::{
    CA_LIFETIME_SECONDS, CLOCK_SKEW_SECONDS, LEAF_LIFETIME_SECONDS, PROPAGATION_SECONDS, Plan, StoredLeaf, Trust,
    Usage, Wanted, decide, next_look, renew_at, still_valid,
};

const DAY: i64 = 24 * 3600;
const BUNDLE: &str = "bundle";
const CA: &str = "kubevirt.io@0";
const OLD_CA: &str = "kubevirt.io@-1";

fn facts(common_name: &str, issuer: &str, made: i64, lifetime: i64, dns: &[&str]) -> CertFacts {
    CertFacts {
        common_name: common_name.to_owned(),
        issuer_common_name: issuer.to_owned(),
        not_before: made - CLOCK_SKEW_SECONDS,
        not_after: made + lifetime,
        dns_names: dns.iter().map(|n| (*n).to_owned()).collect(),
    }
}

fn ca() -> CertFacts {
    facts(CA, CA, 0, CA_LIFETIME_SECONDS, &[])
}

fn bundle_cas() -> Vec<String> {
    vec![CA.to_owned(), OLD_CA.to_owned()]
}

fn trust<'a>(ca: &'a CertFacts, cas: &'a [String]) -> Trust<'a> {
    Trust {
        ca,
        bundle_cas: cas,
        bundle: BUNDLE,
    }
}

fn server() -> Wanted {
    Wanted {
        secret: "server",
        common_name: "virt-api.kubevirt.pod.cluster.local".to_owned(),
        usage: Usage::Server(vec!["virt-api".to_owned()]),
    }
}

fn client() -> Wanted {
    Wanted {
        secret: "client",
        common_name: "kubevirt.io:system:client:virt-handler".to_owned(),
        usage: Usage::Client,
    }
}

fn current(wanted: &Wanted, made: i64) -> StoredLeaf {
    let dns: Vec<&str> = match &wanted.usage {
        Usage::Server(names) => names.iter().map(String::as_str).collect(),
        Usage::Client => Vec::new(),
    };
    StoredLeaf {
        facts: facts(&wanted.common_name, CA, made, LEAF_LIFETIME_SECONDS, &dns),
        ca_bundle: BUNDLE.to_owned(),
    }
}

fn made_at(leaf: &mut StoredLeaf, at: i64) {
    leaf.facts.not_before = at - CLOCK_SKEW_SECONDS;
    leaf.facts.not_after = at + LEAF_LIFETIME_SECONDS;
}

fn plan_for(now: i64, server_leaf: Option<StoredLeaf>) -> Plan {
    let (ca, cas) = (ca(), bundle_cas());
    let leaves = [
        (server(), server_leaf),
        (client(), Some(current(&client(), now - 3600))),
    ];
    decide(now, Some(trust(&ca, &cas)), &leaves)
}

#[test]
fn renewal_is_due_when_a_fifth_of_the_lifetime_is_left() {
    assert_eq!(renew_at(&ca(), CA_LIFETIME_SECONDS), CA_LIFETIME_SECONDS * 4 / 5);
    let leaf = facts("x", "y", 100, DAY, &[]);
    assert_eq!(renew_at(&leaf, LEAF_LIFETIME_SECONDS), 100 + DAY - DAY / 5);
}

#[test]
fn each_reason_to_sign_a_certificate_again_or_give_it_the_bundle() {
    // A minute after the CA was made: its bundle is still spreading.
    let now = 60;
    let ok = current(&server(), now - 3600);
    let with = |change: &dyn Fn(&mut StoredLeaf)| {
        let mut leaf = ok.clone();
        change(&mut leaf);
        Some(leaf)
    };
    let (keep, reissue, rebundle) = (Plan::default(), vec!["server"], vec!["server"]);
    let cases: [(&str, Option<StoredLeaf>, Plan); 10] = [
        ("current", Some(ok.clone()), keep.clone()),
        (
            "missing",
            None,
            Plan {
                reissue: reissue.clone(),
                ..Plan::default()
            },
        ),
        (
            "another holder",
            with(&|l| l.facts.common_name = "virt-handler".to_owned()),
            Plan {
                reissue: reissue.clone(),
                ..Plan::default()
            },
        ),
        (
            "other names",
            with(&|l| l.facts.dns_names = vec!["virt-api.other".to_owned()]),
            Plan {
                reissue: reissue.clone(),
                ..Plan::default()
            },
        ),
        (
            "a CA not in the bundle",
            with(&|l| l.facts.issuer_common_name = "kubevirt.io@9".to_owned()),
            Plan {
                reissue: reissue.clone(),
                ..Plan::default()
            },
        ),
        (
            "due",
            with(&|l| made_at(l, now - DAY * 4 / 5)),
            Plan {
                reissue: reissue.clone(),
                ..Plan::default()
            },
        ),
        (
            "just before due",
            with(&|l| made_at(l, now - DAY * 4 / 5 + 1)),
            keep.clone(),
        ),
        (
            "an old bundle beside it",
            with(&|l| l.ca_bundle = "old".to_owned()),
            Plan {
                rebundle: rebundle.clone(),
                ..Plan::default()
            },
        ),
        (
            "the previous CA's, while the new bundle spreads",
            with(&|l| {
                l.facts.issuer_common_name = OLD_CA.to_owned();
                l.ca_bundle = "old".to_owned();
            }),
            Plan {
                rebundle,
                ..Plan::default()
            },
        ),
        (
            "the previous CA's, with the bundle in place",
            with(&|l| l.facts.issuer_common_name = OLD_CA.to_owned()),
            keep,
        ),
    ];
    for (case, leaf, expected) in cases {
        assert_eq!(plan_for(now, leaf), expected, "{case}");
    }
}

#[test]
fn the_previous_cas_certificates_are_signed_again_once_the_bundle_had_time_to_spread() {
    let (ca, cas) = (ca(), bundle_cas());
    let mut leaf = current(&server(), 0);
    leaf.facts.issuer_common_name = OLD_CA.to_owned();
    let switch = ca.not_before + CLOCK_SKEW_SECONDS + PROPAGATION_SECONDS;
    let at = |now| decide(now, Some(trust(&ca, &cas)), &[(server(), Some(leaf.clone()))]);
    assert!(at(switch - 1).is_empty());
    assert_eq!(at(switch).reissue, ["server"]);
    assert_eq!(next_look(0, Some(&ca), &[(server(), Some(leaf.clone()))], DAY), switch);
}

#[test]
fn a_client_certificate_with_names_is_signed_again() {
    let (ca, cas) = (ca(), bundle_cas());
    let mut leaf = current(&client(), DAY - 3600);
    leaf.facts.dns_names = vec!["virt-api".to_owned()];
    let plan = decide(DAY, Some(trust(&ca, &cas)), &[(client(), Some(leaf))]);
    assert_eq!(plan.reissue, ["client"]);
}

#[test]
fn a_missing_or_due_ca_is_made_again_first_and_alone() {
    let new_ca = Plan {
        new_ca: true,
        ..Plan::default()
    };
    let leaves = [(server(), Some(current(&server(), DAY)))];
    assert_eq!(decide(DAY, None, &leaves), new_ca);
    let (ca, cas) = (ca(), bundle_cas());
    let due = renew_at(&ca, CA_LIFETIME_SECONDS);
    let leaves = [(server(), Some(current(&server(), due - 3600)))];
    assert_eq!(decide(due, Some(trust(&ca, &cas)), &leaves), new_ca);
    assert!(decide(due - 1, Some(trust(&ca, &cas)), &leaves).is_empty());
}

#[test]
fn the_new_bundle_keeps_only_cas_that_have_not_expired() {
    let old = facts(CA, CA, 0, 7 * DAY, &[]);
    let older = facts(OLD_CA, OLD_CA, -7 * DAY, 7 * DAY, &[]);
    let kept = still_valid(DAY, vec![(old, "old".to_owned()), (older, "older".to_owned())]);
    assert_eq!(kept, ["old"]);
}

#[test]
fn the_next_look_is_the_earliest_renewal_within_the_cap() {
    let now = DAY;
    let leaves = [(server(), Some(current(&server(), now - 3600))), (client(), None)];
    let leaf_due = now - 3600 + DAY - DAY / 5;
    assert_eq!(next_look(now, Some(&ca()), &leaves, 7 * DAY), leaf_due);
    assert_eq!(next_look(now, Some(&ca()), &leaves, 60), now + 60);
    assert_eq!(next_look(now, None, &[], 60), now);
}
