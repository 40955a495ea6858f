//! An in-process emulator of the Security Findings Management GraphQL API and of the identity
//! provider (Cognito `InitiateAuth`) that turns API tokens into JWTs.
//!
//! One [`Emulator`] is a real HTTP/1.1 server on loopback with its own tokio runtime, so it serves
//! clients of any runtime (or none) in the same process. Both sides share one port: the identity
//! provider answers `POST /`, the API `POST /api/v1`.
//!
//! An API request goes through, in this order: an injected fault, the global rate limit (which
//! also counts unidentified requests), the method (405 unless POST), the bearer JWT (401), the
//! customer and token limits (429 with `Retry-After`), the body checks (400 with graphene's
//! messages), and GraphQL execution (400 with only `errors` when no error has a `path`, else 200).

mod api;
mod auth;
mod cache;
pub mod caller;
mod config;
mod fault;
pub mod graphql;
mod http;
mod idp;
mod limits;
mod locks;
mod response;
mod sockets;
mod state;
mod stats;
mod ws;

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

pub use crate::api::count_aliases;
pub use crate::caller::Caller;
pub use crate::config::{EmulatorConfig, LimitScope, RateLimit};
pub use crate::fault::{Fault, FaultTarget};
pub use crate::graphql::{FindingUpdate, Profile};
pub use crate::sockets::WsProtocols;
pub use crate::stats::{LoggedRequest, Stats};

use crate::auth::Auth;
use crate::fault::FaultQueue;
use crate::graphql::GraphqlService;
use crate::limits::Limiter;
use crate::locks::lock;
use crate::state::Shared;
use crate::stats::{Counters, RequestLog};

/// Why an emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum EmulatorError {
    #[error("cannot listen: {0}")]
    Bind(#[source] std::io::Error),
    #[error("cannot start the emulator's runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error("cannot build the GraphQL schema: {0}")]
    Schema(String),
}

/// A running emulator. Dropping it shuts it down.
pub struct Emulator {
    shared: Arc<Shared>,
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    profile: Profile,
}

/// Shutdown waits this long at most for the runtime's threads to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

const LISTEN_BACKLOG: u32 = 1024;

impl Emulator {
    /// Builds the store, starts the runtime and binds; the server accepts connections as soon as
    /// this returns.
    pub fn start(config: EmulatorConfig) -> Result<Emulator, EmulatorError> {
        let graphql = GraphqlService::with_profile(config.findings, config.seed, config.profile)
            .map_err(EmulatorError::Schema)?;
        let shared = Arc::new(Shared {
            graphql,
            auth: Auth::new(config.jwt_lifetime),
            global_limit: Limiter::new(config.global_limit),
            customer_limit: Limiter::new(config.customer_limit),
            token_limit: Limiter::new(config.token_limit),
            idp_limit: Limiter::new(config.idp_limit),
            api_faults: FaultQueue::default(),
            idp_faults: FaultQueue::default(),
            mutation_faults: crate::fault::MutationFaults::default(),
            counters: Counters::default(),
            log: RequestLog::default(),
            cache: config.response_cache.then(cache::ResponseCache::default),
            ws: sockets::WsState::default(),
            knobs: config::Knobs::new(&config),
        });
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads.max(1))
            .thread_name("secfindings-emulator")
            .enable_all()
            .build()
            .map_err(EmulatorError::Runtime)?;
        let listener = {
            // Registering the socket with the reactor needs the runtime's context.
            let _context = runtime.enter();
            bind(SocketAddr::new(config.host, config.port)).map_err(EmulatorError::Bind)?
        };
        let addr = listener.local_addr().map_err(EmulatorError::Bind)?;
        let (stop, stopped) = watch::channel(false);
        runtime.spawn(http::accept_loop(listener, shared.clone(), stopped));
        Ok(Emulator { shared, addr, stop, runtime: Mutex::new(Some(runtime)), profile: config.profile })
    }

    /// The API's base URL, `http://HOST:PORT/api/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/api/v1", self.authority())
    }

    /// The identity provider's endpoint, `http://HOST:PORT/`.
    pub fn auth_url(&self) -> String {
        format!("http://{}/", self.authority())
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    fn authority(&self) -> String {
        match self.addr.ip() {
            IpAddr::V4(ip) => format!("{ip}:{}", self.addr.port()),
            IpAddr::V6(ip) => format!("[{ip}]:{}", self.addr.port()),
        }
    }

    /// A new API token for `customer`: base64 (standard, padded) of the `InitiateAuth` body that
    /// exchanges it, like the tokens the real service hands out.
    pub fn create_api_token(&self, customer: &str, name: &str) -> String {
        self.shared.auth.create_api_token(customer, name)
    }

    /// Revokes an API token: its exchanges and every JWT issued from it are refused from now on.
    /// Returns false when the token is unknown to this emulator or was already revoked.
    pub fn revoke_api_token(&self, api_token: &str) -> bool {
        self.shared.auth.revoke_api_token(api_token)
    }

    /// A valid access JWT for `customer` / `name` without a token exchange. `Duration::ZERO`
    /// yields a JWT that is already expired.
    pub fn issue_jwt(&self, customer: &str, name: &str, lifetime: Duration) -> String {
        self.shared.auth.issue_jwt(customer, name, lifetime)
    }

    /// Every JWT issued so far is refused (401) from now on; new exchanges still work.
    pub fn expire_jwts(&self) {
        self.shared.auth.expire_all();
    }

    /// Lifetime of JWTs issued by later exchanges.
    pub fn set_jwt_lifetime(&self, lifetime: Duration) {
        self.shared.auth.set_lifetime(lifetime);
    }

    /// Replaces one scope's limit (`None` lifts it); the scope's windows start afresh.
    pub fn set_rate_limit(&self, scope: LimitScope, limit: Option<RateLimit>) {
        let limiter = match scope {
            LimitScope::Global => &self.shared.global_limit,
            LimitScope::Customer => &self.shared.customer_limit,
            LimitScope::Token => &self.shared.token_limit,
            LimitScope::Idp => &self.shared.idp_limit,
        };
        limiter.set(limit);
    }

    /// The next `count` requests to `target` get `fault`, after any faults injected earlier.
    pub fn inject(&self, target: FaultTarget, fault: Fault, count: u32) {
        match target {
            FaultTarget::Api => self.shared.api_faults.push(fault, count),
            FaultTarget::Idp => self.shared.idp_faults.push(fault, count),
        }
    }

    /// A fault for mutations only: the first `after` mutations pass, then the next `count` get
    /// `fault`; with `applied` each of those runs first and the fault replaces its answer (a reset
    /// or a status) or cuts it short, so the change is made although the client sees a failure.
    pub fn inject_mutation(&self, fault: Fault, after: u32, count: u32, applied: bool) {
        self.shared.mutation_faults.push(fault, after, count, applied);
    }

    pub fn clear_faults(&self) {
        self.shared.api_faults.clear();
        self.shared.idp_faults.clear();
        self.shared.mutation_faults.clear();
    }

    pub fn stats(&self) -> Stats {
        let mut stats = self.shared.counters.snapshot();
        stats.mutations_applied = self.shared.graphql.mutations_applied();
        stats
    }

    pub fn reset_stats(&self) {
        self.shared.counters.reset();
        self.shared.graphql.reset_mutations_applied();
    }

    /// The last (up to 10 000) API requests whose body was a JSON object, oldest first.
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        self.shared.log.snapshot()
    }

    pub fn clear_request_log(&self) {
        self.shared.log.clear();
    }

    /// Test hook: a new finding of `severity` (1-5), published to `finding_created`
    /// subscribers: OPEN (status New) and due as the seeded SLA groups say, unless `status` (a
    /// status key or category) or `due` (unix seconds) say otherwise. Returns the finding's id
    /// and the event's cursor.
    pub fn create_finding(
        &self,
        severity: u8,
        status: Option<&str>,
        due: Option<i64>,
    ) -> Result<(u64, String), String> {
        self.forget_answers();
        self.shared.graphql.create_finding(severity, status, due)
    }

    /// The store is about to change outside a mutation: answers kept by the response cache go.
    fn forget_answers(&self) {
        if let Some(cache) = &self.shared.cache {
            cache.clear();
        }
    }

    /// The model this emulator serves.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Test hook: publishes a `finding_changed` event of `kind` for finding `id`; returns its cursor.
    pub fn change_finding(&self, id: u64, kind: &str) -> Result<String, String> {
        self.shared.graphql.change_finding(id, kind)
    }

    /// Subscriptions open on the server, and WebSocket connections open and accepted so far.
    /// The emulator's clock (unix seconds; see `GraphqlService::now`).
    pub fn now(&self) -> i64 {
        self.shared.graphql.now()
    }

    /// Changes (or removes) a finding and publishes `finding_changed` of `kind`.
    pub fn update_finding(&self, id: u64, update: FindingUpdate, kind: &str) -> Result<String, String> {
        self.forget_answers();
        self.shared.graphql.update_finding(id, update, kind)
    }

    /// Every API request waits this long before it is answered (zero: none).
    pub fn set_latency(&self, latency: Duration) {
        self.shared.knobs.set_latency(latency);
    }

    /// Limits on one request's document: aliased fields, and body bytes (None: no limit).
    pub fn set_document_limits(&self, max_aliases: Option<u32>, max_bytes: Option<usize>) {
        self.shared.knobs.set_document_limits(max_aliases, max_bytes);
    }

    pub fn subscription_stats(&self) -> (usize, u64, u64) {
        (
            self.shared.graphql.active_subscriptions(),
            self.shared.ws.open.load(std::sync::atomic::Ordering::Acquire),
            self.shared.ws.accepted.load(std::sync::atomic::Ordering::Acquire),
        )
    }

    /// Test hook: drops every open WebSocket connection without a close frame.
    pub fn drop_websockets(&self) {
        self.shared.ws.drop_all();
    }

    /// Which WebSocket subprotocols the server accepts from now on.
    /// Drops the next `count` WebSocket connections when their `connection_init` arrives, before
    /// the server acknowledges it.
    pub fn drop_next_websockets(&self, count: u64) {
        self.shared.ws.drop_next_at_init(count);
    }

    pub fn set_ws_protocols(&self, protocols: WsProtocols) {
        self.shared.ws.set_protocols(protocols);
    }

    /// The GraphQL schema in SDL.
    pub fn sdl(&self) -> String {
        self.shared.graphql.sdl()
    }

    /// Stops accepting and stops the runtime. Idempotent; also done on drop.
    pub fn shutdown(&self) {
        let _ = self.stop.send(true);
        let Some(runtime) = lock(&self.runtime).take() else {
            return;
        };
        // Blocking to wait for the workers is forbidden inside an async context (tokio panics);
        // there the runtime is let go in the background.
        if tokio::runtime::Handle::try_current().is_ok() {
            runtime.shutdown_background();
        } else {
            runtime.shutdown_timeout(SHUTDOWN_GRACE);
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.shutdown();
    }
}

impl std::fmt::Debug for Emulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Emulator").field("addr", &self.addr).finish_non_exhaustive()
    }
}

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = match addr {
        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    // Lets a fixed port be reused at once after a previous emulator on it stopped.
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}
