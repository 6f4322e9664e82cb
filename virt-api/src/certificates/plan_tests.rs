//! The renewal decision, case by case.

use control_loop::tls::CertFacts;

use kubevirt_api::v1::{DEFAULT_CA_SECONDS, DEFAULT_SERVER_SECONDS};

use super::{
    CLOCK_SKEW_SECONDS, MAX_BUNDLE_CAS, PROPAGATION_SECONDS, Plan, Renewal, Rotation, StoredLeaf, Trust, Usage, Wanted,
    decide, made_for, next_look, renew_at, still_valid, usable_from,
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
    facts(CA, CA, 0, DEFAULT_CA_SECONDS, &[])
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
        facts: facts(&wanted.common_name, CA, made, DEFAULT_SERVER_SECONDS, &dns),
        ca_bundle: BUNDLE.to_owned(),
    }
}

fn made_at(leaf: &mut StoredLeaf, at: i64) {
    leaf.facts.not_before = at - CLOCK_SKEW_SECONDS;
    leaf.facts.not_after = at + DEFAULT_SERVER_SECONDS;
}

fn plan_for(now: i64, server_leaf: Option<StoredLeaf>) -> Plan {
    let (ca, cas) = (ca(), bundle_cas());
    let leaves = [
        (server(), server_leaf),
        (client(), Some(current(&client(), now - 3600))),
    ];
    decide(now, &Rotation::default(), Some(trust(&ca, &cas)), &leaves)
}

#[test]
fn renewal_is_due_when_a_fifth_of_the_lifetime_is_left() {
    let defaults = Rotation::default();
    assert_eq!(renew_at(&ca(), defaults.ca), DEFAULT_CA_SECONDS * 4 / 5);
    let leaf = facts("x", "y", 100, DAY, &[]);
    assert_eq!(renew_at(&leaf, defaults.server), 100 + DAY - DAY / 5);
    assert!(made_for(&ca(), defaults.ca));
    assert!(!made_for(&ca(), defaults.server));
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
    let (keep, rebundle) = (Plan::default(), vec!["server"]);
    let resign = Plan {
        reissue: vec!["server"],
        ..Plan::default()
    };
    let cases: [(&str, Option<StoredLeaf>, Plan); 12] = [
        ("current", Some(ok.clone()), keep.clone()),
        ("missing", None, resign.clone()),
        (
            "another holder",
            with(&|l| l.facts.common_name = "virt-handler".to_owned()),
            resign.clone(),
        ),
        (
            "other names",
            with(&|l| l.facts.dns_names = vec!["virt-api.other".to_owned()]),
            resign.clone(),
        ),
        (
            "a CA not in the bundle",
            with(&|l| l.facts.issuer_common_name = "kubevirt.io@9".to_owned()),
            resign.clone(),
        ),
        ("due", with(&|l| made_at(l, now - DAY * 4 / 5)), resign.clone()),
        (
            "due, the previous CA's, while the new CA's bundle spreads",
            with(&|l| {
                l.facts.issuer_common_name = OLD_CA.to_owned();
                made_at(l, now - DAY * 4 / 5);
            }),
            keep.clone(),
        ),
        (
            "the previous CA's, expiring before the new CA may be used",
            with(&|l| {
                l.facts.issuer_common_name = OLD_CA.to_owned();
                made_at(l, now - DAY + 60);
            }),
            resign.clone(),
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
    let defaults = Rotation::default();
    let at = |now| {
        decide(
            now,
            &defaults,
            Some(trust(&ca, &cas)),
            &[(server(), Some(leaf.clone()))],
        )
    };
    assert!(at(switch - 1).is_empty());
    assert_eq!(at(switch).reissue, ["server"]);
    let leaves = [(server(), Some(leaf.clone()))];
    assert_eq!(next_look(0, &defaults, Some(&ca), &leaves, DAY), switch);
    // Due while the bundle spreads: it waits for the switch, and the next look is then.
    let mut due = leaf.clone();
    due.facts.not_before = -DAY * 4 / 5 - CLOCK_SKEW_SECONDS;
    due.facts.not_after = DAY / 5;
    let leaves = [(server(), Some(due.clone()))];
    assert!(decide(60, &defaults, Some(trust(&ca, &cas)), &leaves).is_empty());
    assert_eq!(next_look(60, &defaults, Some(&ca), &leaves, DAY), switch);
    assert_eq!(
        decide(switch, &defaults, Some(trust(&ca, &cas)), &leaves).reissue,
        ["server"]
    );
}

#[test]
fn a_client_certificate_with_names_is_signed_again() {
    let (ca, cas) = (ca(), bundle_cas());
    let mut leaf = current(&client(), DAY - 3600);
    leaf.facts.dns_names = vec!["virt-api".to_owned()];
    let plan = decide(
        DAY,
        &Rotation::default(),
        Some(trust(&ca, &cas)),
        &[(client(), Some(leaf))],
    );
    assert_eq!(plan.reissue, ["client"]);
}

#[test]
fn a_missing_or_due_ca_is_made_again_first_and_alone() {
    let new_ca = Plan {
        new_ca: true,
        ..Plan::default()
    };
    let defaults = Rotation::default();
    let leaves = [(server(), Some(current(&server(), DAY)))];
    assert_eq!(decide(DAY, &defaults, None, &leaves), new_ca);
    let (ca, cas) = (ca(), bundle_cas());
    let due = renew_at(&ca, defaults.ca);
    let leaves = [(server(), Some(current(&server(), due - 3600)))];
    assert_eq!(decide(due, &defaults, Some(trust(&ca, &cas)), &leaves), new_ca);
    assert!(decide(due - 1, &defaults, Some(trust(&ca, &cas)), &leaves).is_empty());
}

#[test]
fn the_new_bundle_keeps_only_cas_that_have_not_expired() {
    let old = facts(CA, CA, 0, 7 * DAY, &[]);
    let older = facts(OLD_CA, OLD_CA, -7 * DAY, 7 * DAY, &[]);
    let kept = still_valid(DAY, vec![(old.clone(), "old".to_owned()), (older, "older".to_owned())]);
    assert_eq!(kept, ["old"]);
    // At most 50 with the new one: the newest are kept.
    let many: Vec<(CertFacts, String)> = (0..60).map(|i| (old.clone(), format!("ca{i}"))).collect();
    let kept = still_valid(DAY, many);
    assert_eq!(kept.len(), MAX_BUNDLE_CAS - 1);
    assert_eq!(kept[0], "ca0");
}

#[test]
fn the_next_look_is_the_earliest_renewal_within_the_cap() {
    let now = DAY;
    let leaves = [(server(), Some(current(&server(), now - 3600))), (client(), None)];
    let leaf_due = now - 3600 + DAY - DAY / 5;
    let defaults = Rotation::default();
    assert_eq!(next_look(now, &defaults, Some(&ca()), &leaves, 7 * DAY), leaf_due);
    assert_eq!(next_look(now, &defaults, Some(&ca()), &leaves, 60), now + 60);
    assert_eq!(next_look(now, &defaults, None, &[], 60), now);
}

/// Short lifetimes, as a KubeVirt CR may ask: a CA of an hour renewed 20 minutes before it
/// expires, certificates of 6 minutes renewed 4 minutes before.
fn short() -> Rotation {
    Rotation {
        ca: Renewal {
            duration: 3600,
            renew_before: 20 * 60,
        },
        server: Renewal {
            duration: 6 * 60,
            renew_before: 4 * 60,
        },
    }
}

#[test]
fn custom_lifetimes_move_every_renewal() {
    let rotation = short();
    let ca = facts(CA, CA, 0, 3600, &[]);
    let cas = bundle_cas();
    assert_eq!(renew_at(&ca, rotation.ca), 40 * 60);
    let mut leaf = current(&server(), 0);
    leaf.facts.not_after = 6 * 60;
    assert!(made_for(&leaf.facts, rotation.server));
    let at = |now| {
        decide(
            now,
            &rotation,
            Some(trust(&ca, &cas)),
            &[(server(), Some(leaf.clone()))],
        )
    };
    assert!(at(2 * 60 - 1).is_empty());
    assert_eq!(at(2 * 60).reissue, ["server"]);
    assert_eq!(
        next_look(0, &rotation, Some(&ca), &[(server(), Some(leaf.clone()))], DAY),
        2 * 60
    );
    assert_eq!(
        decide(40 * 60, &rotation, Some(trust(&ca, &cas)), &[]),
        Plan {
            new_ca: true,
            ..Plan::default()
        }
    );
}

#[test]
fn a_lifetime_change_remakes_the_ca_at_once_and_the_certificates_once_it_may_be_used() {
    let (ca, cas) = (ca(), bundle_cas());
    let rotation = short();
    // The CA was made for 7 days, not the hour now asked for: made again at once.
    assert!(decide(60, &rotation, Some(trust(&ca, &cas)), &[]).new_ca);
    // A CA of the right lifetime and a certificate of 24 hours: made again once the CA's
    // bundle had time to spread, which is at most half the CA's renewBefore.
    let new_ca = facts(CA, CA, 0, 3600, &[]);
    let leaf = current(&server(), 0);
    let switch = usable_from(&new_ca, rotation.ca);
    assert_eq!(switch, new_ca.not_before + CLOCK_SKEW_SECONDS + PROPAGATION_SECONDS);
    let leaves = [(server(), Some(leaf))];
    let at = |now| decide(now, &rotation, Some(trust(&new_ca, &cas)), &leaves);
    assert!(at(switch - 1).is_empty());
    assert_eq!(at(switch).reissue, ["server"]);
    assert_eq!(next_look(0, &rotation, Some(&new_ca), &leaves, DAY), switch);
}

#[test]
fn a_short_ca_renewal_shortens_the_wait_for_its_bundle() {
    let ca = facts(CA, CA, 0, 3600, &[]);
    let renewal = Renewal {
        duration: 3600,
        renew_before: 6 * 60,
    };
    assert_eq!(usable_from(&ca, renewal), ca.not_before + CLOCK_SKEW_SECONDS + 3 * 60);
}
