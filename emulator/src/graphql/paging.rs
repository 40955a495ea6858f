//! Relay paging exactly as graphene-django's `DjangoConnectionField` over graphql-relay's
//! `connection_from_array_slice`: array cursors, `offset`, the 100-record cap and its errors,
//! and the Relay quirk that `hasPreviousPage` is only true when paging with `last`.

use async_graphql::dynamic::ObjectAccessor;
use async_graphql::Value;
use base64::Engine;

use super::util::obj;

/// graphene-django's default `RELAY_CONNECTION_MAX_LIMIT`.
pub const MAX_LIMIT: i64 = 100;

const PREFIX: &str = "arrayconnection:";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageArgs {
    pub first: Option<i64>,
    pub last: Option<i64>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub offset: Option<i64>,
}

impl PageArgs {
    pub fn from_args(args: &ObjectAccessor<'_>) -> Result<Self, String> {
        let int = |name: &str| -> Result<Option<i64>, String> {
            match args.get(name) {
                Some(v) if !v.is_null() => v.i64().map(Some).map_err(|e| e.message),
                _ => Ok(None),
            }
        };
        let string = |name: &str| -> Result<Option<String>, String> {
            match args.get(name) {
                Some(v) if !v.is_null() => v.string().map(|s| Some(s.to_owned())).map_err(|e| e.message),
                _ => Ok(None),
            }
        };
        Ok(Self {
            first: int("first")?,
            last: int("last")?,
            before: string("before")?,
            after: string("after")?,
            offset: int("offset")?,
        })
    }
}

/// The slice of the list a page covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: usize,
    pub end: usize,
    pub has_next: bool,
    pub has_previous: bool,
}

impl Window {
    pub fn len(&self) -> usize {
        self.end.saturating_sub(self.start)
    }

    pub fn page_info(&self) -> Value {
        let (start, end) = if self.len() == 0 {
            (Value::Null, Value::Null)
        } else {
            (Value::String(cursor(self.start)), Value::String(cursor(self.end - 1)))
        };
        obj([
            ("hasNextPage", Value::Boolean(self.has_next)),
            ("hasPreviousPage", Value::Boolean(self.has_previous)),
            ("startCursor", start),
            ("endCursor", end),
        ])
    }
}

pub fn cursor(index: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{PREFIX}{index}"))
}

fn cursor_to_offset(c: &str) -> Option<i64> {
    let bytes = base64::engine::general_purpose::STANDARD.decode(c.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    text.strip_prefix(PREFIX)?.trim().parse().ok()
}

fn offset_with_default(c: Option<&str>, default: i64) -> i64 {
    c.and_then(cursor_to_offset).unwrap_or(default)
}

/// Computes the page of a list of `len` items for the connection field `field`.
pub fn window(args: &PageArgs, len: usize, field: &str) -> Result<Window, String> {
    let len_i = len as i64;
    let mut first = args.first;
    let last = args.last;
    if let Some(f) = first.filter(|f| *f > MAX_LIMIT) {
        return Err(format!(
            "Requesting {f} records on the `{field}` connection exceeds the `first` limit of {MAX_LIMIT} records."
        ));
    }
    if let Some(l) = last.filter(|l| *l > MAX_LIMIT) {
        return Err(format!(
            "Requesting {l} records on the `{field}` connection exceeds the `last` limit of {MAX_LIMIT} records."
        ));
    }
    if args.offset.is_some() && args.before.is_some() {
        return Err(format!(
            "You can't provide a `before` value at the same time as an `offset` value to properly paginate the `{field}` connection."
        ));
    }
    let mut after = args.after.clone().filter(|a| !a.is_empty());
    let before = args.before.clone().filter(|b| !b.is_empty());
    if let Some(offset) = args.offset.filter(|o| *o != 0) {
        if offset < 0 {
            return Err(format!(
                "Argument 'offset' must be a non-negative integer on the `{field}` connection."
            ));
        }
        let mut o = offset;
        if let Some(a) = &after {
            let base = cursor_to_offset(a).ok_or_else(|| format!("Invalid cursor: {a:?}"))?;
            o += base + 1;
        }
        after = Some(cursor((o - 1).max(0) as usize));
        if o == 0 {
            after = None;
        }
    }
    let after_offset = offset_with_default(after.as_deref(), -1);
    let slice_start = (after_offset + 1).clamp(0, len_i);
    if first.is_none() && last.is_none() {
        first = Some(MAX_LIMIT);
    }
    let mut start = slice_start;
    let mut end = len_i;
    if (0..len_i).contains(&after_offset) {
        start = start.max(after_offset + 1);
    }
    let before_offset = offset_with_default(before.as_deref(), end);
    if (0..len_i).contains(&before_offset) {
        end = end.min(before_offset);
    }
    if let Some(f) = first {
        if f < 0 {
            return Err("Argument 'first' must be a non-negative integer.".into());
        }
        end = end.min(start + f);
    }
    if let Some(l) = last {
        if l < 0 {
            return Err("Argument 'last' must be a non-negative integer.".into());
        }
        start = start.max(end - l);
    }
    let lower = if after.is_some() { after_offset + 1 } else { 0 };
    let upper = if before.is_some() { before_offset } else { len_i };
    let has_previous = last.is_some() && start > lower;
    let has_next = first.is_some() && end < upper;
    let start_u = start.clamp(0, len_i) as usize;
    let end_u = (end.clamp(0, len_i) as usize).max(start_u);
    Ok(Window { start: start_u, end: end_u, has_next, has_previous })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(first: Option<i64>, after: Option<usize>) -> PageArgs {
        PageArgs { first, after: after.map(cursor), ..Default::default() }
    }

    #[test]
    fn default_first_is_the_cap() {
        let w = window(&PageArgs::default(), 250, "findings_view").unwrap();
        assert_eq!((w.start, w.end, w.has_next, w.has_previous), (0, 100, true, false));
        let w = window(&PageArgs::default(), 30, "x").unwrap();
        assert_eq!((w.start, w.end, w.has_next), (0, 30, false));
    }

    #[test]
    fn cap_errors_match_graphene_django() {
        let e = window(&args(Some(101), None), 10, "findings_view").unwrap_err();
        assert_eq!(
            e,
            "Requesting 101 records on the `findings_view` connection exceeds the `first` limit of 100 records."
        );
        let e = window(&PageArgs { last: Some(500), ..Default::default() }, 10, "scoring_rules").unwrap_err();
        assert!(e.contains("`last` limit of 100"));
        let e = window(&PageArgs { offset: Some(3), before: Some(cursor(5)), ..Default::default() }, 10, "f")
            .unwrap_err();
        assert!(e.contains("`before` value at the same time as an `offset`"));
        assert!(window(&args(Some(-1), None), 10, "f").is_err());
    }

    #[test]
    fn cursors_step_forward() {
        let w = window(&args(Some(10), Some(9)), 25, "f").unwrap();
        assert_eq!((w.start, w.end, w.has_next, w.has_previous), (10, 20, true, false));
        let w = window(&args(Some(10), Some(19)), 25, "f").unwrap();
        assert_eq!((w.start, w.end, w.has_next), (20, 25, false));
        let pi = w.page_info();
        let Value::Object(m) = pi else { panic!() };
        assert_eq!(m.get("endCursor"), Some(&Value::String(cursor(24))));
        // Past the end: empty page, null cursors.
        let w = window(&args(Some(10), Some(30)), 25, "f").unwrap();
        assert_eq!(w.len(), 0);
        assert_eq!(cursor(0), "YXJyYXljb25uZWN0aW9uOjA=");
    }

    #[test]
    fn offset_counts_past_after() {
        let w =
            window(&PageArgs { first: Some(5), offset: Some(10), ..Default::default() }, 100, "f").unwrap();
        assert_eq!((w.start, w.end), (10, 15));
        let w = window(
            &PageArgs { first: Some(5), offset: Some(10), after: Some(cursor(4)), ..Default::default() },
            100,
            "f",
        )
        .unwrap();
        assert_eq!((w.start, w.end), (15, 20));
        let w =
            window(&PageArgs { offset: Some(0), first: Some(3), ..Default::default() }, 100, "f").unwrap();
        assert_eq!((w.start, w.end), (0, 3));
    }

    #[test]
    fn last_and_before_page_backwards() {
        let w = window(&PageArgs { last: Some(5), ..Default::default() }, 20, "f").unwrap();
        assert_eq!((w.start, w.end, w.has_previous, w.has_next), (15, 20, true, false));
        let w = window(&PageArgs { last: Some(5), before: Some(cursor(15)), ..Default::default() }, 20, "f")
            .unwrap();
        assert_eq!((w.start, w.end, w.has_previous), (10, 15, true));
        let w = window(&PageArgs { first: Some(3), before: Some(cursor(2)), ..Default::default() }, 20, "f")
            .unwrap();
        assert_eq!((w.start, w.end, w.has_next), (0, 2, false));
    }
}
