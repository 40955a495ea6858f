//! Request counters and the log of API requests, for tests that assert on client behaviour.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters since start (or since the last [`Emulator::reset_stats`](crate::Emulator::reset_stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Every request to the API endpoint, whatever its outcome.
    pub api_requests: u64,
    /// Every request to the identity provider, whatever its outcome.
    pub idp_requests: u64,
    /// Successful `InitiateAuth` calls (a JWT was issued).
    pub token_exchanges: u64,
    /// 429 answers of the API, injected ones included.
    pub rate_limited: u64,
    /// 401 answers of the API.
    pub unauthorized: u64,
    /// Root mutation fields that ran without an error (each change the store kept).
    pub mutations_applied: u64,
}

/// One API request whose body parsed as a JSON object.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRequest {
    pub operation_name: Option<String>,
    /// Empty when the body had no `query` string.
    pub query: String,
    /// `Null` when absent.
    pub variables: serde_json::Value,
    /// The status sent; 0 when the connection was reset without an answer.
    pub status: u16,
}

#[derive(Default)]
pub(crate) struct Counters {
    pub api_requests: AtomicU64,
    pub idp_requests: AtomicU64,
    pub token_exchanges: AtomicU64,
    pub rate_limited: AtomicU64,
    pub unauthorized: AtomicU64,
}

impl Counters {
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> Stats {
        Stats {
            api_requests: self.api_requests.load(Ordering::Relaxed),
            idp_requests: self.idp_requests.load(Ordering::Relaxed),
            token_exchanges: self.token_exchanges.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            unauthorized: self.unauthorized.load(Ordering::Relaxed),
            mutations_applied: 0,
        }
    }

    pub fn reset(&self) {
        for counter in [
            &self.api_requests,
            &self.idp_requests,
            &self.token_exchanges,
            &self.rate_limited,
            &self.unauthorized,
        ] {
            counter.store(0, Ordering::Relaxed);
        }
    }
}

pub(crate) const LOG_CAPACITY: usize = 10_000;

#[derive(Default)]
pub(crate) struct RequestLog {
    entries: Mutex<VecDeque<LoggedRequest>>,
}

impl RequestLog {
    pub fn push(&self, entry: LoggedRequest) {
        let mut entries = crate::locks::lock(&self.entries);
        if entries.len() >= LOG_CAPACITY {
            entries.pop_front();
        }
        entries.push_back(entry);
    }

    pub fn snapshot(&self) -> Vec<LoggedRequest> {
        crate::locks::lock(&self.entries).iter().cloned().collect()
    }

    pub fn clear(&self) {
        crate::locks::lock(&self.entries).clear();
    }
}
