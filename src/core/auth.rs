//! API token -> JWT exchange (Cognito InitiateAuth) and the one token cache a client shares.
//!
//! One exchange is in flight per client: callers that find the JWT missing or about to lapse
//! queue on one async lock and re-check after it, so 32 threads or 50 tasks cause one exchange.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant, SystemTime};

use reqwest::header::{HeaderValue, CONTENT_TYPE};
use url::Url;

use super::config::{Credential, Settings};
use super::error::{secs, Error, Result};
use super::http::{classify, transport_error};
use super::retry::{self, Attempt, Failure, RetryClass, RetryPolicy};
use super::secret::{ApiToken, Redactor};

pub(crate) const INITIATE_AUTH_TARGET: &str = "AWSCognitoIdentityProviderService.InitiateAuth";
pub(crate) const AMZ_JSON: &str = "application/x-amz-json-1.1";
/// Used when the identity provider gives neither `ExpiresIn` nor a readable `exp`.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(3600);
/// The longest lifetime believed: Cognito access tokens live at most a day, and a larger value
/// (1e19 s, 1e300 s) from a broken or hostile identity provider must not overflow a clock.
pub(crate) const MAX_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// The shortest lifetime believed: a JWT said to live a nanosecond would cost an exchange per
/// call; it is used for a second, and the API says (401) if it really lapsed.
pub(crate) const MIN_LIFETIME: Duration = Duration::from_secs(1);
/// The largest identity-provider answer read (a real one is a few kilobytes).
const MAX_IDP_BODY: usize = 1024 * 1024;
/// After a failed exchange, callers within this long get its error instead of another exchange
/// (a failing or stalled identity provider is not asked once per call).
const FAILURE_HOLD: Duration = Duration::from_secs(1);
/// After a failed background refresh, the next one waits this long (the JWT still serves).
const BACKGROUND_BACKOFF: Duration = Duration::from_secs(5);

/// Seconds from a server, as a lifetime: finite, positive, within [`MIN_LIFETIME`] and
/// [`MAX_LIFETIME`].
fn lifetime_of(seconds: f64) -> Option<Duration> {
    (seconds.is_finite() && seconds > 0.0).then(|| {
        Duration::try_from_secs_f64(seconds.clamp(MIN_LIFETIME.as_secs_f64(), MAX_LIFETIME.as_secs_f64()))
            .unwrap_or(MAX_LIFETIME)
    })
}

/// What the identity provider's answer means for the client.
#[derive(Debug, PartialEq)]
pub(crate) enum IdpAnswer {
    Token {
        jwt: String,
        lifetime: Duration,
    },
    /// Throttling or an internal error: worth another try.
    Retryable {
        error_type: String,
        message: String,
    },
    /// The token was refused, or the answer cannot be used.
    Rejected {
        error_type: Option<String>,
        message: String,
    },
}

/// Cuts an AWS error code to its name: `ns#Name:extra` -> `Name` (as the AWS SDKs do).
pub(crate) fn sanitize_error_type(raw: &str) -> String {
    let cut = raw.split([':', ',']).next().unwrap_or(raw);
    cut.rsplit('#').next().unwrap_or(cut).trim().to_string()
}

/// Reads `exp` from a JWT's payload without verifying it (the API verifies; we only schedule).
pub(crate) fn jwt_expiry(jwt: &str) -> Option<SystemTime> {
    use base64::Engine as _;
    let payload = jwt.split('.').nth(1)?;
    let bytes =
        base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let exp = claims.get("exp")?.as_f64()?;
    if !exp.is_finite() || exp < 0.0 {
        return None;
    }
    // Far-future claims (1e300) are cut to what a clock can hold; the lifetime is clamped later.
    let since_epoch = Duration::try_from_secs_f64(exp.min(1e12)).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(since_epoch)
}

/// How long a JWT has left by its `exp` claim, at most [`MAX_LIFETIME`].
pub(crate) fn jwt_lifetime(jwt: &str, now: SystemTime) -> Option<Duration> {
    jwt_expiry(jwt).map(|exp| exp.duration_since(now).unwrap_or(Duration::ZERO).min(MAX_LIFETIME))
}

/// Interprets an InitiateAuth answer.
pub(crate) fn parse_idp_response(
    status: u16,
    error_type_header: Option<&str>,
    body: &[u8],
    now: SystemTime,
) -> IdpAnswer {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| json.as_ref().and_then(|j| j.get(k));
    if (200..300).contains(&status) {
        if let Some(jwt) =
            field("AuthenticationResult").and_then(|r| r.get("AccessToken")).and_then(|t| t.as_str())
        {
            let lifetime = field("AuthenticationResult")
                .and_then(|r| r.get("ExpiresIn"))
                .and_then(serde_json::Value::as_f64)
                .and_then(lifetime_of)
                .or_else(|| jwt_lifetime(jwt, now))
                .unwrap_or(DEFAULT_LIFETIME);
            return IdpAnswer::Token { jwt: jwt.to_string(), lifetime };
        }
        if let Some(challenge) = field("ChallengeName").and_then(|c| c.as_str()) {
            return IdpAnswer::Rejected {
                error_type: Some(challenge.to_string()),
                message: format!(
                    "the identity provider asked for the {challenge} challenge, which an API token cannot answer; \
                     create a new API token"
                ),
            };
        }
        return IdpAnswer::Rejected {
            error_type: None,
            message: "the identity provider's answer has no AuthenticationResult.AccessToken".into(),
        };
    }
    let error_type = error_type_header
        .filter(|h| !h.trim().is_empty())
        .map(str::to_string)
        .or_else(|| field("code").and_then(|c| c.as_str()).map(str::to_string))
        .or_else(|| field("__type").and_then(|c| c.as_str()).map(str::to_string))
        .map(|t| sanitize_error_type(&t));
    let message = field("message")
        .or_else(|| field("Message"))
        .and_then(|m| m.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| format!("HTTP {status} from the identity provider"));
    let retryable = status >= 500
        || matches!(error_type.as_deref(), Some("TooManyRequestsException" | "InternalErrorException"));
    match (retryable, error_type) {
        (true, t) => {
            IdpAnswer::Retryable { error_type: t.unwrap_or_else(|| format!("HTTP {status}")), message }
        }
        (false, error_type) => IdpAnswer::Rejected { error_type, message },
    }
}

/// How close a JWT is to lapsing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Freshness {
    Fresh,
    /// Inside the advisory window: use it, and refresh in the background.
    Advisory,
    /// Inside the mandatory window (or lapsed): wait for a new one.
    Mandatory,
}

/// The refresh windows for a JWT of `lifetime`: the configured ones, scaled down for short-lived
/// JWTs so that each serves many calls (the advisory window is at most half the lifetime, the
/// mandatory one at most a quarter), instead of one exchange per call.
pub(crate) fn windows(lifetime: Duration, advisory: Duration, mandatory: Duration) -> (Duration, Duration) {
    (advisory.min(lifetime / 2), mandatory.min(lifetime / 4))
}

pub(crate) fn freshness(
    now: Instant,
    expires_at: Option<Instant>,
    advisory: Duration,
    mandatory: Duration,
) -> Freshness {
    let Some(exp) = expires_at else { return Freshness::Fresh };
    let left = exp.saturating_duration_since(now);
    if left <= mandatory {
        Freshness::Mandatory
    } else if left <= advisory {
        Freshness::Advisory
    } else {
        Freshness::Fresh
    }
}

/// A JWT ready to send. The header value is marked sensitive so it never prints.
#[derive(Debug)]
pub struct CachedToken {
    pub header: HeaderValue,
    pub expires_at: Option<Instant>,
    /// How long it lived when obtained (the windows scale with it).
    pub lifetime: Duration,
    pub generation: u64,
}

/// The one token cache of a client, shared by every call, thread and task.
pub struct TokenProvider {
    api_token: Option<ApiToken>,
    auth_url: Url,
    http: reqwest::Client,
    policy: RetryPolicy,
    advisory: Duration,
    mandatory: Duration,
    redactor: Redactor,
    current: RwLock<Option<Arc<CachedToken>>>,
    refresh_lock: tokio::sync::Mutex<()>,
    background: AtomicBool,
    generation: AtomicU64,
    exchanges: AtomicU64,
    /// The last failed exchange: when, and its error.
    failure: std::sync::Mutex<Option<(Instant, Error)>>,
}

fn bearer(jwt: &str, lifetime: Option<Duration>, generation: u64) -> Result<CachedToken> {
    let now = Instant::now();
    let expires_at = lifetime.and_then(|l| now.checked_add(l));
    let mut header = HeaderValue::from_str(&format!("Bearer {jwt}")).map_err(|_| Error::Authentication {
        error_type: None,
        message: "the JWT contains invalid characters".into(),
    })?;
    header.set_sensitive(true);
    Ok(CachedToken { header, expires_at, lifetime: lifetime.unwrap_or(MAX_LIFETIME), generation })
}

impl TokenProvider {
    pub fn new(settings: &Settings, http: reqwest::Client) -> Result<Self> {
        let (api_token, current) = match &settings.credential {
            Credential::ApiToken(t) => (Some(t.clone()), None),
            Credential::Jwt(j) => {
                let lifetime = jwt_lifetime(j.expose(), SystemTime::now());
                (None, Some(Arc::new(bearer(j.expose(), lifetime, 0)?)))
            }
        };
        Ok(Self {
            api_token,
            auth_url: settings.auth_url.clone(),
            http,
            policy: RetryPolicy::new(settings.max_retries, settings.max_retry_wait),
            advisory: settings.refresh_advisory,
            mandatory: settings.refresh_mandatory,
            redactor: settings.redactor.clone(),
            current: RwLock::new(current),
            refresh_lock: tokio::sync::Mutex::new(()),
            background: AtomicBool::new(false),
            generation: AtomicU64::new(1),
            exchanges: AtomicU64::new(0),
            failure: std::sync::Mutex::new(None),
        })
    }

    /// Whether a rejected JWT can be replaced (only with an API token).
    pub fn can_refresh(&self) -> bool {
        self.api_token.is_some()
    }

    /// How many exchanges this provider made (for diagnostics and tests).
    pub fn exchanges(&self) -> u64 {
        self.exchanges.load(Ordering::Relaxed)
    }

    fn snapshot(&self) -> Option<Arc<CachedToken>> {
        self.current.read().ok().and_then(|g| g.clone())
    }

    fn state_of(&self, t: &CachedToken) -> Freshness {
        if self.api_token.is_none() {
            // A given JWT cannot be refreshed: always use it and let the API judge it.
            return Freshness::Fresh;
        }
        let (advisory, mandatory) = windows(t.lifetime, self.advisory, self.mandatory);
        freshness(Instant::now(), t.expires_at, advisory, mandatory)
    }

    /// A JWT to send now: the cached one, or a fresh one from the single exchange in flight.
    pub async fn get(self: &Arc<Self>) -> Result<Arc<CachedToken>> {
        if let Some(t) = self.snapshot() {
            match self.state_of(&t) {
                Freshness::Fresh => return Ok(t),
                Freshness::Advisory => {
                    self.refresh_in_background();
                    return Ok(t);
                }
                Freshness::Mandatory => {}
            }
        }
        self.refresh_now(false).await
    }

    /// Forgets the JWT of `generation` after the API rejected it; a newer one is kept.
    pub fn invalidate(&self, generation: u64) {
        if let Ok(mut g) = self.current.write() {
            if g.as_ref().is_some_and(|t| t.generation == generation) && self.api_token.is_some() {
                *g = None;
            }
        }
    }

    fn refresh_in_background(self: &Arc<Self>) {
        if self.background.swap(true, Ordering::AcqRel) {
            return;
        }
        /// Clears the flag however the task ends (finished, failed, aborted or panicked).
        struct Running(Arc<TokenProvider>);
        impl Drop for Running {
            fn drop(&mut self) {
                self.0.background.store(false, Ordering::Release);
            }
        }
        let running = Running(Arc::clone(self));
        tokio::spawn(async move {
            if let Err(e) = running.0.refresh_now(true).await {
                log::info!("background JWT refresh failed (will retry before expiry): {e}");
            }
            drop(running);
        });
    }

    /// Obtains a new JWT unless another caller did while this one queued for the lock: then the
    /// current one is used if it is fresh (`background`: an advisory refresh) or at least not in
    /// the mandatory window (a caller that must wait).
    async fn refresh_now(self: &Arc<Self>, background: bool) -> Result<Arc<CachedToken>> {
        let _guard = self.refresh_lock.lock().await;
        if let Some(t) = self.snapshot() {
            let state = self.state_of(&t);
            if state == Freshness::Fresh || (!background && state == Freshness::Advisory) {
                return Ok(t);
            }
        }
        let Some(api_token) = &self.api_token else {
            return Err(Error::Authentication {
                error_type: None,
                message:
                    "the JWT was rejected and cannot be refreshed: pass api_token=... instead of jwt=..."
                        .into(),
            });
        };
        let hold = if background { BACKGROUND_BACKOFF } else { FAILURE_HOLD };
        if let Some((at, e)) = self.failure.lock().ok().and_then(|f| f.clone()) {
            if at.elapsed() < hold {
                return Err(e);
            }
        }
        let started = Instant::now();
        let (jwt, lifetime) = match self.exchange(api_token).await {
            Ok(got) => got,
            Err(e) => {
                let e = e.redact(&self.redactor);
                if let Ok(mut f) = self.failure.lock() {
                    *f = Some((Instant::now(), e.clone()));
                }
                return Err(e);
            }
        };
        if let Ok(mut f) = self.failure.lock() {
            *f = None;
        }
        self.redactor.remember_jwt(&jwt);
        let generation = self.generation.fetch_add(1, Ordering::Relaxed);
        // The lifetime counts from when the exchange started (the answer took some of it).
        let lifetime = lifetime.saturating_sub(started.elapsed()).max(MIN_LIFETIME);
        let token = Arc::new(bearer(&jwt, Some(lifetime), generation)?);
        if let Ok(mut g) = self.current.write() {
            *g = Some(Arc::clone(&token));
        }
        self.exchanges.fetch_add(1, Ordering::Relaxed);
        log::info!("obtained a JWT valid for {} (exchange took {})", secs(lifetime), secs(started.elapsed()));
        Ok(token)
    }

    async fn exchange(&self, api_token: &ApiToken) -> Result<(String, Duration)> {
        retry::run(
            self.policy,
            RetryClass::Idempotent,
            || self.exchange_once(api_token),
            |wait, n, why| {
                log::info!(
                    "token exchange failed ({why}); retry {n} of {} in {}",
                    self.policy.max_retries,
                    secs(wait)
                );
                tokio::time::sleep(wait)
            },
        )
        .await
    }

    /// One InitiateAuth request and what its answer means.
    async fn exchange_once(&self, api_token: &ApiToken) -> Attempt<(String, Duration)> {
        let sent = self
            .http
            .post(self.auth_url.clone())
            .header("X-Amz-Target", INITIATE_AUTH_TARGET)
            .header(CONTENT_TYPE, AMZ_JSON)
            .body(api_token.body().to_vec())
            .send()
            .await;
        let (failure, error) = match sent {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let header =
                    resp.headers().get("x-amzn-ErrorType").and_then(|v| v.to_str().ok()).map(str::to_string);
                if (300..400).contains(&status) {
                    return Attempt::Fatal(Error::Authentication {
                        error_type: None,
                        message: format!(
                            "the identity provider answered HTTP {status} with a redirect to {}, which \
                             the client does not follow (it would carry the API token elsewhere); \
                             check auth_url and region",
                            super::http::location(&self.redactor, resp.headers())
                        ),
                    });
                }
                match super::http::read_capped(&mut resp, MAX_IDP_BODY).await {
                    Ok((_, true)) => {
                        return Attempt::Fatal(Error::Authentication {
                            error_type: None,
                            message: format!(
                                "the identity provider's answer (HTTP {status}) is larger than \
                                 {MAX_IDP_BODY} bytes; it is not an InitiateAuth answer"
                            ),
                        })
                    }
                    Ok((body, false)) => {
                        match parse_idp_response(status, header.as_deref(), &body, SystemTime::now()) {
                            IdpAnswer::Token { jwt, lifetime } => return Attempt::Done((jwt, lifetime)),
                            IdpAnswer::Rejected { error_type, message } => {
                                return Attempt::Fatal(Error::Authentication {
                                    message: self.redactor.scrub(&match &error_type {
                                        Some(t) => format!(
                                            "identity provider rejected the API token: {t}: {message}"
                                        ),
                                        None => {
                                            format!("identity provider rejected the API token: {message}")
                                        }
                                    }),
                                    error_type,
                                })
                            }
                            IdpAnswer::Retryable { error_type, message } => (
                                Failure::IdpRetryable,
                                Error::Authentication {
                                    message: self
                                        .redactor
                                        .scrub(&format!("identity provider error {error_type}: {message}")),
                                    error_type: Some(error_type),
                                },
                            ),
                        }
                    }
                    Err(e) => {
                        (Failure::ConnectionLost, transport_error(&self.redactor, "identity provider", &e))
                    }
                }
            }
            Err(e) => (classify(&e), transport_error(&self.redactor, "identity provider", &e)),
        };
        Attempt::Failed { failure, error }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    #[test]
    fn error_types_are_sanitized() {
        assert_eq!(sanitize_error_type("NotAuthorizedException:"), "NotAuthorizedException");
        assert_eq!(
            sanitize_error_type("aws.cognito#TooManyRequestsException:http://x"),
            "TooManyRequestsException"
        );
        assert_eq!(sanitize_error_type("A,B"), "A");
    }

    #[test]
    fn success_reads_expires_in_then_exp() {
        let body = br#"{"AuthenticationResult":{"AccessToken":"a.b.c","ExpiresIn":3600,"TokenType":"Bearer"},"ChallengeParameters":{}}"#;
        assert_eq!(
            parse_idp_response(200, None, body, now()),
            IdpAnswer::Token { jwt: "a.b.c".into(), lifetime: Duration::from_secs(3600) }
        );
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"exp":1700000600}"#);
        let jwt = format!("eyJhbGciOiJIUzI1NiJ9.{payload}.sig");
        let body = format!(r#"{{"AuthenticationResult":{{"AccessToken":"{jwt}"}}}}"#);
        assert_eq!(
            parse_idp_response(200, None, body.as_bytes(), now()),
            IdpAnswer::Token { jwt, lifetime: Duration::from_secs(600) }
        );
    }

    #[test]
    fn challenges_and_errors() {
        let c = parse_idp_response(
            200,
            None,
            br#"{"ChallengeName":"NEW_PASSWORD_REQUIRED","Session":"s"}"#,
            now(),
        );
        assert!(
            matches!(c, IdpAnswer::Rejected { error_type: Some(ref t), .. } if t == "NEW_PASSWORD_REQUIRED")
        );
        let e = parse_idp_response(
            400,
            Some("NotAuthorizedException:"),
            br#"{"__type":"NotAuthorizedException","message":"Invalid Refresh Token."}"#,
            now(),
        );
        assert_eq!(
            e,
            IdpAnswer::Rejected {
                error_type: Some("NotAuthorizedException".into()),
                message: "Invalid Refresh Token.".into()
            }
        );
        let e = parse_idp_response(
            400,
            None,
            br#"{"__type":"TooManyRequestsException","message":"Rate exceeded"}"#,
            now(),
        );
        assert!(
            matches!(e, IdpAnswer::Retryable { ref error_type, .. } if error_type == "TooManyRequestsException")
        );
        let e = parse_idp_response(500, None, b"oops", now());
        assert!(matches!(e, IdpAnswer::Retryable { .. }));
        let e =
            parse_idp_response(400, None, br#"{"code":"InvalidParameterException","Message":"bad"}"#, now());
        assert_eq!(
            e,
            IdpAnswer::Rejected {
                error_type: Some("InvalidParameterException".into()),
                message: "bad".into()
            }
        );
    }

    #[test]
    fn freshness_windows() {
        let now = Instant::now();
        let f = |left: u64| {
            freshness(
                now,
                Some(now + Duration::from_secs(left)),
                Duration::from_secs(120),
                Duration::from_secs(30),
            )
        };
        assert_eq!(f(3600), Freshness::Fresh);
        assert_eq!(f(100), Freshness::Advisory);
        assert_eq!(f(30), Freshness::Mandatory);
        assert_eq!(f(0), Freshness::Mandatory);
        assert_eq!(freshness(now, None, Duration::ZERO, Duration::ZERO), Freshness::Fresh);
    }

    /// A one-route identity provider on loopback: answers every request with a fresh JWT and
    /// counts them. Returns its URL and the counter.
    async fn tiny_idp() -> (String, Arc<AtomicU64>) {
        idp_answering(None).await
    }

    /// `fail`: answer every request with this status and a NotAuthorizedException.
    async fn idp_answering(fail: Option<u16>) -> (String, Arc<AtomicU64>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let count = Arc::new(AtomicU64::new(0));
        let served = Arc::clone(&count);
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let n = served.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 8192];
                    let mut got = Vec::new();
                    // Headers and the small JSON body arrive together; read until the body's end.
                    while !got.ends_with(b"}") {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(k) => got.extend_from_slice(&buf[..k]),
                        }
                    }
                    let (status, body) = match fail {
                        None => (
                            200,
                            format!(
                                r#"{{"AuthenticationResult":{{"AccessToken":"h.jwt-{n}.s","ExpiresIn":3600}}}}"#
                            ),
                        ),
                        Some(code) => {
                            (code, r#"{"__type":"NotAuthorizedException","message":"no"}"#.to_string())
                        }
                    };
                    let resp = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/x-amz-json-1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                });
            }
        });
        (url, count)
    }

    fn provider(auth_url: &str) -> Arc<TokenProvider> {
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(
            r#"{"AuthFlow":"REFRESH_TOKEN_AUTH","ClientId":"c","AuthParameters":{"REFRESH_TOKEN":"r-123456789"}}"#,
        );
        let input = super::super::config::SettingsInput {
            api_token: Some(token),
            base_url: Some("http://127.0.0.1:9/api/v1".into()),
            auth_url: Some(auth_url.into()),
            ..Default::default()
        };
        let settings = Settings::resolve(input, &|_| None).unwrap();
        rustls::crypto::ring::default_provider().install_default().ok();
        Arc::new(TokenProvider::new(&settings, reqwest::Client::new()).unwrap())
    }

    #[tokio::test]
    async fn advisory_window_refreshes_in_the_background_while_calls_go_on() {
        let (url, served) = tiny_idp().await;
        let p = provider(&url);
        // A JWT with 100 s left of an hour: inside the 120 s advisory window, outside the
        // mandatory one.
        let old = Arc::new(CachedToken {
            expires_at: Some(Instant::now() + Duration::from_secs(100)),
            ..bearer("h.old.s", Some(Duration::from_secs(3600)), 7).unwrap()
        });
        *p.current.write().unwrap() = Some(Arc::clone(&old));
        // The call goes on at once with the current JWT...
        let got = p.get().await.unwrap();
        assert_eq!(got.generation, 7);
        // ...and one exchange runs in the background and replaces it.
        for _ in 0..500 {
            if p.exchanges() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(p.exchanges(), 1);
        assert_eq!(served.load(Ordering::SeqCst), 1);
        let now = p.get().await.unwrap();
        assert_ne!(now.generation, 7);
        assert_eq!(now.header.to_str().unwrap(), "Bearer h.jwt-1.s");
        // Fresh now: no further exchange.
        p.get().await.unwrap();
        assert_eq!(p.exchanges(), 1);
    }

    #[tokio::test]
    async fn a_failing_identity_provider_is_not_asked_once_per_call() {
        let (url, served) = idp_answering(Some(400)).await;
        let p = provider(&url);
        for _ in 0..50 {
            assert!(matches!(p.get().await, Err(Error::Authentication { .. })));
        }
        // One exchange; the calls within the hold get its error.
        assert_eq!(served.load(Ordering::SeqCst), 1);
        // A background refresh after a failure waits longer still.
        let t = Arc::new(CachedToken {
            expires_at: Some(Instant::now() + Duration::from_secs(100)),
            ..bearer("h.old.s", Some(Duration::from_secs(3600)), 7).unwrap()
        });
        *p.current.write().unwrap() = Some(t);
        for _ in 0..50 {
            assert_eq!(p.get().await.unwrap().generation, 7);
            tokio::task::yield_now().await;
        }
        assert_eq!(served.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_short_lived_jwt_serves_many_calls() {
        let (url, served) = tiny_idp().await;
        let p = provider(&url);
        // The identity provider's JWT lives 25 s, inside the default 30 s mandatory window:
        // the windows scale down, so it serves every call instead of one each.
        let t = Arc::new(bearer("h.short.s", Some(Duration::from_secs(25)), 3).unwrap());
        *p.current.write().unwrap() = Some(t);
        for _ in 0..100 {
            assert_eq!(p.get().await.unwrap().generation, 3);
        }
        assert_eq!(served.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn windows_scale_down_for_short_lived_jwts() {
        let (a, m) = (Duration::from_secs(120), Duration::from_secs(30));
        assert_eq!(windows(Duration::from_secs(3600), a, m), (a, m));
        assert_eq!(
            windows(Duration::from_secs(2), a, m),
            (Duration::from_secs(1), Duration::from_millis(500))
        );
        // A 2 s JWT is fresh for its first second: it serves many calls, not one.
        let now = Instant::now();
        let (aw, mw) = windows(Duration::from_secs(2), a, m);
        assert_eq!(freshness(now, Some(now + Duration::from_millis(1900)), aw, mw), Freshness::Fresh);
        assert_eq!(freshness(now, Some(now + Duration::from_millis(800)), aw, mw), Freshness::Advisory);
        assert_eq!(freshness(now, Some(now + Duration::from_millis(400)), aw, mw), Freshness::Mandatory);
    }

    #[test]
    fn absurd_lifetimes_are_clamped_not_panics() {
        use base64::Engine as _;
        for expires_in in ["1e19", "1e300", "18446744073709551615", "1.7976931348623157e308"] {
            let body =
                format!(r#"{{"AuthenticationResult":{{"AccessToken":"a.b.c","ExpiresIn":{expires_in}}}}}"#);
            assert_eq!(
                parse_idp_response(200, None, body.as_bytes(), now()),
                IdpAnswer::Token { jwt: "a.b.c".into(), lifetime: MAX_LIFETIME },
                "{expires_in}"
            );
        }
        let body = r#"{"AuthenticationResult":{"AccessToken":"a.b.c","ExpiresIn":1e-9}}"#;
        assert_eq!(
            parse_idp_response(200, None, body.as_bytes(), now()),
            IdpAnswer::Token { jwt: "a.b.c".into(), lifetime: MIN_LIFETIME }
        );
        for expires_in in ["-5", "0", "\"abc\"", "null"] {
            let body =
                format!(r#"{{"AuthenticationResult":{{"AccessToken":"a.b.c","ExpiresIn":{expires_in}}}}}"#);
            assert_eq!(
                parse_idp_response(200, None, body.as_bytes(), now()),
                IdpAnswer::Token { jwt: "a.b.c".into(), lifetime: DEFAULT_LIFETIME },
                "{expires_in}"
            );
        }
        for exp in ["1e300", "1e19", "18446744073709551616"] {
            let payload =
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!(r#"{{"exp":{exp}}}"#));
            let jwt = format!("h.{payload}.s");
            assert_eq!(jwt_lifetime(&jwt, now()), Some(MAX_LIFETIME), "{exp}");
            let t = bearer(&jwt, jwt_lifetime(&jwt, SystemTime::now()), 0).unwrap();
            assert!(t.expires_at.is_some());
        }
        let t = bearer("a.b.c", Some(Duration::MAX), 0).unwrap();
        assert!(t.expires_at.is_none() || t.lifetime == Duration::MAX);
    }
}
