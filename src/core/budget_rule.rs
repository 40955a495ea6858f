//! The pacing rule of the shared request budget, without files, stores or clocks: the state of
//! one token's log of sends and when the next may go. The file budget (`budget`) and the stores
//! past one machine (`budget_store`) book by it.

use serde::{Deserialize, Serialize};

/// The most sends a state file keeps (a budget larger than this is paced per process).
pub(crate) const MAX_SENDS: usize = 20_000;
/// The longest server wait shared through the file (6 hours): a longer `Retry-After` still
/// holds the call that got it, but is not imposed on every process for longer.
pub(crate) const MAX_BLOCK: f64 = 6.0 * 3600.0;
/// The longest window whose sends the file keeps (a day).
pub(crate) const MAX_KEEP: f64 = 86_400.0;
pub(crate) const FORMAT: u32 = 1;
/// How far a writer's clock may run ahead of ours before its times are moved back (seconds).
const CLOCK_MARGIN: f64 = 5.0;
/// Added to a window-old send's time before the next may go (seconds).
pub(crate) fn slack(window: f64) -> f64 {
    (window * 0.01).clamp(0.01, 1.0)
}

/// The file's contents.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct State {
    #[serde(default)]
    pub v: u32,
    #[serde(default)]
    pub sends: Vec<f64>,
    #[serde(default)]
    pub blocked_until: f64,
    /// The longest window any client of the token paces by: sends are kept that long, so a
    /// client with a shorter window never drops what another still counts.
    #[serde(default)]
    pub keep: f64,
    /// When the file was last written, by the writer's clock: a writer whose clock was ahead is
    /// found by it, and its times are moved back by as much (see [`State::sanitize`]).
    #[serde(default)]
    pub written: f64,
}

impl State {
    /// Drops what cannot be true at `now`: non-numbers, sends older than the longest window
    /// (`window`, or a longer one another writer keeps), times further ahead than a booking (or
    /// a server's wait) can be. Keeps the sends sorted.
    pub(crate) fn sanitize(&mut self, now: f64, window: f64) {
        // A file written in our future came from a clock that was ahead: its bookings and its
        // server wait are moved back by that much, or they would hold every client for as long.
        if self.written.is_finite() && self.written > now + CLOCK_MARGIN {
            let ahead = self.written - now;
            self.sends.iter_mut().for_each(|t| *t -= ahead);
            self.blocked_until -= ahead;
        }
        self.written = 0.0;
        let keep = if self.keep.is_finite() { self.keep.max(window) } else { window };
        self.keep = keep.clamp(0.0, MAX_KEEP);
        let horizon = now + MAX_BLOCK + self.keep;
        let keep = self.keep;
        self.sends.retain(|t| t.is_finite() && *t > now - keep && *t <= horizon);
        self.sends.sort_by(f64::total_cmp);
        if self.sends.len() > MAX_SENDS {
            let cut = self.sends.len() - MAX_SENDS;
            self.sends.drain(..cut);
        }
        if !self.blocked_until.is_finite()
            || self.blocked_until <= now
            || self.blocked_until > now + MAX_BLOCK
        {
            self.blocked_until = 0.0;
        }
        self.v = FORMAT;
    }
}

/// When a request wanted at `now` may go under `requests` per `window` seconds (and not before
/// `blocked_until`): the time to book. `state` must be sanitized.
pub(crate) fn slot(state: &State, now: f64, limit: Option<(u32, f64)>) -> f64 {
    let mut at = now.max(state.blocked_until);
    if let Some((requests, window)) = limit {
        let n = usize::try_from(requests).unwrap_or(usize::MAX);
        if n > 0 && state.sends.len() >= n {
            // The send `n` places back must be a window old, and a little more (1 % of the
            // window, 10 ms to 1 s): the server counts arrivals, and a request that connects
            // afresh arrives later than one on a warm connection.
            if let Some(t) = state.sends.len().checked_sub(n).and_then(|i| state.sends.get(i)) {
                at = at.max(t + window + slack(window));
            }
        }
    }
    at
}
