//! What a component binary does around its work: JSON logs on stderr at upstream's verbosity,
//! a two-thread runtime, SIGTERM and Ctrl-C as a stop token, and one error line with a non-zero
//! exit when it fails.

use std::future::Future;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

/// Runs `work` as the component `name` logging at verbosity `verbosity` (upstream's `-v`;
/// `RUST_LOG` overrides it).
pub fn main<F>(name: &str, verbosity: u8, work: F) -> ExitCode
where
    F: Future<Output = anyhow::Result<()>>,
{
    let level = if verbosity >= 4 { "debug" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .log_internal_errors(false)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("{name}: error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: error: {}", kubevirt_api::error_report::one_line(e.as_ref()));
            ExitCode::FAILURE
        }
    }
}

/// A token cancelled by the first SIGTERM or Ctrl-C.
pub fn stop_on_signals() -> std::io::Result<CancellationToken> {
    let stop = CancellationToken::new();
    let on_signal = stop.clone();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::spawn(async move {
        tokio::select! {
            _ = terminate.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        on_signal.cancel();
    });
    Ok(stop)
}
