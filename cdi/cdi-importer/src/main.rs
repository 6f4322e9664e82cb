//! The importer pod's process: reads its job from the environment, runs it, and leaves the
//! outcome as the pod's termination message, as upstream's `cdi-importer` does.

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::Context as _;
use cdi_importer::convert::QemuImg;
use cdi_importer::progress::{self, METRICS_PORT, Progress};
use cdi_importer::run::{self, Ended, Paths, write_termination_message};
use cdi_importer::{job, pod_process};
use tokio_util::sync::CancellationToken;
use tracing::{error, warn};

fn main() -> ExitCode {
    pod_process::main(|e| format!("Unable to process data: {e}"), run_main)
}

fn run_main() -> anyhow::Result<ExitCode> {
    let vars: BTreeMap<String, String> = std::env::vars().collect();
    let job = job::from_env(&vars).context("reading the importer's environment")?;
    let runtime = pod_process::runtime().context("starting the runtime")?;
    control_loop::tls::install_crypto_provider();
    let progress = Progress::default();
    let stop = CancellationToken::new();
    let ended = runtime.block_on(async {
        if let Some(owner_uid) = job.owner_uid.clone() {
            // An endpoint that cannot start is logged, and the import goes on.
            if let Err(e) = progress::serve(progress.clone(), owner_uid, METRICS_PORT, stop.clone()).await {
                warn!(error = %e, "no metrics endpoint");
            }
        }
        let ended = run::run_with_progress(job, &Paths::default(), QemuImg::default(), &progress).await;
        stop.cancel();
        ended
    });
    match ended {
        Ok(Ended::Finished(finished)) => {
            let message = serde_json::to_string(&finished).context("writing the termination message")?;
            tracing::info!(%message, "finished");
            write_termination_message(&message);
            Ok(ExitCode::SUCCESS)
        }
        Ok(Ended::ChecksumMismatch(mismatch)) => {
            // Upstream ends the pod successfully so that it is not restarted; the message says why.
            error!(error = %mismatch, "the download's checksum differs; the disk was removed");
            let message = serde_json::json!({ "message": format!("Unable to process data: {mismatch}") });
            write_termination_message(&message.to_string());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            error!(error = %e, "the import failed");
            write_termination_message(&e.termination_message());
            Ok(ExitCode::FAILURE)
        }
    }
}
