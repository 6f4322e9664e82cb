//! Time behind a trait (shared with virt-controller): see [`kubevirt_api::clock`].

pub use kubevirt_api::clock::{Clock, ManualClock, SystemClock};
