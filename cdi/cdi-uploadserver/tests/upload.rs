//! The upload server over real TLS with raw images (no conversion): who it admits, the one
//! upload it takes, sync, async and form uploads, and what it answers when an upload fails.

mod support;

use std::io::Write as _;
use std::sync::Arc;

use bytes::Bytes;
use cdi_uploadserver::server::Outcome;
use http_body_util::BodyExt as _;
use support::{MIB, NoConverter, Setup, full, head, raw_disk, start};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).expect("gzip");
    encoder.finish().expect("gzip")
}

#[tokio::test]
async fn a_gzipped_raw_upload_is_written_grown_and_ends_the_server() {
    let setup = Setup::new();
    let server = start(setup.config(8 * MIB), Arc::new(NoConverter)).await;
    let proxy = setup.client(Some(&setup.proxy));
    let health = proxy
        .send(server.address, "GET", "/healthz", &[], full(""))
        .await
        .expect("health");
    assert_eq!((health.status, health.body.as_str()), (200, "OK"));
    let disk = raw_disk(3 * MIB);
    let answer = proxy.post(server.address, "/v1beta1/upload", gzip(&disk)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(
        server.outcome().await.expect("outcome"),
        Outcome::Uploaded {
            preallocation_applied: false
        }
    );
    let written = std::fs::metadata(setup.disk()).expect("disk");
    assert_eq!(written.len(), 8 * MIB, "grown to the claim's size");
    assert_eq!(head(&setup.disk(), disk.len()), disk);
}

#[tokio::test]
async fn only_the_proxys_certificate_may_upload_and_a_refusal_writes_nothing() {
    let setup = Setup::new();
    let server = start(setup.config(8 * MIB), Arc::new(NoConverter)).await;
    let anonymous = setup.client(None);
    let health = anonymous.send(server.address, "GET", "/healthz", &[], full("")).await;
    assert_eq!(
        health.expect("health").status,
        200,
        "the kubelet's probe has no certificate"
    );
    assert_eq!(
        anonymous
            .post(server.address, "/v1beta1/upload", raw_disk(MIB))
            .await
            .status,
        401
    );
    let stranger = setup.client(Some(&setup.stranger));
    let refused = stranger.post_err(server.address).await;
    assert!(
        refused.is_err(),
        "another name is cut off at the handshake: {refused:?}"
    );
    let proxy = setup.client(Some(&setup.proxy));
    for (method, path, status) in [
        ("PUT", "/v1beta1/upload", 404),
        ("GET", "/v1beta1/upload", 404),
        ("POST", "/v1beta1/nothing", 404),
        ("HEAD", "/v1beta1/upload-async", 200),
        ("POST", "/v1beta1/upload-archive", 400),
    ] {
        let answer = proxy
            .send(server.address, method, path, &[], full("x"))
            .await
            .expect("answer");
        assert_eq!(answer.status, status, "{method} {path}");
    }
    let clone = proxy
        .send(
            server.address,
            "POST",
            "/v1beta1/upload",
            &[("x-cdi-content-type", "filesystem-clone")],
            full("x"),
        )
        .await
        .expect("answer");
    assert_eq!(clone.status, 400);
    assert!(clone.body.contains("x-cdi-content-type"), "{}", clone.body);
    assert!(!setup.disk().exists(), "nothing written");
    // The server still waits for its upload.
    let answer = proxy.post(server.address, "/v1alpha1/upload", raw_disk(MIB)).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(server.outcome().await.is_ok());
}

#[tokio::test]
async fn a_second_upload_during_the_first_gets_503_and_a_failed_one_may_be_tried_again() {
    let setup = Setup::new();
    let server = start(setup.config(4 * MIB), Arc::new(NoConverter)).await;
    let proxy = Arc::new(setup.client(Some(&setup.proxy)));
    // The first upload's body stays open until the second has its answer.
    let (chunks, receiver) = tokio::sync::mpsc::channel::<Result<hyper::body::Frame<Bytes>, std::io::Error>>(1);
    let body = http_body_util::StreamBody::new(tokio_stream::wrappers::ReceiverStream::new(receiver)).boxed();
    let first = {
        let proxy = Arc::clone(&proxy);
        let address = server.address;
        tokio::spawn(async move { proxy.send(address, "POST", "/v1beta1/upload", &[], body).await })
    };
    let disk = raw_disk(2 * MIB);
    chunks
        .send(Ok(hyper::body::Frame::data(Bytes::copy_from_slice(
            &disk[..disk.len() / 2],
        ))))
        .await
        .expect("first chunk");
    // The first is being written once its disk exists.
    let begin = std::time::Instant::now();
    while !setup.disk().exists() {
        assert!(
            begin.elapsed() < std::time::Duration::from_secs(60),
            "the first upload never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let second = proxy.post(server.address, "/v1beta1/upload", raw_disk(MIB)).await;
    assert_eq!(second.status, 503, "busy");
    // Too much for the claim: 400 with upstream's words, and the half-written disk is removed.
    for _ in 0..4 {
        chunks
            .send(Ok(hyper::body::Frame::data(Bytes::copy_from_slice(
                &disk[..disk.len() / 2],
            ))))
            .await
            .expect("more");
    }
    drop(chunks);
    let first = first.await.expect("first").expect("answer");
    assert_eq!(first.status, 400, "{}", first.body);
    assert!(
        first
            .body
            .starts_with("Saving stream failed: effective image size is larger than the reported available storage"),
        "{}",
        first.body
    );
    assert!(!setup.disk().exists(), "the failed upload left no disk");
    let again = proxy.post(server.address, "/v1beta1/upload", disk.clone()).await;
    assert_eq!(again.status, 200, "{}", again.body);
    assert!(server.outcome().await.is_ok());
    assert_eq!(head(&setup.disk(), disk.len()), disk);
}

#[tokio::test]
async fn a_forms_file_part_is_uploaded_async_after_its_other_parts() {
    let setup = Setup::new();
    let server = start(setup.config(4 * MIB), Arc::new(NoConverter)).await;
    let proxy = setup.client(Some(&setup.proxy));
    let disk = raw_disk(2 * MIB);
    let mut form = b"--b0undary\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhello\r\n".to_vec();
    form.extend_from_slice(
        b"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"disk.img\"\r\nContent-Type: application/octet-stream\r\n\r\n",
    );
    form.extend_from_slice(&disk);
    form.extend_from_slice(b"\r\n--b0undary--\r\n");
    let no_boundary = proxy
        .send(
            server.address,
            "POST",
            "/v1beta1/upload-form-async",
            &[("content-type", "multipart/form-data")],
            full(form.clone()),
        )
        .await
        .expect("answer");
    assert_eq!(no_boundary.status, 400);
    let answer = proxy
        .send(
            server.address,
            "POST",
            "/v1beta1/upload-form-async",
            &[("content-type", "multipart/form-data; boundary=b0undary")],
            full(form),
        )
        .await
        .expect("answer");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(server.outcome().await.is_ok());
    assert_eq!(head(&setup.disk(), disk.len()), disk);
    assert_eq!(std::fs::metadata(setup.disk()).expect("disk").len(), 4 * MIB);
}

#[tokio::test]
async fn a_deadline_with_no_upload_ends_the_server_without_a_disk() {
    let setup = Setup::new();
    let mut config = setup.config(MIB);
    config.deadline = Some(time::OffsetDateTime::now_utc().unix_timestamp() - 1);
    let server = start(config, Arc::new(NoConverter)).await;
    assert_eq!(server.outcome().await.expect("outcome"), Outcome::DeadlinePassed);
    assert!(!setup.disk().exists());
}

/// A converter that says when it starts and waits to be let go, then writes `size` bytes.
struct GatedConverter {
    size: u64,
    started: std::sync::Mutex<std::sync::mpsc::Sender<()>>,
    go: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
}

impl cdi_importer::convert::Converter for GatedConverter {
    fn virtual_size(&self, _: &std::path::Path, _: &str) -> Result<u64, cdi_importer::convert::ConvertError> {
        Ok(self.size)
    }

    fn convert_to_raw(
        &self,
        _: &std::path::Path,
        _: &str,
        target: &std::path::Path,
    ) -> Result<(), cdi_importer::convert::ConvertError> {
        let _ = self.started.lock().expect("started").send(());
        let _ = self.go.lock().expect("go").recv();
        std::fs::write(target, raw_disk(self.size)).expect("the converted disk");
        Ok(())
    }
}

#[tokio::test]
async fn a_client_that_hangs_up_while_its_image_converts_still_gets_its_disk_written() {
    use tokio::io::AsyncWriteExt as _;
    let setup = Setup::new();
    std::fs::create_dir(setup.scratch()).expect("scratch");
    let (started_tx, started) = std::sync::mpsc::channel();
    let (go, go_rx) = std::sync::mpsc::channel();
    let converter = GatedConverter {
        size: 2 * MIB,
        started: std::sync::Mutex::new(started_tx),
        go: std::sync::Mutex::new(go_rx),
    };
    let server = start(setup.config(4 * MIB), Arc::new(converter)).await;
    // A qcow2 header naming a 2 MiB disk, and some bytes after it.
    let mut image = vec![0_u8; 64 * 1024];
    image[..4].copy_from_slice(b"QFI\xfb");
    image[24..32].copy_from_slice(&(2 * MIB).to_be_bytes());
    let config =
        control_loop::tls::client_tls_pem("test", &setup.server_ca.cert_pem(), &setup.proxy.cert, &setup.proxy.key)
            .expect("tls");
    let tcp = tokio::net::TcpStream::connect(server.address).await.expect("connect");
    let name = rustls_pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("tls");
    let request_head = format!(
        "POST /v1beta1/upload HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n\r\n",
        image.len()
    );
    tls.write_all(request_head.as_bytes()).await.expect("head");
    tls.write_all(&image).await.expect("body");
    tls.flush().await.expect("flush");
    // The body is in and being converted: the client goes away before its answer.
    tokio::task::spawn_blocking(move || started.recv_timeout(std::time::Duration::from_secs(60)))
        .await
        .expect("join")
        .expect("the conversion starts");
    drop(tls);
    // Give the server a moment to see the hang-up (and drop the request's handler) before the
    // conversion ends; the outcome is the same either way once the upload is recorded apart.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    go.send(()).expect("let the conversion go");
    assert_eq!(
        server.outcome().await.expect("outcome"),
        Outcome::Uploaded {
            preallocation_applied: false
        },
        "the upload is recorded though nobody waits for its answer"
    );
    assert_eq!(
        std::fs::read(setup.disk()).expect("disk")[..1024],
        raw_disk(2 * MIB)[..1024]
    );
}

#[tokio::test]
async fn a_clones_disk_is_written_as_it_comes_even_when_it_looks_compressed() {
    let setup = Setup::new();
    let server = start(setup.config(8 * MIB), Arc::new(NoConverter)).await;
    let client = setup.client(Some(&setup.proxy));
    // A raw disk that begins like a gzip stream: an upload would take the gzip off, a clone must
    // not.
    let mut disk = gzip(&raw_disk(MIB));
    disk.resize(2 << 20, 0);
    let answer = client
        .send(
            server.address,
            "POST",
            "/v1beta1/upload",
            &[("x-cdi-content-type", "blockdevice-clone")],
            full(disk.clone()),
        )
        .await
        .expect("answer");
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(server.outcome().await.is_ok());
    assert_eq!(head(&setup.disk(), disk.len()), disk, "the bytes as they were sent");
}
