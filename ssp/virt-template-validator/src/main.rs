//! virt-template-validator: SSP's validating webhook for VirtualMachines. Wiring only: its
//! serving certificate (mounted from its Secret, read again when renewed), the API server for
//! templates, and [`virt_template_validator::server::serve`].

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use control_loop::tls::{CertSource, server_tls};
use virt_template_validator::server::{self, KubeTemplates, Validator};

#[derive(Debug, Parser)]
#[command(about = "SSP's template validator: validation rules of VirtualMachines, as a webhook")]
struct Args {
    /// The address to listen on (upstream's webhook port).
    #[arg(long, default_value = "0.0.0.0:9443")]
    listen: SocketAddr,
    /// The serving certificate.
    #[arg(long, default_value = "/etc/webhook/certs/tls.crt")]
    tls_cert_file: PathBuf,
    /// Its key.
    #[arg(long, default_value = "/etc/webhook/certs/tls.key")]
    tls_key_file: PathBuf,
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
        cert: args.tls_cert_file,
        key: args.tls_key_file,
    };
    let tls = server_tls(&source).context("the serving certificate")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {}", args.listen))?;
    let validator = Arc::new(Validator::new(KubeTemplates(client)));
    server::serve(listener, tls.config, validator, stop).await;
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("virt-template-validator", verbosity, run(args))
}
