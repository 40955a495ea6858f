//! What the store's backends and the budget say to each other: the operations, their answers,
//! and the checks on what a store sends back.

use std::time::Duration;

/// How long a store may take to connect, or to answer one booking, before it counts as down.
pub(crate) const PATIENCE: Duration = Duration::from_secs(2);

/// What a store answered about a booking: waits in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Answer {
    /// Booked: go after this wait.
    Booked(f64),
    /// Not booked (no limit): only a server's wait, this long.
    Unbooked(f64),
    /// The wait would be longer than the longest taken.
    TooLong(f64),
}

/// What `client.budget()` shows, by the store's clock (`now` is the store's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Figures {
    pub(crate) now: f64,
    pub(crate) blocked_until: f64,
    pub(crate) in_window: u32,
    pub(crate) used: u32,
    pub(crate) first_used: Option<f64>,
}

/// What is asked of a store.
pub(crate) enum Op {
    /// Book a send (without a limit: read a server's wait).
    Book { limit: Option<(u32, f64)>, max_wait: f64 },
    /// A server asked for this wait (seconds).
    Block(f64),
    /// The figures of this window (seconds).
    View(f64),
}

/// What a store answered.
pub(crate) enum Reply {
    Answer(Answer),
    Figures(Figures),
    Blocked,
}

/// A number a store sent back as text; a non-number or a non-finite one is refused.
pub(crate) fn number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| "a non-number in the store's answer".into())
}
