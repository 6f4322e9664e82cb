//! virt-api over real HTTPS on loopback: the real `kubectl` as a client of discovery, of the
//! start subresource and of a webhook, and a websocket client on the console. The cluster and the
//! node are the fakes, so no API server is needed.

use std::process::Command;
use std::sync::Arc;

use futures::{SinkExt as _, StreamExt as _};
use pretty_assertions::assert_eq;
use rustls_pki_types::pem::PemObject as _;
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_util::sync::CancellationToken;
use virt_api::backends::{FAKE_CONSOLE_BANNER, FakeSubresourceCluster};
use virt_api::server::{fake_app, router, serve_on_loopback};
use virt_api::subresources::authorize::Authentication;
use virt_api::tls::{CertSource, server_tls};

struct Server {
    port: u16,
    cert_pem: String,
    cluster: Arc<FakeSubresourceCluster>,
    stop: CancellationToken,
}

fn start() -> Server {
    let tls = server_tls(&CertSource::SelfSigned {
        names: vec!["127.0.0.1".to_owned(), "localhost".to_owned()],
    })
    .expect("tls");
    let (state, cluster) = fake_app(Authentication::Disabled);
    let (port, stop) = serve_on_loopback(router(state), tls.config).expect("serve");
    Server {
        port,
        cert_pem: tls.cert_pem,
        cluster,
        stop,
    }
}

/// The kubectl the test cluster's build makes (`cluster/build.sh`, which `make test` runs first),
/// or `$KUBECTL`.
fn kubectl_binary() -> std::path::PathBuf {
    let path = std::env::var_os("KUBECTL").map_or_else(
        || {
            let cache = std::env::var_os("KUBEVIRT_RS_CACHE").unwrap_or_else(|| "/var/cache/kubevirt-rs".into());
            std::path::Path::new(&cache).join("cluster/bin/kubectl")
        },
        std::path::PathBuf::from,
    );
    assert!(
        path.exists(),
        "no kubectl at {}: run cluster/build.sh (make test does) or set KUBECTL",
        path.display()
    );
    path
}

async fn kubectl(port: u16, args: &[&str]) -> std::process::Output {
    let mut command = Command::new(kubectl_binary());
    command
        .args([
            "--server",
            &format!("https://127.0.0.1:{port}"),
            "--insecure-skip-tls-verify",
            "--token",
            "test",
        ])
        .args(args)
        .env("KUBECONFIG", "/dev/null")
        .stdin(std::process::Stdio::null());
    tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("join")
        .expect("kubectl runs")
}

#[tokio::test]
#[cfg_attr(
    not(feature = "host-tests"),
    ignore = "needs the test cluster's kubectl: make test runs it (feature host-tests)"
)]
async fn kubectl_reads_discovery_starts_a_vm_and_calls_a_webhook() {
    let server = start();
    let out = kubectl(server.port, &["get", "--raw", "/apis/subresources.kubevirt.io/v1"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["groupVersion"], "subresources.kubevirt.io/v1");

    server.cluster.put_vm(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": "vm", "namespace": "default"},
        "spec": {"runStrategy": "Halted", "template": {"spec": {"domain": {"devices": {}}}}}
    }));
    let dir = tempfile::tempdir().expect("tempdir");
    let body = dir.path().join("body.json");
    std::fs::write(&body, r#"{"paused": false}"#).expect("write");
    let start = "/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachines/vm/start";
    let body_arg = body.to_str().expect("utf-8");
    let out = kubectl(server.port, &["replace", "--raw", start, "-f", body_arg]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        server.cluster.vm("default", "vm").expect("vm")["spec"]["runStrategy"],
        "Always"
    );

    server.cluster.put_vmi(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "default"},
        "spec": {"domain": {"devices": {}}}, "status": {"phase": "Running"}
    }));
    let out = kubectl(server.port, &["replace", "--raw", start, "-f", body_arg]).await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("VM is already running"), "{stderr}");

    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u1", "operation": "CREATE", "userInfo": {"username": "alice"},
        "resource": {"group": "kubevirt.io", "version": "v1", "resource": "virtualmachineinstances"},
        "object": {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance", "metadata": {"name": "x"},
                   "spec": {"domain": {"devices": {"disks": [{"name": "nope"}]}}}}}});
    let review_file = dir.path().join("review.json");
    std::fs::write(&review_file, review.to_string()).expect("write");
    let out = kubectl(
        server.port,
        &[
            "create",
            "--raw",
            "/virtualmachineinstances-validate-create",
            "-f",
            review_file.to_str().expect("utf-8"),
        ],
    )
    .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(answer["response"]["status"]["code"], 422);
    assert_eq!(
        answer["response"]["status"]["details"]["causes"][0]["field"],
        "spec.domain.devices.disks[0].name"
    );
    server.stop.cancel();
}

#[tokio::test]
async fn the_console_is_a_websocket_piped_to_the_node() {
    let server = start();
    server.cluster.put_handler("node1", "10.0.0.7");
    server.cluster.put_vmi(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "vm", "namespace": "default"},
        "spec": {"domain": {"devices": {}}}, "status": {"phase": "Running", "nodeName": "node1"}
    }));
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls_pki_types::CertificateDer::pem_slice_iter(server.cert_pem.as_bytes()) {
        roots.add(cert.expect("cert")).expect("root");
    }
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let url = format!(
        "wss://127.0.0.1:{}/apis/subresources.kubevirt.io/v1/namespaces/default/virtualmachineinstances/vm/console",
        server.port
    );
    let mut request = url.into_client_request().expect("request");
    request.headers_mut().insert(
        "Sec-WebSocket-Protocol",
        http::HeaderValue::from_static("plain.kubevirt.io"),
    );
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", server.port))
        .await
        .expect("connect");
    let name = rustls_pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let stream = tokio_rustls::TlsConnector::from(Arc::new(tls))
        .connect(name, tcp)
        .await
        .expect("TLS");
    let (mut socket, response) = tokio_tungstenite::client_async(request, stream)
        .await
        .expect("websocket");
    assert_eq!(
        response
            .headers()
            .get("sec-websocket-protocol")
            .map(http::HeaderValue::as_bytes),
        Some(&b"plain.kubevirt.io"[..])
    );
    let first = socket.next().await.expect("message").expect("ok");
    assert_eq!(first.into_data().as_ref(), FAKE_CONSOLE_BANNER);
    socket
        .send(Message::Binary(b"echo me".to_vec().into()))
        .await
        .expect("send");
    let echoed = socket.next().await.expect("message").expect("ok");
    assert_eq!(echoed.into_data().as_ref(), b"echo me");
    socket.close(None).await.expect("close");
    server.stop.cancel();
}
