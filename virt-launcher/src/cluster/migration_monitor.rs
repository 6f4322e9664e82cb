//! Watching a running migration, as a pure decision: from the progress libvirt reports at each
//! tick, whether to go on, switch to post-copy, or abort because it stalled or took too long.
//!
//! Progress means the data still to move went down. A migration whose remaining data has not gone
//! down for `progress_timeout` is stuck. One that runs longer than its completion budget
//! (`completionTimeoutPerGiB` times the GiB it moves) switches to post-copy when that is allowed,
//! and is aborted otherwise. In post-copy nothing is watched any more: the guest runs on the target
//! already and aborting would lose it.

use std::time::Duration;

use cmd_protocol::migration::MigrationProgress;

/// The limits a migration runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long the remaining data may stay the same; zero never aborts for that.
    pub progress_timeout: Duration,
    /// How long the whole migration may take; zero is no limit.
    pub completion_timeout: Duration,
    /// Post-copy may be started when the completion budget runs out.
    pub allow_post_copy: bool,
}

impl Limits {
    /// The limits for moving `bytes` at `per_gib_seconds` for each started gigabyte (upstream counts
    /// decimal ones, at least one) with a stall limit of `progress_timeout_seconds`.
    #[must_use]
    pub fn for_size(bytes: u64, per_gib_seconds: u64, progress_timeout_seconds: u64, allow_post_copy: bool) -> Self {
        const GB: u64 = 1_000_000_000;
        let gib = bytes.div_ceil(GB).max(1);
        Self {
            progress_timeout: Duration::from_secs(progress_timeout_seconds),
            completion_timeout: Duration::from_secs(per_gib_seconds.saturating_mul(gib)),
            allow_post_copy,
        }
    }
}

/// What the monitor remembers between ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watch {
    /// The smallest remaining data seen so far.
    lowest_remaining: Option<u64>,
    /// How long after the start the remaining data last went down.
    last_progress_at: Duration,
    /// Post-copy was started.
    post_copy: bool,
    /// QEMU's memory migration was seen running (libvirt counted a memory iteration).
    memory_moving: bool,
}

/// What to do at this tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Let it run.
    Continue,
    /// Switch to post-copy.
    StartPostCopy,
    /// Abort it, for this reason (recorded as the migration's failure reason).
    Abort(String),
}

impl Watch {
    /// Whether post-copy was started.
    #[must_use]
    pub fn is_post_copy(&self) -> bool {
        self.post_copy
    }

    /// The switch to post-copy that [`Action::StartPostCopy`] asked for happened: from now on
    /// nothing is watched.
    pub fn post_copy_started(&mut self) {
        self.post_copy = true;
    }

    /// Decides at `elapsed` since the start, given the counters read now (`None` while libvirt
    /// reports no job yet, which is no progress).
    pub fn tick(&mut self, elapsed: Duration, progress: Option<MigrationProgress>, limits: Limits) -> Action {
        if self.post_copy {
            return Action::Continue;
        }
        if let Some(progress) = progress {
            let remaining = progress.data_remaining_bytes;
            if self.lowest_remaining.is_none_or(|lowest| remaining < lowest) {
                self.lowest_remaining = Some(remaining);
                self.last_progress_at = elapsed;
            }
        }
        let over_budget = !limits.completion_timeout.is_zero() && elapsed > limits.completion_timeout;
        // libvirt turns QEMU's post-copy capability on just before QEMU's memory migration
        // starts (after the target is prepared and any copied disk is mirrored), and QEMU refuses
        // the switch before that: it waits for the first memory iteration.
        self.memory_moving |= progress.is_some_and(|p| p.memory_iterations > 0);
        if over_budget && limits.allow_post_copy && self.memory_moving {
            return Action::StartPostCopy;
        }
        let stalled_for = elapsed.saturating_sub(self.last_progress_at);
        if !limits.progress_timeout.is_zero() && stalled_for > limits.progress_timeout {
            return Action::Abort(format!(
                "Live migration stuck for {} seconds and has been aborted",
                stalled_for.as_secs()
            ));
        }
        // With post-copy allowed, a migration out of time waits for its memory to move to switch,
        // but no longer than a second budget: the stall check may be off (a progress timeout of 0).
        let out_of_time = if limits.allow_post_copy {
            !limits.completion_timeout.is_zero() && elapsed > limits.completion_timeout * 2
        } else {
            over_budget
        };
        if out_of_time {
            return Action::Abort(format!(
                "Live migration is not completed after {} seconds and has been aborted",
                elapsed.as_secs()
            ));
        }
        Action::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory moving, `bytes` left.
    fn remaining(bytes: u64) -> MigrationProgress {
        MigrationProgress {
            data_processed_bytes: 1,
            memory_iterations: 1,
            data_remaining_bytes: bytes,
            ..MigrationProgress::default()
        }
    }

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn limits(progress: u64, completion: u64, post_copy: bool) -> Limits {
        Limits {
            progress_timeout: secs(progress),
            completion_timeout: secs(completion),
            allow_post_copy: post_copy,
        }
    }

    #[test]
    fn the_budget_is_per_started_gigabyte_and_at_least_one() {
        assert_eq!(Limits::for_size(0, 150, 20, false).completion_timeout, secs(150));
        assert_eq!(
            Limits::for_size(256 << 20, 150, 20, false).completion_timeout,
            secs(150)
        );
        assert_eq!(
            Limits::for_size(2_000_000_001, 150, 20, false).completion_timeout,
            secs(450)
        );
        // 1 GiB is more than one decimal gigabyte.
        assert_eq!(Limits::for_size(1 << 30, 10, 20, false).completion_timeout, secs(20));
        assert_eq!(Limits::for_size(1 << 30, 150, 20, true).progress_timeout, secs(20));
    }

    #[test]
    fn falling_remaining_data_is_progress_and_a_plateau_is_a_stall() {
        let mut watch = Watch::default();
        let limits = limits(10, 1000, false);
        assert_eq!(watch.tick(secs(1), Some(remaining(100)), limits), Action::Continue);
        assert_eq!(watch.tick(secs(5), Some(remaining(50)), limits), Action::Continue);
        // Going up again (the guest dirties memory) is not progress.
        assert_eq!(watch.tick(secs(12), Some(remaining(80)), limits), Action::Continue);
        assert_eq!(watch.tick(secs(15), Some(remaining(50)), limits), Action::Continue);
        assert_eq!(
            watch.tick(secs(16), Some(remaining(60)), limits),
            Action::Abort("Live migration stuck for 11 seconds and has been aborted".to_owned())
        );
    }

    #[test]
    fn no_job_yet_counts_as_no_progress() {
        let mut watch = Watch::default();
        assert_eq!(
            watch.tick(secs(3), None, limits(2, 0, false)),
            Action::Abort("Live migration stuck for 3 seconds and has been aborted".to_owned())
        );
    }

    #[test]
    fn zero_limits_never_abort() {
        let mut watch = Watch::default();
        assert_eq!(
            watch.tick(secs(100_000), Some(remaining(5)), limits(0, 0, false)),
            Action::Continue
        );
        assert_eq!(
            watch.tick(secs(200_000), Some(remaining(5)), limits(0, 0, true)),
            Action::Continue
        );
    }

    #[test]
    fn over_budget_aborts_without_post_copy_and_switches_once_with_it() {
        let mut watch = Watch::default();
        let without = limits(0, 30, false);
        assert_eq!(watch.tick(secs(30), Some(remaining(9)), without), Action::Continue);
        assert_eq!(
            watch.tick(secs(31), Some(remaining(8)), without),
            Action::Abort("Live migration is not completed after 31 seconds and has been aborted".to_owned())
        );
        let mut watch = Watch::default();
        let with = limits(5, 30, true);
        assert_eq!(watch.tick(secs(31), Some(remaining(8)), with), Action::StartPostCopy);
        assert!(!watch.is_post_copy(), "not before the switch happened");
        assert_eq!(
            watch.tick(secs(32), Some(remaining(8)), with),
            Action::StartPostCopy,
            "asked again while it did not happen"
        );
        watch.post_copy_started();
        assert!(watch.is_post_copy());
        // In post-copy nothing aborts it, however long it stalls.
        assert_eq!(watch.tick(secs(1000), Some(remaining(8)), with), Action::Continue);
    }

    #[test]
    fn post_copy_waits_for_the_memory_to_move_and_then_wins_over_a_stall() {
        let mut watch = Watch::default();
        let with = limits(5, 1, true);
        // The target still being prepared, or a copied disk mirrored: data, no memory iteration.
        let disks_only = MigrationProgress {
            data_processed_bytes: 4096,
            data_remaining_bytes: 9,
            ..MigrationProgress::default()
        };
        assert_eq!(watch.tick(secs(0), Some(disks_only), with), Action::Continue);
        assert_eq!(watch.tick(secs(2), Some(disks_only), with), Action::Continue);
        assert_eq!(watch.tick(secs(2), None, with), Action::Continue);
        assert_eq!(watch.tick(secs(2), Some(remaining(8)), with), Action::StartPostCopy);
        // A tick that reads nothing (the switch-over) after the memory moved still switches.
        assert_eq!(watch.tick(secs(2), None, with), Action::StartPostCopy);
        // Stalled past the progress timeout at the same tick: the switch still comes first.
        let mut watch = Watch::default();
        assert_eq!(
            watch.tick(secs(0), Some(remaining(9)), limits(5, 30, true)),
            Action::Continue
        );
        assert_eq!(
            watch.tick(secs(40), Some(remaining(9)), limits(5, 30, true)),
            Action::StartPostCopy
        );
        // Nothing ever moved: the stall aborts it.
        let mut watch = Watch::default();
        assert_eq!(
            watch.tick(secs(40), None, limits(5, 30, true)),
            Action::Abort("Live migration stuck for 40 seconds and has been aborted".to_owned())
        );
    }

    #[test]
    fn without_a_stall_check_a_post_copy_that_never_starts_ends_at_twice_the_budget() {
        let mut watch = Watch::default();
        let with = limits(0, 30, true);
        assert_eq!(watch.tick(secs(60), None, with), Action::Continue);
        assert_eq!(
            watch.tick(secs(61), None, with),
            Action::Abort("Live migration is not completed after 61 seconds and has been aborted".to_owned())
        );
    }
}
