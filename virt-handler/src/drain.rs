//! `--graceful-shutdown-seconds`: how long a stopping virt-handler keeps running for the
//! migrations that pass through it. On SIGTERM it opens no new migration proxy, keeps reconciling
//! so the migrations under way can finish and close theirs, and stops everything else only once
//! none is open, or when the period runs out, as upstream's handler does.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

/// Upstream's default.
pub const DEFAULT_GRACE: Duration = Duration::from_secs(300);

/// How often the open proxies are counted while draining.
const POLL: Duration = Duration::from_secs(1);

/// Waits for `signal`, calls `begin` (no new proxies), then waits until `open_proxies` says none
/// is open or `grace` has passed, and cancels `shutdown`. Returns how many proxies were still
/// open when it gave up (zero: drained).
pub async fn drain_then_stop(
    signal: CancellationToken,
    shutdown: CancellationToken,
    grace: Duration,
    begin: impl FnOnce(),
    open_proxies: impl Fn() -> usize,
) -> usize {
    tokio::select! {
        () = signal.cancelled() => {}
        // Stopped some other way: nothing to drain.
        () = shutdown.cancelled() => return 0,
    }
    begin();
    let deadline = tokio::time::Instant::now() + grace;
    let left = loop {
        let open = open_proxies();
        if open == 0 {
            break 0;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            break open;
        }
        info!(open, "waiting for the migration proxies to close before stopping");
        tokio::time::sleep(POLL.min(deadline - now)).await;
    };
    if left > 0 {
        warn!(
            open = left,
            grace_s = grace.as_secs(),
            "migration proxies still open after the graceful shutdown period"
        );
    }
    shutdown.cancel();
    left
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_stop_waits_for_open_proxies_then_for_no_longer_than_the_grace_period() {
        let (signal, shutdown) = (CancellationToken::new(), CancellationToken::new());
        let open = Arc::new(AtomicUsize::new(2));
        let began = Arc::new(AtomicBool::new(false));
        let task = {
            let (signal, shutdown, open, began) = (signal.clone(), shutdown.clone(), open.clone(), began.clone());
            tokio::spawn(async move {
                drain_then_stop(
                    signal,
                    shutdown,
                    Duration::from_secs(30),
                    move || began.store(true, Ordering::SeqCst),
                    move || open.load(Ordering::SeqCst),
                )
                .await
            })
        };
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(
            !began.load(Ordering::SeqCst) && !shutdown.is_cancelled(),
            "nothing before the signal"
        );
        signal.cancel();
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(began.load(Ordering::SeqCst), "no new proxies once signalled");
        assert!(!shutdown.is_cancelled(), "two proxies are still open");
        open.store(0, Ordering::SeqCst);
        assert_eq!(task.await.expect("drain"), 0);
        assert!(shutdown.is_cancelled());

        // A proxy that never closes: the stop comes when the period ends.
        let (signal, shutdown) = (CancellationToken::new(), CancellationToken::new());
        signal.cancel();
        let signalled = tokio::time::Instant::now();
        let left = drain_then_stop(signal, shutdown.clone(), Duration::from_secs(30), || {}, || 1).await;
        assert_eq!(left, 1);
        assert_eq!(signalled.elapsed(), Duration::from_secs(30));
        assert!(shutdown.is_cancelled());
    }
}
