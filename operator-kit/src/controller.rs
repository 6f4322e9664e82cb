//! What every operator's controller does alike around its reconciler: when a CR is looked at again
//! ([`Next`], which each reconciler decides), how long that is ([`Next::wait`]), the retry after a
//! failed pass and the debounce of bursts of status changes. The decision is pure; the kube-rs
//! side ([`action`], [`retry`]) comes with the `client` feature.

use std::time::Duration;

/// A pass that failed is tried again after this long.
pub const RETRY: Duration = Duration::from_secs(5);
/// A CR that does not serve yet is looked at again after this long, even without an event.
pub const LOOK_AGAIN: Duration = Duration::from_secs(5);
/// At most one pass per this long: a workload's status changes in bursts while its pods start.
pub const DEBOUNCE: Duration = Duration::from_secs(1);

/// When a CR is to be looked at again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// On the next change of it or of what it owns.
    Rest,
    /// Soon ([`LOOK_AGAIN`]), even without a change: it does not serve yet, it is not the one in
    /// use, or a write failed.
    LookAgain,
    /// On the next change, or at this time (seconds since the epoch) at the latest: a certificate
    /// is due, or a refusal is to be checked again.
    RestUntil(i64),
}

impl Next {
    /// How long the controller waits without a change, at `now` (seconds since the epoch);
    /// `None`: until one. A time already past is a second from now.
    #[must_use]
    pub fn wait(self, now: i64) -> Option<Duration> {
        match self {
            Self::Rest => None,
            Self::LookAgain => Some(LOOK_AGAIN),
            Self::RestUntil(at) => Some(Duration::from_secs(
                u64::try_from(at.saturating_sub(now)).unwrap_or(0).max(1),
            )),
        }
    }
}

#[cfg(feature = "client")]
pub use kube_side::{action, retry};

#[cfg(feature = "client")]
mod kube_side {
    use std::sync::Arc;

    use kube::Resource;
    use kube::runtime::controller::Action;

    use super::{Next, RETRY};
    use crate::objects::ObjectsError;

    /// The controller's action for `next` at `now` (seconds since the epoch).
    #[must_use]
    pub fn action(next: Next, now: i64) -> Action {
        next.wait(now).map_or_else(Action::await_change, Action::requeue)
    }

    /// The error policy of every operator: the failed pass is logged once, with its cause, and
    /// tried again after [`RETRY`].
    #[expect(clippy::needless_pass_by_value, reason = "the signature of kube's error policy")]
    pub fn retry<K: Resource, C>(cr: Arc<K>, error: &ObjectsError, _: Arc<C>) -> Action {
        tracing::warn!(
            namespace = cr.meta().namespace.as_deref().unwrap_or_default(),
            name = cr.meta().name.as_deref().unwrap_or_default(),
            error = %crate::error_report::one_line(error),
            "the pass failed; trying again"
        );
        Action::requeue(RETRY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_decision_waits_as_long_as_it_says() {
        let now = 1_000;
        let cases = [
            (Next::Rest, None),
            (Next::LookAgain, Some(LOOK_AGAIN)),
            (Next::RestUntil(now + 3_600), Some(Duration::from_secs(3_600))),
            (Next::RestUntil(now + 1), Some(Duration::from_secs(1))),
            (Next::RestUntil(now), Some(Duration::from_secs(1))),
            (Next::RestUntil(now - 50), Some(Duration::from_secs(1))),
            (Next::RestUntil(i64::MIN), Some(Duration::from_secs(1))),
        ];
        for (next, wait) in cases {
            assert_eq!(next.wait(now), wait, "{next:?}");
        }
    }
}
