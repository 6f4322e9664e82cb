//! The clone source against a real upload server over TLS: the source disk arrives byte for byte
//! (even one that looks like a compressed image), only with a certificate for the clone's name,
//! and a source without a disk fails with its path.

use std::path::Path;
use std::sync::Arc;

use cdi_cloner::{CloneError, Config, Source};
use cdi_importer::convert::{ConvertError, Converter};
use cdi_importer::import::Target;
use cdi_uploadserver::config::Config as ServerConfig;
use cdi_uploadserver::server::Server;
use control_loop::tls::test_pki::TestCa;

const CLIENT_NAME: &str = "src/golden-dst/copy";

struct NoConverter;

impl Converter for NoConverter {
    fn virtual_size(&self, image: &Path, _: &str) -> Result<u64, ConvertError> {
        panic!("a clone is never converted: {}", image.display())
    }

    fn convert_to_raw(&self, image: &Path, _: &str, _: &Path) -> Result<(), ConvertError> {
        panic!("a clone is never converted: {}", image.display())
    }
}

struct Sides {
    dir: tempfile::TempDir,
    server_ca: TestCa,
    client_ca: TestCa,
}

impl Sides {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["source", "target"] {
            std::fs::create_dir(dir.path().join(sub)).expect("dir");
        }
        Self {
            dir,
            server_ca: TestCa::new("cdi-uploadserver-signer"),
            client_ca: TestCa::new("cdi-uploadserver-client-signer"),
        }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    async fn server(
        &self,
        size: u64,
    ) -> (
        String,
        tokio::task::JoinHandle<Result<cdi_uploadserver::server::Outcome, cdi_uploadserver::server::ServeError>>,
    ) {
        let serving = self.server_ca.server("cdi-upload-copy.dst.svc", &["localhost"]);
        std::fs::write(self.path("tls.crt"), &serving.cert).expect("write");
        std::fs::write(self.path("tls.key"), &serving.key).expect("write");
        std::fs::write(self.path("ca.crt"), self.client_ca.cert_pem()).expect("write");
        let config = ServerConfig {
            address: [127, 0, 0, 1].into(),
            port: 0,
            cert_file: self.path("tls.crt"),
            key_file: self.path("tls.key"),
            client_ca_file: self.path("ca.crt"),
            client_name: CLIENT_NAME.to_owned(),
            target: Target::File(self.path("target/disk.img")),
            image_size: Some(size),
            filesystem_overhead: "0".to_owned(),
            preallocation: false,
            deadline: None,
            scratch_dir: self.path("no-scratch"),
        };
        let server = Server::bind(config, Arc::new(NoConverter)).await.expect("bind");
        let port = server.local_addr().expect("address").port();
        (
            format!("https://localhost:{port}/v1beta1/upload"),
            tokio::spawn(server.run()),
        )
    }

    fn config(&self, url: &str, name: &str) -> Config {
        let client = self.client_ca.client(name);
        Config {
            client_key: client.key,
            client_cert: client.cert,
            server_ca: self.server_ca.cert_pem(),
            upload_url: url.to_owned(),
            source: Source::Filesystem(self.path("source")),
        }
    }
}

#[tokio::test]
async fn the_source_disk_arrives_byte_for_byte_and_is_grown_to_the_target() {
    let sides = Sides::new();
    // The gzip magic at the start: an upload would be unpacked, a clone is not.
    let mut disk = vec![0x1f, 0x8b, 0x08, 0x00];
    disk.resize(3 << 20, 0);
    disk[2 << 20..(2 << 20) + 4096].fill(0xab);
    std::fs::write(sides.path("source/disk.img"), &disk).expect("source");
    let (url, server) = sides.server(4 << 20).await;
    let sent = cdi_cloner::run(&sides.config(&url, CLIENT_NAME)).await.expect("cloned");
    assert_eq!(sent, disk.len() as u64);
    assert!(server.await.expect("task").is_ok(), "the upload server finished");
    let written = std::fs::read(sides.path("target/disk.img")).expect("target");
    assert_eq!(written.len(), 4 << 20, "grown to the target's size");
    assert!(written[..disk.len()] == disk[..], "the source's bytes");
}

#[tokio::test]
async fn another_name_is_refused_and_writes_nothing() {
    let sides = Sides::new();
    std::fs::write(sides.path("source/disk.img"), vec![1_u8; 1 << 20]).expect("source");
    let (url, server) = sides.server(4 << 20).await;
    let error = cdi_cloner::run(&sides.config(&url, "other/disk-dst/copy"))
        .await
        .expect_err("refused");
    assert!(matches!(error, CloneError::Send { .. }), "{error}");
    assert!(!sides.path("target/disk.img").exists());
    server.abort();
}

#[tokio::test]
async fn a_source_without_its_disk_fails_naming_it() {
    let sides = Sides::new();
    let config = sides.config("https://localhost:1/v1beta1/upload", CLIENT_NAME);
    let error = cdi_cloner::run(&config).await.expect_err("no disk");
    let text = error.to_string();
    assert!(text.contains("source/disk.img"), "{text}");
}
