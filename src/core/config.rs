//! Settings from arguments and the environment, checked once at construction.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use super::error::{Error, Result};
use super::secret::{ApiToken, Redactor, Secret};

/// The deployments of the service and their identity-provider regions.
pub(crate) const REGIONS: [&str; 3] = ["eu-central-1", "eu-west-2", "us-east-2"];
pub(crate) const DEFAULT_REGION: &str = "eu-central-1";

/// What the caller passed; `None` means "look in the environment, then use the default".
#[derive(Default, Debug, Clone)]
pub struct SettingsInput {
    pub api_token: Option<String>,
    pub jwt: Option<String>,
    pub base_url: Option<String>,
    pub region: Option<String>,
    pub auth_url: Option<String>,
    pub timeout: Option<f64>,
    pub max_retries: Option<i64>,
    pub max_retry_wait: Option<f64>,
    pub proxy: Option<String>,
    pub ca_bundle: Option<String>,
    /// Seconds before expiry at which a refresh starts in the background (default 120).
    pub refresh_advisory: Option<f64>,
    /// Seconds before expiry at which every caller waits for a fresh JWT (default 30).
    pub refresh_mandatory: Option<f64>,
    /// The largest response body read, after decompression (default 256 MiB).
    pub max_response_bytes: Option<i64>,
    /// A client-side limit: at most this many requests per this many seconds.
    pub rate_limit: Option<(i64, f64)>,
    /// The shared request budget: a folder, `"off"` (the client paces itself alone), a
    /// `redis://` or `postgresql://` URL (see `budget_store`); `None` the default
    /// (`$SECFINDINGS_BUDGET`, else the folder of `budget::default_dir`).
    pub budget: Option<String>,
    /// Fail a request when the budget's store cannot be used, instead of falling back to the file.
    pub(crate) budget_required: bool,
}

/// How the client gets its bearer token.
#[derive(Clone, Debug)]
pub enum Credential {
    ApiToken(ApiToken),
    Jwt(Secret),
}

/// Checked, complete settings.
#[derive(Clone, Debug)]
pub struct Settings {
    pub credential: Credential,
    pub base_url: Url,
    pub auth_url: Url,
    pub region: String,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_retries: u32,
    pub max_retry_wait: Duration,
    pub proxy: Option<Url>,
    pub ca_bundle: Option<PathBuf>,
    pub refresh_advisory: Duration,
    pub refresh_mandatory: Duration,
    /// The largest response body read, counted after decompression.
    pub max_response_bytes: usize,
    /// A client-side limit on API requests: (requests, per).
    pub rate_limit: Option<(u32, Duration)>,
    /// The folder of the request budget shared per token (`None`: not shared).
    pub budget_dir: Option<PathBuf>,
    /// Whether a server's `Retry-After` is written to the budget folder for every process of the
    /// token. Not for a loopback server with the user's default folder: a test's mock server on
    /// a fixed port would stall every later run of the user's suite for as long as it asked.
    pub budget_shares_waits: bool,
    /// The store past one machine (`budget="redis://..."`); the folder above is its fallback.
    pub(crate) budget_store: Option<super::budget_store::StoreUrl>,
    pub(crate) budget_required: bool,
    pub redactor: Redactor,
}

/// Default of `max_response_bytes`: far above any page (about 30 KB per 100 findings) and low
/// enough that a hostile or broken server cannot exhaust memory.
pub(crate) const DEFAULT_MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

fn non_empty(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => IpAddr::V4(ip).is_loopback(),
        Some(url::Host::Ipv6(ip)) => IpAddr::V6(ip).is_loopback(),
        None => false,
    }
}

/// Parses an http(s) URL and refuses plain http except to loopback, so a bearer token or API
/// token never crosses a network in clear text.
fn checked_url(name: &str, raw: &str) -> Result<Url> {
    let url =
        Url::parse(raw).map_err(|e| Error::config(format!("{name} is not a valid URL ({e}): {raw:?}")))?;
    match url.scheme() {
        "https" => {}
        "http" if is_loopback(&url) => {}
        "http" => {
            return Err(Error::config(format!(
                "{name} uses plain http to a non-loopback host ({}); use https so tokens are not sent in clear text",
                url.host_str().unwrap_or("?")
            )))
        }
        other => return Err(Error::config(format!("{name} must be an http(s) URL, not {other}:"))),
    }
    if url.host_str().unwrap_or("").is_empty() {
        return Err(Error::config(format!("{name} has no host: {raw:?}")));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::config(format!("{name} must not carry credentials in the URL")));
    }
    Ok(url)
}

fn seconds(name: &str, v: f64, min: f64) -> Result<Duration> {
    if !v.is_finite() || v < min {
        return Err(Error::config(format!("{name} must be a number >= {min}, got {v}")));
    }
    Duration::try_from_secs_f64(v).map_err(|_| Error::config(format!("{name} is out of range: {v}")))
}

impl Settings {
    /// Resolves arguments, then `env` (normally `std::env::var`), then defaults, and checks them.
    pub fn resolve(input: SettingsInput, env: &dyn Fn(&str) -> Option<String>) -> Result<Self> {
        let api_token =
            non_empty(input.api_token.clone()).or_else(|| non_empty(env("SECFINDINGS_API_TOKEN")));
        let jwt = non_empty(input.jwt.clone());
        let credential = match (api_token, jwt) {
            (Some(_), Some(_)) => {
                return Err(Error::config("give either api_token or jwt, not both"));
            }
            (None, None) => {
                return Err(Error::config(
                    "no credentials: pass api_token=... (or jwt=...), or set SECFINDINGS_API_TOKEN",
                ))
            }
            (Some(t), None) => Credential::ApiToken(ApiToken::parse(&t).map_err(Error::Configuration)?),
            (None, Some(j)) => {
                if j.split('.').count() != 3 {
                    return Err(Error::config("jwt does not look like a JWT (three dot-separated parts)"));
                }
                Credential::Jwt(Secret::new(j))
            }
        };

        let base_raw = non_empty(input.base_url.clone())
            .or_else(|| non_empty(env("SECFINDINGS_BASE_URL")))
            .ok_or_else(|| {
            Error::config("no base_url: pass base_url=... (ending in /api/v1) or set SECFINDINGS_BASE_URL")
        })?;
        let mut base_url = checked_url("base_url", &base_raw)?;
        let trimmed = base_url.path().trim_end_matches('/').to_string();
        if !trimmed.ends_with("/api/v1") {
            return Err(Error::config(format!(
                "base_url must end in /api/v1 (the API root), got path {:?}",
                base_url.path()
            )));
        }
        base_url.set_path(&trimmed);

        let region = non_empty(input.region.clone())
            .or_else(|| non_empty(env("SECFINDINGS_REGION")))
            .unwrap_or_else(|| DEFAULT_REGION.to_string());
        if !REGIONS.contains(&region.as_str()) {
            return Err(Error::config(format!(
                "region must be one of {}, got {region:?}",
                REGIONS.join(", ")
            )));
        }
        let auth_raw = non_empty(input.auth_url.clone())
            .or_else(|| non_empty(env("SECFINDINGS_AUTH_URL")))
            .unwrap_or_else(|| format!("https://cognito-idp.{region}.amazonaws.com/"));
        let auth_url = checked_url("auth_url", &auth_raw)?;

        let timeout = seconds("timeout", input.timeout.unwrap_or(60.0), 0.001)?;
        let max_retries = input.max_retries.unwrap_or(3);
        let max_retries = u32::try_from(max_retries).ok().filter(|n| *n <= 100).ok_or_else(|| {
            Error::config(format!("max_retries must be between 0 and 100, got {max_retries}"))
        })?;
        let max_retry_wait = seconds("max_retry_wait", input.max_retry_wait.unwrap_or(120.0), 0.0)?;
        let proxy = match non_empty(input.proxy.clone()) {
            Some(p) => {
                Some(Url::parse(&p).map_err(|e| Error::config(format!("proxy is not a valid URL ({e})")))?)
            }
            None => None,
        };
        let ca_bundle = match non_empty(input.ca_bundle.clone()) {
            Some(p) => {
                let path = PathBuf::from(p);
                if !path.is_file() {
                    return Err(Error::config(format!(
                        "ca_bundle {} is not a readable file",
                        path.display()
                    )));
                }
                Some(path)
            }
            None => None,
        };
        let refresh_advisory = seconds("refresh_advisory", input.refresh_advisory.unwrap_or(120.0), 0.0)?;
        let refresh_mandatory = seconds("refresh_mandatory", input.refresh_mandatory.unwrap_or(30.0), 0.0)?;
        if refresh_mandatory > refresh_advisory {
            return Err(Error::config("refresh_mandatory must not exceed refresh_advisory"));
        }

        let max_response_bytes = match input.max_response_bytes {
            None => DEFAULT_MAX_RESPONSE_BYTES,
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n >= 1024)
                .ok_or_else(|| Error::config(format!("max_response_bytes must be at least 1024, got {n}")))?,
        };

        // rate_limit=, else $SECFINDINGS_RATE_LIMIT ("200/60": 200 requests per 60 seconds), so
        // that a command or a worker configured by its environment books in a shared budget.
        let from_env = match env("SECFINDINGS_RATE_LIMIT").filter(|v| !v.trim().is_empty()) {
            Some(text) if input.rate_limit.is_none() => Some(rate_limit_text(&text)?),
            _ => None,
        };
        let rate_limit = match input.rate_limit.or(from_env) {
            None => None,
            Some((n, per)) => {
                let max = super::limit::MAX_REQUESTS;
                let n = u32::try_from(n).ok().filter(|n| (1..=max).contains(n)).ok_or_else(|| {
                    Error::config(format!("rate_limit requests must be between 1 and {max}, got {n}"))
                })?;
                let per = seconds("rate_limit per_seconds", per, 0.001)?;
                Some((n, per))
            }
        };

        // `budget=`, else $SECFINDINGS_BUDGET: a store's URL, a folder, or "off".
        let asked =
            input.budget.clone().or_else(|| env("SECFINDINGS_BUDGET").filter(|v| !v.trim().is_empty()));
        let budget_store = match asked.as_deref().and_then(super::budget_store::parse) {
            None => None,
            Some(Ok(url)) => Some(url),
            Some(Err(why)) => return Err(Error::config(why)),
        };
        if input.budget_required && budget_store.is_none() {
            return Err(Error::config(
                "budget_required=True needs a shared store: budget=\"redis://host:6379/0\" or \
                 \"postgresql://user@host/db\" (or $SECFINDINGS_BUDGET)",
            ));
        }
        if let (true, Some((n, per))) = (input.budget_required && budget_store.is_some(), rate_limit) {
            let (most, day) = (super::budget_rule::MAX_SENDS, super::budget_rule::MAX_KEEP);
            if usize::try_from(n).map_or(true, |n| n > most) || per.as_secs_f64() > day {
                return Err(Error::config(format!(
                    "budget_required=True books every request in the store, which keeps at most \
                     {most} sends over at most a day; rate_limit {n} per {}s is larger (pace by a \
                     shorter window, or drop budget_required)",
                    per.as_secs_f64()
                )));
            }
        }
        let chosen_dir =
            asked.is_some() || env("SECFINDINGS_BUDGET_DIR").is_some_and(|d| !d.trim().is_empty());
        let budget_shares_waits = chosen_dir || !is_loopback(&base_url);
        let folder = if budget_store.is_some() { None } else { asked.as_deref().map(str::trim) };
        let budget_dir = match folder {
            None => super::budget::default_dir(env),
            Some("off") => None,
            Some("") => {
                return Err(Error::config("budget must be a folder, or \"off\"; got an empty string"))
            }
            Some(dir) => Some(PathBuf::from(dir)),
        };

        let mut redactor = Redactor::default();
        if let Some(p) = budget_store.as_ref().and_then(|s| s.password.clone()).filter(|p| !p.is_empty()) {
            redactor.add(Secret::new(p));
        }
        match &credential {
            Credential::ApiToken(t) => t.secrets().cloned().for_each(|s| redactor.add(s)),
            Credential::Jwt(j) => redactor.add(j.clone()),
        }
        Ok(Self {
            credential,
            base_url,
            auth_url,
            region,
            timeout,
            connect_timeout: Duration::from_secs(5).min(timeout),
            max_retries,
            max_retry_wait,
            proxy,
            ca_bundle,
            refresh_advisory,
            refresh_mandatory,
            max_response_bytes,
            rate_limit,
            budget_dir,
            budget_shares_waits,
            budget_store,
            budget_required: input.budget_required,
            redactor,
        })
    }

    /// Whether both endpoints are on this machine (the emulator), where proxies make no sense.
    pub fn all_loopback(&self) -> bool {
        is_loopback(&self.base_url) && is_loopback(&self.auth_url)
    }
}

/// `$SECFINDINGS_RATE_LIMIT`: `"REQUESTS/SECONDS"` (`"200/60"`, `"200/60s"`).
fn rate_limit_text(text: &str) -> Result<(i64, f64)> {
    let bad = || {
        Error::config(format!(
            "$SECFINDINGS_RATE_LIMIT must be REQUESTS/SECONDS, e.g. 200/60; got {:?}",
            text.chars().take(40).collect::<String>()
        ))
    };
    let (n, per) = text.trim().split_once('/').ok_or_else(bad)?;
    let n = n.trim().parse::<i64>().map_err(|_| bad())?;
    let per = per.trim().trim_end_matches('s').trim().parse::<f64>().map_err(|_| bad())?;
    Ok((n, per))
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn token() -> String {
        base64::engine::general_purpose::STANDARD
            .encode(r#"{"AuthFlow":"REFRESH_TOKEN_AUTH","ClientId":"c","AuthParameters":{"REFRESH_TOKEN":"r-123456789"}}"#)
    }

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn the_rate_limit_can_come_from_the_environment() {
        assert_eq!(rate_limit_text("200/60").unwrap(), (200, 60.0));
        assert_eq!(rate_limit_text(" 5 / 1.5s ").unwrap(), (5, 1.5));
        for bad in ["", "200", "a/60", "200/x", "200/60/1"] {
            assert!(rate_limit_text(bad).is_err(), "{bad}");
        }
    }

    fn input(base: &str) -> SettingsInput {
        SettingsInput { api_token: Some(token()), base_url: Some(base.into()), ..Default::default() }
    }

    #[test]
    fn defaults_and_region_auth_url() {
        let s = Settings::resolve(input("https://api.example.com/api/v1/"), &no_env).unwrap();
        assert_eq!(s.base_url.as_str(), "https://api.example.com/api/v1");
        assert_eq!(s.auth_url.as_str(), "https://cognito-idp.eu-central-1.amazonaws.com/");
        assert_eq!(s.timeout, Duration::from_secs(60));
        assert_eq!(s.connect_timeout, Duration::from_secs(5));
        assert_eq!(s.max_retries, 3);
        for r in ["eu-west-2", "us-east-2"] {
            let s = Settings::resolve(
                SettingsInput { region: Some(r.into()), ..input("https://x.example/api/v1") },
                &no_env,
            )
            .unwrap();
            assert_eq!(s.auth_url.as_str(), format!("https://cognito-idp.{r}.amazonaws.com/"));
        }
    }

    #[test]
    fn env_fills_gaps() {
        let t = token();
        let env = move |k: &str| match k {
            "SECFINDINGS_API_TOKEN" => Some(t.clone()),
            "SECFINDINGS_BASE_URL" => Some("http://127.0.0.1:9/api/v1".into()),
            "SECFINDINGS_REGION" => Some("us-east-2".into()),
            "SECFINDINGS_AUTH_URL" => Some("http://localhost:9/".into()),
            _ => None,
        };
        let s = Settings::resolve(SettingsInput::default(), &env).unwrap();
        assert_eq!(s.region, "us-east-2");
        assert_eq!(s.auth_url.as_str(), "http://localhost:9/");
        assert!(s.all_loopback());
    }

    #[test]
    fn a_loopback_servers_waits_stay_out_of_the_users_folder() {
        let t = token();
        let with_dir = |dir: bool| {
            let t = t.clone();
            move |k: &str| match k {
                "SECFINDINGS_API_TOKEN" => Some(t.clone()),
                "HOME" => Some("/home/u".into()),
                "SECFINDINGS_BUDGET_DIR" if dir => Some("/tmp/b".into()),
                _ => None,
            }
        };
        let loopback = || input("http://127.0.0.1:9/api/v1");
        assert!(!Settings::resolve(loopback(), &with_dir(false)).unwrap().budget_shares_waits);
        assert!(Settings::resolve(loopback(), &with_dir(true)).unwrap().budget_shares_waits);
        let chosen = SettingsInput { budget: Some("/tmp/c".into()), ..loopback() };
        assert!(Settings::resolve(chosen, &with_dir(false)).unwrap().budget_shares_waits);
        let remote = input("https://x.example/api/v1");
        assert!(Settings::resolve(remote, &with_dir(false)).unwrap().budget_shares_waits);
    }

    #[test]
    fn rejects_bad_settings() {
        let bad = |i: SettingsInput| Settings::resolve(i, &no_env).unwrap_err().to_string();
        assert!(bad(input("https://x.example/graphql")).contains("/api/v1"));
        assert!(bad(input("http://x.example/api/v1")).contains("plain http"));
        assert!(bad(input("ftp://x.example/api/v1")).contains("http(s)"));
        assert!(bad(input("not a url")).contains("not a valid URL"));
        assert!(bad(input("https://u:p@x.example/api/v1")).contains("credentials"));
        assert!(bad(SettingsInput { region: Some("mars-1".into()), ..input("https://x.example/api/v1") })
            .contains("region"));
        assert!(bad(SettingsInput {
            base_url: Some("https://x.example/api/v1".into()),
            ..Default::default()
        })
        .contains("no credentials"));
        assert!(bad(SettingsInput { jwt: Some("a.b.c".into()), ..input("https://x.example/api/v1") })
            .contains("not both"));
        assert!(bad(SettingsInput { api_token: Some(token()), ..Default::default() }).contains("base_url"));
        assert!(bad(SettingsInput { timeout: Some(f64::NAN), ..input("https://x.example/api/v1") })
            .contains("timeout"));
        assert!(bad(SettingsInput { max_retries: Some(-1), ..input("https://x.example/api/v1") })
            .contains("max_retries"));
        assert!(bad(SettingsInput { max_response_bytes: Some(10), ..input("https://x.example/api/v1") })
            .contains("max_response_bytes"));
        for limit in [(0, 1.0), (-1, 1.0), (5, 0.0), (5, f64::NAN), (5_000_000, 1.0)] {
            assert!(bad(SettingsInput { rate_limit: Some(limit), ..input("https://x.example/api/v1") })
                .contains("rate_limit"));
        }
        assert!(bad(SettingsInput { api_token: Some("%%%".into()), ..input("https://x.example/api/v1") })
            .contains("base64"));
        assert!(bad(SettingsInput {
            auth_url: Some("http://idp.example/".into()),
            ..input("https://x.example/api/v1")
        })
        .contains("auth_url"));
    }

    #[test]
    fn loopback_http_is_allowed() {
        for u in ["http://127.0.0.1:8080/api/v1", "http://localhost/api/v1", "http://[::1]:1/api/v1"] {
            assert!(Settings::resolve(input(u), &no_env).is_ok(), "{u}");
        }
    }
}
