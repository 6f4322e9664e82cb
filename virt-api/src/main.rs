//! The virt-api binary: flags and signals; the server is `virt_api::run`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use virt_api::backends::HandlerConnector;
use virt_api::run::{ApiConfig, run};
use virt_api::subresources::authorize::Authentication;
use virt_api::tls::CertSource;

/// virt-api's flags.
#[derive(Debug, Parser)]
#[command(
    name = "virt-api",
    version,
    args_override_self = true,
    about = "KubeVirt's admission webhooks and subresource API (kubevirt-rs)"
)]
struct Args {
    /// Address and port to serve HTTPS on.
    #[arg(long, default_value = "0.0.0.0:8443")]
    listen: SocketAddr,
    /// The serving certificate (PEM); with --tls-key-file.
    #[arg(long, requires = "tls_key_file", conflicts_with = "self_signed")]
    tls_cert_file: Option<PathBuf>,
    /// The serving certificate's private key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,
    /// Make a self-signed certificate at start, for local use.
    #[arg(long)]
    self_signed: bool,
    /// Keep the certificates in the cluster: make, read and renew KubeVirt's CA and every
    /// component's certificate in their Secrets (`kubevirt-ca`, `kubevirt-virt-api-certs`, ...),
    /// and put the CA bundle into the webhook configurations and APIServices (see
    /// docs/install.md).
    #[arg(long, conflicts_with_all = ["tls_cert_file", "self_signed"])]
    cluster_certificates: bool,
    /// KubeVirt's namespace: its service accounts are trusted, its virt-handlers are dialled.
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt")]
    install_namespace: String,
    /// virt-handler's console server port.
    #[arg(long, default_value_t = 8186)]
    console_server_port: u16,
    /// CA that signed virt-handler's serving certificate (PEM); `--cluster-certificates` takes it
    /// from the cluster instead.
    #[arg(long, conflicts_with = "cluster_certificates")]
    handler_ca_file: Option<PathBuf>,
    /// Client certificate presented to virt-handler (PEM); with --handler-client-key-file and
    /// --handler-ca-file.
    #[arg(
        long,
        requires = "handler_client_key_file",
        requires = "handler_ca_file",
        conflicts_with = "cluster_certificates"
    )]
    handler_client_cert_file: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, requires = "handler_client_cert_file")]
    handler_client_key_file: Option<PathBuf>,
    /// The aggregation layer's request-header CA (the `requestheader-client-ca-file` of the
    /// `kube-system/extension-apiserver-authentication` ConfigMap): subresource callers must
    /// present a certificate it signed, and a SubjectAccessReview decides for their user.
    #[arg(long, conflicts_with = "disable_authorization")]
    requestheader_client_ca_file: Option<PathBuf>,
    /// The common names the request-header CA's client certificates may carry (comma-separated,
    /// as kube-apiserver's `--requestheader-allowed-names`); empty: any it signed.
    #[arg(long, value_delimiter = ',', requires = "requestheader_client_ca_file")]
    requestheader_allowed_names: Vec<String>,
    /// Serve the subresources to anyone, without authentication (local use only).
    #[arg(long)]
    disable_authorization: bool,
    /// Log verbosity (upstream's `-v`, also `--v` as customizeComponents.flags renders it);
    /// `RUST_LOG` overrides it. A flag given twice takes its last value, as upstream's Go flags.
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    verbosity: u8,
}

fn main() -> ExitCode {
    let args = Args::parse();
    control_loop::process::main("virt-api", args.verbosity, serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let cert = match (
        args.tls_cert_file,
        args.tls_key_file,
        args.self_signed || args.cluster_certificates,
    ) {
        (None, None, true) if args.cluster_certificates => None,
        (Some(cert), Some(key), false) => Some(CertSource::Files { cert, key }),
        (None, None, true) => Some(CertSource::SelfSigned {
            names: vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
                args.listen.ip().to_string(),
            ],
        }),
        _ => anyhow::bail!("give either --tls-cert-file and --tls-key-file, --self-signed, or --cluster-certificates"),
    };
    let node = HandlerConnector::new(
        args.console_server_port,
        args.handler_ca_file.as_deref(),
        args.handler_client_cert_file
            .as_deref()
            .zip(args.handler_client_key_file.as_deref()),
    )?;
    let stop = control_loop::process::stop_on_signals()?;
    let authentication = if args.disable_authorization {
        tracing::warn!("subresource requests are not authenticated: --disable-authorization is for local use only");
        Authentication::Disabled
    } else {
        Authentication::FrontProxy
    };
    let config = ApiConfig {
        listen: args.listen,
        cert,
        install_namespace: args.install_namespace,
        node,
        requestheader_ca: args.requestheader_client_ca_file,
        requestheader_allowed_names: args.requestheader_allowed_names,
        authentication,
    };
    run(config, stop).await?;
    Ok(())
}
