//! Small shared helpers: the seeded PRNG, global ids, dates and GraphQL value building.

use async_graphql::indexmap::IndexMap;
use async_graphql::{Name, Value};
use base64::Engine;

/// SplitMix64: tiny, fast and fully specified, so the seeded data never changes with a
/// dependency upgrade (the determinism promise of the emulator rests on it).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (n > 0; 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift: unbiased enough for test data and branch-free.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Picks an index by integer weights.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        let mut r = self.below(total);
        for (i, w) in weights.iter().enumerate() {
            let w = u64::from(*w);
            if r < w {
                return i;
            }
            r -= w;
        }
        weights.len().saturating_sub(1)
    }
}

/// A stateless hash of a few numbers, for values derived at output time from a record's seed.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut r = Rng::new(a.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ b);
    r.next_u64()
}

// ------------------------------------------------------------------ global ids

pub fn to_global_id(type_name: &str, pk: u64) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{type_name}:{pk}"))
}

fn decode_b64(s: &str) -> Option<String> {
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    let s = s.trim();
    [STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD]
        .iter()
        .find_map(|e| e.decode(s).ok())
        .and_then(|b| String::from_utf8(b).ok())
}

/// Parses an `ID` input: an int pk, a string of digits, or a global id of `type_name`.
pub fn parse_id(value: &Value, type_name: &str) -> Result<u64, String> {
    match value {
        Value::Number(n) => n.as_u64().ok_or_else(|| format!("Invalid {type_name} id: {n}")),
        Value::String(s) => parse_id_str(s, type_name),
        other => Err(format!("Invalid {type_name} id: {other}")),
    }
}

pub fn parse_id_str(s: &str, type_name: &str) -> Result<u64, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<u64>().map_err(|_| format!("Invalid {type_name} id: {s:?}"));
    }
    let decoded = decode_b64(t).ok_or_else(|| format!("Invalid {type_name} id: {s:?}"))?;
    // graphql-relay splits on the first colon; trailing whitespace is a known fixture artefact.
    let (ty, pk) = decoded.trim().split_once(':').ok_or_else(|| format!("Invalid {type_name} id: {s:?}"))?;
    if ty != type_name {
        return Err(format!("Must receive a {type_name} id, got a {ty} id: {s:?}"));
    }
    pk.trim().parse::<u64>().map_err(|_| format!("Invalid {type_name} id: {s:?}"))
}

// ------------------------------------------------------------------ dates

pub const DAY: i64 = 86_400;

pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

pub fn format_date_days(days: i64) -> String {
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}")
}

/// ISO 8601 with a UTC offset, as Python's `datetime.isoformat()` prints an aware UTC time.
pub fn format_datetime(secs: i64) -> String {
    let days = secs.div_euclid(DAY);
    let rem = secs.rem_euclid(DAY);
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}+00:00", rem / 3600, rem / 60 % 60, rem % 60)
}

fn num(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses `YYYY-MM-DD`, or a date-time `YYYY-MM-DD[T ]HH:MM[:SS[.frac]][Z|±HH[:MM]]` (UTC when
/// no offset), to unix seconds.
pub fn parse_datetime(s: &str) -> Result<i64, String> {
    let bad = || format!("Invalid DateTime: {s:?} (expected ISO 8601)");
    let s = s.trim();
    let date = s.get(..10).ok_or_else(bad)?;
    let mut parts = date.split('-');
    let (y, m, d) = match (parts.next(), parts.next(), parts.next()) {
        (Some(y), Some(m), Some(d)) if y.len() == 4 && m.len() == 2 && d.len() == 2 => {
            (num(y).ok_or_else(bad)?, num(m).ok_or_else(bad)?, num(d).ok_or_else(bad)?)
        }
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return Err(bad());
    }
    let mut secs = days_from_civil(y, m as u32, d as u32) * DAY;
    let rest = s.get(10..).ok_or_else(bad)?;
    if rest.is_empty() {
        return Ok(secs);
    }
    let rest = rest.strip_prefix('T').or_else(|| rest.strip_prefix(' ')).ok_or_else(bad)?;
    let tz_pos = rest.find(['Z', 'z', '+', '-']).unwrap_or(rest.len());
    let (time, tz) = rest.split_at(tz_pos);
    let time = time.split('.').next().unwrap_or("");
    let hms: Vec<&str> = time.split(':').collect();
    if hms.len() < 2 || hms.len() > 3 {
        return Err(bad());
    }
    let mut t = 0;
    for (i, p) in hms.iter().enumerate() {
        let v = num(p).ok_or_else(bad)?;
        t += v * [3600, 60, 1].get(i).copied().unwrap_or(0);
    }
    secs += t;
    if tz.is_empty() || tz.eq_ignore_ascii_case("z") {
        return Ok(secs);
    }
    let sign = if tz.starts_with('-') { -1 } else { 1 };
    let digits: String = tz.get(1..).unwrap_or("").chars().filter(|c| *c != ':').collect();
    if digits.len() != 2 && digits.len() != 4 {
        return Err(bad());
    }
    let hh = num(digits.get(..2).unwrap_or("")).ok_or_else(bad)?;
    let mm = if digits.len() == 4 { num(digits.get(2..).unwrap_or("")).ok_or_else(bad)? } else { 0 };
    Ok(secs - sign * (hh * 3600 + mm * 60))
}

// ------------------------------------------------------------------ values

pub type Map = IndexMap<Name, Value>;

/// Builds a GraphQL object value: `obj![("a", 1), ("b", "x")]`.
pub fn obj<const N: usize>(pairs: [(&str, Value); N]) -> Value {
    let mut m = Map::with_capacity(N);
    for (k, v) in pairs {
        m.insert(Name::new(k), v);
    }
    Value::Object(m)
}

pub fn opt<T: Into<Value>>(v: Option<T>) -> Value {
    v.map_or(Value::Null, Into::into)
}

pub fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

pub fn strings(v: &[String]) -> Value {
    Value::List(v.iter().map(|x| Value::String(x.clone())).collect())
}

pub fn dt(secs: i64) -> Value {
    Value::String(format_datetime(secs))
}

pub fn enum_v(name: &str) -> Value {
    Value::Enum(Name::new(name))
}

/// Converts a GraphQL input value to JSON (enums become their names).
pub fn to_json(v: &Value) -> serde_json::Value {
    v.clone().into_json().unwrap_or(serde_json::Value::Null)
}

/// Converts JSON to a GraphQL value (for GenericScalar output).
pub fn from_json(v: serde_json::Value) -> Value {
    Value::from_json(v).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_ids_round_trip_and_accept_ints() {
        let id = to_global_id("ScopeGroup", 1);
        assert_eq!(id, "U2NvcGVHcm91cDox");
        assert_eq!(parse_id(&Value::from(id), "ScopeGroup").unwrap(), 1);
        assert_eq!(parse_id(&Value::from(17), "Finding").unwrap(), 17);
        assert_eq!(parse_id(&Value::from("17"), "Finding").unwrap(), 17);
        // The fixture artefact with a trailing newline inside the base64.
        assert_eq!(parse_id_str("VGlja2V0UHJvdmlkZXI6MQo=", "TicketProvider").unwrap(), 1);
        assert_eq!(parse_id_str("RmluZGluZ0ZpbHRlcjoxNzE=", "FindingFilter").unwrap(), 171);
        assert!(parse_id_str("U2NvcGVHcm91cDox", "Finding").unwrap_err().contains("ScopeGroup"));
        assert!(parse_id_str("not an id!", "Finding").is_err());
        assert!(parse_id(&Value::from(-3), "Finding").is_err());
    }

    #[test]
    fn dates_round_trip() {
        let d = days_from_civil(2025, 3, 14);
        assert_eq!(civil_from_days(d), (2025, 3, 14));
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        let secs = d * DAY + 9 * 3600 + 26 * 60 + 53;
        assert_eq!(format_datetime(secs), "2025-03-14T09:26:53+00:00");
        assert_eq!(parse_datetime("2025-03-14T09:26:53+00:00").unwrap(), secs);
        assert_eq!(parse_datetime("2025-03-14T09:26:53.123Z").unwrap(), secs);
        assert_eq!(parse_datetime("2025-03-14T11:26:53+02:00").unwrap(), secs);
        assert_eq!(parse_datetime("2025-03-14").unwrap(), d * DAY);
        assert!(parse_datetime("14/03/2025").is_err());
        assert!(parse_datetime("2025-13-01").is_err());
    }

    #[test]
    fn rng_is_deterministic() {
        let a: Vec<u64> = {
            let mut r = Rng::new(7);
            (0..5).map(|_| r.next_u64()).collect()
        };
        let mut r = Rng::new(7);
        assert_eq!(a, (0..5).map(|_| r.next_u64()).collect::<Vec<_>>());
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| r.below(10) < 10));
    }
}
