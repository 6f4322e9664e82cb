//! The upload's ceiling: a server with the upload server's TLS settings (its certificate, the
//! client CA, the proxy's name) that reads the request's body to its end and throws it away. curl
//! sending the same file into it, on the same cores, takes what no upload server can take less
//! than: curl's reading and encrypting, the loopback, and the decryption.

use std::path::PathBuf;

use anyhow::{Context, bail};
use control_loop::tls::{CertSource, ClientCa, ClientPolicy, Identities};
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::upload::CLIENT_NAME;

/// The sink in this process (the child's side): prints its port, reads one request's body and
/// answers with how many bytes it read.
pub(crate) fn worker(args: &[String]) -> anyhow::Result<()> {
    let [certs] = args else {
        bail!("--upload-sink CERT_DIR");
    };
    let certs = PathBuf::from(certs);
    let policy = ClientPolicy {
        ca: ClientCa::File(certs.join("client-ca.crt")),
        identities: Identities::Only(vec![CLIENT_NAME.to_owned()]),
        required: false,
    };
    let source = CertSource::Files {
        cert: certs.join("tls.crt"),
        key: certs.join("tls.key"),
    };
    let tls = control_loop::tls::server_tls_for(&source, Some(&policy))?;
    let acceptor = tokio_rustls::TlsAcceptor::from(tls.config);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        println!("port {}", listener.local_addr()?.port());
        let (connection, _) = listener.accept().await?;
        let stream = acceptor.accept(connection).await.context("the TLS handshake")?;
        let service = hyper::service::service_fn(|request: Request<Incoming>| async move {
            let mut body = request.into_body();
            let mut read: u64 = 0;
            while let Some(frame) = body.frame().await {
                if let Ok(data) = frame?.into_data() {
                    read += data.len() as u64;
                }
            }
            Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from(read.to_string()))))
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await
            .context("serving the request")?;
        anyhow::Ok(())
    })
}
