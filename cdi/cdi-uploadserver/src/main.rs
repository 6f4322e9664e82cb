//! The upload server pod's process: reads its configuration from the environment, takes one
//! upload, and leaves the outcome as the pod's termination message, as upstream's
//! `cdi-uploadserver` does.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use cdi_api::upload;
use cdi_importer::convert::QemuImg;
use cdi_importer::pod_process;
use cdi_importer::run::write_termination_message;
use cdi_uploadserver::config;
use cdi_uploadserver::server::{Outcome, Server};
use tracing::info;

fn main() -> ExitCode {
    pod_process::main(
        |e| serde_json::json!({ "message": format!("Unable to process data: {e}") }).to_string(),
        || run_main().map(|()| ExitCode::SUCCESS),
    )
}

fn run_main() -> anyhow::Result<()> {
    let vars: BTreeMap<String, String> = std::env::vars().collect();
    let config = config::from_env(&vars).context("reading the upload server's environment")?;
    let runtime = pod_process::runtime().context("starting the runtime")?;
    let outcome = runtime.block_on(async {
        let server = Server::bind(config, Arc::new(QemuImg::default())).await?;
        if let Ok(address) = server.local_addr() {
            info!(%address, "waiting for an upload");
        }
        server.run().await
    })?;
    let message = match outcome {
        Outcome::Uploaded { preallocation_applied } => serde_json::json!({
            "message": upload::UPLOAD_COMPLETE,
            "preallocationApplied": preallocation_applied,
        }),
        Outcome::DeadlinePassed => serde_json::json!({
            "message": upload::DEADLINE_PASSED,
            "deadlinePassed": true,
        }),
    };
    info!(%message, "finished");
    write_termination_message(&message.to_string());
    Ok(())
}
