//! Scalars on the ground floor: the GraphQL Int range and ISO 8601 dates and datetimes, parsed
//! and checked in one place for the variable checks, the catalog's coercion and the columns.
//! It imports nothing of ours. Dates and times are chrono's (its calendar and its RFC 3339
//! parser, already in the build through arrow), not a parser of our own.

/// The largest magnitude of a GraphQL Int: the spec's range is -(2^31 - 1) ..= 2^31 - 1.
pub(crate) const INT_MAX: i64 = (1 << 31) - 1;

/// Is `s` an ISO 8601 date, or a date-time that carries its UTC offset (and parses)?
pub(crate) fn is_aware_datetime(s: &str) -> bool {
    // Sent as given: no space around it (the columns' parser forgives one, a server may not).
    if s.trim() != s {
        return false;
    }
    if s.len() == 10 {
        return parse_date(s).is_some();
    }
    has_offset(s) && parse_datetime_us(s).is_some()
}

/// Whether the time part of a date-time ends in `Z` or a numeric offset.
fn has_offset(s: &str) -> bool {
    let Some(time) = s.get(11..) else { return false };
    time.ends_with(['Z', 'z']) || time.rfind(['+', '-']).is_some_and(|i| i >= 5)
}

/// The calendar's day 0 (1970-01-01) counted from 0001-01-01, as chrono counts.
const EPOCH_DAYS_FROM_CE: i64 = 719_163;

/// `YYYY-MM-DD` as days since the epoch. The shape is checked here (chrono alone would take
/// `2024-1-1` and signed years); the calendar (month lengths, leap years) is chrono's.
pub(crate) fn parse_date(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter().enumerate().all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shaped {
        return None;
    }
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|d| d.parse::<u32>().ok());
    let year = i32::try_from(n(0..4)?).ok()?;
    let date = chrono::NaiveDate::from_ymd_opt(year, n(5..7)?, n(8..10)?)?;
    Some(i64::from(chrono::Datelike::num_days_from_ce(&date)) - EPOCH_DAYS_FROM_CE)
}

/// An ISO 8601 datetime (`2024-05-01T12:30:00`, fractions, `Z` or `+HH:MM`; a space for the
/// `T`; no offset means UTC) as microseconds since the epoch, parsed by chrono's RFC 3339 parser.
/// The ISO forms RFC 3339 lacks (no seconds, no offset, a comma before the fraction, `+HH` and
/// `+HHMM` offsets) are rewritten into it first; a leap second (`:60`) is refused, as Python's
/// `datetime` refuses it.
pub(crate) fn parse_datetime_us(s: &str) -> Option<i64> {
    let s = s.trim();
    let days = parse_date(s.get(..10)?)?;
    if s.len() == 10 {
        return days.checked_mul(86_400_000_000);
    }
    Some(parse_datetime_time(s)?.timestamp_micros())
}

/// As [`parse_datetime_us`], keeping the offset given (a date alone is its midnight in UTC);
/// fractions finer than a microsecond are cut to it, as Python's `datetime` holds no more.
pub(crate) fn parse_datetime(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    let s = s.trim();
    parse_date(s.get(..10)?)?;
    if s.len() == 10 {
        let utc = chrono::DateTime::from_timestamp_micros(parse_datetime_us(s)?)?;
        return Some(utc.fixed_offset());
    }
    let parsed = parse_datetime_time(s)?;
    let micros = chrono::Timelike::nanosecond(&parsed) / 1_000 * 1_000;
    chrono::Timelike::with_nanosecond(&parsed, micros)
}

/// A date-time (its date already checked) through chrono's RFC 3339 parser, rewritten into
/// RFC 3339 first where it is another ISO form; a leap second is refused.
fn parse_datetime_time(s: &str) -> Option<chrono::DateTime<chrono::FixedOffset>> {
    let parsed = match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => t,
        Err(_) => chrono::DateTime::parse_from_rfc3339(&as_rfc3339(s)?).ok()?,
    };
    if chrono::Timelike::nanosecond(&parsed) >= 1_000_000_000 {
        return None;
    }
    Some(parsed)
}

/// `s` (its date checked by the caller; the rest is checked by chrono when it parses the
/// result) in RFC 3339's spelling, or `None` where no rewriting makes it one. Only the forms
/// RFC 3339 lacks come here, so a server that sends RFC 3339 pays no allocation.
fn as_rfc3339(s: &str) -> Option<String> {
    if !matches!(s.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let (date, time) = (s.get(..10)?, s.get(11..)?);
    // Where the offset starts: `Z`, or a sign after the `HH:MM`.
    let at = time.find(['Z', 'z']).or_else(|| time.get(5..)?.find(['+', '-']).map(|i| i + 5));
    let (clock, offset) = time.split_at(at.unwrap_or(time.len()));
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(date);
    out.push('T');
    // HH:MM, then :SS if given, then a fraction after '.' or ','.
    let hm = clock.get(..5)?;
    out.push_str(hm);
    let mut rest = &clock[5..];
    match rest.strip_prefix(':') {
        Some(r) => {
            out.push(':');
            out.push_str(r.get(..2)?);
            rest = &r[2..];
        }
        None => out.push_str(":00"),
    }
    if let Some(frac) = rest.strip_prefix([',', '.']) {
        out.push('.');
        out.push_str(frac);
    } else if !rest.is_empty() {
        return None;
    }
    match offset.len() {
        0 => out.push('Z'),
        // +HH, +HHMM, +HH:MM (and Z) after the sign.
        3 => {
            out.push_str(offset);
            out.push_str(":00");
        }
        5 => {
            out.push_str(offset.get(..3)?);
            out.push(':');
            out.push_str(offset.get(3..)?);
        }
        _ => out.push_str(offset),
    }
    Some(out)
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
        for bad in [
            "2026-01-01T10:00:00",
            "yesterday",
            "2026-1-1",
            "2026-01-01T10:00:00+2",
            // A shape alone was once enough: a date that does not exist, a time that is not one.
            "2026-02-30",
            "2026-01-01Tnoon+00:00",
            "2026-01-01T25:00:00Z",
            " 2026-01-01T10:00:00Z",
            "2026-01-01T10:00:00Z\n",
        ] {
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
            "2024-01-01X10:00:00",
            "2024-01-01T10:00:00.Z",
            "2024-01-01T10:00:00junk",
            "+2024-01-01T10:00:00Z",
            "2024-01-01T10:00:00€",
        ] {
            assert_eq!(parse_datetime_us(bad), None, "{bad}");
        }
    }

    #[test]
    fn datetimes_keep_their_offset() {
        let t = parse_datetime("2024-05-01T12:30:00.1234567+02:00");
        assert_eq!(t.map(|t| t.to_rfc3339()), Some("2024-05-01T12:30:00.123456+02:00".to_owned()));
        let t = parse_datetime("2024-05-01 12:30");
        assert_eq!(t.map(|t| t.to_rfc3339()), Some("2024-05-01T12:30:00+00:00".to_owned()));
        let t = parse_datetime("2024-05-01");
        assert_eq!(t.map(|t| t.to_rfc3339()), Some("2024-05-01T00:00:00+00:00".to_owned()));
        assert_eq!(parse_datetime("2024-05-01T23:59:60Z"), None);
        assert_eq!(parse_datetime("2024-13-01T00:00:00Z"), None);
        assert_eq!(parse_datetime("soon"), None);
    }

    #[test]
    fn the_iso_forms_rfc_3339_lacks_are_taken() {
        assert_eq!(parse_datetime_us("1970-01-01T00:01"), Some(60_000_000));
        assert_eq!(parse_datetime_us("1970-01-01t00:00:01,25z"), Some(1_250_000));
        assert_eq!(parse_datetime_us("1970-01-01 01:00+01"), Some(0));
        assert_eq!(parse_datetime_us("1970-01-01T00:00:00.1234567Z"), Some(123_456));
        assert_eq!(parse_datetime_us("  1970-01-02T00:00:00Z "), Some(86_400_000_000));
        assert_eq!(parse_date("1970-01-01"), Some(0));
        assert_eq!(parse_date("1969-12-31"), Some(-1));
        assert_eq!(parse_date("2000-02-29"), Some(11_016));
        assert_eq!(parse_date("1900-02-29"), None);
    }

    #[test]
    fn offsets_up_to_a_day_are_taken() {
        assert_eq!(parse_datetime_us("1970-01-01T00:00:00+23:59"), Some(-(23 * 3600 + 59 * 60) * 1_000_000));
        assert_eq!(parse_datetime_us("1970-01-01T00:00:00-0130"), Some(5400 * 1_000_000));
    }
}
