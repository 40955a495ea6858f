//! API tokens, the refresh tokens inside them, and the JWTs the token exchange issues.
//!
//! JWTs are HS256 with a per-emulator secret: clients never verify them (they only read `exp`),
//! so the emulator only needs tokens it can check cheaply and that no other instance accepts.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::caller::Caller;

type HmacSha256 = Hmac<Sha256>;

pub(crate) const ISSUER: &str = "https://cognito-idp.eu-central-1.amazonaws.com/eu-central-1_EMULATOR";

/// Bound on the verified-JWT cache; it is simply emptied when full, since re-verifying is cheap.
const CACHE_CAPACITY: usize = 50_000;

/// The user behind an API token (or behind `issue_jwt`'s customer and name).
pub(crate) struct Identity {
    customer: String,
    name: String,
    sub: String,
    origin_jti: String,
    revoked: AtomicBool,
}

struct Verified {
    identity: Arc<Identity>,
    exp: u64,
    serial: u64,
}

pub(crate) enum ExchangeError {
    Unknown,
    Revoked,
}

pub(crate) struct Exchanged {
    pub access_token: String,
    pub id_token: String,
    pub expires_in: u64,
}

pub(crate) struct Auth {
    mac: HmacSha256,
    rng_mac: HmacSha256,
    rng_counter: AtomicU64,
    header_b64: String,
    client_id: String,
    lifetime_ms: AtomicU64,
    // Monotonic number of each issued JWT, carried in its `jti`.
    serial: AtomicU64,
    // JWTs with a serial below this were issued before the last `expire_jwts`.
    valid_from_serial: AtomicU64,
    refresh_tokens: RwLock<HashMap<String, Arc<Identity>>>,
    subjects: RwLock<HashMap<String, Arc<Identity>>>,
    cache: RwLock<HashMap<String, Verified>>,
}

#[derive(Deserialize)]
struct AccessClaims {
    sub: String,
    exp: u64,
    token_use: String,
    client_id: String,
    jti: String,
    customer: String,
}

impl Auth {
    pub fn new(lifetime: Duration) -> Self {
        let seed = os_seed();
        let mac = keyed(&seed, b"jwt");
        let rng_mac = keyed(&seed, b"rng");
        let mut auth = Self {
            mac,
            rng_mac,
            rng_counter: AtomicU64::new(0),
            header_b64: String::new(),
            client_id: String::new(),
            lifetime_ms: AtomicU64::new(duration_ms(lifetime)),
            serial: AtomicU64::new(1),
            valid_from_serial: AtomicU64::new(0),
            refresh_tokens: RwLock::new(HashMap::new()),
            subjects: RwLock::new(HashMap::new()),
            cache: RwLock::new(HashMap::new()),
        };
        // Cognito app client ids are 26 lower-case alphanumerics.
        auth.client_id = auth.random_alnum(26);
        let kid = STANDARD.encode(auth.random());
        let header = serde_json::json!({"kid": kid, "alg": "HS256", "typ": "JWT"});
        auth.header_b64 = URL_SAFE_NO_PAD.encode(header.to_string());
        auth
    }

    pub fn client_id(&self) -> &str {
        &self.client_id
    }

    pub fn set_lifetime(&self, lifetime: Duration) {
        self.lifetime_ms.store(duration_ms(lifetime), Ordering::Relaxed);
    }

    pub fn lifetime(&self) -> Duration {
        Duration::from_millis(self.lifetime_ms.load(Ordering::Relaxed))
    }

    /// 32 unpredictable bytes: HMAC of a counter under a key seeded from the OS, so that no call
    /// after start-up can fail.
    pub fn random(&self) -> [u8; 32] {
        let mut mac = self.rng_mac.clone();
        mac.update(&self.rng_counter.fetch_add(1, Ordering::Relaxed).to_le_bytes());
        mac.finalize().into_bytes().into()
    }

    fn random_alnum(&self, len: usize) -> String {
        const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let mut out = String::with_capacity(len);
        while out.len() < len {
            for byte in self.random() {
                if out.len() == len {
                    break;
                }
                let index = usize::from(byte) % ALPHABET.len();
                out.push(char::from(ALPHABET.get(index).copied().unwrap_or(b'a')));
            }
        }
        out
    }

    fn random_uuid(&self) -> String {
        uuid(first16(&self.random()))
    }

    /// `jti`s look like UUIDs; the last group carries the JWT's serial for the `expire_jwts` check.
    fn jti(&self, serial: u64) -> String {
        let random = u128::from_be_bytes(first16(&self.random()));
        let with_serial = (random & !SERIAL_MASK) | (u128::from(serial) & SERIAL_MASK);
        uuid(with_serial.to_be_bytes())
    }

    /// A new API token: base64 of the `InitiateAuth` body that exchanges it.
    pub fn create_api_token(&self, customer: &str, name: &str) -> String {
        // Real refresh tokens are JWEs; mimic the five-segment shape so clients treat them opaquely.
        let segments: Vec<String> = (0..4).map(|_| URL_SAFE_NO_PAD.encode(self.random())).collect();
        let refresh_token =
            format!("eyJjdHkiOiJKV1QiLCJlbmMiOiJBMjU2R0NNIiwiYWxnIjoiUlNBLU9BRVAifQ.{}", segments.join("."));
        let identity = Arc::new(Identity {
            customer: customer.to_owned(),
            name: name.to_owned(),
            sub: self.random_uuid(),
            origin_jti: self.random_uuid(),
            revoked: AtomicBool::new(false),
        });
        write(&self.subjects).insert(identity.sub.clone(), identity.clone());
        write(&self.refresh_tokens).insert(refresh_token.clone(), identity);
        let body = serde_json::json!({
            "AuthFlow": "REFRESH_TOKEN_AUTH",
            "ClientId": self.client_id,
            "AuthParameters": {"REFRESH_TOKEN": refresh_token},
        });
        STANDARD.encode(body.to_string())
    }

    /// Revokes the API token; false when it is unknown here or was already revoked.
    pub fn revoke_api_token(&self, api_token: &str) -> bool {
        let Some(refresh_token) = refresh_token_of(api_token) else {
            return false;
        };
        let tokens = read(&self.refresh_tokens);
        match tokens.get(&refresh_token) {
            Some(identity) => !identity.revoked.swap(true, Ordering::AcqRel),
            None => false,
        }
    }

    pub fn exchange(&self, refresh_token: &str) -> Result<Exchanged, ExchangeError> {
        let identity =
            read(&self.refresh_tokens).get(refresh_token).cloned().ok_or(ExchangeError::Unknown)?;
        if identity.revoked.load(Ordering::Acquire) {
            return Err(ExchangeError::Revoked);
        }
        let lifetime = self.lifetime();
        let expires_in = lifetime_secs(lifetime);
        let access_token = self.sign_access(&identity, lifetime);
        let id_token = self.sign_id(&identity, expires_in);
        Ok(Exchanged { access_token, id_token, expires_in })
    }

    /// A valid access token for `customer` / `name` without an exchange. The same pair always maps
    /// to the same subject, so rate limits per token apply across such JWTs.
    pub fn issue_jwt(&self, customer: &str, name: &str, lifetime: Duration) -> String {
        let mut mac = self.rng_mac.clone();
        mac.update(b"issue_jwt\0");
        mac.update(customer.as_bytes());
        mac.update(b"\0");
        mac.update(name.as_bytes());
        let sub = uuid(first16(&mac.finalize().into_bytes()));
        let identity = {
            let mut subjects = write(&self.subjects);
            subjects
                .entry(sub.clone())
                .or_insert_with(|| {
                    Arc::new(Identity {
                        customer: customer.to_owned(),
                        name: name.to_owned(),
                        sub,
                        origin_jti: self.random_uuid(),
                        revoked: AtomicBool::new(false),
                    })
                })
                .clone()
        };
        self.sign_access(&identity, lifetime)
    }

    /// Rejects every JWT issued so far.
    pub fn expire_all(&self) {
        let next = self.serial.load(Ordering::Acquire);
        self.valid_from_serial.fetch_max(next, Ordering::AcqRel);
        write(&self.cache).clear();
    }

    fn sign_access(&self, identity: &Identity, lifetime: Duration) -> String {
        let now = now_secs();
        let serial = self.serial.fetch_add(1, Ordering::AcqRel);
        let claims = serde_json::json!({
            "sub": identity.sub,
            "customer": identity.customer,
            "iss": ISSUER,
            "client_id": self.client_id,
            "origin_jti": identity.origin_jti,
            "event_id": self.random_uuid(),
            "token_use": "access",
            "scope": "aws.cognito.signin.user.admin",
            "auth_time": now,
            "exp": now.saturating_add(lifetime_secs(lifetime)),
            "iat": now,
            "jti": self.jti(serial),
            "username": identity.sub,
        });
        self.sign(&claims)
    }

    fn sign_id(&self, identity: &Identity, expires_in: u64) -> String {
        let now = now_secs();
        let claims = serde_json::json!({
            "sub": identity.sub,
            "customer": identity.customer,
            "aud": self.client_id,
            "iss": ISSUER,
            "origin_jti": identity.origin_jti,
            "event_id": self.random_uuid(),
            "token_use": "id",
            "auth_time": now,
            "exp": now.saturating_add(expires_in),
            "iat": now,
            "jti": self.random_uuid(),
            "cognito:username": identity.sub,
            "name": identity.name,
        });
        self.sign(&claims)
    }

    fn sign(&self, claims: &serde_json::Value) -> String {
        let mut token = String::with_capacity(1024);
        token.push_str(&self.header_b64);
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(claims.to_string(), &mut token);
        let mut mac = self.mac.clone();
        mac.update(token.as_bytes());
        let signature = mac.finalize().into_bytes();
        token.push('.');
        URL_SAFE_NO_PAD.encode_string(signature, &mut token);
        token
    }

    /// The caller a bearer JWT stands for, or `None` when it must be rejected with 401.
    pub fn verify(&self, token: &str) -> Option<Caller> {
        let now = now_secs();
        let valid_from = self.valid_from_serial.load(Ordering::Acquire);
        if let Some(hit) = read(&self.cache).get(token) {
            return usable(hit, now, valid_from).then(|| caller(&hit.identity));
        }
        let verified = self.verify_uncached(token)?;
        let accepted = usable(&verified, now, valid_from).then(|| caller(&verified.identity));
        if accepted.is_some() {
            let mut cache = write(&self.cache);
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            cache.insert(token.to_owned(), verified);
        }
        accepted
    }

    fn verify_uncached(&self, token: &str) -> Option<Verified> {
        let (signed, signature) = token.rsplit_once('.')?;
        let (_header, payload) = signed.split_once('.')?;
        let signature = URL_SAFE_NO_PAD.decode(signature).ok()?;
        let mut mac = self.mac.clone();
        mac.update(signed.as_bytes());
        mac.verify_slice(&signature).ok()?;
        let claims: AccessClaims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).ok()?).ok()?;
        if claims.token_use != "access" || claims.client_id != self.client_id {
            return None;
        }
        let serial = u64::from_str_radix(claims.jti.rsplit('-').next()?, 16).ok()?;
        let identity = read(&self.subjects).get(&claims.sub).cloned()?;
        if identity.customer != claims.customer {
            return None;
        }
        Some(Verified { identity, exp: claims.exp, serial })
    }
}

fn usable(verified: &Verified, now: u64, valid_from: u64) -> bool {
    now < verified.exp && verified.serial >= valid_from && !verified.identity.revoked.load(Ordering::Acquire)
}

fn caller(identity: &Identity) -> Caller {
    Caller {
        customer: identity.customer.clone(),
        token_name: identity.name.clone(),
        subject: identity.sub.clone(),
    }
}

/// The refresh token inside a base64 API token, if it has the expected shape.
fn refresh_token_of(api_token: &str) -> Option<String> {
    let body: serde_json::Value = serde_json::from_slice(&STANDARD.decode(api_token.trim()).ok()?).ok()?;
    body.get("AuthParameters")?.get("REFRESH_TOKEN")?.as_str().map(str::to_owned)
}

const SERIAL_MASK: u128 = 0xffff_ffff_ffff;

fn first16(bytes: &[u8]) -> [u8; 16] {
    bytes.get(..16).and_then(|head| <[u8; 16]>::try_from(head).ok()).unwrap_or_default()
}

/// Formats 16 bytes as a version-4 UUID, the shape Cognito uses for `sub`, `jti` and `event_id`.
fn uuid(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let n = u128::from_be_bytes(bytes);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        n >> 96,
        (n >> 80) & 0xffff,
        (n >> 64) & 0xffff,
        (n >> 48) & 0xffff,
        n & SERIAL_MASK
    )
}

fn keyed(seed: &[u8; 32], purpose: &[u8]) -> HmacSha256 {
    let mut key = [0u8; 64];
    let (first, second) = key.split_at_mut(32);
    first.copy_from_slice(seed);
    second.copy_from_slice(&Sha256::digest(purpose));
    <HmacSha256 as hmac::digest::KeyInit>::new(&key.into())
}

/// 256 bits from std's OS-seeded hasher keys (plus time and pid), so no extra RNG crate is needed.
fn os_seed() -> [u8; 32] {
    let mut digest = Sha256::new();
    for round in 0u64..4 {
        digest.update(RandomState::new().hash_one(round).to_le_bytes());
    }
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    digest.update(nanos.to_le_bytes());
    digest.update(std::process::id().to_le_bytes());
    digest.finalize().into()
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default()
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Whole seconds, rounded up so a sub-second lifetime still yields a usable token; zero stays
/// zero (exp = iat, already expired).
fn lifetime_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exchange_verify_revoke_expire() {
        let auth = Auth::new(Duration::from_secs(3600));
        let api_token = auth.create_api_token("acme", "ci");
        let refresh = refresh_token_of(&api_token).unwrap();
        let Ok(issued) = auth.exchange(&refresh) else { panic!("exchange failed") };
        assert_eq!(issued.expires_in, 3600);
        let caller = auth.verify(&issued.access_token).unwrap();
        assert_eq!((caller.customer.as_str(), caller.token_name.as_str()), ("acme", "ci"));
        assert!(auth.verify(&issued.id_token).is_none(), "id tokens are not access tokens");
        let mut tampered = issued.access_token.clone();
        tampered.pop();
        tampered.push(if issued.access_token.ends_with('A') { 'B' } else { 'A' });
        assert!(auth.verify(&tampered).is_none());

        auth.expire_all();
        assert!(auth.verify(&issued.access_token).is_none());
        let Ok(fresh) = auth.exchange(&refresh) else { panic!("exchange failed") };
        assert!(auth.verify(&fresh.access_token).is_some());

        assert!(auth.revoke_api_token(&api_token));
        assert!(!auth.revoke_api_token(&api_token));
        assert!(auth.verify(&fresh.access_token).is_none());
        assert!(matches!(auth.exchange(&refresh), Err(ExchangeError::Revoked)));
        assert!(matches!(auth.exchange("nope"), Err(ExchangeError::Unknown)));
    }

    #[test]
    fn issued_jwts_and_zero_lifetime() {
        let auth = Auth::new(Duration::from_secs(3600));
        let jwt = auth.issue_jwt("acme", "bench", Duration::from_secs(60));
        let caller = auth.verify(&jwt).unwrap();
        assert_eq!(
            caller.subject,
            auth.verify(&auth.issue_jwt("acme", "bench", Duration::from_secs(5))).unwrap().subject
        );
        assert!(auth.verify(&auth.issue_jwt("acme", "bench", Duration::ZERO)).is_none());
        assert_eq!(auth.client_id().len(), 26);
    }
}
