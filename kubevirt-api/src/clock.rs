//! Time behind a trait, so the status timestamps the components write are exact in tests.

use k8s_openapi::jiff::Timestamp;

/// A source of wall-clock time.
pub trait Clock: Send + Sync + 'static {
    /// Now.
    fn now(&self) -> Timestamp;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

impl<T: Clock> Clock for std::sync::Arc<T> {
    fn now(&self) -> Timestamp {
        self.as_ref().now()
    }
}

#[cfg(any(test, feature = "testing"))]
pub use manual::ManualClock;

/// A clock for tests, behind the `testing` feature.
#[cfg(any(test, feature = "testing"))]
mod manual {
    use std::sync::{Mutex, PoisonError};

    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    use super::Clock;

    /// A clock that moves only when told (for tests).
    #[derive(Debug)]
    pub struct ManualClock(Mutex<Timestamp>);

    impl ManualClock {
        /// A clock reading `start`.
        #[must_use]
        pub fn new(start: Timestamp) -> Self {
            Self(Mutex::new(start))
        }

        /// Moves the clock forward.
        pub fn advance(&self, by: std::time::Duration) {
            let mut now = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::ZERO);
            *now = now.checked_add(by).unwrap_or(*now);
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> Timestamp {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }
}
