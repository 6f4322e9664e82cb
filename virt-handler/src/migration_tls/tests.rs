use std::path::Path;
use std::sync::Arc;

use super::MigrationTls;
use crate::migration_proxy::Security;

fn issuer() -> rcgen::CertifiedIssuer<'static, rcgen::KeyPair> {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    rcgen::CertifiedIssuer::self_signed(params, rcgen::KeyPair::generate().expect("key")).expect("CA")
}

/// Writes a new certificate for `virt-handler` signed by `ca`, and its key, into `dir`.
fn write_handler_cert(dir: &Path, ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["virt-handler".to_owned()])
        .expect("params")
        .signed_by(&key, ca)
        .expect("sign");
    std::fs::write(dir.join("tls.crt"), cert.pem()).expect("cert");
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).expect("key");
}

fn server_of(security: &Security) -> Arc<rustls::ServerConfig> {
    match security {
        Security::Tls { server, .. } => server.clone(),
        Security::Plain => panic!("plain"),
    }
}

#[test]
fn the_certificates_are_read_again_when_they_change_and_kept_while_broken() {
    control_loop::tls::install_crypto_provider();
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = issuer();
    std::fs::write(dir.path().join("ca.crt"), ca.pem()).expect("ca");
    write_handler_cert(dir.path(), &ca);
    let files = |name: &str| dir.path().join(name);
    let tls = MigrationTls::new(files("tls.crt"), files("tls.key"), files("ca.crt")).expect("tls");
    let first = server_of(&tls.current());
    assert!(
        Arc::ptr_eq(&first, &server_of(&tls.current())),
        "unchanged files are not read again"
    );

    // Rotated: a new certificate and key (the sleep lets the modification time move on).
    std::thread::sleep(std::time::Duration::from_millis(20));
    write_handler_cert(dir.path(), &ca);
    let rotated = server_of(&tls.current());
    assert!(!Arc::ptr_eq(&first, &rotated), "the new certificate is used");

    // Half written: the last good one stays.
    std::fs::write(files("tls.crt"), "-----BEGIN CERTIFICATE-----\n").expect("broken");
    assert!(Arc::ptr_eq(&rotated, &server_of(&tls.current())));

    // Whole again: read.
    write_handler_cert(dir.path(), &ca);
    assert!(!Arc::ptr_eq(&rotated, &server_of(&tls.current())));
}

#[test]
fn missing_files_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = MigrationTls::new(
        dir.path().join("tls.crt"),
        dir.path().join("tls.key"),
        dir.path().join("ca.crt"),
    )
    .expect_err("no files");
    let shown = dir.path().display().to_string();
    assert!(error.to_string().contains(&shown), "names the file: {error}");
}
