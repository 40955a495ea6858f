//! A token's request budget past one machine: kept in Redis or PostgreSQL (`budget=
//! "redis://host:6379/0"` or `"postgresql://user@host/db"`, or `$SECFINDINGS_BUDGET`), so every
//! client of the token on every machine books its sends in one place and waits for a server's
//! `Retry-After` at once.
//!
//! - The rule is the file budget's (`budget::slot`): a request goes when fewer than `requests`
//!   sends were booked in the window before it, else when the oldest of the last `requests` is a
//!   window old, and never before the longest wait a server asked for.
//! - Times are the store's clock (Redis `TIME`, PostgreSQL `clock_timestamp()`), never the
//!   caller's: a machine whose clock is off books like the others. What goes back to the caller
//!   is a wait (a duration), and `client.budget()` moves the store's times onto the caller's clock.
//! - The key is the file budget's: a hash of the API URL and the credential, never the token.
//! - Redis: one Lua script per booking (`book.lua`), atomic by Redis's design. PostgreSQL: one row
//!   per token (`secfindings_budget`, made on first use), a transaction per booking holding the
//!   row's lock (`SELECT ... FOR UPDATE`).
//! - A store that cannot be reached (connect or answer within [`wire::PATIENCE`]): the client falls
//!   back to the file budget with one WARNING and tries the store again after [`COOLDOWN`]; with
//!   `budget_required=True` the request fails instead, naming the store (never its password).
//!
//! Why our own script and not a library's: `limits` and pyrate-limiter are Python (a booking here
//! is made in the Rust core, before each send, without the GIL), redis-cell is a Redis module that
//! Debian's and most managed Redis servers do not load, and none of them shares a server's
//! `Retry-After`. The protocols are the maintained `redis` and `tokio-postgres` crates'.

mod postgres;
mod redis;
mod wire;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use url::Url;

pub(crate) use wire::{Answer, Figures};
use wire::{Op, Reply};

/// After the store failed, the client uses the file budget this long before it tries again.
pub(crate) const COOLDOWN: Duration = Duration::from_secs(10);

/// Which store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Redis,
    Postgres,
}

impl Kind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Redis => "redis",
            Kind::Postgres => "postgresql",
        }
    }
}

/// A store's URL: the whole one (it may hold a password) and the one shown (without it).
#[derive(Clone)]
pub(crate) struct StoreUrl {
    pub(crate) kind: Kind,
    url: String,
    pub(crate) shown: String,
    pub(crate) password: Option<String>,
}

impl std::fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreUrl").field("kind", &self.kind).field("url", &self.shown).finish()
    }
}

impl StoreUrl {
    /// The whole URL, password included: only for a pickled client's settings.
    pub(crate) fn expose_url(&self) -> &str {
        &self.url
    }
}

/// `None` when `text` names no store (it is a folder); else the store's URL, or why it is refused.
pub(crate) fn parse(text: &str) -> Option<Result<StoreUrl, String>> {
    let text = text.trim();
    let scheme = text.split_once("://").map(|(s, _)| s.to_ascii_lowercase())?;
    let kind = match scheme.as_str() {
        "postgresql" | "postgres" => Kind::Postgres,
        // Redis over TLS: the system's trusted roots, or the client's `ca_bundle` alone.
        "redis" | "rediss" => Kind::Redis,
        // A Windows drive or anything else with "://" is not a folder we would make either.
        other => {
            return Some(Err(format!(
                "budget must be True, False, a folder, or a redis:// or postgresql:// URL; got a \
                 {other}:// URL"
            )))
        }
    };
    let parsed = match Url::parse(text) {
        Ok(u) => u,
        Err(e) => return Some(Err(format!("budget: the {} URL is not valid ({e})", kind.name()))),
    };
    if parsed.host_str().is_none_or(str::is_empty) {
        return Some(Err(format!("budget: the {} URL names no host", kind.name())));
    }
    let mut url = parsed.clone();
    if kind == Kind::Postgres {
        // libpq's sslmode: our TLS always checks the certificate's chain and name (the client's
        // verifier and `ca_bundle`), so verify-ca and verify-full are `require` to the driver,
        // which knows only disable, prefer and require.
        let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
        if let Some((_, mode)) = pairs.iter().find(|(k, _)| k == "sslmode") {
            if !matches!(
                mode.as_str(),
                "disable" | "allow" | "prefer" | "require" | "verify-ca" | "verify-full"
            ) {
                return Some(Err(format!("budget: sslmode={mode:.20} is not a PostgreSQL sslmode")));
            }
            let mut query = url.query_pairs_mut();
            query.clear();
            for (k, v) in &pairs {
                let v = match (k.as_str(), v.as_str()) {
                    ("sslmode", "verify-ca" | "verify-full") => "require",
                    ("sslmode", "allow") => "prefer",
                    _ => v.as_str(),
                };
                query.append_pair(k, v);
            }
        }
    }
    let password =
        parsed.password().map(|p| percent_encoding::percent_decode_str(p).decode_utf8_lossy().into_owned());
    let mut shown = parsed.clone();
    if password.is_some() {
        let _ = shown.set_password(Some("***"));
    }
    // libpq also takes the password as a parameter (`?password=...`): masked the same way.
    let in_query = parsed.query_pairs().find(|(k, _)| k == "password").map(|(_, v)| v.into_owned());
    let password = password.or(in_query.clone());
    if in_query.is_some() {
        let pairs: Vec<(String, String)> = parsed.query_pairs().into_owned().collect();
        let mut query = shown.query_pairs_mut();
        query.clear();
        for (k, v) in &pairs {
            query.append_pair(k, if k == "password" { "***" } else { v });
        }
    }
    let url = if kind == Kind::Postgres { url.to_string() } else { text.to_string() };
    Some(Ok(StoreUrl { kind, url, shown: shown.to_string(), password }))
}

/// What came of asking the store.
#[derive(Debug)]
pub(crate) enum Outcome<T> {
    Done(T),
    /// The store is down: use the file budget (warned once).
    Fallback,
    /// The store is down and `budget_required`: the request fails with this.
    Failed(String),
}

enum Backend {
    Redis(redis::Connection),
    Postgres(postgres::Connection),
}

/// One token's budget in a store. Connects on first use, and again after a failure (after
/// [`COOLDOWN`]) or in a child process after `fork()`.
pub(crate) struct Shared {
    url: StoreUrl,
    /// The client's TLS configuration, for a PostgreSQL store that asks for TLS.
    tls: Arc<rustls::ClientConfig>,
    /// The client's `ca_bundle`, the roots a `rediss://` store is checked by (else the system's).
    ca_bundle: Option<std::path::PathBuf>,
    key: String,
    required: bool,
    backend: tokio::sync::Mutex<Option<(u32, Backend)>>,
    down: Mutex<Option<(tokio::time::Instant, String)>>,
    warned: AtomicBool,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("url", &self.url).field("required", &self.required).finish()
    }
}

impl Shared {
    pub(crate) fn new(
        url: StoreUrl,
        key: String,
        required: bool,
        tls: Arc<rustls::ClientConfig>,
        ca_bundle: Option<std::path::PathBuf>,
    ) -> Self {
        Self {
            url,
            tls,
            ca_bundle,
            key,
            required,
            backend: tokio::sync::Mutex::new(None),
            down: Mutex::new(None),
            warned: AtomicBool::new(false),
        }
    }

    pub(crate) fn kind(&self) -> Kind {
        self.url.kind
    }

    pub(crate) fn shown(&self) -> &str {
        &self.url.shown
    }

    /// Books a send (or, without a limit, reads a server's wait).
    pub(crate) async fn book(&self, limit: Option<(u32, f64)>, max_wait: f64) -> Outcome<Answer> {
        match self.run(Op::Book { limit, max_wait }).await {
            // A booking asked with a limit must be booked (or refused as too long): a store that
            // answers "not booked" would let the request go unbooked.
            Outcome::Done(Reply::Answer(Answer::Unbooked(_))) if limit.is_some() => {
                self.failed("the store answered a booking without booking it".into())
            }
            Outcome::Done(Reply::Answer(a)) => Outcome::Done(a),
            Outcome::Done(_) => self.failed("the store answered another question".into()),
            Outcome::Fallback => Outcome::Fallback,
            Outcome::Failed(why) => Outcome::Failed(why),
        }
    }

    /// A server asked for `wait` seconds: every client of the token waits for it.
    pub(crate) async fn block(&self, wait: f64) -> Outcome<()> {
        match self.run(Op::Block(wait)).await {
            Outcome::Done(_) => Outcome::Done(()),
            Outcome::Fallback => Outcome::Fallback,
            Outcome::Failed(why) => Outcome::Failed(why),
        }
    }

    /// The figures of `window` seconds before now.
    pub(crate) async fn figures(&self, window: f64) -> Outcome<Figures> {
        match self.run(Op::View(window)).await {
            Outcome::Done(Reply::Figures(f)) => Outcome::Done(f),
            Outcome::Done(_) => self.failed("the store answered another question".into()),
            Outcome::Fallback => Outcome::Fallback,
            Outcome::Failed(why) => Outcome::Failed(why),
        }
    }

    /// Why the store was last found down (kept through the cooldown and after it).
    pub(crate) fn last_failure(&self) -> Option<String> {
        self.down.lock().ok()?.as_ref().map(|(_, why)| why.clone())
    }

    fn down_reason(&self) -> Option<String> {
        let guard = self.down.lock().ok()?;
        let (until, why) = guard.as_ref()?;
        (tokio::time::Instant::now() < *until).then(|| why.clone())
    }

    fn failed<T>(&self, why: String) -> Outcome<T> {
        if let Ok(mut g) = self.down.lock() {
            *g = tokio::time::Instant::now().checked_add(COOLDOWN).map(|t| (t, why.clone()));
        }
        self.gave_up(why)
    }

    fn gave_up<T>(&self, why: String) -> Outcome<T> {
        if self.required {
            return Outcome::Failed(format!(
                "the shared request budget at {} cannot be used ({why}), and budget_required=True",
                self.url.shown
            ));
        }
        if !self.warned.swap(true, Ordering::Relaxed) {
            log::warn!(
                "request budget: the store at {} cannot be used ({why}); this client books in its \
                 machine's file budget instead, and tries the store again every {}s",
                self.url.shown,
                COOLDOWN.as_secs()
            );
        }
        Outcome::Fallback
    }

    async fn run(&self, op: Op) -> Outcome<Reply> {
        if let Some(why) = self.down_reason() {
            return self.gave_up(why);
        }
        let pid = std::process::id();
        let mut guard = self.backend.lock().await;
        // While this request waited for the connection, the one before may have found the store
        // down: one patience spent, not one per queued request.
        if let Some(why) = self.down_reason() {
            return self.gave_up(why);
        }
        if guard.as_ref().is_none_or(|(p, _)| *p != pid) {
            *guard = None;
            let made = match self.url.kind {
                Kind::Redis => redis::Connection::open(&self.url.url, self.ca_bundle.as_deref())
                    .await
                    .map(Backend::Redis),
                Kind::Postgres => {
                    postgres::Connection::open(&self.url.url, &self.tls).await.map(Backend::Postgres)
                }
            };
            match made {
                Ok(b) => *guard = Some((pid, b)),
                Err(why) => return self.failed(self.scrub(why)),
            }
        }
        let Some((_, backend)) = guard.as_mut() else { return self.failed("not connected".into()) };
        let result = match backend {
            Backend::Redis(c) => c.run(&self.key, &op).await,
            Backend::Postgres(c) => c.run(&self.key, &op).await,
        };
        match result {
            Ok(reply) => {
                if let Ok(mut g) = self.down.lock() {
                    *g = None;
                }
                self.warned.store(false, Ordering::Relaxed);
                Outcome::Done(reply)
            }
            Err(why) => {
                *guard = None;
                self.failed(self.scrub(why))
            }
        }
    }

    /// A driver's message, without the store's password should it quote the URL.
    fn scrub(&self, why: String) -> String {
        let mut why = why.replace(&self.url.url, &self.url.shown);
        if let Some(p) = self.url.password.as_deref().filter(|p| !p.is_empty()) {
            why = why.replace(p, "***");
        }
        why.chars().filter(|c| !c.is_control()).take(300).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_stores_are_told_from_folders() {
        assert!(parse("/tmp/budget").is_none());
        assert!(parse("relative/folder").is_none());
        let r = parse("redis://:s3cret@127.0.0.1:6379/0");
        let u = r.unwrap().unwrap();
        assert_eq!(u.kind, Kind::Redis);
        assert!(!u.shown.contains("s3cret"), "{}", u.shown);
        assert_eq!(u.password.as_deref(), Some("s3cret"));
        assert!(!format!("{u:?}").contains("s3cret"));
        let p = parse("postgres://me:pw@db.example:5432/x").unwrap().unwrap();
        assert_eq!(p.kind, Kind::Postgres);
        assert_eq!(parse("rediss://h:1/0").unwrap().unwrap().kind, Kind::Redis);
        let tls = parse("postgresql://u:pw@h/db?sslmode=verify-full&application_name=x").unwrap().unwrap();
        assert!(tls.url.contains("sslmode=require"), "{}", tls.url);
        assert!(tls.url.contains("application_name=x"), "{}", tls.url);
        assert!(tls.shown.contains("sslmode=verify-full"), "{}", tls.shown);
        assert!(matches!(parse("postgresql://h/db?sslmode=sometimes"), Some(Err(_))));
        let q = parse("postgresql://u@h/db?password=s3cr%3Dt&sslmode=disable").unwrap().unwrap();
        assert_eq!(q.password.as_deref(), Some("s3cr=t"));
        assert!(!q.shown.contains("s3cr"), "{}", q.shown);
        assert!(q.shown.contains("password=***") || q.shown.contains("password=%2A%2A%2A"), "{}", q.shown);
        assert!(matches!(parse("ftp://h/"), Some(Err(_))));
        assert!(matches!(parse("redis:///0"), Some(Err(_))));
    }

    #[test]
    fn numbers_from_a_store_are_checked() {
        use super::wire::number;
        assert_eq!(number(" 1.5 "), Ok(1.5));
        assert!(number("nan").is_err());
        assert!(number("inf").is_err());
        assert!(number("x").is_err());
    }
}
