//! hostpath-csi-driver: the hostpath provisioner's CSI driver on one node, with upstream's flags.
//! Wiring only: the pools from `--datadir`, made if missing, then [`hostpath_csi_driver::server`].

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Parser;
use hostpath_csi_driver::host::{Host as _, RealHost};
use hostpath_csi_driver::pools::Pools;
use hostpath_csi_driver::registration::{self, Registrar};
use hostpath_csi_driver::server::{self, Driver};

#[derive(Debug, Parser)]
#[command(about = "The hostpath provisioner's CSI driver: a directory per volume in the node's storage pools")]
struct Args {
    /// The CSI endpoint (`unix:///csi/csi.sock`).
    #[arg(long, default_value = "unix:///csi/csi.sock")]
    endpoint: String,
    /// The driver's name.
    #[arg(long, default_value = hostpath_csi_driver::DRIVER_NAME)]
    drivername: String,
    /// The storage pools, as a JSON list of {"name", "path"}.
    #[arg(long)]
    datadir: String,
    /// This node's name.
    #[arg(long)]
    nodeid: String,
    /// The driver's version.
    #[arg(long)]
    version: String,
    /// The CSI socket as the kubelet sees it; with it the driver registers with the kubelet
    /// through --registration-dir, as node-driver-registrar's --kubelet-registration-path.
    #[arg(long)]
    kubelet_registration_path: Option<String>,
    /// The kubelet's plugins_registry directory, as mounted.
    #[arg(long, default_value = "/registration")]
    registration_dir: std::path::PathBuf,
    /// Log verbosity, upstream's --v.
    #[arg(long = "v", default_value_t = 1)]
    verbosity: u8,
}

async fn run(args: Args) -> anyhow::Result<()> {
    for (flag, value) in [
        ("--drivername", &args.drivername),
        ("--nodeid", &args.nodeid),
        ("--version", &args.version),
    ] {
        anyhow::ensure!(!value.is_empty(), "{flag} must not be empty");
    }
    let pools = Pools::parse(&args.datadir)?;
    let host = Arc::new(RealHost);
    for pool in pools.paths() {
        host.make_dir(pool)
            .with_context(|| format!("making the storage pool {}", pool.display()))?;
    }
    let path = server::socket_path(&args.endpoint)?;
    let stop = control_loop::process::stop_on_signals().context("listening for signals")?;
    let driver = Driver {
        name: args.drivername,
        version: args.version,
        node_id: args.nodeid,
        pools,
    };
    let Some(endpoint) = args.kubelet_registration_path else {
        server::serve(driver, host, path, stop).await?;
        return Ok(());
    };
    let registrar = Registrar {
        driver: driver.name.clone(),
        endpoint,
    };
    let socket = registration::socket_in(&args.registration_dir, &driver.name);
    // The two run together: the first to end (a failure, or the stop) ends the other.
    let (served, registered) = tokio::join!(
        ending(server::serve(driver, host, path, stop.clone()), stop.clone()),
        ending(registration::serve(registrar, socket, stop.clone()), stop),
    );
    served?;
    registered?;
    Ok(())
}

/// Runs `work`, then stops the rest through `stop`.
async fn ending<T>(work: impl std::future::Future<Output = T>, stop: tokio_util::sync::CancellationToken) -> T {
    let outcome = work.await;
    stop.cancel();
    outcome
}

fn main() -> ExitCode {
    let args = Args::parse();
    let verbosity = args.verbosity;
    control_loop::process::main("hostpath-csi-driver", verbosity, run(args))
}
