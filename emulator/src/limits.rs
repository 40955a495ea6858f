//! Fixed-window rate limiting, one limiter per scope, keyed within the scope.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::RateLimit;

struct Window {
    start: Instant,
    count: u32,
}

struct Inner {
    limit: Option<RateLimit>,
    windows: HashMap<String, Window>,
}

/// Above this many keys, expired windows are dropped so a long run with many customers or tokens
/// does not grow without bound.
const PRUNE_AT: usize = 4096;

pub(crate) struct Limiter {
    // Lets the common no-limit case skip the lock entirely.
    enabled: AtomicBool,
    inner: Mutex<Inner>,
}

impl Limiter {
    pub fn new(limit: Option<RateLimit>) -> Self {
        Self {
            enabled: AtomicBool::new(limit.is_some()),
            inner: Mutex::new(Inner { limit, windows: HashMap::new() }),
        }
    }

    /// Changing the limit starts fresh windows, so a test sees exactly the limit it set.
    pub fn set(&self, limit: Option<RateLimit>) {
        let mut inner = crate::locks::lock(&self.inner);
        inner.limit = limit;
        inner.windows.clear();
        self.enabled.store(limit.is_some(), Ordering::Release);
    }

    /// Counts one request for `key`; `Err(retry_after_secs)` when the window's budget is spent.
    pub fn check(&self, key: &str) -> Result<(), u64> {
        if !self.enabled.load(Ordering::Acquire) {
            return Ok(());
        }
        let now = Instant::now();
        let mut inner = crate::locks::lock(&self.inner);
        let Some(limit) = inner.limit else {
            return Ok(());
        };
        if inner.windows.len() >= PRUNE_AT && !inner.windows.contains_key(key) {
            inner.windows.retain(|_, w| now.saturating_duration_since(w.start) < limit.window);
        }
        if !inner.windows.contains_key(key) {
            inner.windows.insert(key.to_owned(), Window { start: now, count: 0 });
        }
        let Some(window) = inner.windows.get_mut(key) else {
            return Ok(());
        };
        if now.saturating_duration_since(window.start) >= limit.window {
            window.start = now;
            window.count = 0;
        }
        window.count = window.count.saturating_add(1);
        if window.count <= limit.requests {
            return Ok(());
        }
        let remaining = limit.window.saturating_sub(now.saturating_duration_since(window.start));
        Err(ceil_secs(remaining).max(1))
    }
}

fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_then_retry_after() {
        let limiter = Limiter::new(Some(RateLimit { requests: 2, window: Duration::from_secs(60) }));
        assert_eq!(limiter.check("a"), Ok(()));
        assert_eq!(limiter.check("a"), Ok(()));
        let retry = limiter.check("a").unwrap_err();
        assert!((59..=60).contains(&retry), "{retry}");
        assert_eq!(limiter.check("b"), Ok(()));
        limiter.set(None);
        assert_eq!(limiter.check("a"), Ok(()));
    }

    #[test]
    fn zero_window_never_blocks_for_long() {
        let limiter = Limiter::new(Some(RateLimit { requests: 0, window: Duration::from_millis(10) }));
        assert_eq!(limiter.check("a"), Err(1));
    }
}
