//! A web server on the loopback for the importer's tests: plain or TLS, with the routes the
//! tests use.

#![allow(dead_code, reason = "each test binary uses a part")]

use std::convert::Infallible;
use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub mod fake_registry;

/// A converter for images that must never reach one.
pub struct NoConverter;

impl cdi_importer::convert::Converter for NoConverter {
    fn virtual_size(&self, image: &std::path::Path, _: &str) -> Result<u64, cdi_importer::convert::ConvertError> {
        panic!("no conversion expected: {}", image.display())
    }

    fn convert_to_raw(
        &self,
        image: &std::path::Path,
        _: &str,
        _: &std::path::Path,
    ) -> Result<(), cdi_importer::convert::ConvertError> {
        panic!("no conversion expected: {}", image.display())
    }
}

/// An importer pod's volumes in a temporary directory.
pub struct Pod {
    pub root: tempfile::TempDir,
    pub paths: cdi_importer::run::Paths,
}

/// A pod's volumes: the data directory, and the scratch directory when `scratch`.
pub fn pod(scratch: bool) -> Pod {
    let root = tempfile::tempdir().expect("temp dir");
    let paths = cdi_importer::run::Paths {
        data_dir: root.path().join("data"),
        block_device: root.path().join("dev/cdi-block-volume"),
        scratch_dir: root.path().join("scratch"),
    };
    std::fs::create_dir(&paths.data_dir).expect("data");
    if scratch {
        std::fs::create_dir(&paths.scratch_dir).expect("scratch");
    }
    Pod { root, paths }
}

impl Pod {
    /// The disk file the import writes.
    pub fn disk(&self) -> std::path::PathBuf {
        self.paths.data_dir.join("disk.img")
    }
}

pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

/// Something that starts as a VMDK does (what follows matters only to a converter).
pub fn vmdk() -> Vec<u8> {
    let mut bytes = b"KDMV".to_vec();
    bytes.resize(65_536, 1);
    bytes
}

pub fn image() -> Vec<u8> {
    (0..3_000_000_u32).map(|n| (n % 253) as u8).collect()
}

fn respond(request: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let reply = |status: StatusCode, body: Vec<u8>| {
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = status;
        response
    };
    let redirect = |to: &str| {
        let mut response = reply(StatusCode::FOUND, Vec::new());
        response
            .headers_mut()
            .insert(hyper::header::LOCATION, to.parse().expect("location"));
        response
    };
    match request.uri().path() {
        "/images/disk.img" => reply(StatusCode::OK, image()),
        "/images/disk.img.gz" => reply(StatusCode::OK, gzip(&image())),
        "/images/disk.vmdk" => reply(StatusCode::OK, vmdk()),
        "/moved" => redirect("/images/disk.img"),
        "/images/relative" => redirect("disk.img"),
        "/loop" => redirect("/loop"),
        "/private" => {
            let auth = request.headers().get(hyper::header::AUTHORIZATION);
            let header = request.headers().get("x-token");
            // "user:secret" in base64.
            if auth.is_some_and(|a| a == "Basic dXNlcjpzZWNyZXQ=") && header.is_some_and(|h| h == "abc") {
                reply(StatusCode::OK, image())
            } else {
                reply(StatusCode::UNAUTHORIZED, Vec::new())
            }
        }
        _ => reply(StatusCode::NOT_FOUND, Vec::new()),
    }
}

pub async fn serve_plain() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                TokioIo::new(stream),
                service_fn(|r| async move { Ok::<_, Infallible>(respond(&r)) }),
            ));
        }
    });
    address
}

/// A server that promises more than it sends, then hangs up.
pub async fn serve_cut_short() -> SocketAddr {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut request = [0_u8; 4096];
            let _ = stream.read(&mut request).await;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nonly this much")
                .await;
        }
    });
    address
}

pub async fn serve_tls() -> (SocketAddr, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .expect("params")
        .self_signed(&key)
        .expect("cert");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![cert.der().clone()],
            rustls_pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        )
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("listener");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(stream).await {
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(
                            TokioIo::new(stream),
                            service_fn(|r| async move { Ok::<_, Infallible>(respond(&r)) }),
                        )
                        .await;
                }
            });
        }
    });
    (address, cert.pem())
}
