//! What the processes of CDI's pods (importer, upload server, clone source) share around their
//! work: logs to stderr, a small runtime, and a failure left as the pod's termination message.

use std::process::ExitCode;

use crate::run::write_termination_message;

/// Runs `body` with logging set up; a failure is logged once and written as the termination
/// message `message(<the error and its causes>)`.
pub fn main<E: std::fmt::Display>(message: fn(&str) -> String, body: impl FnOnce() -> Result<ExitCode, E>) -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    match body() {
        Ok(code) => code,
        Err(e) => {
            let text = format!("{e:#}");
            tracing::error!("{text}");
            write_termination_message(&message(&text));
            ExitCode::FAILURE
        }
    }
}

/// The runtime a pod's process runs its work on: two workers, every driver.
///
/// # Errors
/// The system's.
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
}
