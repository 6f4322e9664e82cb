//! The identity checks and reloading, over real TLS handshakes in memory.

use std::sync::Arc;

use super::test_pki::{TestCa, TestPair, handshake, write_atomically};
use super::{CertSource, ClientCa, ClientPolicy, Identities, client_tls_pem, server_tls_for};

const ADMITTED: &str = "kubevirt.io:system:client:virt-handler";

fn policy(ca: ClientCa) -> ClientPolicy {
    ClientPolicy {
        ca,
        identities: Identities::Only(vec![ADMITTED.to_owned()]),
        required: true,
    }
}

fn pem_ca(ca: &TestCa) -> ClientCa {
    ClientCa::Pem {
        origin: "test".to_owned(),
        pem: ca.cert_pem(),
    }
}

fn server(ca: &TestCa, policy: &ClientPolicy) -> Arc<rustls::ServerConfig> {
    let pair = ca.server("kubevirt.io:system:node:virt-handler", &["virt-handler"]);
    let source = CertSource::Pem {
        origin: "test".to_owned(),
        cert: pair.cert,
        key: pair.key,
    };
    server_tls_for(&source, Some(policy)).expect("server").config
}

/// A client that trusts `ca` and presents no certificate.
fn anonymous(ca: &TestCa) -> Arc<rustls::ClientConfig> {
    let roots = super::roots_from_pem("test", &ca.cert_pem()).expect("roots");
    Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

fn client(trusted: &TestCa, pair: &TestPair) -> Arc<rustls::ClientConfig> {
    client_tls_pem("test", &trusted.cert_pem(), &pair.cert, &pair.key).expect("client")
}

#[tokio::test]
async fn only_the_admitted_holder_of_a_current_certificate_from_the_ca_gets_in() {
    let ca = TestCa::new("kubevirt.io@1");
    let server = server(&ca, &policy(pem_ca(&ca)));
    let admitted = client(&ca, &ca.client(ADMITTED));
    handshake(server.clone(), admitted, "virt-handler")
        .await
        .expect("admitted");

    let wrong = client(&ca, &ca.client("kubevirt.io:system:client:migration"));
    let refused = handshake(server.clone(), wrong, "virt-handler")
        .await
        .expect_err("wrong identity");
    assert!(refused.contains("kubevirt.io:system:client:migration"), "{refused}");

    let expired = client(&ca, &ca.expired_client(ADMITTED));
    let refused = handshake(server.clone(), expired, "virt-handler")
        .await
        .expect_err("expired");
    assert!(refused.to_lowercase().contains("expired"), "{refused}");

    let other = TestCa::new("kubevirt.io@2");
    let stranger = client(&ca, &other.client(ADMITTED));
    handshake(server.clone(), stranger, "virt-handler")
        .await
        .expect_err("another CA");

    // A server certificate is not a client's, whatever its name.
    let server_cert = client(&ca, &ca.server(ADMITTED, &["x"]));
    handshake(server, server_cert, "virt-handler")
        .await
        .expect_err("a server certificate");
}

#[tokio::test]
async fn any_holder_is_admitted_when_the_policy_names_none_and_none_is_needed_when_optional() {
    let ca = TestCa::new("front-proxy-ca");
    let open = ClientPolicy {
        ca: pem_ca(&ca),
        identities: Identities::AnySignedByTheCa,
        required: false,
    };
    let server = server(&ca, &open);
    handshake(server.clone(), client(&ca, &ca.client("anyone")), "virt-handler")
        .await
        .expect("any name");
    handshake(server, anonymous(&ca), "virt-handler")
        .await
        .expect("no certificate");
}

#[tokio::test]
async fn a_server_reads_its_changed_certificate_and_ca_files_and_open_connections_stay() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key, ca_file) = (
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("ca.crt"),
    );
    let first = TestCa::new("kubevirt.io@1");
    let served = first.server("kubevirt.io:system:node:virt-handler", &["virt-handler"]);
    write_atomically(&cert, &served.cert);
    write_atomically(&key, &served.key);
    write_atomically(&ca_file, &first.cert_pem());
    let source = CertSource::Files {
        cert: cert.clone(),
        key: key.clone(),
    };
    let config = server_tls_for(&source, Some(&policy(ClientCa::File(ca_file.clone()))))
        .expect("server")
        .config;

    // A connection opened with the first certificates.
    let (a, b) = tokio::io::duplex(16 * 1024);
    let name = rustls_pki_types::ServerName::try_from("virt-handler").expect("name");
    let (accepted, connected) = tokio::join!(
        tokio_rustls::TlsAcceptor::from(config.clone()).accept(a),
        tokio_rustls::TlsConnector::from(client(&first, &first.client(ADMITTED))).connect(name, b)
    );
    let (mut open_server, mut open_client) = (accepted.expect("accept"), connected.expect("connect"));

    // Renewed under a new CA: the bundle holds both, the certificate is the new CA's.
    let second = TestCa::new("kubevirt.io@2");
    let renewed = second.server("kubevirt.io:system:node:virt-handler", &["virt-handler"]);
    write_atomically(&ca_file, &format!("{}{}", second.cert_pem(), first.cert_pem()));
    write_atomically(&cert, &renewed.cert);
    write_atomically(&key, &renewed.key);

    // New handshakes: the old CA's server certificate is gone, the new CA's clients get in,
    // and so do the old CA's until they are renewed.
    handshake(config.clone(), client(&first, &first.client(ADMITTED)), "virt-handler")
        .await
        .expect_err("the client trusting only the old CA sees the new certificate");
    handshake(
        config.clone(),
        client(&second, &second.client(ADMITTED)),
        "virt-handler",
    )
    .await
    .expect("a client of the new CA");
    handshake(config, client(&second, &first.client(ADMITTED)), "virt-handler")
        .await
        .expect("an old CA's client while the bundle has it");

    // The connection opened before still carries data both ways.
    open_client.write_all(b"ping").await.expect("write");
    open_client.flush().await.expect("flush");
    let mut got = [0_u8; 4];
    open_server.read_exact(&mut got).await.expect("read");
    assert_eq!(&got, b"ping");
}

#[tokio::test]
async fn a_half_written_certificate_keeps_the_last_good_one() {
    let dir = tempfile::tempdir().expect("dir");
    let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    let ca = TestCa::new("kubevirt.io@1");
    let served = ca.server("kubevirt.io:system:node:virt-handler", &["virt-handler"]);
    write_atomically(&cert, &served.cert);
    write_atomically(&key, &served.key);
    let source = CertSource::Files {
        cert: cert.clone(),
        key,
    };
    let config = server_tls_for(&source, None).expect("server").config;
    write_atomically(&cert, "-----BEGIN CERTIFICATE-----\n");
    handshake(config, anonymous(&ca), "virt-handler")
        .await
        .expect("still served with the last good certificate");
}

#[test]
fn the_facts_of_a_certificate() {
    let ca = TestCa::new("kubevirt.io@7");
    let pair = ca.server(
        "virt-api.kubevirt.pod.cluster.local",
        &["virt-api", "virt-api.kubevirt"],
    );
    let facts = super::CertFacts::from_pem(&pair.cert).expect("parses");
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].common_name, "virt-api.kubevirt.pod.cluster.local");
    assert_eq!(facts[0].issuer_common_name, "kubevirt.io@7");
    assert_eq!(facts[0].dns_names, ["virt-api", "virt-api.kubevirt"]);
    assert_eq!(facts[0].not_after - facts[0].not_before, 366 * 24 * 3600);
    assert_eq!(super::CertFacts::from_pem("not a certificate"), None);
}
