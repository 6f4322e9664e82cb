//! Making certificates as upstream KubeVirt does ([`control_loop::tls::issue`]): a self-signed CA
//! named `kubevirt.io@<unix time>`, valid for the CA's duration (7 days unless the KubeVirt CR
//! says otherwise); and certificates it signs, valid for the server duration (24 hours), each for
//! one holder (its common name) and one use (server or client). Each is valid from a few minutes
//! before it is made, for peers whose clock is a little behind.

pub use control_loop::tls::issue::Pair;

use super::plan::{CLOCK_SKEW_SECONDS, Wanted};

/// A new CA at `now` (seconds since the epoch), living `duration` seconds.
///
/// # Errors
/// rcgen's.
pub fn new_ca(now: i64, duration: i64) -> Result<Pair, rcgen::Error> {
    control_loop::tls::issue::new_ca(&format!("kubevirt.io@{now}"), now - CLOCK_SKEW_SECONDS, now + duration)
}

/// The certificate `wanted` names, signed at `now` by `ca`, whose common name is
/// `ca_common_name`, living `duration` seconds.
///
/// # Errors
/// rcgen's.
pub fn sign(ca: &Pair, ca_common_name: &str, wanted: &Wanted, now: i64, duration: i64) -> Result<Pair, rcgen::Error> {
    sign_between(ca, ca_common_name, wanted, now - CLOCK_SKEW_SECONDS, now + duration)
}

/// Like [`sign`], valid from `not_before` to `not_after`.
///
/// # Errors
/// rcgen's.
pub fn sign_between(
    ca: &Pair,
    ca_common_name: &str,
    wanted: &Wanted,
    not_before: i64,
    not_after: i64,
) -> Result<Pair, rcgen::Error> {
    control_loop::tls::issue::sign(
        ca,
        ca_common_name,
        &wanted.common_name,
        &wanted.usage,
        not_before,
        not_after,
    )
}
