//! cdi-apiserver: the aggregated `upload.cdi.kubevirt.io` API. Wiring only: its certificate and
//! token key from CDI's Secrets (mounted), the aggregation layer's request-header CA, and
//! [`cdi_apiserver::server::serve`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cdi_apiserver::server::{self, KubeAccessReviews, UploadApi};
use clap::Parser;
use control_loop::aggregation::{front_proxy_clients, requestheader};
use control_loop::tls::{CertSource, ClientCa, server_tls_for};

#[derive(Debug, Parser)]
#[command(about = "CDI's API server: upload tokens for the upload proxy")]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The serving certificate (the Secret `cdi-apiserver-server-cert`).
    #[arg(long, default_value = "/var/run/certs/cdi-apiserver-server-cert/tls.crt")]
    tls_cert_file: PathBuf,
    /// Its key.
    #[arg(long, default_value = "/var/run/certs/cdi-apiserver-server-cert/tls.key")]
    tls_key_file: PathBuf,
    /// The token signing key (`cdi-api-signing-key`'s `id_ed25519`, PKCS#8).
    #[arg(long, default_value = "/var/run/keys/cdi-api-signing-key/id_ed25519")]
    signing_key_file: PathBuf,
    /// The aggregation layer's request-header CA; with the allowed names and the user's headers,
    /// read from `kube-system/extension-apiserver-authentication` when not given.
    #[arg(long)]
    requestheader_client_ca_file: Option<PathBuf>,
    /// The common names the aggregation layer's certificates may carry (with
    /// --requestheader-client-ca-file; empty: any the CA signed).
    #[arg(long, value_delimiter = ',', requires = "requestheader_client_ca_file")]
    requestheader_allowed_names: Vec<String>,
    /// Log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

async fn run(args: Args) -> anyhow::Result<()> {
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let key = std::fs::read(&args.signing_key_file)
        .with_context(|| format!("reading the signing key {}", args.signing_key_file.display()))?;
    let issuer = cdi_token::Issuer::new(&key, cdi_token::UPLOAD_ISSUER, cdi_token::UPLOAD_LIFETIME_SECONDS)
        .with_context(|| format!("the signing key {}", args.signing_key_file.display()))?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server")?;
    let (policy, header_names) = if let Some(path) = args.requestheader_client_ca_file {
        (
            front_proxy_clients(ClientCa::File(path), &args.requestheader_allowed_names),
            control_loop::aggregation::HeaderNames::default(),
        )
    } else {
        let header = requestheader(&client).await.context("reading the request-header CA")?;
        let pem = header
            .ca
            .context("the cluster has no request-header CA: token requests could not be authenticated")?;
        let ca = ClientCa::Pem {
            origin: control_loop::aggregation::AUTHENTICATION_CONFIG_MAP.to_owned(),
            pem,
        };
        (front_proxy_clients(ca, &header.allowed_names), header.names)
    };
    let source = CertSource::Files {
        cert: args.tls_cert_file,
        key: args.tls_key_file,
    };
    let tls = server_tls_for(&source, Some(&policy)).context("the serving certificate")?;
    let api = Arc::new(UploadApi {
        reviews: KubeAccessReviews(client),
        issuer,
        header_names,
    });
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    server::serve(listener, tls.config, api, stop).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("cdi-apiserver", verbosity, run(args))
}
