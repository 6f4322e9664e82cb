//! The http source against a server on the loopback: plain and TLS, redirects, basic auth and
//! extra headers, and each way a download fails, named.

mod support;

use std::io::Read as _;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use cdi_importer::http_source::{self, HttpError, HttpSource};
use support::{image, serve_cut_short, serve_plain, serve_tls};
use tokio::net::TcpListener;

/// Opens `source` and reads it to its end on a blocking thread, as the importer does.
async fn download(source: HttpSource) -> Result<Vec<u8>, String> {
    let download = http_source::open(&source).await.map_err(|e| e.to_string())?;
    let length = download.content_length;
    let read = Arc::clone(&download.read);
    let bytes = tokio::task::spawn_blocking(move || {
        let mut download = download;
        let mut bytes = Vec::new();
        download.read_to_end(&mut bytes).map(|_| bytes)
    })
    .await
    .expect("the reader")
    .map_err(|e| format!("read: {e}"))?;
    assert_eq!(
        read.load(Ordering::Relaxed),
        bytes.len() as u64,
        "progress counts every byte"
    );
    assert_eq!(length, Some(bytes.len() as u64));
    Ok(bytes)
}

fn source(url: String) -> HttpSource {
    HttpSource {
        url,
        ..HttpSource::default()
    }
}

#[tokio::test]
async fn a_plain_download_and_its_redirects_bring_the_whole_image() {
    let server = serve_plain().await;
    for path in ["/images/disk.img", "/moved", "/images/relative"] {
        let bytes = download(source(format!("http://{server}{path}"))).await.expect(path);
        assert!(bytes == image(), "{path} brought the image");
    }
}

#[tokio::test]
async fn basic_auth_and_extra_headers_are_sent() {
    let server = serve_plain().await;
    let url = format!("http://{server}/private");
    let denied = download(source(url.clone())).await.expect_err("no credentials");
    assert_eq!(denied, format!("GET {url}: HTTP 401 Unauthorized"));
    let allowed = HttpSource {
        url,
        basic_auth: Some(("user".to_owned(), "secret".to_owned())),
        extra_headers: vec!["X-Token: abc".to_owned()],
        extra_roots_pem: Vec::new(),
        skip_tls_verify: false,
        no_redirects: false,
    };
    assert!(download(allowed).await.expect("allowed") == image());
}

#[tokio::test]
async fn each_failure_is_named() {
    let server = serve_plain().await;
    let missing = download(source(format!("http://{server}/nothing")))
        .await
        .expect_err("404");
    assert_eq!(missing, format!("GET http://{server}/nothing: HTTP 404 Not Found"));
    let looping = http_source::open(&source(format!("http://{server}/loop"))).await.err();
    assert!(
        matches!(looping, Some(HttpError::TooManyRedirects { .. })),
        "{looping:?}"
    );
    let scheme = download(source("ftp://example.com/disk.img".to_owned()))
        .await
        .expect_err("ftp");
    assert!(scheme.contains("the scheme must be http or https"), "{scheme}");
    let closed = TcpListener::bind("127.0.0.1:0").await.expect("port");
    let port = closed.local_addr().expect("address").port();
    drop(closed);
    let refused = download(source(format!("http://127.0.0.1:{port}/x")))
        .await
        .expect_err("refused");
    assert!(
        refused.starts_with(&format!("connecting to 127.0.0.1:{port}")),
        "{refused}"
    );
    let header = HttpSource {
        extra_headers: vec!["no colon".to_owned()],
        ..source(format!("http://{server}/images/disk.img"))
    };
    let bad_header = download(header).await.expect_err("bad header");
    assert!(
        bad_header.contains("an extra header is not `Name: value`"),
        "{bad_header}"
    );
    assert!(
        !bad_header.contains("no colon"),
        "a header's value is never repeated: {bad_header}"
    );
    let credentials = download(source(format!("http://user:pass@{server}/images/disk.img")))
        .await
        .expect_err("credentials in the URL");
    assert!(credentials.contains("use the source's secretRef"), "{credentials}");
}

#[tokio::test]
async fn a_body_cut_short_is_a_read_error() {
    let server = serve_cut_short().await;
    let cut = download(source(format!("http://{server}/disk.img")))
        .await
        .expect_err("cut short");
    assert!(cut.starts_with("read: "), "{cut}");
}

#[tokio::test]
async fn https_trusts_the_given_certificate_and_no_unknown_one() {
    let (server, pem) = serve_tls().await;
    let url = format!("https://localhost:{}/images/disk.img", server.port());
    let unknown = download(source(url.clone())).await.expect_err("unknown certificate");
    assert!(unknown.starts_with("connecting to localhost:"), "{unknown}");
    let trusted = HttpSource {
        extra_roots_pem: pem.into_bytes(),
        ..source(url)
    };
    assert!(download(trusted).await.expect("trusted") == image());
}
