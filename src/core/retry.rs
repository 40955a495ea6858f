//! The one retry engine: a pure policy (given what happened on an attempt, whether to try again
//! and after how long), the state of one retried operation between attempts ([`Retrying`], also
//! pure), and the one loop ([`run`]) that requests and the token exchange go through. The sleep
//! is the caller's, so the schedule is tested without waiting.

use std::future::Future;
use std::time::{Duration, SystemTime};

use super::error::{Error, Result};

/// Whether a request may be repeated after a failure that could have reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryClass {
    /// Queries and token exchanges: repeating them changes nothing.
    Idempotent,
    /// Mutations: repeated only when the server cannot have processed them.
    Mutation,
}

/// What one attempt ended with, as far as retrying is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome<'a> {
    /// An HTTP answer with this status, and its `Retry-After` header if any.
    Status { code: u16, retry_after: Option<&'a str> },
    /// No connection could be made: the request was never sent.
    ConnectFailed,
    /// The connection broke after the request may have been sent.
    ConnectionLost,
    /// The attempt timed out.
    TimedOut,
    /// The identity provider answered a throttling or internal error.
    IdpRetryable,
}

/// The policy's verdict.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Decision {
    /// Try again after this long.
    RetryAfter(Duration),
    /// Stop and report the failure.
    GiveUp,
    /// Stop: rate limited, and the server's wait (if it gave one) is reported to the user.
    RateLimited { retry_after: Option<f64> },
}

/// Backoff and limits from the client's settings.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RetryPolicy {
    pub max_retries: u32,
    pub max_retry_wait: Duration,
    pub base: Duration,
    pub cap: Duration,
}

impl RetryPolicy {
    pub(crate) fn new(max_retries: u32, max_retry_wait: Duration) -> Self {
        Self { max_retries, max_retry_wait, base: Duration::from_millis(500), cap: Duration::from_secs(8) }
    }

    /// Exponential backoff for retry number `retries_done` (0 for the first retry): 0.5 s doubling
    /// to an 8 s cap, less up to 25 % by `jitter` (in [0, 1)) so that clients spread out.
    pub(crate) fn backoff(&self, retries_done: u32, jitter: f64) -> Duration {
        let exp = self.base.as_secs_f64() * 2f64.powi(i32::try_from(retries_done.min(30)).unwrap_or(30));
        let capped = exp.min(self.cap.as_secs_f64());
        let factor = 1.0 - 0.25 * jitter.clamp(0.0, 1.0);
        Duration::from_secs_f64(capped * factor)
    }

    /// Decides what follows `outcome` on the attempt after `retries_done` retries.
    pub(crate) fn decide(
        &self,
        retries_done: u32,
        outcome: Outcome<'_>,
        class: RetryClass,
        now: SystemTime,
        jitter: f64,
    ) -> Decision {
        let exhausted = retries_done >= self.max_retries;
        match outcome {
            Outcome::Status { code: 429, retry_after } => {
                let wait = retry_after.and_then(|h| parse_retry_after(h, now));
                match wait {
                    Some(w) if w > self.max_retry_wait => {
                        Decision::RateLimited { retry_after: Some(w.as_secs_f64()) }
                    }
                    _ if exhausted => Decision::RateLimited { retry_after: wait.map(|w| w.as_secs_f64()) },
                    Some(w) => Decision::RetryAfter(w),
                    None => Decision::RetryAfter(self.backoff(retries_done, jitter)),
                }
            }
            // A 429 and a refused connection mean the request was not processed: safe for mutations.
            Outcome::ConnectFailed | Outcome::IdpRetryable if !exhausted => {
                Decision::RetryAfter(self.backoff(retries_done, jitter))
            }
            Outcome::Status { code: 502..=504, .. } | Outcome::ConnectionLost | Outcome::TimedOut
                if !exhausted && class == RetryClass::Idempotent =>
            {
                Decision::RetryAfter(self.backoff(retries_done, jitter))
            }
            _ => Decision::GiveUp,
        }
    }
}

/// The shortest wait of a poller after a 429 that names none; it doubles per failure in a row.
pub(crate) const POLL_BACKOFF_BASE: Duration = Duration::from_millis(500);
/// The longest such wait.
pub(crate) const POLL_BACKOFF_CAP: Duration = Duration::from_secs(60);

/// How long a poller (the watch) waits after its `failures`-th 429 in a row (1 for the first):
/// what the server asked, never less than the polling interval nor a backoff that doubles with
/// each failure from [`POLL_BACKOFF_BASE`] to [`POLL_BACKOFF_CAP`], so it cannot spin.
pub(crate) fn poll_backoff(failures: u32, asked: Option<Duration>, interval: Duration) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    let grown = POLL_BACKOFF_BASE.saturating_mul(1u32 << doublings).min(POLL_BACKOFF_CAP);
    asked.unwrap_or_default().max(interval).max(grown)
}

/// How an attempt failed, owned (a [`Outcome`] borrows its `Retry-After`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    Status { code: u16, retry_after: Option<String> },
    ConnectFailed,
    ConnectionLost,
    TimedOut,
    IdpRetryable,
}

impl Failure {
    pub(crate) fn outcome(&self) -> Outcome<'_> {
        match self {
            Self::Status { code, retry_after } => {
                Outcome::Status { code: *code, retry_after: retry_after.as_deref() }
            }
            Self::ConnectFailed => Outcome::ConnectFailed,
            Self::ConnectionLost => Outcome::ConnectionLost,
            Self::TimedOut => Outcome::TimedOut,
            Self::IdpRetryable => Outcome::IdpRetryable,
        }
    }
}

/// What one attempt of a retried operation ended with.
#[derive(Debug)]
pub(crate) enum Attempt<T> {
    Done(T),
    /// Failed for good: no retry.
    Fatal(Error),
    /// Try again at once, not counted as a retry (a JWT refreshed once after a 401).
    Again,
    /// Failed in a way the policy judges; `error` is what the caller gets if it gives up.
    Failed {
        failure: Failure,
        error: Error,
    },
}

/// One retried operation between attempts: how many retries it has had, and what follows a
/// failure. Pure: the clock and the jitter are arguments.
#[derive(Debug)]
pub(crate) struct Retrying {
    policy: RetryPolicy,
    class: RetryClass,
    retries: u32,
}

impl Retrying {
    pub(crate) fn new(policy: RetryPolicy, class: RetryClass) -> Self {
        Self { policy, class, retries: 0 }
    }

    pub(crate) fn retries(&self) -> u32 {
        self.retries
    }

    /// After a failed attempt: the wait before the next one, or the error the operation ends with
    /// (a rate limit says how long the server asked to wait, and how many retries were made).
    pub(crate) fn after(
        &mut self,
        failure: &Failure,
        error: Error,
        now: SystemTime,
        jitter: f64,
    ) -> Result<Duration> {
        match self.policy.decide(self.retries, failure.outcome(), self.class, now, jitter) {
            Decision::RetryAfter(wait) => {
                self.retries += 1;
                Ok(wait)
            }
            Decision::GiveUp => Err(error),
            Decision::RateLimited { retry_after } => Err(match error {
                Error::RateLimit { status, body, headers, .. } => Error::RateLimit {
                    status,
                    message: match retry_after {
                        Some(s) if s > self.policy.max_retry_wait.as_secs_f64() => format!(
                            "rate limited (HTTP 429): the server asks to wait {s:.0}s, longer than max_retry_wait ({})",
                            seconds(self.policy.max_retry_wait.as_secs_f64())
                        ),
                        Some(s) => format!("rate limited (HTTP 429) after {} retries; retry after {s:.0}s", self.retries),
                        None => format!("rate limited (HTTP 429) after {} retries", self.retries),
                    },
                    body,
                    headers,
                    retry_after,
                },
                other => other,
            }),
        }
    }
}

/// The one retry loop: runs `attempt` until it is done or fails for good, or the policy gives
/// up; between attempts `wait` is called with the wait, the retry's number and what failed (it
/// logs, counts and sleeps).
pub(crate) async fn run<T, A, AF, W, WF>(
    policy: RetryPolicy,
    class: RetryClass,
    mut attempt: A,
    mut wait: W,
) -> Result<T>
where
    A: FnMut() -> AF,
    AF: Future<Output = Attempt<T>>,
    W: FnMut(Duration, u32, &str) -> WF,
    WF: Future<Output = ()>,
{
    let mut state = Retrying::new(policy, class);
    loop {
        match attempt().await {
            Attempt::Done(value) => return Ok(value),
            Attempt::Fatal(error) => return Err(error),
            Attempt::Again => {}
            Attempt::Failed { failure, error } => {
                let why = error.to_string();
                let pause = state.after(&failure, error, SystemTime::now(), fastrand::f64())?;
                wait(pause, state.retries(), &why).await;
            }
        }
    }
}

/// Parses `Retry-After` as seconds (integer or decimal) or an HTTP date, relative to `now`.
/// A date in the past means "now"; anything unparseable is ignored.
pub(crate) fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let v = value.trim();
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(1e9)));
    }
    let when = httpdate::parse_http_date(v).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Seconds for a message: whole ones as they are (`3600s`), a fraction kept (`0.5s`, where
/// `{:.0}` printed `0s`).
pub(crate) fn seconds(v: f64) -> String {
    if v.fract() == 0.0 || v >= 100.0 {
        format!("{v:.0}s")
    } else {
        let text = format!("{v:.3}");
        format!("{}s", text.trim_end_matches('0').trim_end_matches('.'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_keep_their_fraction() {
        assert_eq!(seconds(0.5), "0.5s");
        assert_eq!(seconds(0.25), "0.25s");
        assert_eq!(seconds(60.0), "60s");
        assert_eq!(seconds(3600.0), "3600s");
    }

    #[test]
    fn a_poller_waits_as_asked_but_never_less_than_its_interval_or_a_doubling_backoff() {
        let s = Duration::from_secs_f64;
        assert_eq!(poll_backoff(1, None, s(0.1)), s(0.5));
        assert_eq!(poll_backoff(3, None, s(0.1)), s(2.0));
        assert_eq!(poll_backoff(3, None, s(5.0)), s(5.0));
        assert_eq!(poll_backoff(1, Some(s(30.0)), s(1.0)), s(30.0));
        assert_eq!(poll_backoff(40, None, s(1.0)), POLL_BACKOFF_CAP);
        assert_eq!(poll_backoff(u32::MAX, Some(s(7200.0)), s(1.0)), s(7200.0));
        assert_eq!(poll_backoff(0, None, Duration::ZERO), s(0.5));
    }

    fn policy() -> RetryPolicy {
        RetryPolicy::new(3, Duration::from_secs(120))
    }

    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    fn status(code: u16) -> Outcome<'static> {
        Outcome::Status { code, retry_after: None }
    }

    #[test]
    fn backoff_doubles_to_cap_with_jitter() {
        let p = policy();
        let s: Vec<f64> = (0..7).map(|n| p.backoff(n, 0.0).as_secs_f64()).collect();
        assert_eq!(s, vec![0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]);
        assert!((p.backoff(0, 0.999).as_secs_f64() - 0.375).abs() < 0.001);
        assert_eq!(p.backoff(1000, 0.0), Duration::from_secs(8));
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(parse_retry_after("3", now()), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(" 0.5 ", now()), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("-1", now()), None);
        assert_eq!(parse_retry_after("soon", now()), None);
        let later = httpdate::fmt_http_date(now() + Duration::from_secs(30));
        assert_eq!(parse_retry_after(&later, now()), Some(Duration::from_secs(30)));
        let past = httpdate::fmt_http_date(now() - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&past, now()), Some(Duration::ZERO));
    }

    #[test]
    fn rate_limit_honours_retry_after_up_to_the_cap() {
        let p = policy();
        let q = RetryClass::Idempotent;
        let d = p.decide(0, Outcome::Status { code: 429, retry_after: Some("2") }, q, now(), 0.0);
        assert_eq!(d, Decision::RetryAfter(Duration::from_secs(2)));
        let d = p.decide(0, Outcome::Status { code: 429, retry_after: Some("3597") }, q, now(), 0.0);
        assert_eq!(d, Decision::RateLimited { retry_after: Some(3597.0) });
        let d = p.decide(3, Outcome::Status { code: 429, retry_after: Some("2") }, q, now(), 0.0);
        assert_eq!(d, Decision::RateLimited { retry_after: Some(2.0) });
        let d = p.decide(1, status(429), q, now(), 0.0);
        assert_eq!(d, Decision::RetryAfter(Duration::from_secs(1)));
        // 429 means not processed: mutations retry too.
        let d = p.decide(
            0,
            Outcome::Status { code: 429, retry_after: Some("1") },
            RetryClass::Mutation,
            now(),
            0.0,
        );
        assert_eq!(d, Decision::RetryAfter(Duration::from_secs(1)));
    }

    #[test]
    fn transient_failures_retry_queries_only() {
        let p = policy();
        for o in [status(502), status(503), status(504), Outcome::ConnectionLost, Outcome::TimedOut] {
            assert_eq!(
                p.decide(0, o, RetryClass::Idempotent, now(), 0.0),
                Decision::RetryAfter(Duration::from_millis(500))
            );
            assert_eq!(p.decide(0, o, RetryClass::Mutation, now(), 0.0), Decision::GiveUp, "{o:?}");
            assert_eq!(p.decide(3, o, RetryClass::Idempotent, now(), 0.0), Decision::GiveUp);
        }
        assert_eq!(
            p.decide(2, Outcome::ConnectFailed, RetryClass::Mutation, now(), 0.0),
            Decision::RetryAfter(Duration::from_secs(2))
        );
    }

    #[test]
    fn other_statuses_never_retry() {
        let p = policy();
        for code in [400, 401, 403, 404, 500, 501] {
            assert_eq!(p.decide(0, status(code), RetryClass::Idempotent, now(), 0.0), Decision::GiveUp);
        }
    }

    #[test]
    fn the_state_between_attempts_counts_and_ends_with_the_right_error() {
        let mut r = Retrying::new(policy(), RetryClass::Idempotent);
        let busy = Failure::Status { code: 503, retry_after: None };
        for n in 0..3 {
            let wait = r.after(&busy, Error::Transport("x".into()), now(), 0.0).unwrap();
            assert_eq!(wait, policy().backoff(n, 0.0));
        }
        assert!(
            matches!(r.after(&busy, Error::Transport("gone".into()), now(), 0.0), Err(Error::Transport(m)) if m == "gone")
        );
        let limited = Failure::Status { code: 429, retry_after: Some("3597".into()) };
        let err = Error::RateLimit {
            status: 429,
            message: String::new(),
            body: String::new(),
            headers: vec![],
            retry_after: None,
        };
        match Retrying::new(policy(), RetryClass::Mutation).after(&limited, err, now(), 0.0) {
            Err(Error::RateLimit { message, retry_after, .. }) => {
                assert!(message.contains("3597s, longer than max_retry_wait (120s)"), "{message}");
                assert_eq!(retry_after, Some(3597.0));
            }
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn the_loop_retries_refreshes_once_and_stops() {
        let mut left = vec![
            Attempt::Done(7),
            Attempt::Failed { failure: Failure::ConnectFailed, error: Error::Transport("refused".into()) },
            Attempt::Again,
            Attempt::Failed { failure: Failure::TimedOut, error: Error::Timeout("slow".into()) },
        ];
        let mut waits = Vec::new();
        let got = run(
            RetryPolicy {
                max_retries: 3,
                max_retry_wait: Duration::from_secs(1),
                base: Duration::ZERO,
                cap: Duration::ZERO,
            },
            RetryClass::Idempotent,
            || std::future::ready(left.pop().unwrap_or(Attempt::Fatal(Error::Transport("none left".into())))),
            |d, n, _why| {
                waits.push((d, n));
                std::future::ready(())
            },
        )
        .await;
        assert_eq!(got.unwrap(), 7);
        assert_eq!(waits, vec![(Duration::ZERO, 1), (Duration::ZERO, 2)]);
        let fatal: Result<u8> = run(
            policy(),
            RetryClass::Mutation,
            || {
                std::future::ready(Attempt::Failed {
                    failure: Failure::ConnectionLost,
                    error: Error::Transport("lost".into()),
                })
            },
            |_, _, _| std::future::ready(()),
        )
        .await;
        assert!(matches!(fatal, Err(Error::Transport(m)) if m == "lost"));
    }

    #[test]
    fn zero_retries_gives_up_at_once() {
        let p = RetryPolicy::new(0, Duration::from_secs(120));
        assert_eq!(p.decide(0, status(503), RetryClass::Idempotent, now(), 0.0), Decision::GiveUp);
        assert_eq!(
            p.decide(0, status(429), RetryClass::Idempotent, now(), 0.0),
            Decision::RateLimited { retry_after: None }
        );
    }
}
