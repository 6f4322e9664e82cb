use operator_kit::certificates::CertFacts;
use pretty_assertions::assert_eq;

use super::*;

const NOW: i64 = 1_796_000_000;

fn client_chain() -> Chain {
    chains("cdi").remove(1)
}

fn whole(lifetimes: &Lifetimes, now: i64) -> Stored {
    let ca = new_ca("cdi-uploadserver-client-signer", lifetimes.ca, now).expect("ca");
    let leaf = client_chain()
        .leaf
        .expect("the client chain signs the proxy's certificate");
    Stored {
        leaf: Some(sign_leaf(&ca, &leaf, lifetimes, now).expect("leaf")),
        bundle: Some(ca.cert.clone()),
        ca: Some(ca),
    }
}

#[test]
fn lifetimes_default_to_upstreams_and_read_the_cr() {
    let defaults = Lifetimes::default();
    assert_eq!(lifetimes(None), Ok(defaults));
    assert_eq!(
        (defaults.ca, defaults.server, defaults.client),
        (
            Lifetime {
                duration: 48 * HOUR,
                refresh: 24 * HOUR
            },
            Lifetime {
                duration: 24 * HOUR,
                refresh: 12 * HOUR
            },
            Lifetime {
                duration: 24 * HOUR,
                refresh: 12 * HOUR
            },
        )
    );
    let config = CDICertConfig {
        ca: Some(CertConfig {
            duration: Some("4h".to_owned()),
            renew_before: Some("1h30m".to_owned()),
        }),
        server: Some(CertConfig {
            duration: Some("2h".to_owned()),
            renew_before: None,
        }),
        client: Some(CertConfig {
            duration: Some("168h".to_owned()),
            renew_before: None,
        }),
    };
    let read = lifetimes(Some(&config)).expect("reads");
    assert_eq!(
        (read.ca, read.server, read.client),
        (
            Lifetime {
                duration: 4 * HOUR,
                refresh: 150 * 60
            },
            Lifetime {
                duration: 2 * HOUR,
                refresh: 96 * 60
            },
            Lifetime {
                duration: 168 * HOUR,
                refresh: 12 * HOUR
            },
        ),
        "renewBefore counts back from the end; a duration alone keeps the default time to renewal, at most 80 % of the way"
    );
    let backwards = CDICertConfig {
        ca: Some(CertConfig {
            duration: Some("1h".to_owned()),
            renew_before: Some("2h".to_owned()),
        }),
        ..CDICertConfig::default()
    };
    assert_eq!(
        lifetimes(Some(&backwards))
            .expect_err("renewed before it starts")
            .to_string(),
        "spec.certConfig.ca: renewBefore (7200s) must be shorter than duration (3600s), which must be positive"
    );
    let bad = CDICertConfig {
        client: Some(CertConfig {
            duration: Some("a day".to_owned()),
            renew_before: None,
        }),
        ..CDICertConfig::default()
    };
    assert!(
        lifetimes(Some(&bad))
            .expect_err("not a duration")
            .to_string()
            .starts_with("spec.certConfig.client.duration: ")
    );
}

#[test]
fn a_chain_is_made_when_missing_kept_while_fresh_and_renewed_when_due() {
    let lifetimes = Lifetimes::default();
    let all = Needs { ca: true, leaf: true };
    let chain = client_chain();
    assert_eq!(decide(&Stored::default(), &chain, &lifetimes, NOW), all);
    assert_eq!(
        decide(&Stored::default(), &chains("cdi")[0], &lifetimes, NOW),
        Needs { ca: true, leaf: false },
        "a CA that signs no fixed certificate"
    );
    let stored = whole(&lifetimes, NOW);
    assert_eq!(decide(&stored, &chain, &lifetimes, NOW), Needs::default());
    assert_eq!(
        decide(&stored, &chain, &lifetimes, NOW + 12 * HOUR - 1),
        Needs::default(),
        "before the certificate's renewal"
    );
    assert_eq!(
        decide(&stored, &chain, &lifetimes, NOW + 12 * HOUR),
        Needs { ca: false, leaf: true },
        "the certificate 12h before its end, the CA kept"
    );
    assert_eq!(
        decide(&stored, &chain, &lifetimes, NOW + 24 * HOUR),
        all,
        "the CA 24h before its end, and all it signed"
    );
}

#[test]
fn a_changed_lifetime_another_ca_or_a_broken_ca_remakes_the_chain() {
    let lifetimes = Lifetimes::default();
    let chain = client_chain();
    let stored = whole(&lifetimes, NOW);
    let longer_certificates = Lifetimes {
        client: Lifetime {
            duration: 30 * HOUR,
            refresh: 12 * HOUR,
        },
        ..lifetimes
    };
    assert_eq!(
        decide(&stored, &chain, &longer_certificates, NOW),
        Needs { ca: false, leaf: true }
    );
    let longer_cas = Lifetimes {
        ca: Lifetime {
            duration: 72 * HOUR,
            refresh: 24 * HOUR,
        },
        ..lifetimes
    };
    assert_eq!(
        decide(&stored, &chain, &longer_cas, NOW),
        Needs { ca: true, leaf: false },
        "the certificate stays while the CA that signed it lives on in the bundle"
    );
    let mut foreign = whole(&lifetimes, NOW);
    let other = new_ca("another", lifetimes.ca, NOW).expect("ca");
    let leaf = chain.leaf.clone().expect("leaf");
    foreign.leaf = Some(sign_leaf(&other, &leaf, &lifetimes, NOW).expect("leaf"));
    assert_eq!(
        decide(&foreign, &chain, &lifetimes, NOW),
        Needs { ca: false, leaf: true }
    );
    let mut broken = whole(&lifetimes, NOW);
    if let Some(ca) = broken.ca.as_mut() {
        ca.key = "not a key".to_owned();
    }
    assert_eq!(
        decide(&broken, &chain, &lifetimes, NOW),
        Needs { ca: true, leaf: false },
        "a CA whose key is lost is made again; what it signed stays while the bundle trusts it"
    );
    broken.bundle = None;
    assert_eq!(
        decide(&broken, &chain, &lifetimes, NOW),
        Needs { ca: true, leaf: true },
        "and goes with it when nothing trusts it any more"
    );
}

#[test]
fn a_bundle_keeps_the_cas_it_had_until_they_expire() {
    let lifetime = Lifetimes::default().ca;
    let first = new_ca("signer", lifetime, NOW).expect("ca");
    let second = new_ca("signer", lifetime, NOW + 24 * HOUR).expect("ca");
    let names = |pem: &str| -> Vec<String> {
        CertFacts::from_pem(pem)
            .expect("pem")
            .into_iter()
            .map(|f| f.common_name)
            .collect()
    };
    let one = bundle(&first.cert, None, NOW);
    assert_eq!(names(&one), [format!("signer@{NOW}")]);
    assert_eq!(bundle(&first.cert, Some(&one), NOW), one, "the same CA once");
    let two = bundle(&second.cert, Some(&one), NOW + 24 * HOUR);
    assert_eq!(
        names(&two),
        [format!("signer@{}", NOW + 24 * HOUR), format!("signer@{NOW}")],
        "the new CA first, the old one while it lives"
    );
    assert_eq!(
        names(&bundle(&second.cert, Some(&two), NOW + 48 * HOUR)),
        [format!("signer@{}", NOW + 24 * HOUR)],
        "the old CA once expired"
    );
}

#[test]
fn the_chains_are_upstreams_with_their_service_names() {
    let chains = chains("cdi");
    let names: Vec<_> = chains
        .iter()
        .map(|c| {
            (
                c.ca_secret.as_str(),
                c.bundle.as_str(),
                c.leaf.as_ref().map(|l| l.secret.as_str()),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("cdi-uploadserver-signer", "cdi-uploadserver-signer-bundle", None),
            (
                "cdi-uploadserver-client-signer",
                "cdi-uploadserver-client-signer-bundle",
                Some("cdi-uploadserver-client-cert")
            ),
            (
                "cdi-apiserver-signer",
                "cdi-apiserver-signer-bundle",
                Some("cdi-apiserver-server-cert")
            ),
            (
                "cdi-uploadproxy-signer",
                "cdi-uploadproxy-signer-bundle",
                Some("cdi-uploadproxy-server-cert")
            ),
        ]
    );
    let api = chains[2].leaf.clone().expect("api");
    assert_eq!(api.common_name, "cdi-api.cdi.svc");
    assert_eq!(
        api.usage,
        Usage::Server(vec![
            "cdi-api.cdi.svc".to_owned(),
            "cdi-api.cdi.svc.cluster.local".to_owned(),
            "cdi-api.cdi".to_owned(),
            "cdi-api".to_owned(),
        ])
    );
    let client = chains[1].leaf.clone().expect("client");
    assert_eq!(client.common_name, "client.upload-server.cdi.kubevirt.io");
}

#[test]
fn a_certificate_stays_while_the_replaced_ca_that_signed_it_is_in_the_bundle() {
    let lifetimes = Lifetimes::default();
    let chain = client_chain();
    let old = whole(&lifetimes, NOW);
    let new_ca = new_ca("cdi-uploadserver-client-signer", lifetimes.ca, NOW + 24 * HOUR + 1).expect("ca");
    let rotated = Stored {
        bundle: Some(bundle(&new_ca.cert, old.bundle.as_deref(), NOW + 24 * HOUR)),
        ca: Some(new_ca.clone()),
        leaf: old.leaf.clone(),
    };
    // The old certificate, made at NOW, is due at NOW + 12h anyway; one made just before the CA
    // was replaced is kept until its own renewal.
    let late_leaf = sign_leaf(
        old.ca.as_ref().expect("old ca"),
        &chain.leaf.clone().expect("leaf"),
        &lifetimes,
        NOW + 20 * HOUR,
    )
    .expect("leaf");
    let kept = Stored {
        leaf: Some(late_leaf),
        ..rotated.clone()
    };
    assert_eq!(
        decide(&kept, &chain, &lifetimes, NOW + 24 * HOUR + 1),
        Needs::default(),
        "signed by the CA the bundle still trusts"
    );
    assert_eq!(
        decide(&kept, &chain, &lifetimes, NOW + 32 * HOUR),
        Needs { ca: false, leaf: true },
        "made again at its own renewal, by the new CA"
    );
    let without_old = Stored {
        bundle: Some(new_ca.cert.clone()),
        ..kept
    };
    assert_eq!(
        decide(&without_old, &chain, &lifetimes, NOW + 24 * HOUR + 1),
        Needs { ca: false, leaf: true },
        "no longer trusted"
    );
}
