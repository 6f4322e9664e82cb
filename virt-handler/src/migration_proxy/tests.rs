//! The proxies over loopback: bytes reach the target pod's socket and come back, plain and with
//! mutual TLS; a client without the cluster's certificate gets nothing through; the source's
//! sockets go when the proxy does.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use cmd_protocol::migration::Channel;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::{Proxy, ProxyError, Security};
use crate::pod_socket::PodSocket;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A "target pod" socket that answers every line with `<tag>:` and the line.
fn echo_socket(path: &Path, tag: &'static str) {
    let listener = cmd_protocol::sockets::bind_unix(path).expect("bind");
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buffer = [0_u8; 64];
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 {
                        return;
                    }
                    let mut answer = format!("{tag}:").into_bytes();
                    answer.extend_from_slice(&buffer[..n]);
                    if stream.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
}

async fn round_trip(socket: &Path, message: &str) -> std::io::Result<String> {
    let mut stream = tokio::net::UnixStream::connect(socket).await?;
    stream.write_all(message.as_bytes()).await?;
    let mut buffer = vec![0_u8; 64];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut buffer))
        .await
        .map_err(|_| std::io::Error::other("no answer"))??;
    buffer.truncate(n);
    Ok(String::from_utf8_lossy(&buffer).into_owned())
}

/// Two proxies, source and target, for the libvirt and stream channels.
async fn proxies(dir: &Path, target_security: &Security, source_security: &Security) -> (Proxy, Proxy) {
    let target_pod = dir.join("target");
    std::fs::create_dir_all(&target_pod).expect("dir");
    echo_socket(&target_pod.join("libvirt-sock"), "libvirt");
    echo_socket(&target_pod.join("stream.sock"), "qemu");
    let target = Proxy::target(
        LOOPBACK,
        BTreeMap::from([
            (Channel::Libvirt, PodSocket::new(dir, "target/libvirt-sock")),
            (Channel::Stream, PodSocket::new(dir, "target/stream.sock")),
        ]),
        target_security,
    )
    .await
    .expect("target proxy");
    let source = Proxy::source(
        LOOPBACK,
        target.ports(),
        BTreeMap::from([
            (
                Channel::Libvirt,
                PodSocket::new(dir, "source/migrationproxy/u-source.sock"),
            ),
            (
                Channel::Stream,
                PodSocket::new(dir, "source/migrationproxy/u-49152-source.sock"),
            ),
        ]),
        None,
        source_security,
    )
    .expect("source proxy");
    (target, source)
}

#[tokio::test]
async fn each_channel_reaches_its_socket_in_the_target_pod() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (target, source) = proxies(dir.path(), &Security::Plain, &Security::Plain).await;
    let sockets = dir.path().join("source/migrationproxy");
    assert_eq!(
        round_trip(&sockets.join("u-source.sock"), "hello")
            .await
            .expect("libvirt"),
        "libvirt:hello"
    );
    assert_eq!(
        round_trip(&sockets.join("u-49152-source.sock"), "pages")
            .await
            .expect("stream"),
        "qemu:pages"
    );
    let ports = target.status_ports();
    assert_eq!(ports.len(), 2);
    assert_eq!(
        ports.get(&target.ports()[&Channel::Stream].to_string()),
        Some(&49152),
        "{ports:?}"
    );
    assert_eq!(ports.get(&target.ports()[&Channel::Libvirt].to_string()), Some(&0));
    drop(source);
    assert!(
        !sockets.join("u-source.sock").exists(),
        "the source's sockets go with the proxy"
    );
}

/// A CA and a certificate for `virt-handler` signed by it, as rustls configurations.
fn tls(ca_name: &str) -> (Security, rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) {
    control_loop::tls::install_crypto_provider();
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.distinguished_name.push(rcgen::DnType::CommonName, ca_name);
    let ca = rcgen::CertifiedIssuer::self_signed(params, ca_key).expect("CA");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["virt-handler".to_owned()])
        .expect("params")
        .signed_by(&key, &ca)
        .expect("sign");
    let server = rustls::ServerConfig::builder()
        .with_client_cert_verifier(
            rustls::server::WebPkiClientVerifier::builder(std::sync::Arc::new(roots(&ca)))
                .build()
                .expect("verifier"),
        )
        .with_single_cert(vec![cert.der().clone()], private(&key))
        .expect("server config");
    let client =
        control_loop::tls::client_tls_pem("test", &ca.pem(), &cert.pem(), &key.serialize_pem()).expect("client");
    let security = Security::Tls {
        server: std::sync::Arc::new(server),
        client,
        server_name: rustls_pki_types::ServerName::try_from("virt-handler").expect("name"),
    };
    (security, ca)
}

fn roots(ca: &rcgen::CertifiedIssuer<'static, rcgen::KeyPair>) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).expect("root");
    roots
}

fn private(key: &rcgen::KeyPair) -> rustls_pki_types::PrivateKeyDer<'static> {
    rustls_pki_types::PrivateKeyDer::Pkcs8(rustls_pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()))
}

#[tokio::test]
async fn mutual_tls_carries_the_bytes_between_handlers_of_one_cluster() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (security, _ca) = tls("cluster");
    let (_target, _source) = proxies(dir.path(), &security, &security).await;
    let sockets = dir.path().join("source/migrationproxy");
    assert_eq!(
        round_trip(&sockets.join("u-49152-source.sock"), "pages")
            .await
            .expect("stream"),
        "qemu:pages"
    );
}

#[tokio::test]
async fn a_handler_of_another_cluster_gets_nothing_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ours, _ca) = tls("cluster");
    let (theirs, _other) = tls("elsewhere");
    let (_target, _source) = proxies(dir.path(), &ours, &theirs).await;
    let sockets = dir.path().join("source/migrationproxy");
    let answer = round_trip(&sockets.join("u-49152-source.sock"), "pages").await;
    assert!(
        answer.as_ref().is_err() || answer.as_ref().is_ok_and(String::is_empty),
        "a stranger's connection is cut: {answer:?}"
    );
}

#[tokio::test]
async fn the_source_needs_a_port_for_every_channel() {
    let dir = tempfile::tempdir().expect("tempdir");
    let error = Proxy::source(
        LOOPBACK,
        &BTreeMap::from([(Channel::Libvirt, 4000)]),
        BTreeMap::from([(Channel::Stream, PodSocket::new(dir.path(), "s.sock"))]),
        None,
        &Security::Plain,
    )
    .expect_err("no stream port");
    assert!(matches!(error, ProxyError::NoPort(Channel::Stream)), "{error}");
}
