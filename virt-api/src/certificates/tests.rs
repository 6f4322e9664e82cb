//! The certificates virt-api issues, as their holders use them: over real TLS handshakes in
//! memory, with the same admission rules the servers apply.

use std::sync::Arc;

use control_loop::tls::test_pki::handshake;
use control_loop::tls::{
    CertFacts, CertSource, ClientCa, ClientPolicy, Identities, MIGRATION_CLIENT, VIRT_API_CLIENT, client_tls_pem,
    server_tls_for,
};

use super::issue::{Pair, new_ca, sign};
use kubevirt_api::v1::{DEFAULT_CA_SECONDS, DEFAULT_SERVER_SECONDS};

use super::plan::CLOCK_SKEW_SECONDS;
use super::*;

const NOW: i64 = 1_790_000_000;

fn issued_at(now: i64, namespace: &str) -> (Pair, BTreeMap<&'static str, Pair>) {
    let ca = new_ca(now, DEFAULT_CA_SECONDS).expect("CA");
    let name = format!("kubevirt.io@{now}");
    let leaves = wanted(namespace)
        .iter()
        .map(|w| {
            (
                w.secret,
                sign(&ca, &name, w, now, DEFAULT_SERVER_SECONDS).expect("sign"),
            )
        })
        .collect();
    (ca, leaves)
}

/// Issued a minute ago, to be used now.
fn issued(namespace: &str) -> (Pair, BTreeMap<&'static str, Pair>) {
    issued_at(time::OffsetDateTime::now_utc().unix_timestamp() - 60, namespace)
}

fn facts(pair: &Pair) -> CertFacts {
    CertFacts::from_pem(&pair.cert).expect("parses").remove(0)
}

#[test]
fn each_holder_gets_upstreams_name_and_lifetime() {
    let (ca, leaves) = issued_at(NOW, "kv");
    let ca_facts = facts(&ca);
    assert_eq!(ca_facts.common_name, format!("kubevirt.io@{NOW}"));
    assert_eq!(
        (ca_facts.not_before, ca_facts.not_after),
        (NOW - CLOCK_SKEW_SECONDS, NOW + DEFAULT_CA_SECONDS)
    );
    assert_eq!(DEFAULT_CA_SECONDS, 7 * 24 * 3600);
    let names: Vec<(&str, String)> = leaves.iter().map(|(s, p)| (*s, facts(p).common_name)).collect();
    assert_eq!(
        names,
        [
            (
                "kubevirt-controller-certs",
                "virt-controller.kv.pod.cluster.local".to_owned()
            ),
            ("kubevirt-virt-api-certs", "virt-api.kv.pod.cluster.local".to_owned()),
            (
                "kubevirt-virt-handler-certs",
                "kubevirt.io:system:client:virt-handler".to_owned()
            ),
            (
                "kubevirt-virt-handler-migration-client-certs",
                "kubevirt.io:system:client:migration".to_owned()
            ),
            (
                "kubevirt-virt-handler-server-certs",
                "kubevirt.io:system:node:virt-handler".to_owned()
            ),
        ]
    );
    for pair in leaves.values() {
        let leaf = facts(pair);
        assert_eq!(leaf.issuer_common_name, ca_facts.common_name);
        assert_eq!(
            (leaf.not_before, leaf.not_after),
            (NOW - CLOCK_SKEW_SECONDS, NOW + DEFAULT_SERVER_SECONDS)
        );
    }
    assert_eq!(facts(&leaves[API_SECRET]).dns_names[2], "virt-api.kv.svc");
    assert!(facts(&leaves[HANDLER_CLIENT_SECRET]).dns_names.is_empty());
}

fn server(pair: &Pair, ca: &Pair, admitted: &str) -> Arc<rustls::ServerConfig> {
    let source = CertSource::Pem {
        origin: "test".to_owned(),
        cert: pair.cert.clone(),
        key: pair.key.clone(),
    };
    let policy = ClientPolicy {
        ca: ClientCa::Pem {
            origin: "test".to_owned(),
            pem: ca.cert.clone(),
        },
        identities: Identities::Only(vec![admitted.to_owned()]),
        required: true,
    };
    server_tls_for(&source, Some(&policy)).expect("server").config
}

fn client(pair: &Pair, ca: &Pair) -> Arc<rustls::ClientConfig> {
    client_tls_pem("test", &ca.cert, &pair.cert, &pair.key).expect("client")
}

#[tokio::test]
async fn virt_api_reaches_the_console_server_and_only_handlers_reach_the_migration_proxy() {
    let (ca, leaves) = issued("kubevirt");
    let handler = &leaves[HANDLER_SERVER_SECRET];
    let console = server(handler, &ca, VIRT_API_CLIENT);
    let migration = server(handler, &ca, MIGRATION_CLIENT);
    let virt_api = client(&leaves[HANDLER_CLIENT_SECRET], &ca);
    let peer = client(&leaves[MIGRATION_CLIENT_SECRET], &ca);
    handshake(console.clone(), virt_api.clone(), "virt-handler")
        .await
        .expect("virt-api → console");
    handshake(migration.clone(), peer.clone(), "virt-handler")
        .await
        .expect("handler → migration");
    handshake(console, peer, "virt-handler")
        .await
        .expect_err("a handler at the console server");
    handshake(migration, virt_api, "virt-handler")
        .await
        .expect_err("virt-api at a migration proxy");
}

#[tokio::test]
async fn a_server_certificate_answers_only_for_its_own_names() {
    let (ca, leaves) = issued("kubevirt");
    // virt-api's serving certificate cannot pose as a handler to virt-api's handler client.
    let api = server(&leaves[API_SECRET], &ca, VIRT_API_CLIENT);
    let virt_api = client(&leaves[HANDLER_CLIENT_SECRET], &ca);
    handshake(api.clone(), virt_api.clone(), "virt-handler")
        .await
        .expect_err("not virt-handler");
    handshake(api, virt_api, "virt-api.kubevirt.svc")
        .await
        .expect("its own name");
}

#[test]
fn pem_bundles_split_into_their_certificates() {
    let (ca, leaves) = issued_at(NOW, "kubevirt");
    let bundle = format!("{}{}", ca.cert, leaves[API_SECRET].cert);
    let parts = split_pem(&bundle);
    assert_eq!(parts, [ca.cert.clone(), leaves[API_SECRET].cert.clone()]);
    assert!(split_pem("").is_empty());
}
