//! The one upload a server takes, as upstream's: while one is received or finished, another gets
//! 503; once one is done, any other gets 409. A sync upload that fails leaves the server waiting
//! for the next try; an async upload that fails after its answer ends the server with an error,
//! so that its pod is run again.

/// Where the server's upload is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// No upload yet, or the last one failed while the client was still waiting.
    Waiting,
    /// A client's body is being read and written.
    Receiving,
    /// The body is in (an async upload was answered); the disk is being finished.
    Finishing,
    /// The disk is written: the server ends.
    Done,
    /// An async upload failed after it was answered: the server ends with an error.
    Failed,
}

/// What happens to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    /// A client posts an upload.
    Arrived,
    /// An async upload's body is all read: it is answered, and the disk finished after.
    Received,
    /// The disk is written.
    Finished,
    /// Writing failed.
    Failed,
}

/// Why an upload is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// Another upload is under way (503).
    Busy,
    /// The upload is done already (409).
    AlreadyDone,
}

impl Refusal {
    /// The HTTP status upstream answers with.
    #[must_use]
    pub const fn status(self) -> u16 {
        match self {
            Self::Busy => 503,
            Self::AlreadyDone => 409,
        }
    }
}

/// What an event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// The upload moves to this state.
    To(State),
    /// The arriving upload is refused; the state stays.
    Refuse(Refusal),
    /// The event cannot happen in this state (a bug if it does); the state stays.
    Impossible,
}

/// The transition table.
#[must_use]
pub const fn step(state: State, event: Event) -> Step {
    use Event as E;
    use State as S;
    match (state, event) {
        (S::Waiting, E::Arrived) => Step::To(S::Receiving),
        (S::Receiving | S::Finishing, E::Arrived) => Step::Refuse(Refusal::Busy),
        (S::Done | S::Failed, E::Arrived) => Step::Refuse(Refusal::AlreadyDone),
        (S::Receiving, E::Received) => Step::To(S::Finishing),
        (S::Receiving | S::Finishing, E::Finished) => Step::To(S::Done),
        (S::Receiving, E::Failed) => Step::To(S::Waiting),
        (S::Finishing, E::Failed) => Step::To(S::Failed),
        (S::Waiting | S::Finishing | S::Done | S::Failed, E::Received)
        | (S::Waiting | S::Done | S::Failed, E::Finished | E::Failed) => Step::Impossible,
    }
}

/// Whether the server has nothing more to do in `state`.
#[must_use]
pub const fn is_over(state: State) -> bool {
    matches!(state, State::Done | State::Failed)
}

/// Whether an upload is under way in `state` (a passing deadline waits for it).
#[must_use]
pub const fn is_busy(state: State) -> bool {
    matches!(state, State::Receiving | State::Finishing)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const STATES: [State; 5] = [
        State::Waiting,
        State::Receiving,
        State::Finishing,
        State::Done,
        State::Failed,
    ];
    const EVENTS: [Event; 4] = [Event::Arrived, Event::Received, Event::Finished, Event::Failed];

    #[test]
    fn every_state_and_event() {
        use State as S;
        let refuse_busy = Step::Refuse(Refusal::Busy);
        let refuse_done = Step::Refuse(Refusal::AlreadyDone);
        let x = Step::Impossible;
        // Rows: states; columns: Arrived, Received, Finished, Failed.
        let table: [(State, [Step; 4]); 5] = [
            (S::Waiting, [Step::To(S::Receiving), x, x, x]),
            (
                S::Receiving,
                [
                    refuse_busy,
                    Step::To(S::Finishing),
                    Step::To(S::Done),
                    Step::To(S::Waiting),
                ],
            ),
            (S::Finishing, [refuse_busy, x, Step::To(S::Done), Step::To(S::Failed)]),
            (S::Done, [refuse_done, x, x, x]),
            (S::Failed, [refuse_done, x, x, x]),
        ];
        assert_eq!(table.map(|(s, _)| s), STATES);
        for (state, row) in table {
            for (event, want) in EVENTS.into_iter().zip(row) {
                assert_eq!(step(state, event), want, "{state:?} on {event:?}");
            }
        }
    }

    #[test]
    fn refusals_answer_upstreams_statuses_and_only_done_or_failed_end_the_server() {
        assert_eq!(Refusal::Busy.status(), 503);
        assert_eq!(Refusal::AlreadyDone.status(), 409);
        assert_eq!(STATES.map(is_over), [false, false, false, true, true]);
        assert_eq!(STATES.map(is_busy), [false, true, true, false, false]);
    }
}
