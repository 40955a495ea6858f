//! The client-side rate limit (`rate_limit=(requests, per_seconds)`): bulk jobs pace themselves
//! below a token's known limit instead of bouncing off it with 429s.
//!
//! A sliding window: a request goes when fewer than `requests` went in the last `per` seconds,
//! else when the oldest of them is `per` old, so no window of that length ever holds more than
//! the limit of *sends*. Requests reach the server a little later and unevenly, so set the limit
//! with a margin below the server's (10 % is plenty on a LAN). The policy is pure (`reserve` takes the
//! time and returns the wait), so the schedule is tested without sleeping; every thread and task
//! of a client shares one [`RateLimiter`].

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The largest `requests` a limit takes (the window keeps one time per request).
pub(crate) const MAX_REQUESTS: u32 = 1_000_000;

/// The pacing state: when the last `requests` requests go (booked, in order).
#[derive(Debug, Clone)]
pub(crate) struct Pace {
    requests: usize,
    per: Duration,
    sends: VecDeque<Instant>,
}

impl Pace {
    /// `requests` per `per`; `None` when the numbers cannot make a limit (checked by settings).
    pub(crate) fn new(requests: u32, per: Duration) -> Option<Self> {
        if requests == 0 || requests > MAX_REQUESTS || per.is_zero() {
            return None;
        }
        let requests = usize::try_from(requests).ok()?;
        Some(Self { requests, per, sends: VecDeque::with_capacity(requests.min(4096)) })
    }

    /// Books a slot for a request wanted at `now`: how long to wait before sending it.
    pub(crate) fn reserve(&mut self, now: Instant) -> Duration {
        let at = if self.sends.len() < self.requests {
            now
        } else {
            let oldest = self.sends.pop_front().unwrap_or(now);
            oldest.checked_add(self.per).unwrap_or(now).max(now)
        };
        // Booked in order: a later booking never goes before an earlier one.
        let at = self.sends.back().map_or(at, |last| at.max(*last));
        self.sends.push_back(at);
        at.saturating_duration_since(now)
    }
}

/// A [`Pace`] shared by every caller of a client.
#[derive(Debug)]
pub(crate) struct RateLimiter {
    pace: Mutex<Pace>,
}

impl RateLimiter {
    pub(crate) fn new(pace: Pace) -> Self {
        Self { pace: Mutex::new(pace) }
    }

    /// Waits for this request's slot (booked now, so callers queue fairly); returns the wait.
    pub(crate) async fn acquire(&self) -> Duration {
        let wait = match self.pace.lock() {
            Ok(mut p) => p.reserve(Instant::now()),
            Err(_) => Duration::ZERO,
        };
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_average_pace() {
        let mut p = Pace::new(5, Duration::from_secs(1)).unwrap();
        let t0 = Instant::now();
        // Five at once after a quiet spell...
        for _ in 0..5 {
            assert_eq!(p.reserve(t0), Duration::ZERO);
        }
        // ...then the sixth when the first is a second old.
        assert_eq!(p.reserve(t0), Duration::from_secs(1));
        assert_eq!(p.reserve(t0 + Duration::from_millis(500)), Duration::from_millis(500));
        // Time passing frees slots again.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(p.reserve(later), Duration::ZERO);
    }

    #[test]
    fn over_any_window_no_more_than_the_limit() {
        let mut p = Pace::new(10, Duration::from_secs(2)).unwrap();
        let t0 = Instant::now();
        let sends: Vec<Instant> = (0..100).map(|_| t0 + p.reserve(t0)).collect();
        for (i, start) in sends.iter().enumerate() {
            let within =
                sends[i..].iter().filter(|t| t.duration_since(*start) < Duration::from_secs(2)).count();
            assert!(within <= 10, "{within} requests within 2 s from request {i}");
        }
    }

    #[test]
    fn nonsense_is_no_limit() {
        assert!(Pace::new(0, Duration::from_secs(1)).is_none());
        assert!(Pace::new(5, Duration::ZERO).is_none());
        assert!(Pace::new(MAX_REQUESTS + 1, Duration::from_secs(1)).is_none());
    }
}
