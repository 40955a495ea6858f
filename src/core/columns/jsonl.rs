//! One page's nodes as JSON lines, kept exactly as the server wrote them.

use std::sync::OnceLock;

use crate::core::error::{Error, Result};
use crate::core::paging::RawPage;

/// One page's nodes as JSON lines, as the server sent them: the raw text of each node with the
/// spacing between tokens taken out, so numbers (an integer beyond 64 bits too) and strings are
/// kept exactly. A null node is `null`.
pub(crate) fn page_jsonl(page: &RawPage) -> Result<Vec<u8>> {
    use std::borrow::Cow;
    use std::collections::HashMap;

    use serde_json::value::RawValue;

    type Object<'a> = HashMap<Cow<'a, str>, &'a RawValue>;
    let bad = |e: serde_json::Error| {
        Error::Transport(format!("the response body is not the JSON a GraphQL server sends ({e})"))
    };
    let vanished = || Error::pagination("the connection vanished from the page");
    let text = std::str::from_utf8(&page.body)
        .map_err(|_| Error::Transport("the response body is not UTF-8 text".into()))?;
    let envelope: Object<'_> = serde_json::from_str(text).map_err(bad)?;
    let mut conn: &RawValue = envelope.get("data").copied().ok_or_else(vanished)?;
    match page.path.as_deref() {
        Some(path) => {
            for key in path {
                let obj: Object<'_> = serde_json::from_str(conn.get()).map_err(bad)?;
                conn = obj.get(key.as_str()).copied().ok_or_else(vanished)?;
            }
        }
        None => {
            let obj: Object<'_> = serde_json::from_str(conn.get()).map_err(bad)?;
            conn = obj.values().next().copied().ok_or_else(vanished)?;
        }
    }
    let conn: Object<'_> = serde_json::from_str(conn.get()).map_err(bad)?;
    let nodes: Vec<&RawValue> = match (conn.get("edges"), conn.get("nodes")) {
        (Some(edges), _) => {
            let edges: Option<Vec<Option<Object<'_>>>> = serde_json::from_str(edges.get()).map_err(bad)?;
            let none: &RawValue = null();
            edges
                .unwrap_or_default()
                .into_iter()
                .map(|e| e.and_then(|e| e.get("node").copied()).unwrap_or(none))
                .collect()
        }
        (None, Some(nodes)) => {
            let nodes: Option<Vec<&RawValue>> = serde_json::from_str(nodes.get()).map_err(bad)?;
            nodes.unwrap_or_default()
        }
        (None, None) => Vec::new(),
    };
    let mut out = Vec::with_capacity(page.body.len());
    for node in nodes.into_iter().take(page.take) {
        minify_into(node.get(), &mut out);
        out.push(b'\n');
    }
    Ok(out)
}

/// The JSON `null`, as a raw value.
pub(super) fn null() -> &'static serde_json::value::RawValue {
    static NULL: OnceLock<Box<serde_json::value::RawValue>> = OnceLock::new();
    NULL.get_or_init(|| serde_json::value::RawValue::from_string("null".into()).unwrap_or_default())
}

/// JSON text without the whitespace between its tokens (strings untouched).
pub(super) fn minify_into(json: &str, out: &mut Vec<u8>) {
    let (mut in_string, mut escaped) = (false, false);
    for &b in json.as_bytes() {
        if in_string {
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !b.is_ascii_whitespace() {
            out.push(b);
            in_string = b == b'"';
        }
    }
}
