//! The clone source pod's process: reads its environment, sends the source disk to the target's
//! upload server, and leaves the outcome as the pod's termination message.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use cdi_importer::run::write_termination_message;
use tracing::{error, info};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match run_main() {
        Ok(sent) => {
            info!(bytes = sent, "the source disk is sent");
            write_termination_message(&serde_json::json!({ "message": cdi_cloner::COMPLETE }).to_string());
            ExitCode::SUCCESS
        }
        Err(e) => {
            error!("{e:#}");
            write_termination_message(&serde_json::json!({ "message": format!("Unable to clone: {e:#}") }).to_string());
            ExitCode::FAILURE
        }
    }
}

fn run_main() -> anyhow::Result<u64> {
    let vars: BTreeMap<String, String> = std::env::vars().collect();
    let config = cdi_cloner::from_env(&vars).context("reading the clone source's environment")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the runtime")?;
    Ok(runtime.block_on(cdi_cloner::run(&config))?)
}
