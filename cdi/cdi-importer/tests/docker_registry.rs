//! The registry source against Debian's docker-registry (unpacked by `make deps`), served over TLS
//! with a certificate of the test's own: a containerDisk image pushed through the registry API
//! (its disk a qcow2, as containerDisks carry them) is pulled through `certConfigMap`'s CA and
//! converted by the real qemu-img; without the CA, the import fails on the certificate and leaves
//! no disk.

mod support;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use cdi_importer::convert::QemuImg;
use cdi_importer::job::{Job, Source};
use cdi_importer::registry::RegistrySource;
use cdi_importer::run::{self, Ended};
use support::fake_registry::{OCI_MANIFEST, digest, layer};
use support::{gzip, pod};

fn registry_binary() -> PathBuf {
    let cache =
        std::env::var_os("KUBEVIRT_RS_CACHE").map_or_else(|| PathBuf::from("/var/cache/kubevirt-rs"), PathBuf::from);
    let binary = cache.join("docker-registry/usr/bin/docker-registry");
    assert!(binary.is_file(), "{} is missing: run make deps", binary.display());
    binary
}

/// A docker-registry process, stopped when dropped.
struct Registry {
    child: Child,
    port: u16,
    ca_pem: String,
    dir: tempfile::TempDir,
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn curl(registry: &Registry, args: &[&str]) -> String {
    let ca = registry.dir.path().join("ca.pem");
    let output = Command::new("curl")
        .args(["-sS", "--fail-with-body", "--cacert"])
        .arg(&ca)
        .args(args)
        .output()
        .expect("curl is installed (make deps)");
    assert!(
        output.status.success(),
        "curl {args:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

impl Registry {
    /// Starts the registry on a free port (another, if something took the port first).
    fn start() -> Self {
        let binary = registry_binary();
        let key = rcgen::KeyPair::generate().expect("key");
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .expect("params")
            .self_signed(&key)
            .expect("cert");
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir");
            let port = free_port();
            std::fs::write(dir.path().join("ca.pem"), cert.pem()).expect("ca");
            std::fs::write(dir.path().join("key.pem"), key.serialize_pem()).expect("key");
            let config = format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {root}\nhttp:\n  addr: 127.0.0.1:{port}\n  tls:\n    certificate: {dir}/ca.pem\n    key: {dir}/key.pem\n",
                root = dir.path().join("storage").display(),
                dir = dir.path().display(),
            );
            std::fs::write(dir.path().join("config.yml"), config).expect("config");
            let child = Command::new(&binary)
                .arg("serve")
                .arg(dir.path().join("config.yml"))
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("registry.log")).expect("log"))
                .spawn()
                .expect("docker-registry starts");
            let mut registry = Self {
                child,
                port,
                ca_pem: cert.pem(),
                dir,
            };
            if registry.wait_ready() {
                return registry;
            }
        }
        panic!("docker-registry did not start on any of five ports");
    }

    /// Waits for the API to answer; false when the process ended (its port was taken).
    fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            if self.child.try_wait().expect("wait").is_some() {
                return false;
            }
            let answered = Command::new("curl")
                .args(["-sS", "-o", "/dev/null", "--cacert"])
                .arg(self.dir.path().join("ca.pem"))
                .arg(format!("https://localhost:{}/v2/", self.port))
                .stderr(Stdio::null())
                .status()
                .expect("curl is installed (make deps)");
            if answered.success() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let log = std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default();
        panic!("docker-registry did not answer within 60 s: {log}");
    }

    fn url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// Uploads a blob (a monolithic upload) and gives its digest.
    fn push_blob(&self, repository: &str, bytes: &[u8]) -> String {
        let digest = digest(bytes);
        let file = self.dir.path().join("blob");
        std::fs::write(&file, bytes).expect("blob");
        let headers = curl(
            self,
            &[
                "-D",
                "-",
                "-o",
                "/dev/null",
                "-X",
                "POST",
                &self.url(&format!("/v2/{repository}/blobs/uploads/")),
            ],
        );
        let location = headers
            .lines()
            .find_map(|l| l.strip_prefix("Location: ").or_else(|| l.strip_prefix("location: ")))
            .expect("an upload location")
            .trim()
            .to_owned();
        let separator = if location.contains('?') { '&' } else { '?' };
        let location = if location.starts_with("http") {
            location
        } else {
            self.url(&location)
        };
        curl(
            self,
            &[
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/octet-stream",
                "--data-binary",
                &format!("@{}", file.display()),
                &format!("{location}{separator}digest={digest}"),
            ],
        );
        digest
    }

    /// Pushes an image of `layers` as `repository:tag`.
    fn push_image(&self, repository: &str, tag: &str, layers: &[Vec<u8>]) {
        let config = br#"{"architecture":"amd64","os":"linux","config":{},"rootfs":{"type":"layers","diff_ids":[]}}"#;
        let config_digest = self.push_blob(repository, config);
        let layers: Vec<String> = layers
            .iter()
            .map(|layer| {
                let digest = self.push_blob(repository, layer);
                format!(
                    r#"{{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"{digest}","size":{}}}"#,
                    layer.len()
                )
            })
            .collect();
        let manifest = format!(
            r#"{{"schemaVersion":2,"mediaType":"{OCI_MANIFEST}","config":{{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"{config_digest}","size":{}}},"layers":[{}]}}"#,
            config.len(),
            layers.join(",")
        );
        let file = self.dir.path().join("manifest.json");
        std::fs::write(&file, manifest).expect("manifest");
        curl(
            self,
            &[
                "-X",
                "PUT",
                "-H",
                &format!("Content-Type: {OCI_MANIFEST}"),
                "--data-binary",
                &format!("@{}", file.display()),
                &self.url(&format!("/v2/{repository}/manifests/{tag}")),
            ],
        );
    }
}

/// A 6 MiB disk with data at its start, its middle and its end.
fn raw_disk() -> Vec<u8> {
    let mut bytes = vec![0_u8; 6 << 20];
    bytes[..4096].fill(0xeb);
    bytes[3 << 20..(3 << 20) + 65_536].fill(0x5a);
    let end = bytes.len();
    bytes[end - 512..].fill(0xaa);
    bytes
}

fn qcow2_of(raw: &[u8], dir: &Path) -> Vec<u8> {
    let source = dir.join("disk.raw");
    let out = dir.join("disk.qcow2");
    std::fs::write(&source, raw).expect("raw");
    let status = Command::new("qemu-img")
        .args(["convert", "-f", "raw", "-O", "qcow2"])
        .arg(&source)
        .arg(&out)
        .status()
        .expect("qemu-img is installed (make deps)");
    assert!(status.success(), "qemu-img convert");
    std::fs::read(out).expect("qcow2")
}

fn job(url: String, cert_dir: Option<PathBuf>) -> Job {
    Job {
        source: Source::Registry(RegistrySource {
            url,
            ..RegistrySource::default()
        }),
        cert_dir,
        image_size: Some(8 << 20),
        filesystem_overhead: "0".to_owned(),
        preallocation: false,
        checksum: None,
        owner_uid: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_containerdisk_s_qcow2_is_pulled_through_the_ca_and_converted() {
    let registry = Registry::start();
    let work = tempfile::tempdir().expect("work");
    let qcow2 = qcow2_of(&raw_disk(), work.path());
    let boot = gzip(&layer(&[("boot/vmlinuz", b"a kernel")]));
    let disk = gzip(&layer(&[("disk/testguest.qcow2", &qcow2)]));
    registry.push_image("containerdisks/testguest", "v1", &[boot, disk]);
    let url = format!("docker://localhost:{}/containerdisks/testguest:v1", registry.port);

    let verified = pod(true);
    let certs = verified.root.path().join("certs");
    std::fs::create_dir(&certs).expect("certs");
    std::fs::write(certs.join("ca.crt"), &registry.ca_pem).expect("ca");
    let ended = run::run(job(url.clone(), Some(certs)), &verified.paths, QemuImg::default()).await;
    match ended {
        Ok(Ended::Finished(finished)) => assert!(!finished.scratch_space_required, "{finished:?}"),
        other => panic!("not imported: {other:?}"),
    }
    let disk = std::fs::read(verified.paths.data_dir.join("disk.img")).expect("disk.img");
    assert_eq!(disk.len(), 8 << 20, "grown to the size asked for");
    assert!(disk[..6 << 20] == raw_disk()[..], "the qcow2's disk, converted");
    assert!(disk[6 << 20..].iter().all(|&b| b == 0));
    assert_eq!(
        std::fs::read_dir(&verified.paths.scratch_dir).expect("scratch").count(),
        0,
        "scratch emptied"
    );

    // Without the CA, the registry's certificate is refused and nothing is left.
    let unverified = pod(true);
    let error = run::run(job(url, None), &unverified.paths, QemuImg::default())
        .await
        .expect_err("an unknown certificate");
    let message = error.termination_message();
    assert!(
        message.starts_with(&format!(
            "Unable to process data: Failed to read registry image: connecting to localhost:{}",
            registry.port
        )),
        "{message}"
    );
    assert!(!unverified.paths.data_dir.join("disk.img").exists());
}
