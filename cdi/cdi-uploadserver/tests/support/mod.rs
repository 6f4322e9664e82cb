//! A running upload server for tests, its certificates from a test CA, and a client that posts
//! to it with or without the proxy's client certificate.

#![allow(dead_code, reason = "each test file uses part of the support")]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use cdi_api::upload;
use cdi_importer::convert::Converter;
use cdi_importer::import::Target;
use cdi_uploadserver::config::Config;
use cdi_uploadserver::server::{Outcome, ServeError, Server};
pub use control_loop::tls::test_pki::Answer;
use control_loop::tls::test_pki::{TestCa, TestPair, https_request};
use http_body_util::{BodyExt as _, Full, combinators::BoxBody};
use tokio::task::JoinHandle;

pub const MIB: u64 = 1 << 20;

/// The server's files and the clients' certificates.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub server_ca: TestCa,
    pub proxy: TestPair,
    pub stranger: TestPair,
}

impl Setup {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let server_ca = TestCa::new("cdi-uploadserver-signer");
        let client_ca = TestCa::new("cdi-uploadserver-client-signer");
        let serving = server_ca.server(
            "cdi-upload-disk.default.svc",
            &["cdi-upload-disk.default.svc", "localhost"],
        );
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).expect("write");
        write("tls.crt", &serving.cert);
        write("tls.key", &serving.key);
        write("ca.crt", &client_ca.cert_pem());
        std::fs::create_dir(dir.path().join("data")).expect("data dir");
        let proxy = client_ca.client(upload::PROXY_CLIENT_NAME);
        // Signed by the right CA, but for someone else.
        let stranger = client_ca.client("system:anonymous");
        Self {
            dir,
            server_ca,
            proxy,
            stranger,
        }
    }

    pub fn disk(&self) -> PathBuf {
        self.dir.path().join("data/disk.img")
    }

    pub fn scratch(&self) -> PathBuf {
        self.dir.path().join("scratch")
    }

    /// The configuration the controller's environment would give, for a claim of `size`.
    pub fn config(&self, size: u64) -> Config {
        let file = |name: &str| self.dir.path().join(name);
        Config {
            address: [127, 0, 0, 1].into(),
            port: 0,
            cert_file: file("tls.crt"),
            key_file: file("tls.key"),
            client_ca_file: file("ca.crt"),
            client_name: upload::PROXY_CLIENT_NAME.to_owned(),
            target: Target::File(self.disk()),
            image_size: Some(size),
            filesystem_overhead: "0".to_owned(),
            preallocation: false,
            deadline: None,
            scratch_dir: self.scratch(),
        }
    }

    pub fn client(&self, who: Option<&TestPair>) -> Client {
        let config = if let Some(pair) = who {
            control_loop::tls::client_tls_pem("test", &self.server_ca.cert_pem(), &pair.cert, &pair.key)
                .expect("client tls")
        } else {
            let ca = self.dir.path().join("server-ca.crt");
            std::fs::write(&ca, self.server_ca.cert_pem()).expect("ca");
            control_loop::tls::client_tls(&ca, None).expect("client tls")
        };
        Client { config }
    }
}

/// A server running on its own task.
pub struct Running {
    pub address: SocketAddr,
    pub ended: JoinHandle<Result<Outcome, ServeError>>,
}

pub async fn start(config: Config, converter: Arc<dyn Converter + Send + Sync>) -> Running {
    let server = Server::bind(config, converter).await.expect("bind");
    let address = server.local_addr().expect("address");
    Running {
        address,
        ended: tokio::spawn(server.run()),
    }
}

impl Running {
    pub async fn outcome(self) -> Result<Outcome, ServeError> {
        tokio::time::timeout(std::time::Duration::from_secs(120), self.ended)
            .await
            .expect("the server ends")
            .expect("the server's task")
    }
}

pub type RequestBody = BoxBody<Bytes, std::io::Error>;

pub fn full(bytes: impl Into<Bytes>) -> RequestBody {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed()
}

pub struct Client {
    config: Arc<rustls::ClientConfig>,
}

impl Client {
    /// Sends `method` on `path` with `body` and `headers`; `Err` when the connection fails.
    pub async fn send(
        &self,
        address: SocketAddr,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: RequestBody,
    ) -> Result<Answer, String> {
        https_request(Arc::clone(&self.config), address, method, path, headers, body).await
    }

    /// A post that is expected to fail before any answer.
    pub async fn post_err(&self, address: SocketAddr) -> Result<Answer, String> {
        self.send(address, "POST", "/v1beta1/upload", &[], full("x")).await
    }

    pub async fn post(&self, address: SocketAddr, path: &str, body: impl Into<Bytes>) -> Answer {
        self.send(address, "POST", path, &[], full(body)).await.expect("answer")
    }
}

/// A raw disk of `size` bytes with a pattern every MiB, and zeros between.
pub fn raw_disk(size: u64) -> Vec<u8> {
    let mut disk = vec![0_u8; usize::try_from(size).expect("size")];
    for (n, chunk) in disk.chunks_mut(usize::try_from(MIB).expect("MiB")).enumerate() {
        let label = format!("KUBEVIRT-RS-UPLOAD block {n}");
        chunk[..label.len()].copy_from_slice(label.as_bytes());
    }
    disk
}

/// The first `len` bytes of the file at `path`.
pub fn head(path: &Path, len: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(path).expect("disk");
    bytes.truncate(len);
    bytes
}

/// A converter for uploads that must not be converted.
pub struct NoConverter;

impl Converter for NoConverter {
    fn virtual_size(&self, image: &Path, _: &str) -> Result<u64, cdi_importer::convert::ConvertError> {
        panic!("no conversion expected: {}", image.display())
    }

    fn convert_to_raw(&self, image: &Path, _: &str, _: &Path) -> Result<(), cdi_importer::convert::ConvertError> {
        panic!("no conversion expected: {}", image.display())
    }
}
