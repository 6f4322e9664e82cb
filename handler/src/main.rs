//! The virt-handler binary: flags, logging, the kube client and signals; the handler itself is
//! `virt_handler::node`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use virt_handler::cluster_api::KubeClusterApi;
use virt_handler::node::{NodeConfig, run};
use virt_handler::reconciler::ReconcilerConfig;
use virt_handler::runner::RunOptions;

/// virt-handler's flags (upstream's names where upstream has them).
#[derive(Debug, Parser)]
#[command(name = "virt-handler", version, about = "KubeVirt's per-node agent (kubevirt-rs)")]
struct Args {
    /// Port of `/healthz` and `/metrics`.
    #[arg(long, default_value_t = 8443)]
    port: u16,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    listen_address: IpAddr,
    /// This node's name.
    #[arg(long, env = "NODE_NAME")]
    hostname_override: String,
    /// The pod's IP (accepted for upstream compatibility).
    #[arg(long, env = "MY_POD_IP")]
    pod_ip_address: Option<String>,
    /// Launchers asked for statistics at once per scrape.
    #[arg(long, default_value_t = 3)]
    max_metric_requests: usize,
    /// Console server port (accepted; no console server yet).
    #[arg(long, default_value_t = 8186)]
    console_server_port: u16,
    /// How long a stop may take (accepted; in-flight reconciles always finish).
    #[arg(long, default_value_t = 315)]
    graceful_shutdown_seconds: u64,
    /// The share directory: the notify server's socket goes here.
    #[arg(long, default_value = "/var/run/kubevirt")]
    kubevirt_share_dir: PathBuf,
    /// The kubelet's pods directory.
    #[arg(long, default_value = "/var/lib/kubelet/pods")]
    kubelet_pods_dir: PathBuf,
    /// The kubelet's root directory (for its CPU manager state).
    #[arg(long, default_value = "/var/lib/kubelet")]
    kubelet_root: PathBuf,
    /// VMIs reconciled at once.
    #[arg(long, default_value_t = 10)]
    workers: usize,
    /// Log verbosity (upstream's `-v`); `RUST_LOG` overrides it.
    #[arg(short = 'v', default_value_t = 2)]
    verbosity: u8,
}

fn main() -> ExitCode {
    let args = Args::parse();
    control_loop::process::main("virt-handler", args.verbosity, serve(args))
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the Kubernetes API (in-cluster config or KUBECONFIG)")?;
    let stop = control_loop::process::stop_on_signals().context("cannot watch SIGTERM")?;
    let config = NodeConfig {
        reconciler: ReconcilerConfig::for_node(&args.hostname_override),
        node: args.hostname_override,
        share_dir: args.kubevirt_share_dir,
        pods_dir: args.kubelet_pods_dir,
        cpu_manager_state: args.kubelet_root.join("cpu_manager_state"),
        listen: Some(SocketAddr::new(args.listen_address, args.port)),
        max_metric_requests: args.max_metric_requests,
        heartbeat: virt_handler::heartbeat::INTERVAL,
        run: RunOptions {
            workers: args.workers,
            resync: Duration::from_secs(300),
        },
    };
    run(config, KubeClusterApi::new(client), stop).await?;
    Ok(())
}
