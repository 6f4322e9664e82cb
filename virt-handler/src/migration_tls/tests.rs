use std::path::Path;
use std::sync::Arc;

use control_loop::tls::test_pki::{TestCa, TestPair, handshake, write_atomically as write};
use control_loop::tls::{HANDLER_SERVER, MIGRATION_CLIENT, VIRT_API_CLIENT};

use super::{MigrationFiles, MigrationTls};
use crate::migration_proxy::Security;

fn files(dir: &Path) -> MigrationFiles {
    MigrationFiles {
        server_cert: dir.join("server.crt"),
        server_key: dir.join("server.key"),
        client_cert: dir.join("client.crt"),
        client_key: dir.join("client.key"),
        ca: dir.join("ca.crt"),
    }
}

/// Writes a handler's certificates from `ca`, its migration client one for `client_name`.
fn write_handler(dir: &Path, ca: &TestCa, client: &TestPair) {
    let files = files(dir);
    let server = ca.server(HANDLER_SERVER, &["virt-handler"]);
    write(&files.ca, &ca.cert_pem());
    write(&files.server_cert, &server.cert);
    write(&files.server_key, &server.key);
    write(&files.client_cert, &client.cert);
    write(&files.client_key, &client.key);
}

fn parts(security: &Security) -> (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>) {
    match security {
        Security::Tls { server, client, .. } => (server.clone(), client.clone()),
        Security::Plain => panic!("plain"),
    }
}

#[tokio::test]
async fn a_migration_proxy_admits_only_a_handlers_current_migration_certificate() {
    let ca = TestCa::new("kubevirt.io@1");
    let (target, source) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
    write_handler(target.path(), &ca, &ca.client(MIGRATION_CLIENT));
    let (server, _) = parts(&MigrationTls::new(&files(target.path())).expect("target").current());
    let peer = |client: TestPair| {
        write_handler(source.path(), &ca, &client);
        parts(&MigrationTls::new(&files(source.path())).expect("source").current()).1
    };
    handshake(server.clone(), peer(ca.client(MIGRATION_CLIENT)), "virt-handler")
        .await
        .expect("a handler");
    let refused = handshake(server.clone(), peer(ca.client(VIRT_API_CLIENT)), "virt-handler")
        .await
        .expect_err("virt-api's certificate");
    assert!(refused.contains(VIRT_API_CLIENT), "{refused}");
    handshake(
        server.clone(),
        peer(ca.expired_client(MIGRATION_CLIENT)),
        "virt-handler",
    )
    .await
    .expect_err("an expired certificate");
    let other = TestCa::new("kubevirt.io@2");
    handshake(server, peer(other.client(MIGRATION_CLIENT)), "virt-handler")
        .await
        .expect_err("another CA");
}

#[tokio::test]
async fn the_source_accepts_only_a_server_named_virt_handler() {
    let ca = TestCa::new("kubevirt.io@1");
    let (target, source) = (tempfile::tempdir().expect("dir"), tempfile::tempdir().expect("dir"));
    write_handler(source.path(), &ca, &ca.client(MIGRATION_CLIENT));
    let (_, client) = parts(&MigrationTls::new(&files(source.path())).expect("source").current());
    write_handler(target.path(), &ca, &ca.client(MIGRATION_CLIENT));
    // A target serving virt-api's certificate instead of a handler's.
    let api = ca.server("virt-api.kubevirt.pod.cluster.local", &["virt-api"]);
    write(&files(target.path()).server_cert, &api.cert);
    write(&files(target.path()).server_key, &api.key);
    let (server, _) = parts(&MigrationTls::new(&files(target.path())).expect("target").current());
    handshake(server, client, "virt-handler")
        .await
        .expect_err("not a handler");
}

#[test]
fn the_certificates_are_read_again_when_they_change_and_kept_while_broken() {
    control_loop::tls::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new("kubevirt.io@1");
    write_handler(dir.path(), &ca, &ca.client(MIGRATION_CLIENT));
    let tls = MigrationTls::new(&files(dir.path())).expect("tls");
    let first = parts(&tls.current()).1;
    assert!(
        Arc::ptr_eq(&first, &parts(&tls.current()).1),
        "unchanged files are not read again"
    );

    // Renewed: a new client certificate and key.
    let renewed = ca.client(MIGRATION_CLIENT);
    write(&files(dir.path()).client_cert, &renewed.cert);
    write(&files(dir.path()).client_key, &renewed.key);
    let rotated = parts(&tls.current()).1;
    assert!(!Arc::ptr_eq(&first, &rotated), "the new certificate is used");

    // Half written: the last good one stays.
    write(&files(dir.path()).client_cert, "-----BEGIN CERTIFICATE-----\n");
    assert!(Arc::ptr_eq(&rotated, &parts(&tls.current()).1));

    // Whole again: read.
    write(&files(dir.path()).client_cert, &renewed.cert);
    assert!(!Arc::ptr_eq(&rotated, &parts(&tls.current()).1));
}

#[test]
fn missing_files_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = MigrationTls::new(&files(dir.path())).expect_err("no files");
    let shown = dir.path().display().to_string();
    assert!(error.to_string().contains(&shown), "names the file: {error}");
}
