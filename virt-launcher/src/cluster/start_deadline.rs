//! `--qemu-timeout`: how long a launcher waits for its guest to start. virt-handler defines and
//! starts the domain once the pod is up; a launcher whose QEMU has not run within the timeout
//! gives up and exits with an error, so the pod fails and the VMI with it instead of waiting
//! forever, as upstream's launcher does ("timed out waiting for domain to be defined").
//! virt-controller spreads the timeouts of its launchers with a jitter, so that many launchers
//! that missed their handler do not all give up at once.

use std::time::Duration;

use kubevirt_api::domain_state::{DomainState, StateReason};
use thiserror::Error;

use crate::libvirt::{DomainManager, DomainStatus};

/// Upstream's default when the flag is not given.
pub const DEFAULT_QEMU_TIMEOUT: Duration = Duration::from_secs(180);

/// How often the domain's state is read while waiting: a cheap call to the private libvirtd.
const POLL: Duration = Duration::from_secs(1);

/// Whether a domain in `status` has a QEMU that ran: defined and never started, or failed to
/// start, has not.
#[must_use]
pub fn has_qemu_run(status: DomainStatus) -> bool {
    match status.state {
        DomainState::NoState => false,
        DomainState::Running
        | DomainState::Blocked
        | DomainState::Paused
        | DomainState::ShuttingDown
        | DomainState::Crashed
        | DomainState::PmSuspended => true,
        DomainState::Shutoff => !matches!(
            status.reason,
            StateReason::Unknown | StateReason::NonExistent | StateReason::Failed
        ),
    }
}

/// Resolves when `timeout` has passed and the domain's QEMU never ran; never resolves once it
/// did, nor when `timeout` is zero (no limit). A state that cannot be read counts as not started
/// yet.
pub async fn overdue<M: DomainManager>(manager: &M, timeout: Duration) {
    if timeout.is_zero() {
        return std::future::pending().await;
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if matches!(manager.status().await, Ok(status) if has_qemu_run(status)) {
            return std::future::pending().await;
        }
        let now = tokio::time::Instant::now();
        if now >= deadline {
            return;
        }
        tokio::time::sleep(POLL.min(deadline - now)).await;
    }
}

/// A `--qemu-timeout` that is not a duration.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("{value:?} is not a duration such as 240s, 3m or 1h30m")]
pub struct BadTimeout {
    /// What was given.
    pub value: String,
}

/// Reads a Go duration as upstream's flag takes it (`240s`, `3m`, `1h2m3.5s`, `500ms`); a bare
/// `0` is no time at all.
///
/// # Errors
/// [`BadTimeout`] when `value` is not one.
pub fn parse_timeout(value: &str) -> Result<Duration, BadTimeout> {
    let bad = || BadTimeout {
        value: value.to_owned(),
    };
    if value == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = value;
    let mut total = Duration::ZERO;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|n| *n > 0)
            .ok_or_else(bad)?;
        let number: f64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let seconds_per_unit = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(number * seconds_per_unit).map_err(|_| bad())?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATES: [DomainState; 8] = [
        DomainState::NoState,
        DomainState::Running,
        DomainState::Blocked,
        DomainState::Paused,
        DomainState::ShuttingDown,
        DomainState::Shutoff,
        DomainState::Crashed,
        DomainState::PmSuspended,
    ];

    #[test]
    fn qemu_has_run_in_every_state_but_undefined_defined_or_failed_to_start() {
        let reasons = [
            StateReason::Unknown,
            StateReason::NonExistent,
            StateReason::User,
            StateReason::Shutdown,
            StateReason::Destroyed,
            StateReason::Crashed,
            StateReason::Migrated,
            StateReason::Saved,
            StateReason::Failed,
            StateReason::FromSnapshot,
        ];
        for state in STATES {
            for reason in reasons {
                let expected = match state {
                    DomainState::NoState => false,
                    DomainState::Shutoff => !matches!(
                        reason,
                        StateReason::Unknown | StateReason::NonExistent | StateReason::Failed
                    ),
                    _ => true,
                };
                assert_eq!(
                    has_qemu_run(DomainStatus { state, reason }),
                    expected,
                    "{state:?} {reason:?}"
                );
            }
        }
    }

    #[test]
    fn timeouts_read_as_go_durations() {
        assert_eq!(parse_timeout("240s"), Ok(Duration::from_secs(240)));
        assert_eq!(parse_timeout("3m"), Ok(Duration::from_secs(180)));
        assert_eq!(parse_timeout("1h2m3s"), Ok(Duration::from_secs(3723)));
        assert_eq!(parse_timeout("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_timeout("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_timeout("0"), Ok(Duration::ZERO));
        for bad in ["", "240", "s", "3x", "-3s", "3s4", "1..2s"] {
            assert_eq!(parse_timeout(bad), Err(BadTimeout { value: bad.to_owned() }), "{bad:?}");
        }
    }
}
