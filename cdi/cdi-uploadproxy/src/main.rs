//! cdi-uploadproxy: checks upload tokens and streams uploads to their claims' upload servers.
//! Wiring only: the files of CDI's certificates and token key, a kube client for the claims, and
//! [`cdi_uploadproxy::proxy::serve`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cdi_uploadproxy::claims::KubeClaims;
use cdi_uploadproxy::proxy::{self, DnsDialer, Proxy, READY_WAIT, TOKEN_LEEWAY_SECONDS};
use clap::Parser;
use control_loop::tls::{CertSource, server_tls};

#[derive(Debug, Parser)]
#[command(about = "CDI's upload proxy: uploads into their claims' upload servers")]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The serving certificate (the Secret `cdi-uploadproxy-server-cert`).
    #[arg(long, default_value = "/var/run/certs/cdi-uploadproxy-server-cert/tls.crt")]
    tls_cert_file: PathBuf,
    /// Its key.
    #[arg(long, default_value = "/var/run/certs/cdi-uploadproxy-server-cert/tls.key")]
    tls_key_file: PathBuf,
    /// The client certificate presented to upload servers (`cdi-uploadserver-client-cert`).
    #[arg(long, default_value = "/var/run/certs/cdi-uploadserver-client-cert/tls.crt")]
    client_cert_file: PathBuf,
    /// Its key.
    #[arg(long, default_value = "/var/run/certs/cdi-uploadserver-client-cert/tls.key")]
    client_key_file: PathBuf,
    /// The CA of upload servers' certificates (`cdi-uploadserver-signer-bundle`).
    #[arg(
        long,
        default_value = "/var/run/ca-bundle/cdi-uploadserver-signer-bundle/ca-bundle.crt"
    )]
    upload_server_ca_file: PathBuf,
    /// cdi-apiserver's token key, public (`cdi-api-signing-key`'s `id_ed25519.pub`).
    #[arg(long, default_value = "/var/run/keys/cdi-api-signing-key/id_ed25519.pub")]
    token_public_key_file: PathBuf,
    /// Log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

async fn run(args: Args) -> anyhow::Result<()> {
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let public_key = std::fs::read(&args.token_public_key_file)
        .with_context(|| format!("reading the token key {}", args.token_public_key_file.display()))?;
    let serving = server_tls(&CertSource::Files {
        cert: args.tls_cert_file,
        key: args.tls_key_file,
    })
    .context("the serving certificate")?;
    let upstream_tls = proxy::upstream_tls(
        &args.upload_server_ca_file,
        &args.client_cert_file,
        &args.client_key_file,
    )
    .context("the client certificate for upload servers")?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server")?;
    let proxy = Arc::new(Proxy {
        claims: KubeClaims(client),
        dialer: DnsDialer,
        validator: cdi_token::Validator::new(&public_key, cdi_token::UPLOAD_ISSUER, TOKEN_LEEWAY_SECONDS),
        upstream_tls,
        ready_wait: READY_WAIT,
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    proxy::serve(listener, serving.config, proxy, stop).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("cdi-uploadproxy", verbosity, run(args))
}
