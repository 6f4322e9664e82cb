//! What the long-running commands (`run`, cluster mode) share as processes: how they report a
//! fatal error and the async runtime they run on.

use std::process::ExitCode;

/// Prints `virt-launcher: error: <message>` and returns the exit code to end with.
#[must_use]
pub fn fail(message: &str, code: u8) -> ExitCode {
    eprintln!("virt-launcher: error: {message}");
    ExitCode::from(code)
}

/// The two-worker tokio runtime, or the exit code that reports why it could not start.
pub fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(&format!("cannot start the async runtime: {e}"), 1))
}
