//! Time behind a trait (shared with virt-controller): see [`kubevirt_api::clock`].

#[cfg(any(test, feature = "testing"))]
pub use kubevirt_api::clock::ManualClock;
pub use kubevirt_api::clock::{Clock, SystemClock};
