//! The virt-controller binary: flags, logging, the kube client, the HTTP endpoint and signals;
//! the controllers themselves are `virt_controller::runner`.

use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use control_loop::http::Endpoints;
use kubevirt_api::clock::{Clock, SystemClock};
use tokio_util::sync::CancellationToken;
use virt_controller::cluster_api::{ControllerApi, KubeControllerApi};
use virt_controller::pod::{Emulation, PodConfig};
use virt_controller::runner::{Controllers, run};

/// virt-controller's flags (upstream's names).
#[derive(Debug, Parser)]
#[command(
    name = "virt-controller",
    version,
    args_override_self = true,
    about = "KubeVirt's cluster controller (kubevirt-rs)"
)]
struct Args {
    /// The virt-launcher image launcher pods run.
    #[arg(long)]
    launcher_image: String,
    /// Pull policy of launcher and containerDisk images.
    #[arg(long, default_value = "IfNotPresent")]
    image_pull_policy: String,
    /// Port of `/healthz`, `/leader` and `/metrics`.
    #[arg(long, default_value_t = 8443)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    listen_address: IpAddr,
    /// The certificate `/healthz`, `/leader` and `/metrics` are served with (PEM); without it and
    /// its key they are plain HTTP.
    #[arg(long, requires = "tls_key_file")]
    tls_cert_file: Option<std::path::PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_key_file: Option<std::path::PathBuf>,
    /// Base of the launchers' `--qemu-timeout`, in seconds.
    #[arg(long, default_value_t = 240)]
    qemu_timeout_seconds: u64,
    /// Launchers get `--allow-emulation` and no `/dev/kvm` (the KubeVirt CR's `useEmulation`).
    #[arg(long)]
    use_emulation: bool,
    /// Elect a leader among replicas through a coordination.k8s.io Lease.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// The Lease's namespace (the install namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "kubevirt")]
    leader_election_namespace: String,
    /// This replica's identity in the Lease.
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Objects reconciled at once.
    #[arg(long, default_value_t = 10)]
    workers: usize,
    /// Log verbosity (upstream's `-v`, also `--v` as customizeComponents.flags renders it);
    /// `RUST_LOG` overrides it. A flag given twice takes its last value, as upstream's Go flags.
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    verbosity: u8,
}

/// The endpoint's view of the controller: healthy until stopped, ready while leading.
struct Health<A, K> {
    stop: CancellationToken,
    controllers: Arc<Controllers<A, K>>,
    leading: tokio::sync::watch::Receiver<bool>,
}

impl<A: ControllerApi, K: Clock> Endpoints for Health<A, K> {
    fn healthy(&self) -> bool {
        !self.stop.is_cancelled()
    }

    fn leading(&self) -> bool {
        *self.leading.borrow()
    }

    async fn metrics(&self) -> String {
        virt_controller::runner::metrics(&self.controllers, self.leading())
    }
}

/// Leadership: a Lease shared by the replicas, or (with `--leader-elect=false`) always.
async fn leadership(
    client: &kube::Client,
    args: &Args,
) -> anyhow::Result<(
    tokio::sync::watch::Receiver<bool>,
    Option<tokio::sync::watch::Sender<bool>>,
)> {
    if !args.leader_elect {
        let (always, leading) = tokio::sync::watch::channel(true);
        return Ok((leading, Some(always)));
    }
    let identity = args
        .identity
        .clone()
        .unwrap_or_else(|| format!("virt-controller-{}", std::process::id()));
    let leading = virt_controller::leader::elect(client.clone(), &args.leader_election_namespace, &identity).await?;
    Ok((leading, None))
}

fn main() -> ExitCode {
    let args = Args::parse();
    control_loop::process::main("virt-controller", args.verbosity, serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the Kubernetes API (in-cluster config or KUBECONFIG)")?;
    let tls = control_loop::http::endpoint_tls(
        "virt-controller",
        args.tls_cert_file.as_deref(),
        args.tls_key_file.as_deref(),
    )?;
    let addr = SocketAddr::new(args.listen_address, args.port);
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let stop = control_loop::process::stop_on_signals().context("cannot watch SIGTERM")?;
    let mut config = PodConfig::new(&args.launcher_image);
    config.image_pull_policy.clone_from(&args.image_pull_policy);
    config.qemu_timeout_seconds = args.qemu_timeout_seconds;
    if args.use_emulation {
        config.emulation = Emulation::WhereKvmIsMissing;
    }
    let (leading, _always) = leadership(&client, &args).await?;
    let api = KubeControllerApi::new(client);
    let controllers = Arc::new(Controllers::new(&api, &SystemClock, config));
    let health = Arc::new(Health {
        stop: stop.clone(),
        controllers: controllers.clone(),
        leading: leading.clone(),
    });
    let http = tokio::spawn(control_loop::http::serve(listener, health, tls, stop.clone()));
    run(controllers, &api, args.workers, leading, stop).await;
    http.await.context("the HTTP endpoint failed")?;
    Ok(())
}
