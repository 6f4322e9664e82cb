//! What a component binary does around its work: JSON logs on stderr at upstream's verbosity,
//! a two-thread runtime with two malloc arenas, SIGTERM and Ctrl-C as a stop token, and
//! one error line with a non-zero exit when it fails.

use std::future::Future;
use std::process::ExitCode;

use tokio_util::sync::CancellationToken;

/// The async runtime's worker threads.
pub const RUNTIME_WORKERS: usize = 2;

/// Caps glibc's malloc arenas at [`RUNTIME_WORKERS`] in all (the main arena included), unless
/// the operator set a cap (`MALLOC_ARENA_MAX`, or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`,
/// which glibc applied at start-up). By default glibc gives threads that allocate at the same
/// moment arenas of their own, up to eight per core, and memory freed in one arena serves no
/// other, so a component's resident memory grew with how its work happened to be spread over
/// threads: with 1000 VMIs, bench-handler's RSS ranged over 28.4-32.7 MiB, and over 26.7-28.5 MiB
/// with two arenas. (One arena gave about 25 MiB, but its lock made a full resync about 2.5 times
/// slower.) Call it before any thread starts. Returns whether it set the cap.
pub fn limit_malloc_arenas() -> bool {
    let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    if std::env::var_os("MALLOC_ARENA_MAX").is_some() || tunables.contains("glibc.malloc.arena_max") {
        return false;
    }
    let arenas = nix::libc::c_int::try_from(RUNTIME_WORKERS).unwrap_or(nix::libc::c_int::MAX);
    // SAFETY: mallopt only sets a tunable of the allocator; no memory is touched.
    #[allow(unsafe_code)]
    let set = unsafe { nix::libc::mallopt(nix::libc::M_ARENA_MAX, arenas) };
    if set == 0 {
        tracing::warn!(arenas, "cannot cap the malloc arenas");
    }
    set != 0
}

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
    let _ = limit_malloc_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(RUNTIME_WORKERS)
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
