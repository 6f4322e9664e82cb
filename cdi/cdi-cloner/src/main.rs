//! The clone source pod's process: reads its environment, sends the source disk to the target's
//! upload server, and leaves the outcome as the pod's termination message.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use cdi_importer::pod_process;
use cdi_importer::run::write_termination_message;

fn main() -> ExitCode {
    pod_process::main(
        |e| serde_json::json!({ "message": format!("Unable to clone: {e}") }).to_string(),
        run_main,
    )
}

fn run_main() -> anyhow::Result<ExitCode> {
    let vars: BTreeMap<String, String> = std::env::vars().collect();
    let config = cdi_cloner::from_env(&vars).context("reading the clone source's environment")?;
    let runtime = pod_process::runtime().context("starting the runtime")?;
    let sent = runtime.block_on(cdi_cloner::run(&config))?;
    tracing::info!(bytes = sent, "the source disk is sent");
    write_termination_message(&serde_json::json!({ "message": cdi_cloner::COMPLETE }).to_string());
    Ok(ExitCode::SUCCESS)
}
