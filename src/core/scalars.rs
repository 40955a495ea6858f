//! Scalars on the ground floor: the GraphQL Int range and ISO 8601 dates and datetimes, parsed
//! and checked in one place for the variable checks, the catalog's coercion and the columns.
//! It imports nothing of ours.

/// The largest magnitude of a GraphQL Int: the spec's range is -(2^31 - 1) ..= 2^31 - 1.
pub const INT_MAX: i64 = (1 << 31) - 1;

/// Is `s` an ISO 8601 date, or a date-time that carries its UTC offset?
pub fn is_aware_datetime(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    let date_ok =
        digits(0..4) && b.get(4) == Some(&b'-') && digits(5..7) && b.get(7) == Some(&b'-') && digits(8..10);
    if !date_ok {
        return false;
    }
    if b.len() == 10 {
        return true;
    }
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return false;
    }
    let rest = &s[11..];
    if rest.ends_with('Z') || rest.ends_with('z') {
        return true;
    }
    // An offset: the last '+' or '-' after the time, followed by hh:mm or hhmm.
    match rest.rfind(['+', '-']) {
        Some(i) if i >= 5 => {
            let off = &rest[i + 1..];
            let off: String = off.chars().filter(|c| *c != ':').collect();
            off.len() == 4 && off.chars().all(|c| c.is_ascii_digit())
        }
        _ => false,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn digits(s: &str) -> Option<i64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok()).flatten()
}

/// `YYYY-MM-DD` as days since the epoch.
pub fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let (y, m, d) = (digits(s.get(..4)?)?, digits(s.get(5..7)?)?, digits(s.get(8..10)?)?);
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days_in_month = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    (1..=days_in_month).contains(&d).then(|| days_from_civil(y, m, d))
}

/// An ISO 8601 datetime (`2024-05-01T12:30:00`, fractions, `Z` or `+HH:MM`; a space for the
/// `T`; no offset means UTC) as microseconds since the epoch.
pub fn parse_datetime_us(s: &str) -> Option<i64> {
    let s = s.trim();
    let days = parse_date(s.get(..10)?)?;
    let rest = s.get(10..)?;
    if rest.is_empty() {
        return days.checked_mul(86_400_000_000);
    }
    let rest = rest.strip_prefix(['T', 't', ' '])?;
    let (h, mi) = (digits(rest.get(..2)?)?, digits(rest.get(3..5)?)?);
    if rest.as_bytes().get(2) != Some(&b':') {
        return None;
    }
    let mut tail = rest.get(5..)?;
    let mut sec = 0;
    if let Some(t) = tail.strip_prefix(':') {
        sec = digits(t.get(..2)?)?;
        tail = t.get(2..)?;
    }
    let mut micros = 0i64;
    if let Some(t) = tail.strip_prefix(['.', ',']) {
        let n = t.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return None;
        }
        let frac = t.get(..n)?;
        let six: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
        micros = six.parse().ok()?;
        tail = t.get(n..)?;
    }
    let offset_secs = match tail {
        "" | "Z" | "z" => 0,
        t if t.starts_with(['+', '-']) => {
            let sign = if t.starts_with('-') { -1 } else { 1 };
            let t = t.get(1..)?;
            let (oh, om) = match t.len() {
                2 => (digits(t)?, 0),
                4 => (digits(t.get(..2)?)?, digits(t.get(2..)?)?),
                5 if t.as_bytes().get(2) == Some(&b':') => (digits(t.get(..2)?)?, digits(t.get(3..)?)?),
                _ => return None,
            };
            // As Python's datetime: an offset is less than a day and its minutes a valid count
            // (`+99:99` would shift the time by more than four days).
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    if h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    let secs = days.checked_mul(86_400)? + h * 3600 + mi * 60 + sec - offset_secs;
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recognises_aware_datetimes() {
        for ok in
            ["2026-01-01", "2026-01-01T10:00:00Z", "2026-01-01T10:00:00+02:00", "2026-01-01 10:00:00.5-0500"]
        {
            assert!(is_aware_datetime(ok), "{ok}");
        }
        for bad in ["2026-01-01T10:00:00", "yesterday", "2026-1-1", "2026-01-01T10:00:00+2"] {
            assert!(!is_aware_datetime(bad), "{bad}");
        }
    }

    #[test]
    fn datetimes_parse_as_utc_microseconds() {
        assert_eq!(parse_datetime_us("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_datetime_us("1970-01-01T00:00:01.5+00:00"), Some(1_500_000));
        assert_eq!(parse_datetime_us("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(parse_datetime_us("2024-02-29 12:00:00"), Some(1_709_208_000_000_000));
        assert_eq!(parse_datetime_us("1969-12-31T23:59:59.999999Z"), Some(-1));
        assert_eq!(parse_datetime_us("2024-01-01"), Some(1_704_067_200_000_000));
        for bad in [
            "2024-02-30",
            "2023-02-29T00:00:00",
            "2024-04-31",
            "2024-01-01T23:59:60",
            "",
            "2024",
            "2024-13-01T00:00:00",
            "2024-01-01T25:00:00",
            "2024-01-01T00:00:00+1",
            "2024-01-01T00:00:00+99:99",
            "2024-01-01T00:00:00+24:00",
            "2024-01-01T00:00:00-23:60",
            "2024-01-01T00:00:00+0099",
            "2024-01-01T00:00+€1",
            "é024-01-01",
        ] {
            assert_eq!(parse_datetime_us(bad), None, "{bad}");
        }
    }

    #[test]
    fn offsets_up_to_a_day_are_taken() {
        assert_eq!(parse_datetime_us("1970-01-01T00:00:00+23:59"), Some(-(23 * 3600 + 59 * 60) * 1_000_000));
        assert_eq!(parse_datetime_us("1970-01-01T00:00:00-0130"), Some(5400 * 1_000_000));
    }
}
