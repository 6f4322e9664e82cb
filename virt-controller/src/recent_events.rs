//! Which events were sent lately. A controller looks at an object again and again and says the
//! same thing each time (a target pod still unschedulable, a backoff still running); the API
//! server would keep every copy as an Event object. client-go's recorder folds repeats into one
//! Event with a count; here a repeat of the same event about the same object within
//! [`REPEAT_WINDOW`] is not sent at all.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long an event is not sent again.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(5 * 60);

/// How many events are remembered before the old ones are forgotten.
const REMEMBERED: usize = 4096;

/// What identifies an event: the object's UID, the type, the reason and the message.
type Said = (String, &'static str, String, String);

/// The events sent within the window.
#[derive(Debug, Default)]
pub struct RecentEvents {
    sent: HashMap<Said, Instant>,
}

impl RecentEvents {
    /// Whether the event should be sent at `now`: not sent about `object_uid` within the window.
    /// Records it when it should.
    pub fn should_send(
        &mut self,
        object_uid: &str,
        kind: &'static str,
        reason: &str,
        message: &str,
        now: Instant,
    ) -> bool {
        if self.sent.len() >= REMEMBERED {
            self.sent
                .retain(|_, at| now.saturating_duration_since(*at) < REPEAT_WINDOW);
            // Still full of recent ones: forget them all rather than grow (a repeat may be sent).
            if self.sent.len() >= REMEMBERED {
                self.sent.clear();
            }
        }
        let said = (object_uid.to_owned(), kind, reason.to_owned(), message.to_owned());
        match self.sent.get(&said) {
            Some(at) if now.saturating_duration_since(*at) < REPEAT_WINDOW => false,
            _ => {
                self.sent.insert(said, now);
                true
            }
        }
    }

    /// The event could not be sent after all: it may be sent again at once.
    pub fn forget(&mut self, object_uid: &str, kind: &'static str, reason: &str, message: &str) {
        self.sent
            .remove(&(object_uid.to_owned(), kind, reason.to_owned(), message.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::{REPEAT_WINDOW, RecentEvents};

    #[test]
    fn a_repeat_within_the_window_is_not_sent_again() {
        let mut recent = RecentEvents::default();
        let start = Instant::now();
        assert!(recent.should_send("u1", "Warning", "Unschedulable", "stuck", start));
        assert!(!recent.should_send(
            "u1",
            "Warning",
            "Unschedulable",
            "stuck",
            start + Duration::from_secs(60)
        ));
        // Another object, reason or message is another event.
        assert!(recent.should_send("u2", "Warning", "Unschedulable", "stuck", start));
        assert!(recent.should_send("u1", "Warning", "Unschedulable", "still stuck", start));
        assert!(recent.should_send("u1", "Normal", "Unschedulable", "stuck", start));
        // After the window, it is said again.
        assert!(recent.should_send("u1", "Warning", "Unschedulable", "stuck", start + REPEAT_WINDOW));
    }

    #[test]
    fn old_events_are_forgotten_when_many_are_remembered() {
        let mut recent = RecentEvents::default();
        let start = Instant::now();
        for n in 0..super::REMEMBERED {
            assert!(recent.should_send(&n.to_string(), "Normal", "R", "m", start));
        }
        let later = start + REPEAT_WINDOW;
        assert!(recent.should_send("new", "Normal", "R", "m", later));
        assert_eq!(recent.sent.len(), 1, "the old ones went");
        // Full of recent ones: all are forgotten rather than the map growing.
        for n in 0..super::REMEMBERED {
            recent.should_send(&format!("r{n}"), "Normal", "R", "m", later);
        }
        assert!(recent.sent.len() <= super::REMEMBERED);
        assert!(recent.should_send("r0", "Normal", "R", "m", later), "forgotten");
    }

    #[test]
    fn an_event_that_could_not_be_sent_is_sent_next_time() {
        let mut recent = RecentEvents::default();
        let start = Instant::now();
        assert!(recent.should_send("u1", "Normal", "R", "m", start));
        recent.forget("u1", "Normal", "R", "m");
        assert!(recent.should_send("u1", "Normal", "R", "m", start));
    }
}
