//! The one async send loop every call goes through: token -> POST -> classify -> retry -> body.

use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use reqwest::header::{HeaderMap, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};

use super::auth::{CachedToken, TokenProvider};
use super::budget::{Booking, Budget};
use super::budget_store::Shared;
use super::config::{Credential, Settings};
use super::error::{secs, Error, Result};
use super::graphql::{decode_response, PreparedRequest};
use super::http::{build_http, classify, location, read_capped, tls_config, transport_error};
use super::limit::{Pace, RateLimiter};
use super::observe;
use super::retry::{self, parse_retry_after, Attempt, Failure, RetryPolicy};
use super::secret::Redactor;

/// How much of an error body is kept for `APIStatusError.body`.
const BODY_KEEP: usize = 4096;
/// Read past what is kept, so that a secret echoed across the cut is whole when it is masked.
const BODY_MARGIN: usize = 16 * 1024;

/// What the observer is told of a request's attempts (see `observe.rs`): their count, and the
/// wait and status a retry follows.
#[derive(Default)]
struct Trace {
    attempts: AtomicU32,
    /// The status of the last attempt (0: no answer), and the wait before the next one when
    /// the retry policy chose to send it again (`u64::MAX`: it did not).
    last_status: AtomicU16,
    wait_us: AtomicU64,
}

impl Trace {
    /// Counts an attempt; returns its number.
    fn begin(&self) -> u32 {
        self.attempts.fetch_add(1, Ordering::Relaxed).saturating_add(1)
    }

    fn retrying(&self, wait: Duration) {
        let us = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX - 1);
        self.wait_us.store(us.min(u64::MAX - 1), Ordering::Relaxed);
    }

    fn report(
        &self,
        req: &PreparedRequest,
        started: (u32, SystemTime, Instant),
        posted: &std::result::Result<Answer, Attempt<Bytes>>,
    ) {
        let (attempt, at, clock) = started;
        let (status, bytes, retry_after) = match posted {
            Ok(a) => (
                a.status,
                a.body.len() as u64,
                a.headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string),
            ),
            Err(_) => (0, 0, None),
        };
        let previous = self.last_status.swap(status, Ordering::Relaxed);
        let wait = self.wait_us.swap(u64::MAX, Ordering::Relaxed);
        let retry_of = (attempt > 1 && wait != u64::MAX).then_some(previous);
        observe::emit(&observe::AttemptEvent {
            call: observe::current_call(),
            operation: req.label.clone(),
            attempt,
            status,
            started: at.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64()),
            elapsed: clock.elapsed(),
            waited: if retry_of.is_some() { Duration::from_micros(wait) } else { Duration::ZERO },
            retry_of,
            retry_after,
            bytes,
        });
    }
}

/// An answer as [`Transport::post`] read it: `more` when the body went past its cap.
struct Answer {
    status: u16,
    headers: reqwest::header::HeaderMap,
    body: Bytes,
    more: bool,
}

/// The HTTP side of a client: one connection pool, one token provider, one retry policy.
pub struct Transport {
    http: reqwest::Client,
    /// The one TLS configuration: reqwest's is a copy with ALPN, WebSockets use this one.
    tls: Arc<rustls::ClientConfig>,
    settings: Settings,
    tokens: Arc<TokenProvider>,
    policy: RetryPolicy,
    closed: AtomicBool,
    on_close: tokio::sync::watch::Sender<bool>,
    limiter: Option<RateLimiter>,
    /// The request budget shared by every client of this token on the machine.
    budget: Budget,
    stats: Stats,
    /// The server has no `subscription_cursor` query (a subscription's start is then its first
    /// event): asked once per client.
    no_event_head: AtomicBool,
}

/// What a client has done so far, for logs and progress (`client.stats()`).
#[derive(Debug, Default)]
pub struct Stats {
    /// API requests sent (every attempt).
    pub requests: AtomicU64,
    /// Attempts that were retries.
    pub retries: AtomicU64,
    /// 429 answers received.
    pub rate_limited: AtomicU64,
    /// Time slept before retries, in microseconds.
    pub retry_wait_us: AtomicU64,
    /// Requests the client-side rate limit held back, and for how long in all (microseconds).
    pub limiter_waits: AtomicU64,
    pub limiter_wait_us: AtomicU64,
    /// Response body bytes read (after decompression).
    pub bytes_received: AtomicU64,
}

fn add_micros(counter: &AtomicU64, d: std::time::Duration) {
    counter.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
}

/// The start of an error body for an exception: scrubbed of secrets first, then cut (so a
/// secret across the cut is masked, not half shown).
fn truncated(redactor: &Redactor, body: &[u8], more: bool) -> String {
    let text = String::from_utf8_lossy(body);
    let (kept, cut) = redactor.scrub_cut(&text, BODY_KEEP);
    if more || cut {
        format!("{kept}... (truncated)")
    } else {
        kept
    }
}

/// Headers that carry credentials or sessions: never copied into an exception.
const SENSITIVE_HEADERS: [&str; 8] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "set-cookie2",
    "x-api-key",
    "x-amz-security-token",
    "x-auth-token",
];

fn header_pairs(h: &HeaderMap) -> Vec<(String, String)> {
    h.iter()
        .filter(|(k, _)| !SENSITIVE_HEADERS.contains(&k.as_str()))
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect()
}

impl Transport {
    pub fn new(settings: Settings) -> Result<Self> {
        let tls = tls_config(&settings)?;
        let http = build_http(&settings, &tls)?;
        let tokens = Arc::new(TokenProvider::new(&settings, http.clone())?);
        let policy = RetryPolicy::new(settings.max_retries, settings.max_retry_wait);
        let limiter = settings.rate_limit.and_then(|(n, per)| Pace::new(n, per)).map(RateLimiter::new);
        let credential: &[u8] = match &settings.credential {
            Credential::ApiToken(t) => t.expose_text().as_bytes(),
            Credential::Jwt(j) => j.expose().as_bytes(),
        };
        let key = super::budget::key(settings.base_url.as_str(), credential);
        let shared = settings.budget_store.clone().map(|url| {
            Shared::new(
                url,
                key.clone(),
                settings.budget_required,
                Arc::clone(&tls),
                settings.ca_bundle.clone(),
            )
        });
        let budget =
            Budget::new(settings.budget_dir.clone(), key, settings.rate_limit, settings.max_retry_wait)
                .sharing_waits(settings.budget_shares_waits)
                .with_store(shared);
        Ok(Self {
            http,
            tls,
            settings,
            tokens,
            policy,
            closed: AtomicBool::new(false),
            on_close: tokio::sync::watch::channel(false).0,
            limiter,
            budget,
            stats: Stats::default(),
            no_event_head: AtomicBool::new(false),
        })
    }

    /// Whether the server is known to lack the event head query (see `subscribe`).
    pub fn lacks_event_head(&self) -> bool {
        self.no_event_head.load(Ordering::Acquire)
    }

    pub fn set_lacks_event_head(&self) {
        self.no_event_head.store(true, Ordering::Release);
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    pub fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.tls
    }

    pub fn budget(&self) -> &Budget {
        &self.budget
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    pub fn tokens(&self) -> &Arc<TokenProvider> {
        &self.tokens
    }

    /// Stops new calls; connections close when the last reference goes.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        // Subscriptions end on the server too.
        self.on_close.send_replace(true);
    }

    /// Becomes true when the client is closed (what long-lived tasks select on).
    pub fn on_close(&self) -> tokio::sync::watch::Receiver<bool> {
        self.on_close.subscribe()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends one request with refresh-on-401 and retries; returns the body of a 2xx answer. No
    /// error carries a secret of the client's, whatever the server echoed.
    pub async fn send(&self, req: &PreparedRequest) -> Result<Bytes> {
        self.send_inner(req).await.map_err(|e| e.redact(&self.settings.redactor))
    }

    async fn send_inner(&self, req: &PreparedRequest) -> Result<Bytes> {
        let refreshed = AtomicBool::new(false);
        let trace = Trace::default();
        let label = req.label.as_str();
        retry::run(
            self.policy,
            req.retry,
            || self.attempt(req, &refreshed, &trace),
            |wait, n, why| {
                trace.retrying(wait);
                self.stats.retries.fetch_add(1, Ordering::Relaxed);
                add_micros(&self.stats.retry_wait_us, wait);
                log::info!("{label}: {why}; retry {n} of {} in {}", self.policy.max_retries, secs(wait));
                tokio::time::sleep(wait)
            },
        )
        .await
    }

    /// The error for a wait the shared budget asks for that is longer than `max_retry_wait`.
    fn budget_spent(&self, wait: f64) -> Error {
        Error::RateLimit {
            status: 429,
            message: format!(
                "the request budget of this API token (shared by every client of it) allows the \
                 next request in {wait:.0}s, longer than max_retry_wait ({}); see client.budget(). \
                 A wait a server asked for is kept in {}: delete it, or pass budget=False, to stop \
                 honouring it",
                super::retry::seconds(self.policy.max_retry_wait.as_secs_f64()),
                self.budget.kept_in()
            ),
            body: String::new(),
            headers: Vec::new(),
            retry_after: Some(wait),
        }
    }

    /// One attempt: its turn (the budget, the rate limiter), a JWT, the POST, and what its
    /// answer means.
    async fn attempt(&self, req: &PreparedRequest, refreshed: &AtomicBool, trace: &Trace) -> Attempt<Bytes> {
        if self.is_closed() {
            return Attempt::Fatal(Error::Closed("the client is closed".into()));
        }
        if let Err(e) = self.wait_turn().await {
            return Attempt::Fatal(e);
        }
        // The JWT is taken after the wait: one taken before it could lapse while the request
        // waited its turn (a long Retry-After), and the API's 401 then read as a bad token.
        let token = match self.tokens.get().await {
            Ok(t) => t,
            Err(e) => return Attempt::Fatal(e),
        };
        let number = trace.begin();
        // Only an observed attempt is timed for the observer (see observe.rs).
        let started = observe::observed().then(|| (number, SystemTime::now(), Instant::now()));
        let posted = self.post(req, &token).await;
        if let Some(started) = started {
            trace.report(req, started, &posted);
        }
        match posted {
            Ok(answer) => self.judge(req, &token, refreshed, answer).await,
            Err(failed) => failed,
        }
    }

    /// Waits for this request's turn: the shared budget books the send for every process of
    /// this token; when it cannot (no limit to share, or its file is unusable), the client's own
    /// limiter paces it, after any wait a server asked every client of the token for.
    async fn wait_turn(&self) -> Result<()> {
        let waited = match self.budget.reserve().await {
            Booking::TooLong(wait) => return Err(self.budget_spent(wait)),
            Booking::Unavailable(why) => return Err(Error::Transport(why)),
            Booking::Booked(wait) => {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                wait
            }
            Booking::Unbooked(wait) => {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                match &self.limiter {
                    Some(limiter) => wait + limiter.acquire().await,
                    None => wait,
                }
            }
        };
        if !waited.is_zero() {
            self.stats.limiter_waits.fetch_add(1, Ordering::Relaxed);
            add_micros(&self.stats.limiter_wait_us, waited);
        }
        Ok(())
    }

    /// The POST and its answer, read as far as its status deserves: a 2xx body, or a 400 with
    /// GraphQL errors, whole (up to the cap); any other error body only as far as an exception
    /// keeps it.
    async fn post(
        &self,
        req: &PreparedRequest,
        token: &CachedToken,
    ) -> std::result::Result<Answer, Attempt<Bytes>> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let sent = self
            .http
            .post(self.settings.base_url.clone())
            .header(AUTHORIZATION, token.header.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(req.body.clone())
            .send()
            .await;
        let mut resp = sent.map_err(|e| Attempt::Failed {
            failure: classify(&e),
            error: transport_error(&self.settings.redactor, "API", &e),
        })?;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let cap = if (200..300).contains(&status) || status == 400 {
            self.settings.max_response_bytes
        } else {
            BODY_KEEP + BODY_MARGIN
        };
        let (body, more) = read_capped(&mut resp, cap).await.map_err(|e| Attempt::Failed {
            failure: if e.is_timeout() { Failure::TimedOut } else { Failure::ConnectionLost },
            error: transport_error(&self.settings.redactor, "API", &e),
        })?;
        self.stats.bytes_received.fetch_add(body.len() as u64, Ordering::Relaxed);
        log::debug!("{} -> HTTP {status} in {:.1} ms", req.label, started.elapsed().as_secs_f64() * 1e3);
        Ok(Answer { status, headers, body, more })
    }

    /// What an answer means: done, refresh and again, or a failure the retry policy judges.
    async fn judge(
        &self,
        req: &PreparedRequest,
        token: &CachedToken,
        refreshed: &AtomicBool,
        answer: Answer,
    ) -> Attempt<Bytes> {
        let Answer { status, headers, body, more } = answer;
        if (200..300).contains(&status) {
            if more {
                return Attempt::Fatal(Error::Transport(format!(
                    "the API's answer is larger than max_response_bytes ({} bytes, counted after \
                     decompression); nothing was kept. Raise max_response_bytes= if the answer is \
                     legitimate, or ask for fewer fields or a smaller page_size",
                    self.settings.max_response_bytes
                )));
            }
            return Attempt::Done(body);
        }
        if (300..400).contains(&status) {
            return Attempt::Fatal(Error::ApiStatus {
                status,
                message: format!(
                    "the API answered with a redirect to {}, which the client does not follow (it \
                     would carry the JWT and the request elsewhere); check base_url",
                    location(&self.settings.redactor, &headers)
                ),
                body: truncated(&self.settings.redactor, &body, more),
                headers: header_pairs(&headers),
            });
        }
        if status == 401 {
            if self.tokens.can_refresh() && !refreshed.swap(true, Ordering::AcqRel) {
                log::info!("{}: API answered 401; refreshing the JWT once and retrying", req.label);
                self.tokens.invalidate(token.generation);
                return Attempt::Again;
            }
            return Attempt::Fatal(Error::Authentication {
                error_type: None,
                message: if self.tokens.can_refresh() {
                    "the API rejected a freshly obtained JWT (HTTP 401); check the API token's permissions"
                        .into()
                } else {
                    "the API rejected the JWT (HTTP 401); it may have expired: pass api_token=... so the \
                     client can refresh it"
                        .into()
                },
            });
        }
        if status == 400 && !more {
            // Parse and validation failures come back as 400 with GraphQL `errors`.
            if let Err(e @ Error::GraphQL { .. }) = decode_response(&body) {
                return Attempt::Fatal(e);
            }
        }
        let text = truncated(&self.settings.redactor, &body, more);
        let pairs = header_pairs(&headers);
        let retry_after = headers.get(RETRY_AFTER).and_then(|v| v.to_str().ok()).map(str::to_string);
        let error = if status == 429 {
            self.stats.rate_limited.fetch_add(1, Ordering::Relaxed);
            // Every client of this token waits for what the server asked, not only this call.
            if let Some(wait) = retry_after.as_deref().and_then(|v| parse_retry_after(v, SystemTime::now())) {
                self.budget.blocked_for(wait).await;
            }
            Error::RateLimit {
                status,
                message: "rate limited (HTTP 429)".into(),
                body: text,
                headers: pairs,
                retry_after: None,
            }
        } else {
            let reason = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("unexpected status");
            Error::ApiStatus { status, message: reason.to_string(), body: text, headers: pairs }
        };
        Attempt::Failed { failure: Failure::Status { code: status, retry_after }, error }
    }
}
