//! Secrets in newtypes that never print, and a redactor for text that comes back from servers.

use std::fmt;
use std::sync::Arc;

/// A string that must never reach a log, repr or message. Debug and Display print `****`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    pub fn new(value: impl Into<Arc<str>>) -> Self {
        Self(value.into())
    }

    /// The secret itself, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("****")
    }
}

/// The API token: its base64 text and the decoded InitiateAuth body that is POSTed unchanged.
#[derive(Clone)]
pub struct ApiToken {
    text: Secret,
    body: Arc<[u8]>,
    /// Secret strings found inside the body (the refresh token), scrubbed from server messages.
    inner: Vec<Secret>,
}

impl ApiToken {
    /// Decodes and checks an API token. The error never quotes the token.
    pub fn parse(text: &str) -> Result<Self, String> {
        use base64::Engine as _;
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if compact.is_empty() {
            return Err("api_token is empty".into());
        }
        let engines = [
            base64::engine::general_purpose::STANDARD,
            base64::engine::general_purpose::STANDARD_NO_PAD,
            base64::engine::general_purpose::URL_SAFE,
            base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        let body = engines
            .iter()
            .find_map(|e| e.decode(compact.as_bytes()).ok())
            .ok_or_else(|| "api_token is not valid base64; copy the whole token from Settings > Authentication - API Tokens".to_string())?;
        let parsed: serde_json::Value = serde_json::from_slice(&body).map_err(|_| {
            "api_token does not decode to a JSON InitiateAuth request; is it an API token (not a JWT)?"
                .to_string()
        })?;
        let obj = parsed.as_object().ok_or_else(|| {
            "api_token does not decode to a JSON object (an InitiateAuth request)".to_string()
        })?;
        let mut inner = Vec::new();
        if let Some(params) = obj.get("AuthParameters").and_then(serde_json::Value::as_object) {
            for v in params.values().filter_map(serde_json::Value::as_str) {
                if v.len() >= 8 {
                    inner.push(Secret::new(v));
                }
            }
        }
        Ok(Self { text: Secret::new(compact), body: body.into(), inner })
    }

    /// The token's text, for the one place that must hand it on (pickling a client).
    pub fn expose_text(&self) -> &str {
        self.text.expose()
    }

    /// The decoded bytes, sent unchanged as the InitiateAuth body.
    pub fn body(&self) -> &[u8] {
        &self.body
    }

    /// Every string that must be scrubbed from anything we print.
    pub fn secrets(&self) -> impl Iterator<Item = &Secret> {
        std::iter::once(&self.text).chain(self.inner.iter())
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(****)")
    }
}

/// How many JWTs a client remembers for scrubbing: the current one and a few before it (a
/// server may echo one that was just replaced).
const REMEMBERED_JWTS: usize = 4;

/// Scrubs known secrets and anything shaped like a JWT out of text bound for users.
///
/// Clones share one list: the JWTs a client obtains later are scrubbed by every clone (the
/// transport's, the token provider's, the errors' of a page walk).
#[derive(Clone, Default, Debug)]
pub struct Redactor {
    fixed: Arc<[Secret]>,
    jwts: Arc<std::sync::RwLock<std::collections::VecDeque<Secret>>>,
}

/// The forms a secret may come back in: as is, with `/` escaped as JSON allows (`\/`), and for a
/// JWT its signature alone (a server may echo the part it failed to verify).
fn variants(secret: Secret) -> impl Iterator<Item = Secret> {
    let escaped = secret.expose().contains('/').then(|| Secret::new(secret.expose().replace('/', "\\/")));
    let signature = jwt_signature(secret.expose()).map(Secret::new);
    std::iter::once(secret).chain(escaped).chain(signature)
}

/// The signature segment of a JWT-shaped secret, when it is long enough to be unmistakable.
fn jwt_signature(secret: &str) -> Option<&str> {
    let mut parts = secret.split('.');
    let (_header, _payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && signature.len() >= 16).then_some(signature)
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = Secret>) -> Self {
        let fixed: Vec<Secret> =
            secrets.into_iter().filter(|s| !s.expose().is_empty()).flat_map(variants).collect();
        Self { fixed: fixed.into(), jwts: Arc::default() }
    }

    pub fn add(&mut self, secret: Secret) {
        if !secret.expose().is_empty() {
            let mut all = self.fixed.to_vec();
            all.extend(variants(secret));
            self.fixed = all.into();
        }
    }

    /// Remembers a JWT the client obtained, for every clone of this redactor; the oldest of
    /// more than [`REMEMBERED_JWTS`] is forgotten.
    pub fn remember_jwt(&self, jwt: &str) {
        if jwt.is_empty() {
            return;
        }
        if let Ok(mut list) = self.jwts.write() {
            if list.iter().any(|s| s.expose() == jwt) {
                return;
            }
            // Each JWT with its signature: two entries.
            while list.len() + 2 > REMEMBERED_JWTS * 2 {
                list.pop_front();
            }
            list.push_back(Secret::new(jwt));
            if let Some(signature) = jwt_signature(jwt) {
                list.push_back(Secret::new(signature));
            }
        }
    }

    /// Returns `text` with every known secret and every JWT-looking token replaced by `****`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        let mut replace = |s: &Secret| {
            if out.contains(s.expose()) {
                out = out.replace(s.expose(), "****");
            }
        };
        self.fixed.iter().for_each(&mut replace);
        if let Ok(list) = self.jwts.read() {
            list.iter().for_each(&mut replace);
        }
        scrub_jwts(&out)
    }

    /// Scrubs `text`, then keeps its first `keep` characters; a cut that ends inside a secret
    /// (a tail that starts one) is masked too, so no part of a secret survives the cut.
    pub fn scrub_cut(&self, text: &str, keep: usize) -> (String, bool) {
        let clean = self.scrub(text);
        let Some((cut_at, _)) = clean.char_indices().nth(keep) else { return (clean, false) };
        let mut out = clean[..cut_at].to_string();
        let mut starts: Vec<Secret> = self.fixed.to_vec();
        if let Ok(list) = self.jwts.read() {
            starts.extend(list.iter().cloned());
        }
        // The longest tail of `out` that is a prefix of a secret (at least a few characters).
        let tail = starts
            .iter()
            .filter_map(|s| {
                let secret = s.expose();
                (4..=secret.len().min(out.len())).rev().find(|&n| {
                    out.is_char_boundary(out.len() - n)
                        && secret.as_bytes().starts_with(&out.as_bytes()[out.len() - n..])
                })
            })
            .max();
        if let Some(n) = tail {
            out.truncate(out.len() - n);
            out.push_str("****");
        }
        (out, true)
    }

    /// Scrubs every string of a JSON value (keys included), in place.
    pub fn scrub_json(&self, value: &mut serde_json::Value) {
        use serde_json::Value;
        let mut stack = vec![value];
        while let Some(v) = stack.pop() {
            match v {
                Value::String(s) => {
                    let clean = self.scrub(s);
                    if clean != *s {
                        *s = clean;
                    }
                }
                Value::Array(items) => stack.extend(items.iter_mut()),
                Value::Object(map) => {
                    if map.keys().any(|k| self.scrub(k) != *k) {
                        let old = std::mem::take(map);
                        for (k, v) in old {
                            map.insert(self.scrub(&k), v);
                        }
                    }
                    stack.extend(map.values_mut());
                }
                _ => {}
            }
        }
    }
}

/// Replaces substrings shaped like a JWT (three base64url segments, the first starting `eyJ`).
fn scrub_jwts(text: &str) -> String {
    if !text.contains("eyJ") {
        return text.to_string();
    }
    let is_b64url = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("eyJ") {
        let (before, candidate) = rest.split_at(pos);
        out.push_str(before);
        let end = candidate.find(|c: char| !(is_b64url(c) || c == '.')).unwrap_or(candidate.len());
        let token = &candidate[..end];
        if token.split('.').filter(|p| !p.is_empty()).count() >= 3 {
            out.push_str("****");
        } else {
            out.push_str(token);
        }
        rest = &candidate[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;

    fn token(body: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(body)
    }

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("hunter2-very-secret");
        assert_eq!(format!("{s}"), "****");
        assert_eq!(format!("{s:?}"), "****");
    }

    #[test]
    fn api_token_decodes_body_unchanged() {
        let body = r#"{"AuthFlow":"REFRESH_TOKEN_AUTH","ClientId":"abc","AuthParameters":{"REFRESH_TOKEN":"rt-0123456789"}}"#;
        let t = ApiToken::parse(&format!("  {}\n", token(body))).unwrap();
        assert_eq!(t.body(), body.as_bytes());
        assert_eq!(format!("{t:?}"), "ApiToken(****)");
        assert_eq!(t.secrets().count(), 2);
    }

    #[test]
    fn api_token_rejects_bad_input_without_quoting_it() {
        let e = ApiToken::parse("not base64 at all!!").unwrap_err();
        assert!(e.contains("not valid base64"), "{e}");
        assert!(!e.contains("not base64 at all"));
        let e = ApiToken::parse(&token("plain text")).unwrap_err();
        assert!(e.contains("JSON"), "{e}");
        let e = ApiToken::parse(&token("[1,2]")).unwrap_err();
        assert!(e.contains("object"), "{e}");
        assert!(ApiToken::parse("   ").is_err());
    }

    #[test]
    fn a_jwt_signature_alone_is_scrubbed() {
        let sig = "Qx7vZ2pLm9Kd3WfR8tYb1nHc";
        let jwt = format!("eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxIn0.{sig}");
        let r = Redactor::default();
        r.remember_jwt(&jwt);
        assert_eq!(r.scrub(&format!("bad signature {sig}!")), "bad signature ****!");
        let (cut, _) = r.scrub_cut(&format!("bad signature {sig}"), 20);
        assert!(!cut.contains(&sig[..6]), "{cut}");
        // A given JWT (not obtained by the client) too.
        let given = Redactor::new([Secret::new(jwt.clone())]);
        assert_eq!(given.scrub(sig), "****");
        // Many JWTs later, the list stays bounded.
        for i in 0..20 {
            r.remember_jwt(&format!("eyJh.eyJz.{sig}{i:04}"));
        }
        assert!(r.jwts.read().unwrap().len() <= REMEMBERED_JWTS * 2);
    }

    #[test]
    fn redactor_scrubs_secrets_and_jwts() {
        let r = Redactor::new([Secret::new("topsecret-token")]);
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
        let text = format!("bad token topsecret-token and Bearer {jwt}, eyJ alone");
        let out = r.scrub(&text);
        assert_eq!(out, "bad token **** and Bearer ****, eyJ alone");
    }

    #[test]
    fn redactor_scrubs_remembered_jwts_in_every_clone() {
        let r = Redactor::new([Secret::new("a/b+c=token")]);
        let clone = r.clone();
        let opaque = "opaque-header.payload-part.signature-part";
        assert_eq!(clone.scrub(opaque), opaque);
        r.remember_jwt(opaque);
        assert_eq!(clone.scrub(&format!("x {opaque} y")), "x **** y");
        assert_eq!(clone.scrub(r"escaped a\/b+c=token"), "escaped ****");
        for i in 0..10 {
            r.remember_jwt(&format!("jwt-number-{i}"));
        }
        assert_eq!(clone.scrub("jwt-number-9 jwt-number-6"), "**** ****");
        assert_eq!(clone.scrub("jwt-number-0"), "jwt-number-0");
        // Scrubbed before the cut: the secret across the cut is masked whole.
        let (cut, more) = clone.scrub_cut("abc jwt-number-9 and more", 10);
        assert_eq!((cut.as_str(), more), ("abc **** a", true));
        // A cut that ends inside the start of a secret masks that start.
        let (cut, _) = clone.scrub_cut("xx jwt-number-7", 9);
        assert_eq!(cut, "xx ****");
        assert_eq!(clone.scrub_cut("short", 10), ("short".to_string(), false));
        let mut v = serde_json::json!({"m": ["jwt-number-9", {"jwt-number-8": 1}], "n": 2});
        clone.scrub_json(&mut v);
        assert_eq!(v, serde_json::json!({"m": ["****", {"****": 1}], "n": 2}));
    }
}
