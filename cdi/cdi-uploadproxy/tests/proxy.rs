//! cdi-uploadproxy in front of a real cdi-uploadserver, over real TLS with certificates from test
//! CAs: the target comes from the token only, each refusal is upstream's status and writes
//! nothing, a server that becomes ready within the wait takes the upload, and the answer comes
//! back through the proxy.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use cdi_api::upload;
use cdi_importer::import::Target;
use cdi_token::{Issuer, Payload, UPLOAD_ISSUER, Validator, generate_key};
use cdi_uploadproxy::claims::{ClaimRecord, Claims};
use cdi_uploadproxy::proxy::{Dialer, Proxy, serve};
use cdi_uploadserver::config::Config;
use cdi_uploadserver::server::{Outcome, Server};
use control_loop::tls::test_pki::{Answer, TestCa, https_request};
use http_body_util::Full;
use pretty_assertions::assert_eq;
use tokio::net::TcpStream;

const MIB: usize = 1 << 20;

/// Claims in memory; remembers which were read.
#[derive(Default)]
struct FakeClaims {
    claims: Mutex<BTreeMap<String, ClaimRecord>>,
    read: Mutex<Vec<String>>,
}

impl FakeClaims {
    fn set(&self, name: &str, annotations: &[(&str, &str)]) {
        self.set_record(name, annotations, false);
    }

    /// A claim whose `dataSourceRef` names a VolumeUploadSource (when `populated`).
    fn set_record(&self, name: &str, annotations: &[(&str, &str)], upload_populated: bool) {
        let annotations = annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        self.claims.lock().expect("claims").insert(
            format!("vms/{name}"),
            ClaimRecord {
                annotations,
                upload_populated,
            },
        );
    }
}

/// The fake, shared between the proxy and the test.
#[derive(Clone)]
struct Shared(Arc<FakeClaims>);

impl Claims for Shared {
    async fn claim(&self, namespace: &str, name: &str) -> Result<Option<ClaimRecord>, kube::Error> {
        let key = format!("{namespace}/{name}");
        self.0.read.lock().expect("read").push(key.clone());
        Ok(self.0.claims.lock().expect("claims").get(&key).cloned())
    }
}

/// Reaches every host at one local address, remembering the hosts asked for.
struct LocalDialer(SocketAddr, Arc<Mutex<Vec<String>>>);

impl Dialer for LocalDialer {
    async fn connect(&self, host: &str, port: u16) -> std::io::Result<TcpStream> {
        self.1.lock().expect("hosts").push(format!("{host}:{port}"));
        TcpStream::connect(self.0).await
    }
}

struct Setup {
    dir: tempfile::TempDir,
    proxy_ca: TestCa,
    issuer: Issuer,
    claims: Arc<FakeClaims>,
    hosts: Arc<Mutex<Vec<String>>>,
    proxy: SocketAddr,
    server: tokio::task::JoinHandle<Result<Outcome, cdi_uploadserver::server::ServeError>>,
}

const READY: [(&str, &str); 3] = [
    ("cdi.kubevirt.io/storage.upload.target", ""),
    ("cdi.kubevirt.io/storage.pod.ready", "true"),
    ("cdi.kubevirt.io/storage.contentType", "kubevirt"),
];

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

async fn setup(ready_wait: Duration) -> Setup {
    let dir = tempfile::tempdir().expect("tempdir");
    let server_ca = TestCa::new("cdi-uploadserver-signer");
    let client_ca = TestCa::new("cdi-uploadserver-client-signer");
    let proxy_ca = TestCa::new("cdi-uploadproxy-signer");
    let serving = server_ca.server(
        "cdi-upload-disk.vms.svc",
        &["cdi-upload-disk.vms.svc", "cdi-upload-prime-u1.vms.svc"],
    );
    let config = Config {
        address: [127, 0, 0, 1].into(),
        port: 0,
        cert_file: write(dir.path(), "server.crt", &serving.cert),
        key_file: write(dir.path(), "server.key", &serving.key),
        client_ca_file: write(dir.path(), "client-ca.crt", &client_ca.cert_pem()),
        client_name: upload::PROXY_CLIENT_NAME.to_owned(),
        target: Target::File(dir.path().join("disk.img")),
        image_size: Some(4 * MIB as u64),
        filesystem_overhead: "0".to_owned(),
        preallocation: false,
        deadline: None,
        scratch_dir: dir.path().join("no-scratch"),
    };
    let server = Server::bind(config, Arc::new(cdi_importer_no_converter::NoConverter))
        .await
        .expect("upload server");
    let server_address = server.local_addr().expect("address");
    let server = tokio::spawn(server.run());
    let client = client_ca.client(upload::PROXY_CLIENT_NAME);
    let upstream_tls = cdi_uploadproxy::proxy::upstream_tls(
        &write(dir.path(), "server-ca.crt", &server_ca.cert_pem()),
        &write(dir.path(), "client.crt", &client.cert),
        &write(dir.path(), "client.key", &client.key),
    )
    .expect("client tls");
    let issuer = Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, 300).expect("issuer");
    let claims = Arc::new(FakeClaims::default());
    let hosts = Arc::new(Mutex::new(Vec::new()));
    let proxy = Arc::new(Proxy {
        claims: Shared(Arc::clone(&claims)),
        dialer: LocalDialer(server_address, Arc::clone(&hosts)),
        validator: Validator::new(&issuer.public_key(), UPLOAD_ISSUER, 10),
        upstream_tls,
        ready_wait,
    });
    let proxy_cert = proxy_ca.server("cdi-uploadproxy.cdi.svc", &["localhost"]);
    let serving = control_loop::tls::server_tls(&control_loop::tls::CertSource::Pem {
        origin: "test".to_owned(),
        cert: proxy_cert.cert,
        key: proxy_cert.key,
    })
    .expect("proxy tls");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("listen");
    let address = listener.local_addr().expect("address");
    tokio::spawn(serve(
        listener,
        serving.config,
        proxy,
        tokio_util::sync::CancellationToken::new(),
    ));
    Setup {
        dir,
        proxy_ca,
        issuer,
        claims,
        hosts,
        proxy: address,
        server,
    }
}

mod cdi_importer_no_converter {
    use std::path::Path;

    use cdi_importer::convert::{ConvertError, Converter};

    /// Uploads here are raw: nothing is converted.
    pub struct NoConverter;

    impl Converter for NoConverter {
        fn virtual_size(&self, image: &Path, _: &str) -> Result<u64, ConvertError> {
            panic!("no conversion expected: {}", image.display())
        }

        fn convert_to_raw(&self, image: &Path, _: &str, _: &Path) -> Result<(), ConvertError> {
            panic!("no conversion expected: {}", image.display())
        }
    }
}

impl Setup {
    fn now() -> i64 {
        time_now()
    }

    fn token(&self, payload: &Payload) -> String {
        self.issuer.issue(payload, Self::now())
    }

    async fn send(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Vec<u8>) -> Answer {
        let ca = write(self.dir.path(), "proxy-ca.crt", &self.proxy_ca.cert_pem());
        let config = control_loop::tls::client_tls(&ca, None).expect("tls");
        https_request(config, self.proxy, method, path, headers, Full::new(Bytes::from(body)))
            .await
            .expect("answer")
    }

    async fn upload(&self, authorization: &str, body: Vec<u8>) -> Answer {
        self.send("POST", "/v1beta1/upload", &[("authorization", authorization)], body)
            .await
    }

    fn disk(&self) -> std::path::PathBuf {
        self.dir.path().join("disk.img")
    }
}

fn time_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).expect("seconds"))
        .expect("clock")
}

fn disk(size: usize) -> Vec<u8> {
    let mut disk = vec![0_u8; size];
    disk[..16].copy_from_slice(b"KUBEVIRT-RS-DISK");
    disk
}

#[tokio::test]
async fn a_valid_token_streams_the_upload_to_its_claims_server_and_back() {
    let setup = setup(Duration::from_secs(5)).await;
    setup.claims.set("disk", &READY);
    let token = setup.token(&Payload::upload("vms", "disk"));
    let health = setup.send("GET", "/healthz", &[], Vec::new()).await;
    assert_eq!((health.status, health.body.as_str()), (200, "OK"));
    let probe = setup
        .send(
            "HEAD",
            "/v1beta1/upload-async",
            &[("authorization", &format!("Bearer {token}"))],
            Vec::new(),
        )
        .await;
    assert_eq!(probe.status, 200, "the async probe reaches the upload server");
    let answer = setup.upload(&format!("Bearer {token}"), disk(2 * MIB)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        setup.hosts.lock().expect("hosts").clone(),
        ["cdi-upload-disk.vms.svc:8443", "cdi-upload-disk.vms.svc:8443"]
    );
    let outcome = tokio::time::timeout(Duration::from_secs(60), setup.server)
        .await
        .expect("ends");
    assert!(matches!(outcome, Ok(Ok(Outcome::Uploaded { .. }))), "{outcome:?}");
    let written = std::fs::read(setup.dir.path().join("disk.img")).expect("disk");
    assert_eq!(&written[..16], b"KUBEVIRT-RS-DISK");
    assert_eq!(written.len(), 4 * MIB, "grown to the claim");
}

#[tokio::test]
async fn each_refusal_is_upstreams_and_writes_nothing() {
    let setup = setup(Duration::ZERO).await;
    setup.claims.set("disk", &READY);
    setup.claims.set("plain", &[]);
    setup
        .claims
        .set("waiting", &[("cdi.kubevirt.io/storage.upload.target", "")]);
    setup.claims.set(
        "done",
        &[
            ("cdi.kubevirt.io/storage.upload.target", ""),
            ("cdi.kubevirt.io/storage.pod.phase", "Succeeded"),
        ],
    );
    let token = |payload: &Payload| format!("Bearer {}", setup.token(payload));
    let another_key = Issuer::new(&generate_key().expect("key"), UPLOAD_ISSUER, 300).expect("issuer");
    let forged = format!(
        "Bearer {}",
        another_key.issue(&Payload::upload("vms", "disk"), Setup::now())
    );
    let expired = format!(
        "Bearer {}",
        setup.issuer.issue(&Payload::upload("vms", "disk"), Setup::now() - 3600)
    );
    let mut clone = Payload::upload("vms", "disk");
    clone.operation = "Clone".to_owned();
    let cases = [
        (String::new(), 400, ""),
        ("Basic dXNlcjpwYXNz".to_owned(), 400, ""),
        (forged, 401, ""),
        (expired, 401, ""),
        (token(&clone), 400, ""),
        (
            token(&Payload::upload("vms", "gone")),
            503,
            "rejecting Upload Request for PVC gone that doesn't exist",
        ),
        (
            token(&Payload::upload("vms", "plain")),
            503,
            "rejecting Upload Request for PVC plain that is not an upload target",
        ),
        (
            token(&Payload::upload("vms", "waiting")),
            503,
            "rejecting Upload Request for PVC waiting that is not ready yet",
        ),
        (
            token(&Payload::upload("vms", "done")),
            503,
            "rejecting Upload Request for PVC done that already finished uploading",
        ),
    ];
    for (authorization, status, body) in cases {
        let answer = setup.upload(&authorization, disk(MIB)).await;
        assert_eq!((answer.status, answer.body.as_str()), (status, body), "{authorization}");
    }
    assert!(!setup.disk().exists(), "nothing written");
    assert!(
        setup.hosts.lock().expect("hosts").is_empty(),
        "no upload server reached"
    );
    assert!(
        setup.claims.read.lock().expect("read").iter().all(|k| k != "vms/disk"),
        "only the tokens' claims are read"
    );
    assert_eq!(
        setup
            .send("POST", "/v1beta1/upload-archive", &[], Vec::new())
            .await
            .status,
        404
    );
}

#[tokio::test]
async fn a_server_that_becomes_ready_within_the_wait_takes_the_upload() {
    let setup = setup(Duration::from_secs(10)).await;
    setup.claims.set("disk", &READY[..1]);
    let token = format!("Bearer {}", setup.token(&Payload::upload("vms", "disk")));
    let claims = Arc::clone(&setup.claims);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        claims.set("disk", &READY);
    });
    let answer = setup.upload(&token, disk(MIB)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(setup.disk().exists());
}

/// A claim CDI's upload populator fills takes its upload through its prime claim's server, once
/// it names the prime (within the wait); one done, or naming a prime that is not there, is
/// refused with upstream's words.
#[tokio::test]
async fn a_populated_claims_upload_goes_to_its_prime_claims_server() {
    let setup = setup(Duration::from_secs(10)).await;
    setup.claims.set_record("disk", &[], true);
    setup.claims.set("prime-u1", &READY);
    setup.claims.set_record(
        "done",
        &[
            ("cdi.kubevirt.io/storage.populator.pvcPrime", "prime-u2"),
            ("cdi.kubevirt.io/storage.pod.phase", "Succeeded"),
        ],
        true,
    );
    setup.claims.set_record(
        "orphan",
        &[("cdi.kubevirt.io/storage.populator.pvcPrime", "prime-gone")],
        true,
    );
    for (claim, body) in [
        (
            "done",
            "rejecting Upload Request for PVC done that already finished uploading",
        ),
        (
            "orphan",
            "rejecting Upload Request for PVC orphan, PVC' wasn't created yet",
        ),
    ] {
        let token = format!("Bearer {}", setup.token(&Payload::upload("vms", claim)));
        let answer = setup.upload(&token, disk(MIB)).await;
        assert_eq!((answer.status, answer.body.as_str()), (503, body));
    }
    assert!(setup.hosts.lock().expect("hosts").is_empty());
    let token = format!("Bearer {}", setup.token(&Payload::upload("vms", "disk")));
    let claims = Arc::clone(&setup.claims);
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        claims.set_record(
            "disk",
            &[("cdi.kubevirt.io/storage.populator.pvcPrime", "prime-u1")],
            true,
        );
    });
    let answer = setup.upload(&token, disk(MIB)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        setup.hosts.lock().expect("hosts").clone(),
        ["cdi-upload-prime-u1.vms.svc:8443"]
    );
    assert!(setup.disk().exists());
}

#[tokio::test]
async fn a_browsers_preflight_is_answered_and_an_unreachable_server_is_502() {
    let setup = setup(Duration::ZERO).await;
    let preflight = setup
        .send(
            "OPTIONS",
            "/v1beta1/upload-form-async",
            &[
                ("origin", "https://console.example"),
                ("access-control-request-method", "POST"),
                ("access-control-request-headers", "authorization"),
            ],
            Vec::new(),
        )
        .await;
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.headers["access-control-allow-origin"], "*");
    assert_eq!(preflight.headers["access-control-allow-headers"], "authorization");
    setup.server.abort();
    while !setup.server.is_finished() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    setup.claims.set("disk", &READY);
    let token = format!("Bearer {}", setup.token(&Payload::upload("vms", "disk")));
    let answer = setup
        .send(
            "POST",
            "/v1beta1/upload",
            &[("authorization", &token), ("origin", "https://console.example")],
            disk(MIB),
        )
        .await;
    assert_eq!(answer.status, 502);
    assert_eq!(answer.headers["access-control-allow-origin"], "*");
}
