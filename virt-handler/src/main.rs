//! The virt-handler binary: flags, logging, the kube client and signals; the handler itself is
//! `virt_handler::node`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use control_loop::tls::{CertSource, server_tls_for};
use virt_handler::cluster_api::KubeClusterApi;
use virt_handler::console_server::console_clients;
use virt_handler::migration_tls::{MigrationFiles, MigrationTls};
use virt_handler::node::{ConsoleServerConfig, NodeConfig, run};
use virt_handler::reconciler::{MigrationNetwork, ReconcilerConfig};
use virt_handler::runner::RunOptions;

/// virt-handler's flags (upstream's names where upstream has them).
#[derive(Debug, Parser)]
#[command(
    name = "virt-handler",
    version,
    args_override_self = true,
    about = "KubeVirt's per-node agent (kubevirt-rs)"
)]
struct Args {
    /// Port of `/healthz` and `/metrics`.
    #[arg(long, default_value_t = 8443)]
    port: u16,
    /// The certificate `/healthz` and `/metrics` are served with (PEM); without it and its key
    /// they are plain HTTP.
    #[arg(long, requires = "tls_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    listen_address: IpAddr,
    /// This node's name.
    #[arg(long, env = "NODE_NAME")]
    hostname_override: String,
    /// The pod's IP: the migration proxies of a migration to this node listen there.
    #[arg(long, env = "MY_POD_IP")]
    pod_ip_address: Option<IpAddr>,
    /// Launchers asked for statistics at once per scrape.
    #[arg(long, default_value_t = 3)]
    max_metric_requests: usize,
    /// Port of the console server (pause, unpause and the serial console, for virt-api).
    #[arg(long, default_value_t = 8186)]
    console_server_port: u16,
    /// The handler's server certificate (PEM) for the console server and the migration proxies;
    /// without it and its key there is no console server. Read again when it changes.
    #[arg(long, requires_all = ["console_tls_key_file", "console_client_ca_file"])]
    console_tls_cert_file: Option<PathBuf>,
    /// The server certificate's private key (PEM).
    #[arg(long, requires = "console_tls_cert_file")]
    console_tls_key_file: Option<PathBuf>,
    /// The KubeVirt CA bundle (PEM): the console server admits virt-api's client certificate
    /// signed by it, the migration proxies the handlers' migration client certificate.
    #[arg(long, requires = "console_tls_cert_file")]
    console_client_ca_file: Option<PathBuf>,
    /// The client certificate (PEM) this handler presents to another handler's migration proxy
    /// (`kubevirt.io:system:client:migration`).
    #[arg(long, requires_all = ["migration_client_key_file", "console_tls_cert_file"])]
    migration_client_cert_file: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, requires = "migration_client_cert_file")]
    migration_client_key_file: Option<PathBuf>,
    /// How long a stop waits for the migrations through this node to close their proxies.
    #[arg(long, default_value_t = virt_handler::drain::DEFAULT_GRACE.as_secs())]
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
    /// Log verbosity (upstream's `-v`, also `--v` as customizeComponents.flags renders it);
    /// `RUST_LOG` overrides it. A flag given twice takes its last value, as upstream's Go flags.
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    verbosity: u8,
}

fn main() -> ExitCode {
    // The mount helper enters the node's mount namespace, which only a process without threads can.
    let raw: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(code) = virt_handler::mount_helper::run_helper(&raw) {
        return code;
    }
    let args = Args::parse();
    control_loop::process::main("virt-handler", args.verbosity, serve(args))
}

/// The console server's settings, when its certificate is given.
fn console_config(args: &Args) -> anyhow::Result<Option<ConsoleServerConfig>> {
    let (Some(cert), Some(key), Some(ca)) = (
        &args.console_tls_cert_file,
        &args.console_tls_key_file,
        &args.console_client_ca_file,
    ) else {
        tracing::warn!(
            "no console server: pause, unpause and console need --console-tls-cert-file, --console-tls-key-file and --console-client-ca-file"
        );
        return Ok(None);
    };
    let source = CertSource::Files {
        cert: cert.clone(),
        key: key.clone(),
    };
    let tls = server_tls_for(&source, Some(&console_clients(ca.clone())))?;
    let listen = SocketAddr::new(args.listen_address, args.console_server_port);
    Ok(Some(ConsoleServerConfig {
        listen,
        tls: tls.config,
    }))
}

/// The migration proxies' network: the pod's IP, and mutual TLS with the handler's server
/// certificate and its migration client certificate.
fn migration_network(args: &Args) -> anyhow::Result<MigrationNetwork> {
    let tls = if let (Some(server_cert), Some(server_key), Some(ca), Some(client_cert), Some(client_key)) = (
        &args.console_tls_cert_file,
        &args.console_tls_key_file,
        &args.console_client_ca_file,
        &args.migration_client_cert_file,
        &args.migration_client_key_file,
    ) {
        let files = MigrationFiles {
            server_cert: server_cert.clone(),
            server_key: server_key.clone(),
            client_cert: client_cert.clone(),
            client_key: client_key.clone(),
            ca: ca.clone(),
        };
        Some(std::sync::Arc::new(MigrationTls::new(&files)?))
    } else {
        tracing::warn!(
            "no migration TLS (--migration-client-cert-file and the console certificates): only migrations with migrations.disableTLS can run"
        );
        None
    };
    if args.pod_ip_address.is_none() {
        tracing::warn!("no --pod-ip-address: this node cannot be a migration target");
    }
    Ok(MigrationNetwork {
        address: args.pod_ip_address,
        tls,
    })
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let console = console_config(&args)?;
    let endpoint_tls = control_loop::http::endpoint_tls(
        "virt-handler",
        args.tls_cert_file.as_deref(),
        args.tls_key_file.as_deref(),
    )?;
    let client = kube::Client::try_default()
        .await
        .context("cannot reach the Kubernetes API (in-cluster config or KUBECONFIG)")?;
    let stop = control_loop::process::stop_on_signals().context("cannot watch SIGTERM")?;
    let config = NodeConfig {
        console,
        node_process: PathBuf::from("/proc/1"),
        mount_helper: std::env::current_exe().context("cannot find this binary for the mount helper")?,
        device_plugin_dir: Some(args.kubelet_root.join("device-plugins")),
        graceful_shutdown: Duration::from_secs(args.graceful_shutdown_seconds),
        reconciler: ReconcilerConfig {
            migration: migration_network(&args)?,
            ..ReconcilerConfig::for_node(&args.hostname_override)
        },
        node: args.hostname_override,
        share_dir: args.kubevirt_share_dir,
        pods_dir: args.kubelet_pods_dir,
        cpu_manager_state: args.kubelet_root.join("cpu_manager_state"),
        listen: Some(SocketAddr::new(args.listen_address, args.port)),
        endpoint_tls,
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

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::Args;

    #[test]
    fn customized_flags_come_first_and_a_repeated_flag_takes_its_last_value() {
        // As customizeComponents.flags lays a command out: the binary, the flags, then the args.
        let args = Args::try_parse_from(["virt-handler", "--v", "4", "--hostname-override", "node01", "-v", "3"])
            .expect("parses");
        assert_eq!(args.verbosity, 3);
        let args = Args::try_parse_from(["virt-handler", "--v", "5", "--hostname-override", "node01"]).expect("parses");
        assert_eq!(args.verbosity, 5);
    }
}
