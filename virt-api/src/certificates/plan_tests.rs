//! The renewal decision, case by case.

use control_loop::tls::CertFacts;

use super::{Plan, StoredLeaf, Usage, Wanted, decide, next_look, renew_at, still_valid};

const DAY: i64 = 24 * 3600;
const BUNDLE: &str = "bundle";

fn facts(common_name: &str, issuer: &str, not_before: i64, lifetime: i64, dns: &[&str]) -> CertFacts {
    CertFacts {
        common_name: common_name.to_owned(),
        issuer_common_name: issuer.to_owned(),
        not_before,
        not_after: not_before + lifetime,
        dns_names: dns.iter().map(|n| (*n).to_owned()).collect(),
    }
}

fn ca() -> CertFacts {
    facts("kubevirt.io@0", "kubevirt.io@0", 0, 7 * DAY, &[])
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

fn current(wanted: &Wanted, signed_at: i64) -> StoredLeaf {
    let dns: Vec<&str> = match &wanted.usage {
        Usage::Server(names) => names.iter().map(String::as_str).collect(),
        Usage::Client => Vec::new(),
    };
    StoredLeaf {
        facts: facts(&wanted.common_name, "kubevirt.io@0", signed_at, DAY, &dns),
        ca_bundle: BUNDLE.to_owned(),
    }
}

fn signed_at(leaf: &mut StoredLeaf, at: i64) {
    leaf.facts.not_before = at;
    leaf.facts.not_after = at + DAY;
}

fn plan_for(now: i64, ca: Option<&CertFacts>, server_leaf: Option<StoredLeaf>) -> Plan {
    let leaves = [
        (server(), server_leaf),
        (client(), Some(current(&client(), now - 3600))),
    ];
    decide(now, ca, BUNDLE, &leaves)
}

#[test]
fn renewal_is_due_at_four_fifths_of_the_lifetime() {
    assert_eq!(renew_at(&ca()), 7 * DAY * 4 / 5);
    assert_eq!(renew_at(&facts("x", "y", 100, DAY, &[])), 100 + DAY * 4 / 5);
}

#[test]
fn each_reason_to_sign_a_certificate_again() {
    let now = DAY;
    let ok = current(&server(), now - 3600);
    let with = |change: &dyn Fn(&mut StoredLeaf)| {
        let mut leaf = ok.clone();
        change(&mut leaf);
        Some(leaf)
    };
    let cases: [(&str, Option<StoredLeaf>, bool); 8] = [
        ("current", Some(ok.clone()), false),
        ("missing", None, true),
        (
            "another holder",
            with(&|l| l.facts.common_name = "virt-handler".to_owned()),
            true,
        ),
        (
            "other names",
            with(&|l| l.facts.dns_names = vec!["virt-api.other".to_owned()]),
            true,
        ),
        (
            "another CA",
            with(&|l| l.facts.issuer_common_name = "kubevirt.io@9".to_owned()),
            true,
        ),
        ("due", with(&|l| signed_at(l, now - DAY * 4 / 5)), true),
        ("just before due", with(&|l| signed_at(l, now - DAY * 4 / 5 + 1)), false),
        (
            "an old bundle beside it",
            with(&|l| l.ca_bundle = "old".to_owned()),
            true,
        ),
    ];
    for (case, leaf, reissued) in cases {
        let plan = plan_for(now, Some(&ca()), leaf);
        assert!(!plan.new_ca, "{case}");
        assert_eq!(plan.reissue == ["server"], reissued, "{case}: {plan:?}");
    }
}

#[test]
fn a_client_certificate_with_names_is_signed_again() {
    let mut leaf = current(&client(), DAY - 3600);
    leaf.facts.dns_names = vec!["virt-api".to_owned()];
    let plan = decide(DAY, Some(&ca()), BUNDLE, &[(client(), Some(leaf))]);
    assert_eq!(plan.reissue, ["client"]);
}

#[test]
fn a_missing_or_due_ca_is_made_again_with_every_certificate() {
    let everything = Plan {
        new_ca: true,
        reissue: vec!["server", "client"],
    };
    assert_eq!(plan_for(DAY, None, Some(current(&server(), DAY))), everything);
    let due = renew_at(&ca());
    assert_eq!(plan_for(due, Some(&ca()), Some(current(&server(), due))), everything);
    assert!(plan_for(due - 1, Some(&ca()), Some(current(&server(), due - 1))).is_empty());
}

#[test]
fn the_new_bundle_keeps_only_cas_that_have_not_expired() {
    let old = facts("kubevirt.io@0", "kubevirt.io@0", 0, 7 * DAY, &[]);
    let older = facts("kubevirt.io@-7", "kubevirt.io@-7", -7 * DAY, 7 * DAY, &[]);
    let kept = still_valid(DAY, vec![(old, "old".to_owned()), (older, "older".to_owned())]);
    assert_eq!(kept, ["old"]);
}

#[test]
fn the_next_look_is_the_earliest_renewal_within_the_cap() {
    let now = DAY;
    let leaves = [(server(), Some(current(&server(), now - 3600))), (client(), None)];
    assert_eq!(next_look(now, Some(&ca()), &leaves, 7 * DAY), now - 3600 + DAY * 4 / 5);
    assert_eq!(next_look(now, Some(&ca()), &leaves, 60), now + 60);
    assert_eq!(next_look(now, None, &[], 60), now);
}
