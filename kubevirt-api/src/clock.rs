//! Time behind a trait, so the status timestamps the components write are exact in tests, and
//! timeouts can be run out in tests without waiting.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

/// A source of time: the wall clock, for what is written to the API, and a monotonic clock, for
/// timeouts, which a step of the wall clock must not cut short or stretch.
pub trait Clock: Send + Sync + 'static {
    /// Now, on the wall clock.
    fn now(&self) -> Timestamp;
    /// Time since a fixed point of this clock's own, never going back.
    fn monotonic(&self) -> Duration;
}

/// The system clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }

    fn monotonic(&self) -> Duration {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        ORIGIN.get_or_init(Instant::now).elapsed()
    }
}

/// Now on the wall clock in whole seconds, as the API server keeps times: a condition stamped
/// twice in one second is then the same, and a pass that changes nothing writes nothing.
#[must_use]
pub fn whole_seconds_now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    let second = Timestamp::now().as_second();
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(second).unwrap_or(Timestamp::UNIX_EPOCH),
    )
}

impl<T: Clock> Clock for std::sync::Arc<T> {
    fn now(&self) -> Timestamp {
        self.as_ref().now()
    }

    fn monotonic(&self) -> Duration {
        self.as_ref().monotonic()
    }
}

#[cfg(any(test, feature = "testing"))]
pub use manual::ManualClock;

/// A clock for tests, behind the `testing` feature.
#[cfg(any(test, feature = "testing"))]
mod manual {
    use std::sync::{Mutex, PoisonError};
    use std::time::Duration;

    use k8s_openapi::jiff::{SignedDuration, Timestamp};

    use super::Clock;

    /// A clock that moves only when told (for tests): both its wall and monotonic readings move
    /// by what [`ManualClock::advance`] is given.
    #[derive(Debug)]
    pub struct ManualClock(Mutex<(Timestamp, Duration)>);

    impl ManualClock {
        /// A clock reading `start`.
        #[must_use]
        pub fn new(start: Timestamp) -> Self {
            Self(Mutex::new((start, Duration::ZERO)))
        }

        /// Moves the clock forward.
        pub fn advance(&self, by: Duration) {
            let mut time = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let signed = SignedDuration::try_from(by).unwrap_or(SignedDuration::ZERO);
            time.0 = time.0.checked_add(signed).unwrap_or(time.0);
            time.1 = time.1.saturating_add(by);
        }
    }

    impl Clock for ManualClock {
        fn now(&self) -> Timestamp {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).0
        }

        fn monotonic(&self) -> Duration {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).1
        }
    }
}
