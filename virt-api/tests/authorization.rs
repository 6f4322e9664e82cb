//! Who may use the subresources: over real TLS, a caller must present a certificate signed by the
//! aggregation layer's request-header CA, and the user it names in `X-Remote-User` and
//! `X-Remote-Group` is checked with a SubjectAccessReview (the fake API server records each one
//! and denies chosen users). Discovery needs neither.

use std::path::Path;
use std::sync::Arc;

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use pretty_assertions::assert_eq;
use rustls_pki_types::pem::PemObject as _;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use virt_api::backends::FakeSubresourceCluster;
use virt_api::server::{fake_app, router, serve_on_loopback};
use virt_api::subresources::authorize::Authentication;
use virt_api::tls::{CertSource, server_tls_verifying_optional};

/// The request-header CA and a front-proxy client certificate it signed, as PEM files.
fn front_proxy_certificates(dir: &Path) {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = rcgen::CertifiedIssuer::self_signed(params, ca_key).expect("CA");
    std::fs::write(dir.join("requestheader-ca.crt"), ca.pem()).expect("write");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["front-proxy-client".to_owned()])
        .expect("params")
        .signed_by(&key, &ca)
        .expect("sign");
    std::fs::write(dir.join("proxy.crt"), cert.pem()).expect("write");
    std::fs::write(dir.join("proxy.key"), key.serialize_pem()).expect("write");
}

struct Server {
    port: u16,
    server_cert: String,
    cluster: Arc<FakeSubresourceCluster>,
    stop: CancellationToken,
}

fn start(dir: &Path) -> Server {
    let tls = server_tls_verifying_optional(
        &CertSource::SelfSigned {
            names: vec!["localhost".to_owned()],
        },
        Some(&dir.join("requestheader-ca.crt")),
    )
    .expect("tls");
    let (state, cluster) = fake_app(Authentication::FrontProxy);
    cluster.put_vm(json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": "ns"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}}));
    let (port, stop) = serve_on_loopback(router(state), tls.config).expect("serve");
    Server {
        port,
        server_cert: tls.cert_pem,
        cluster,
        stop,
    }
}

/// Sends a request; `client` is the certificate and key to present, if any.
async fn send(
    server: &Server,
    method: &str,
    path: &str,
    client: Option<&Path>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(server.server_cert.as_bytes()).expect("pem"))
        .expect("root");
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let tls = match client {
        Some(dir) => builder
            .with_client_auth_cert(
                vec![rustls_pki_types::CertificateDer::from_pem_file(dir.join("proxy.crt")).expect("cert")],
                rustls_pki_types::PrivateKeyDer::from_pem_file(dir.join("proxy.key")).expect("key"),
            )
            .expect("client auth"),
        None => builder.with_no_client_auth(),
    };
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .expect("TLS");
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("HTTP");
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(request.body(Full::new(Bytes::new())).expect("request"))
        .await
        .expect("response");
    let code = response.status().as_u16();
    let body = response.into_body().collect().await.expect("body").to_bytes();
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

const START: &str = "/apis/subresources.kubevirt.io/v1/namespaces/ns/virtualmachines/vm/start";

#[tokio::test]
async fn only_front_proxied_users_the_api_server_allows_may_use_the_subresources() {
    let dir = tempfile::tempdir().expect("tempdir");
    front_proxy_certificates(dir.path());
    let server = start(dir.path());
    let user = [
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "devs"),
        ("X-Remote-Group", "system:authenticated"),
    ];

    let (code, body) = send(&server, "PUT", START, None, &user).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (401, Some("unauthorized: request is not authenticated"))
    );
    let (code, body) = send(&server, "GET", "/apis/subresources.kubevirt.io/v1", None, &[]).await;
    assert_eq!(
        (code, body["kind"].as_str()),
        (200, Some("APIResourceList")),
        "discovery needs no authorization"
    );

    let (code, body) = send(&server, "PUT", START, Some(dir.path()), &[]).await;
    assert_eq!(
        (code, body["message"].as_str()),
        (
            401,
            Some("unauthorized: a valid user header is required for authorization")
        )
    );

    let (code, _) = send(&server, "PUT", START, Some(dir.path()), &user).await;
    assert_eq!(code, 202);
    assert_eq!(
        server.cluster.reviews(),
        [json!({
            "user": "alice", "groups": ["devs", "system:authenticated"], "extra": {},
            "resourceAttributes": {"namespace": "ns", "verb": "update", "group": "subresources.kubevirt.io",
                "version": "v1", "resource": "virtualmachines", "subresource": "start", "name": "vm"}
        })]
    );
    assert_eq!(
        server.cluster.vm("ns", "vm").expect("vm")["spec"]["runStrategy"],
        "Always"
    );

    server.cluster.deny_user("mallory");
    let (code, body) = send(
        &server,
        "PUT",
        START,
        Some(dir.path()),
        &[("X-Remote-User", "mallory"), ("X-Remote-Group", "x")],
    )
    .await;
    assert_eq!(
        (code, body["message"].as_str()),
        (401, Some("unauthorized: mallory may not"))
    );
    server.stop.cancel();
}
