//! Configuration of an emulator instance.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// A fixed-window rate limit: at most `requests` requests per `window`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub requests: u32,
    pub window: Duration,
}

/// The context a rate limit applies to, as in the production service (global, per customer, per
/// API token), plus the identity provider's own throttling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitScope {
    Global,
    Customer,
    Token,
    Idp,
}

/// How to start an [`Emulator`](crate::Emulator).
#[derive(Clone, Debug)]
pub struct EmulatorConfig {
    pub host: IpAddr,
    /// 0 picks a free port.
    pub port: u16,
    /// Number of seeded findings.
    pub findings: usize,
    /// Seed of the deterministic store.
    pub seed: u64,
    /// Lifetime of the JWTs issued by the token exchange.
    pub jwt_lifetime: Duration,
    pub global_limit: Option<RateLimit>,
    pub customer_limit: Option<RateLimit>,
    pub token_limit: Option<RateLimit>,
    pub idp_limit: Option<RateLimit>,
    /// Worker threads of the emulator's own tokio runtime.
    pub worker_threads: usize,
    /// Answer a repeated query document from memory (see `cache.rs`); for benchmarks.
    pub response_cache: bool,
    /// Added to every API request before it is answered, as a network round trip would.
    pub latency: Duration,
    /// Refuse a document with more aliased fields than this (400, "too many aliases").
    pub max_aliases: Option<u32>,
    /// Refuse a request body larger than this many bytes (413).
    pub max_document_bytes: Option<usize>,
    /// The model served: ours (`Default`) or only what the public facts show (`Known`).
    pub profile: crate::graphql::Profile,
}

impl Default for EmulatorConfig {
    fn default() -> Self {
        Self {
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            findings: 5000,
            seed: 7,
            jwt_lifetime: Duration::from_secs(3600),
            global_limit: None,
            customer_limit: None,
            token_limit: None,
            idp_limit: None,
            worker_threads: 2,
            response_cache: false,
            latency: Duration::ZERO,
            max_aliases: None,
            max_document_bytes: None,
            profile: crate::graphql::Profile::Default,
        }
    }
}

/// The settings a test may change while the emulator runs (no lock on the request path).
#[derive(Debug, Default)]
pub(crate) struct Knobs {
    latency_us: AtomicU64,
    /// 0: no limit.
    max_aliases: AtomicU32,
    /// 0: no limit.
    max_document_bytes: AtomicUsize,
}

impl Knobs {
    pub fn new(config: &EmulatorConfig) -> Self {
        let knobs = Self::default();
        knobs.set_latency(config.latency);
        knobs.set_document_limits(config.max_aliases, config.max_document_bytes);
        knobs
    }

    pub fn set_latency(&self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency_us.store(us, Ordering::Relaxed);
    }

    pub fn latency(&self) -> Option<Duration> {
        let us = self.latency_us.load(Ordering::Relaxed);
        (us > 0).then(|| Duration::from_micros(us))
    }

    /// `None` lifts a limit; `Some(0)` is treated as 1 (a limit of nothing refuses everything).
    pub fn set_document_limits(&self, max_aliases: Option<u32>, max_bytes: Option<usize>) {
        self.max_aliases.store(max_aliases.map_or(0, |n| n.max(1)), Ordering::Relaxed);
        self.max_document_bytes.store(max_bytes.map_or(0, |n| n.max(1)), Ordering::Relaxed);
    }

    pub fn max_aliases(&self) -> Option<u32> {
        Some(self.max_aliases.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }

    pub fn max_document_bytes(&self) -> Option<usize> {
        Some(self.max_document_bytes.load(Ordering::Relaxed)).filter(|n| *n > 0)
    }
}
