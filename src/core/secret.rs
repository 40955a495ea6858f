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

/// Scrubs known secrets and anything shaped like a JWT out of text bound for users.
#[derive(Clone, Default, Debug)]
pub struct Redactor {
    secrets: Vec<Secret>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = Secret>) -> Self {
        Self { secrets: secrets.into_iter().filter(|s| !s.expose().is_empty()).collect() }
    }

    pub fn add(&mut self, secret: Secret) {
        if !secret.expose().is_empty() {
            self.secrets.push(secret);
        }
    }

    /// Returns `text` with every known secret and every JWT-looking token replaced by `****`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.expose()) {
                out = out.replace(s.expose(), "****");
            }
        }
        scrub_jwts(&out)
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
    fn redactor_scrubs_secrets_and_jwts() {
        let r = Redactor::new([Secret::new("topsecret-token")]);
        let jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl";
        let text = format!("bad token topsecret-token and Bearer {jwt}, eyJ alone");
        let out = r.scrub(&text);
        assert_eq!(out, "bad token **** and Bearer ****, eyJ alone");
    }
}
