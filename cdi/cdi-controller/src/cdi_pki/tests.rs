use pretty_assertions::assert_eq;

use super::*;

const NOW: i64 = 1_796_000_000;
const DAY: i64 = 24 * 60 * 60;

fn client_leaf() -> Leaf {
    chains("cdi")[1]
        .leaf
        .clone()
        .expect("the client chain signs the proxy's certificate")
}

fn whole(now: i64) -> Stored {
    let ca = new_ca("cdi-uploadserver-client-signer", now).expect("ca");
    Stored {
        leaf: Some(sign_leaf(&ca, &client_leaf(), now).expect("leaf")),
        ca: Some(ca),
    }
}

#[test]
fn nothing_stored_makes_everything_and_a_fresh_chain_is_kept() {
    let all = Needs { ca: true, leaf: true };
    assert_eq!(decide(&Stored::default(), true, NOW), all);
    assert_eq!(
        decide(&Stored::default(), false, NOW),
        Needs { ca: true, leaf: false },
        "a CA that signs no fixed certificate"
    );
    assert_eq!(decide(&whole(NOW), true, NOW), Needs::default());
    assert_eq!(
        decide(&whole(NOW), true, NOW + 300 * DAY),
        Needs::default(),
        "within a year"
    );
    assert_eq!(decide(&whole(NOW), true, NOW + 400 * DAY), all, "due");
}

#[test]
fn a_certificate_of_another_ca_or_a_broken_ca_is_made_again() {
    let mut stored = whole(NOW);
    let other = new_ca("another", NOW).expect("ca");
    stored.leaf = Some(sign_leaf(&other, &client_leaf(), NOW).expect("leaf"));
    assert_eq!(decide(&stored, true, NOW), Needs { ca: false, leaf: true });
    let mut broken = whole(NOW);
    if let Some(ca) = broken.ca.as_mut() {
        ca.key = "not a key".to_owned();
    }
    assert_eq!(decide(&broken, true, NOW), Needs { ca: true, leaf: true });
}

#[test]
fn the_chains_are_upstreams_with_their_service_names() {
    let chains = chains("cdi");
    let names: Vec<_> = chains
        .iter()
        .map(|c| (c.ca_secret, c.leaf.as_ref().map(|l| l.secret)))
        .collect();
    assert_eq!(
        names,
        [
            ("cdi-uploadserver-signer", None),
            ("cdi-uploadserver-client-signer", Some("cdi-uploadserver-client-cert")),
            ("cdi-apiserver-signer", Some("cdi-apiserver-server-cert")),
            ("cdi-uploadproxy-signer", Some("cdi-uploadproxy-server-cert")),
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
    assert_eq!(client_leaf().common_name, "client.upload-server.cdi.kubevirt.io");
}

#[test]
fn a_serving_certificate_names_the_service_and_is_signed_by_the_server_ca() {
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    let pki = UploadPki {
        server_ca: new_ca("cdi-uploadserver-signer", now).expect("ca"),
        client_ca: new_ca("cdi-uploadserver-client-signer", now).expect("client ca"),
        token_public_key: Vec::new(),
    };
    let names = [
        "cdi-upload-disk.vms.svc".to_owned(),
        "cdi-upload-disk.vms.svc.cluster.local".to_owned(),
    ];
    let issued = pki.issue(&names).expect("issued");
    let facts = CertFacts::from_pem(&issued.cert).expect("pem").remove(0);
    let ca = CertFacts::from_pem(&pki.server_ca.cert).expect("pem").remove(0);
    assert_eq!(facts.common_name, "cdi-upload-disk.vms.svc");
    assert_eq!(facts.issuer_common_name, ca.common_name);
    assert!(ca.common_name.starts_with("cdi-uploadserver-signer@"));
    assert!(facts.not_after - facts.not_before <= SERVER_LIFETIME_SECONDS + CLOCK_SKEW_SECONDS);
    assert_eq!(issued.client_ca, pki.client_ca.cert);
    let client = pki.issue_client("src/disk-dst/copy").expect("client");
    let facts = CertFacts::from_pem(&client.cert).expect("pem").remove(0);
    let client_ca = CertFacts::from_pem(&pki.client_ca.cert).expect("pem").remove(0);
    assert_eq!(facts.common_name, "src/disk-dst/copy");
    assert_eq!(facts.issuer_common_name, client_ca.common_name);
    assert_eq!(client.server_ca, pki.server_ca.cert);
}
