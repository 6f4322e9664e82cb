//! virt-template-validator: SSP's validating webhook for VirtualMachines. Wiring only: its
//! serving certificate (mounted from its Secret, read again when renewed), the API server for
//! templates, and [`virt_template_validator::server::serve`] on the webhook and metrics ports.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use control_loop::tls::{CertSource, server_tls};
use virt_template_validator::server::{self, KubeTemplates, Port, Validator};

#[derive(Debug, Parser)]
#[command(about = "SSP's template validator: validation rules of VirtualMachines, as a webhook")]
struct Args {
    /// The address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    listen: IpAddr,
    /// The webhook's port (and its probes').
    #[arg(long, default_value_t = 9443)]
    webhook_port: u16,
    /// The metrics' port.
    #[arg(long, default_value_t = 8443)]
    metrics_port: u16,
    /// The directory with the serving certificate and key (`tls.crt`, `tls.key`). Upstream
    /// serves plain HTTP without one; this validator always serves HTTPS.
    #[arg(short = 'c', long, default_value = "/etc/webhook/certs")]
    cert_dir: PathBuf,
    /// Log verbosity, upstream's -v.
    #[arg(short = 'v', default_value_t = 1)]
    verbosity: u8,
}

async fn run(args: Args) -> anyhow::Result<()> {
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let client = kube::Client::try_default()
        .await
        .context("connecting to the API server")?;
    let source = CertSource::Files {
        cert: args.cert_dir.join("tls.crt"),
        key: args.cert_dir.join("tls.key"),
    };
    let tls = server_tls(&source).context("the serving certificate")?;
    let bind = |port: u16| async move {
        let address = SocketAddr::new(args.listen, port);
        tokio::net::TcpListener::bind(address)
            .await
            .with_context(|| format!("listening on {address}"))
    };
    let webhook = bind(args.webhook_port).await?;
    let metrics = bind(args.metrics_port).await?;
    let validator = Arc::new(Validator::new(KubeTemplates(client)));
    tokio::join!(
        server::serve(
            webhook,
            Port::Webhook,
            tls.config.clone(),
            Arc::clone(&validator),
            stop.clone()
        ),
        server::serve(metrics, Port::Metrics, tls.config, validator, stop),
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("virt-template-validator", verbosity, run(args))
}
