//! Controller expectations: pod creations and deletions this controller made that its watch has
//! not shown yet. While any is pending for a VMI, the VMI is not acted on, so its pod is never
//! created twice. Entries expire after five minutes, as upstream's, in case an event is lost.
//! Time comes from the caller, who reads the controller's clock seam (its monotonic side, so a
//! step of the wall clock neither expires them early nor holds them), so tests can expire them.

use std::collections::HashMap;
use std::time::Duration;

/// Upstream's expiry.
pub const TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Clone, Copy, Debug)]
struct Pending {
    creations: u32,
    deletions: u32,
    since: Duration,
}

/// Expectations by VMI key.
#[derive(Debug, Default)]
pub struct Expectations {
    pending: HashMap<String, Pending>,
}

impl Expectations {
    fn entry(&mut self, key: &str, now: Duration) -> &mut Pending {
        self.pending.entry(key.to_owned()).or_insert(Pending {
            creations: 0,
            deletions: 0,
            since: now,
        })
    }

    /// A pod is about to be created for `key`.
    pub fn expect_creation(&mut self, key: &str, now: Duration) {
        let entry = self.entry(key, now);
        entry.creations += 1;
        entry.since = now;
    }

    /// `count` pods of `key` are about to be deleted.
    pub fn expect_deletions(&mut self, key: &str, count: u32, now: Duration) {
        let entry = self.entry(key, now);
        entry.deletions += count;
        entry.since = now;
    }

    /// The watch showed a new pod of `key` (or the creation failed).
    pub fn creation_observed(&mut self, key: &str) {
        if let Some(entry) = self.pending.get_mut(key) {
            entry.creations = entry.creations.saturating_sub(1);
        }
        self.drop_if_met(key);
    }

    /// The watch showed a pod of `key` going away (or the deletion failed).
    pub fn deletion_observed(&mut self, key: &str) {
        if let Some(entry) = self.pending.get_mut(key) {
            entry.deletions = entry.deletions.saturating_sub(1);
        }
        self.drop_if_met(key);
    }

    /// Nothing pending is nothing kept: thousands of settled VMIs cost no memory here.
    fn drop_if_met(&mut self, key: &str) {
        if self
            .pending
            .get(key)
            .is_some_and(|p| p.creations == 0 && p.deletions == 0)
        {
            self.pending.remove(key);
        }
    }

    /// Nothing is pending for `key` (or what is pending expired).
    #[must_use]
    pub fn satisfied(&self, key: &str, now: Duration) -> bool {
        self.pending
            .get(key)
            .is_none_or(|p| (p.creations == 0 && p.deletions == 0) || now.saturating_sub(p.since) >= TIMEOUT)
    }

    /// How long until what is pending for `key` expires: when its owner must be looked at again
    /// even if the awaited event never comes. `None` when nothing is pending.
    #[must_use]
    pub fn expires_in(&self, key: &str, now: Duration) -> Option<Duration> {
        self.pending
            .get(key)
            .filter(|p| p.creations > 0 || p.deletions > 0)
            .map(|p| TIMEOUT.saturating_sub(now.saturating_sub(p.since)))
            .filter(|left| !left.is_zero())
    }

    /// Forgets `key` (its VMI is gone).
    pub fn forget(&mut self, key: &str) {
        self.pending.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_creation_blocks_until_observed_or_expired() {
        let mut expectations = Expectations::default();
        let start = Duration::from_secs(1_000);
        assert!(expectations.satisfied("ns/vm", start));
        expectations.expect_creation("ns/vm", start);
        assert!(!expectations.satisfied("ns/vm", start));
        expectations.creation_observed("ns/vm");
        assert!(expectations.satisfied("ns/vm", start));
        expectations.expect_deletions("ns/vm", 2, start);
        expectations.deletion_observed("ns/vm");
        assert!(!expectations.satisfied("ns/vm", start));
        assert_eq!(
            expectations.expires_in("ns/vm", start + Duration::from_secs(100)),
            Some(Duration::from_secs(200))
        );
        assert!(expectations.satisfied("ns/vm", start + TIMEOUT), "expired");
        assert_eq!(
            expectations.expires_in("ns/vm", start + TIMEOUT),
            None,
            "nothing to wake for any more"
        );
        expectations.forget("ns/vm");
        assert!(expectations.satisfied("ns/vm", start));
        assert_eq!(expectations.expires_in("ns/vm", start), None);
    }
}
