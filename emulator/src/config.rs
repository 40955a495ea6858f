//! Configuration of an emulator instance.

use std::net::{IpAddr, Ipv4Addr};
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
        }
    }
}
