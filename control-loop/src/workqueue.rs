//! The reconcile queue: keys wait at most once, a key is never worked on twice at the same time,
//! and a key that changes while it is being worked on is queued again when the work is done.
//! Delays (requeue after N seconds) go through a timer queue.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use tokio_util::time::DelayQueue;
use tokio_util::time::delay_queue;

/// The queue.
#[derive(Debug, Default)]
pub struct WorkQueue {
    ready: VecDeque<String>,
    queued: HashSet<String>,
    in_flight: HashSet<String>,
    again: HashSet<String>,
    delayed: DelayQueue<String>,
    timers: HashMap<String, delay_queue::Key>,
}

impl WorkQueue {
    /// An empty queue.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `key` now.
    pub fn add(&mut self, key: &str) {
        if let Some(timer) = self.timers.remove(key) {
            self.delayed.remove(&timer);
        }
        if self.in_flight.contains(key) {
            self.again.insert(key.to_owned());
        } else if self.queued.insert(key.to_owned()) {
            self.ready.push_back(key.to_owned());
        }
    }

    /// Queues `key` after `delay`, unless it is queued sooner.
    pub fn add_after(&mut self, key: &str, delay: Duration) {
        if self.queued.contains(key) {
            return;
        }
        match self.timers.get(key) {
            Some(timer) if self.delayed.deadline(timer) <= tokio::time::Instant::now() + delay => {}
            Some(timer) => {
                let timer = *timer;
                self.delayed.reset(&timer, delay);
            }
            None => {
                let timer = self.delayed.insert(key.to_owned(), delay);
                self.timers.insert(key.to_owned(), timer);
            }
        }
    }

    /// Takes the next key to work on, if any is ready.
    pub fn pop(&mut self) -> Option<String> {
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        self.in_flight.insert(key.clone());
        Some(key)
    }

    /// Marks the work on `key` done; queues it again if it changed meanwhile.
    pub fn done(&mut self, key: &str) {
        self.in_flight.remove(key);
        if self.again.remove(key) {
            self.add(key);
        }
    }

    /// Keys waiting or being worked on.
    #[must_use]
    pub fn len(&self) -> usize {
        self.ready.len() + self.in_flight.len()
    }

    /// Nothing is waiting or being worked on (timers aside).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Waits for the next timer and queues its key; pending forever when no timer is set.
    pub async fn next_timer(&mut self) {
        match std::future::poll_fn(|cx| self.delayed.poll_expired(cx)).await {
            Some(expired) => {
                let key = expired.into_inner();
                self.timers.remove(&key);
                self.add(&key);
            }
            None => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_waits_once_and_is_never_worked_on_twice_at_once() {
        let mut queue = WorkQueue::new();
        queue.add("a");
        queue.add("a");
        queue.add("b");
        assert_eq!(queue.pop().as_deref(), Some("a"));
        queue.add("a");
        assert_eq!(
            queue.pop().as_deref(),
            Some("b"),
            "a is in flight, so it is not handed out"
        );
        assert_eq!(queue.pop(), None);
        queue.done("a");
        assert_eq!(queue.pop().as_deref(), Some("a"), "a changed while in flight");
        queue.done("a");
        queue.done("b");
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn delayed_keys_come_back_after_their_delay_and_add_cancels_the_timer() {
        let mut queue = WorkQueue::new();
        queue.add_after("a", Duration::from_secs(5));
        queue.add_after("a", Duration::from_secs(1));
        assert_eq!(queue.pop(), None);
        let begin = tokio::time::Instant::now();
        queue.next_timer().await;
        assert_eq!(begin.elapsed(), Duration::from_secs(1), "the sooner delay wins");
        assert_eq!(queue.pop().as_deref(), Some("a"));
        queue.done("a");
        queue.add_after("b", Duration::from_secs(1));
        queue.add("b");
        assert_eq!(queue.pop().as_deref(), Some("b"));
        let timed_out = tokio::time::timeout(Duration::from_secs(10), queue.next_timer()).await;
        assert!(timed_out.is_err(), "the timer of b was cancelled");
    }
}
