//! The graceful-stop cadence upstream uses on both sides of the launcher: press the ACPI power
//! button, press it again at most every 5 s while the grace period lasts (a booting guest can miss
//! a press), then kill. Without ACPI or without a grace period there is nothing to wait for.

use std::time::Duration;

/// Upstream re-sends the ACPI power button at most this often.
pub const ACPI_RESEND_INTERVAL: Duration = Duration::from_secs(5);

/// Where a graceful stop stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StopClock {
    /// Time since the stop began.
    pub elapsed: Duration,
    /// Time since the last ACPI press, if any.
    pub since_last_acpi: Option<Duration>,
}

/// The next step of a graceful stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopStep {
    /// Press the ACPI power button now.
    PressPowerButton,
    /// Stop the guest at once.
    Kill,
    /// Wait this long, then decide again.
    Wait(Duration),
}

/// Decides the next step of a graceful stop with `grace` and (`has_acpi`) a power button.
#[must_use]
pub fn next_step(clock: StopClock, grace: Duration, has_acpi: bool) -> StopStep {
    if !has_acpi || grace.is_zero() || clock.elapsed >= grace {
        return StopStep::Kill;
    }
    let remaining = grace.saturating_sub(clock.elapsed);
    match clock.since_last_acpi {
        Some(since) if since < ACPI_RESEND_INTERVAL => {
            StopStep::Wait(ACPI_RESEND_INTERVAL.saturating_sub(since).min(remaining))
        }
        Some(_) | None => StopStep::PressPowerButton,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(elapsed: u64, since: Option<u64>, grace: u64, acpi: bool) -> StopStep {
        let clock = StopClock {
            elapsed: Duration::from_secs(elapsed),
            since_last_acpi: since.map(Duration::from_secs),
        };
        next_step(clock, Duration::from_secs(grace), acpi)
    }

    #[test]
    fn the_button_is_pressed_at_once_then_every_five_seconds_until_the_grace_ends() {
        assert_eq!(step(0, None, 30, true), StopStep::PressPowerButton);
        assert_eq!(step(2, Some(2), 30, true), StopStep::Wait(Duration::from_secs(3)));
        assert_eq!(step(5, Some(5), 30, true), StopStep::PressPowerButton);
        assert_eq!(step(29, Some(1), 30, true), StopStep::Wait(Duration::from_secs(1)));
        assert_eq!(step(30, Some(2), 30, true), StopStep::Kill);
    }

    #[test]
    fn no_acpi_or_no_grace_kills_at_once() {
        assert_eq!(step(0, None, 30, false), StopStep::Kill);
        assert_eq!(step(0, None, 0, true), StopStep::Kill);
    }

    #[test]
    fn every_wait_is_short_and_never_passes_the_grace_period() {
        for grace in 0..12 {
            for elapsed in 0..14 {
                for since in [None, Some(0), Some(1), Some(4), Some(5), Some(9)] {
                    for acpi in [false, true] {
                        if let StopStep::Wait(wait) = step(elapsed, since, grace, acpi) {
                            assert!(wait <= ACPI_RESEND_INTERVAL && !wait.is_zero());
                            assert!(Duration::from_secs(elapsed) + wait <= Duration::from_secs(grace));
                        }
                    }
                }
            }
        }
    }
}
