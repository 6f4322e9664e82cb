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
use virt_api::run::front_proxy_clients;
use virt_api::server::{fake_app, router, serve_on_loopback};
use virt_api::subresources::authorize::Authentication;
use virt_api::tls::test_pki::TestCa;
use virt_api::tls::{CertSource, ClientCa, server_tls_for};

/// The request-header CA and client certificates it signed, as PEM files: the front proxy's
/// (`proxy`), another holder's (`intruder`) and the front proxy's expired one (`expired`).
fn front_proxy_certificates(dir: &Path) {
    let ca = TestCa::new("front-proxy-ca");
    std::fs::write(dir.join("requestheader-ca.crt"), ca.cert_pem()).expect("write");
    for (name, pair) in [
        ("proxy", ca.client("front-proxy-client")),
        ("intruder", ca.client("intruder")),
        ("expired", ca.expired_client("front-proxy-client")),
    ] {
        std::fs::write(dir.join(format!("{name}.crt")), pair.cert).expect("write");
        std::fs::write(dir.join(format!("{name}.key")), pair.key).expect("write");
    }
}

struct Server {
    port: u16,
    server_cert: String,
    cluster: Arc<FakeSubresourceCluster>,
    stop: CancellationToken,
}

fn start(dir: &Path) -> Server {
    let clients = front_proxy_clients(
        ClientCa::File(dir.join("requestheader-ca.crt")),
        &["front-proxy-client".to_owned()],
    );
    let tls = server_tls_for(
        &CertSource::SelfSigned {
            names: vec!["localhost".to_owned()],
        },
        Some(&clients),
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

/// Sends a request; `client` is the certificate and key to present, if any: the directory and
/// the files' stem.
async fn send(
    server: &Server,
    method: &str,
    path: &str,
    client: Option<&Path>,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    try_send(server, method, path, client.map(|dir| (dir, "proxy")), headers)
        .await
        .expect("an answer")
}

async fn try_send(
    server: &Server,
    method: &str,
    path: &str,
    client: Option<(&Path, &str)>,
    headers: &[(&str, &str)],
) -> Result<(u16, Value), String> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls_pki_types::CertificateDer::from_pem_slice(server.server_cert.as_bytes()).expect("pem"))
        .expect("root");
    let builder = rustls::ClientConfig::builder().with_root_certificates(roots);
    let tls = match client {
        Some((dir, stem)) => builder
            .with_client_auth_cert(
                vec![rustls_pki_types::CertificateDer::from_pem_file(dir.join(format!("{stem}.crt"))).expect("cert")],
                rustls_pki_types::PrivateKeyDer::from_pem_file(dir.join(format!("{stem}.key"))).expect("key"),
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
        .map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| format!("HTTP: {e}"))?;
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
        .map_err(|e| format!("response: {e}"))?;
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| format!("body: {e}"))?
        .to_bytes();
    Ok((code, serde_json::from_slice(&body).unwrap_or(Value::Null)))
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

#[tokio::test]
async fn a_certificate_of_another_holder_or_an_expired_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    front_proxy_certificates(dir.path());
    let server = start(dir.path());
    let user = [("X-Remote-User", "alice"), ("X-Remote-Group", "system:authenticated")];
    for stem in ["intruder", "expired"] {
        let answer = try_send(&server, "PUT", START, Some((dir.path(), stem)), &user).await;
        assert!(answer.is_err(), "{stem}: {answer:?}");
    }
    assert!(
        try_send(&server, "PUT", START, Some((dir.path(), "proxy")), &user)
            .await
            .is_ok(),
        "the front proxy itself gets in"
    );
    server.stop.cancel();
}
