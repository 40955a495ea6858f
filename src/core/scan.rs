//! Reading what the client needs from a response body without building it: whether it carries
//! GraphQL `errors`, and a connection's `pageInfo` and item count. One pass over the bytes with
//! serde's `IgnoredAny` for everything else, so the I/O thread can send the next page's request
//! before anyone has turned this page into objects (that happens once, in the caller's format).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use super::error::{Error, Result};
use super::graphql::decode_response;

/// The scalar visits of a visitor that looks only into objects and lists: JSON null gives
/// `$null`, any other scalar `$other`.
macro_rules! scalars {
    ($ty:ty, null => $null:expr, other => $other:expr) => {
        fn visit_unit<E: de::Error>(self) -> std::result::Result<$ty, E> {
            Ok($null)
        }
        fn visit_none<E: de::Error>(self) -> std::result::Result<$ty, E> {
            Ok($null)
        }
        fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<$ty, E> {
            Ok($other)
        }
        fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<$ty, E> {
            Ok($other)
        }
        fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<$ty, E> {
            Ok($other)
        }
        fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<$ty, E> {
            Ok($other)
        }
        fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<$ty, E> {
            Ok($other)
        }
    };
}

/// What a page answer says about the walk: its pageInfo and how many items it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ConnectionMeta {
    pub has_next_page: Option<bool>,
    pub has_previous_page: Option<bool>,
    pub start_cursor: Option<String>,
    pub end_cursor: Option<String>,
    /// `pageInfo` was selected.
    pub page_info: bool,
    /// Items under `edges` (or `nodes` when the query selects that list instead).
    pub items: usize,
    /// Whether `edges` or `nodes` was there at all.
    pub has_list: bool,
    /// A hash of each item's identity, in order: an edge's `cursor`, else its node's `id` (the
    /// walker's guard against a server that hands out the same items again). Items with
    /// neither are not in it.
    pub edge_cursors: Vec<u64>,
    /// The connection's `totalCount` / `total_count`, when selected.
    pub total: Option<u64>,
}

pub(crate) fn hash_cursor(cursor: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    cursor.hash(&mut h);
    h.finish()
}

/// Where the connection sits in `data`, and what went wrong finding it.
#[derive(Debug)]
enum Found {
    Conn(ConnectionMeta),
    Missing,
    Null,
    NotObject,
    Several,
    BadList(&'static str),
}

#[cfg(test)]
/// Fails on GraphQL `errors` (with the partial data, decoded the slow way on this rare path);
/// otherwise says nothing: the caller decodes `data` itself.
pub(crate) fn check_envelope(body: &[u8]) -> Result<()> {
    #[derive(Deserialize)]
    struct Envelope {
        #[serde(default)]
        errors: Option<Vec<IgnoredAny>>,
    }
    let env: Envelope = serde_json::from_slice(body).map_err(not_graphql)?;
    match env.errors {
        Some(e) if !e.is_empty() => decode_response(body).map(|_| ()),
        _ => Ok(()),
    }
}

fn not_graphql(e: serde_json::Error) -> Error {
    Error::Transport(format!("the response body is not the JSON a GraphQL server sends ({e})"))
}

/// Scans a page answer: GraphQL errors fail as usual; the connection at `path` in `data` (or the
/// only top-level field when `path` is `None`) is found and its pageInfo read.
pub(crate) fn scan_page(body: &[u8], path: Option<&[String]>) -> Result<ConnectionMeta> {
    let label = path.map_or_else(|| "the connection".to_string(), |p| format!("{:?}", p.join(".")));
    let mut de = serde_json::Deserializer::from_slice(body);
    let (found, errors) = EnvelopeSeed { path }.deserialize(&mut de).map_err(not_graphql)?;
    de.end().map_err(not_graphql)?;
    if errors {
        decode_response(body)?;
    }
    match found {
        Some(Found::Conn(meta)) => Ok(meta),
        Some(Found::Missing) | None => {
            Err(Error::pagination(format!("{label} was not found in the response data")))
        }
        Some(Found::Null) => Err(Error::pagination(format!("{label} is null in the response"))),
        Some(Found::NotObject) => Err(Error::pagination(format!("{label} is not a connection object"))),
        Some(Found::Several) => Err(Error::validation(
            "the query selects several top-level fields: pass path= to name the connection",
        )),
        Some(Found::BadList(which)) => Err(Error::pagination(format!("{label}.{which} is not a list"))),
    }
}

struct EnvelopeSeed<'p> {
    path: Option<&'p [String]>,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed<'_> {
    type Value = (Option<Found>, bool);
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed<'_> {
    type Value = (Option<Found>, bool);
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a GraphQL response object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Self::Value, A::Error> {
        let (mut found, mut errors) = (None, false);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "data" => found = Some(map.next_value_seed(DataSeed { path: self.path })?),
                "errors" => {
                    errors = map.next_value::<Option<Vec<IgnoredAny>>>()?.is_some_and(|e| !e.is_empty())
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((found, errors))
    }
}

/// A map key, borrowed from the body unless it has escapes.
pub(crate) struct Key<'de>(std::borrow::Cow<'de, str>);

impl Key<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Key<'de>, E> {
                Ok(Key(std::borrow::Cow::Owned(v.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}

/// `data`, or one object on the way down `path` to the connection.
struct DataSeed<'p> {
    path: Option<&'p [String]>,
}

impl<'de> DeserializeSeed<'de> for DataSeed<'_> {
    type Value = Found;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for DataSeed<'_> {
    type Value = Found;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }
    scalars!(Found, null => Found::Missing, other => Found::Missing);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Found, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::Missing)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Found, A::Error> {
        let mut found = None;
        let mut fields = 0usize;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            fields += 1;
            let (wanted, rest) = match self.path {
                Some([first, rest @ ..]) => (key.as_str() == first, Some(rest)),
                Some([]) => (false, None),
                None => (fields == 1, None),
            };
            if !wanted {
                map.next_value::<IgnoredAny>()?;
                continue;
            }
            found = Some(match rest {
                Some(rest) if !rest.is_empty() => map.next_value_seed(DataSeed { path: Some(rest) })?,
                _ => map.next_value_seed(ConnSeed)?,
            });
        }
        if self.path.is_none() && fields > 1 {
            return Ok(Found::Several);
        }
        Ok(found.unwrap_or(Found::Missing))
    }
}

/// The connection object: reads pageInfo, counts edges or nodes, skips the rest.
struct ConnSeed;

impl<'de> DeserializeSeed<'de> for ConnSeed {
    type Value = Found;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Found, D::Error> {
        d.deserialize_any(self)
    }
}

/// The length of a list (null counts as empty); anything else is `None`. With `cursors`, each
/// item's identity hash is collected too (`edges`: the cursor, else the node's id; `nodes`:
/// the id).
struct Count<'a> {
    cursors: Option<&'a mut Vec<u64>>,
    edges: bool,
}

impl<'de> DeserializeSeed<'de> for Count<'_> {
    type Value = Option<usize>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Option<usize>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Count<'_> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list")
    }
    scalars!(Option<usize>, null => Some(0), other => None);
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Option<usize>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Option<usize>, A::Error> {
        let mut n = 0usize;
        match self.cursors {
            Some(cursors) => {
                while let Some(id) = seq.next_element_seed(Identity { edge: self.edges })? {
                    n = n.saturating_add(1);
                    cursors.extend(id);
                }
            }
            None => {
                while seq.next_element::<IgnoredAny>()?.is_some() {
                    n = n.saturating_add(1);
                }
            }
        }
        Ok(Some(n))
    }
}

/// One item's identity hash: an edge's `cursor`, else its node's `id`; a node's `id`.
struct Identity {
    edge: bool,
}

impl<'de> DeserializeSeed<'de> for Identity {
    type Value = Option<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Option<u64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Identity {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an edge or a node")
    }
    scalars!(Option<u64>, null => None, other => None);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Option<u64>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Option<u64>, A::Error> {
        let (mut cursor, mut id) = (None, None);
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "cursor" if self.edge => cursor = map.next_value_seed(CursorText)?,
                "node" if self.edge => id = map.next_value_seed(Identity { edge: false })?,
                // A node's id, marked apart from cursors (an id and a cursor may be equal text).
                "id" if !self.edge => {
                    id = map.next_value_seed(CursorText)?.map(|h| h ^ 0x9e37_79b9_7f4a_7c15)
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(cursor.or(id))
    }
}

/// A cursor's hash if it is a string; any other value is skipped.
struct CursorText;

impl<'de> DeserializeSeed<'de> for CursorText {
    type Value = Option<u64>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<Option<u64>, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for CursorText {
    type Value = Option<u64>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a cursor")
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_none<E: de::Error>(self) -> std::result::Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> std::result::Result<Option<u64>, E> {
        // An integer id (a cursor is a string).
        Ok(Some(hash_cursor(&v.to_string())))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<Option<u64>, E> {
        Ok(None)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> std::result::Result<Option<u64>, E> {
        Ok(Some(hash_cursor(v)))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Option<u64>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(None)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Option<u64>, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(None)
    }
}

impl<'de> Visitor<'de> for ConnSeed {
    type Value = Found;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a connection")
    }
    scalars!(Found, null => Found::Null, other => Found::NotObject);
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Found, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Found::NotObject)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Found, A::Error> {
        let mut meta = ConnectionMeta::default();
        // Some(None): there, but not a list.
        let mut edges: Option<Option<usize>> = None;
        let mut nodes: Option<Option<usize>> = None;
        while let Some(key) = map.next_key::<Key<'de>>()? {
            match key.as_str() {
                "pageInfo" => {
                    // Read leniently (a small object): a field of an unexpected type counts as
                    // absent, as it would in a dict, instead of failing the whole answer.
                    if let Some(pi) =
                        map.next_value::<Option<serde_json::Map<String, serde_json::Value>>>()?
                    {
                        let text = |k: &str| pi.get(k).and_then(|v| v.as_str()).map(str::to_string);
                        meta.page_info = true;
                        meta.has_next_page = pi.get("hasNextPage").and_then(serde_json::Value::as_bool);
                        meta.has_previous_page =
                            pi.get("hasPreviousPage").and_then(serde_json::Value::as_bool);
                        meta.start_cursor = text("startCursor");
                        meta.end_cursor = text("endCursor");
                    }
                }
                "edges" => {
                    meta.edge_cursors.clear();
                    edges = Some(
                        map.next_value_seed(Count { cursors: Some(&mut meta.edge_cursors), edges: true })?,
                    );
                }
                "nodes" => {
                    let mut ids = Vec::new();
                    nodes = Some(map.next_value_seed(Count { cursors: Some(&mut ids), edges: false })?);
                    if edges.is_none() {
                        meta.edge_cursors = ids;
                    }
                }
                "totalCount" | "total_count" => {
                    meta.total = map.next_value::<Option<serde_json::Value>>()?.and_then(|v| v.as_u64());
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // The walker hands out `edges` when both are selected: only the list it uses must be one.
        let (list, which) = match (edges, nodes) {
            (Some(e), _) => (Some(e), "edges"),
            (None, n) => (n, "nodes"),
        };
        match list {
            Some(None) => Ok(Found::BadList(which)),
            Some(Some(n)) => {
                meta.has_list = true;
                meta.items = n;
                Ok(Found::Conn(meta))
            }
            None => Ok(Found::Conn(meta)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn body(v: serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn path(p: &str) -> Vec<String> {
        p.split('.').map(str::to_string).collect()
    }

    #[test]
    fn reads_page_info_and_counts_edges() {
        let b = body(json!({"data": {"items": {
            "edges": [{"node": {"id": 1, "deep": {"x": [1, {"y": "}"}]}}}, {"node": null}],
            "pageInfo": {"hasNextPage": true, "endCursor": "E", "startCursor": null}
        }}}));
        let m = scan_page(&b, None).unwrap();
        assert_eq!(m.items, 2);
        assert!(m.has_list && m.page_info);
        assert_eq!(m.has_next_page, Some(true));
        assert_eq!(m.end_cursor.as_deref(), Some("E"));
        assert_eq!(m.start_cursor, None);
        let m = scan_page(&b, Some(&path("items"))).unwrap();
        assert_eq!(m.items, 2);
    }

    #[test]
    fn follows_a_path_and_skips_other_fields() {
        let b = body(json!({"data": {
            "other": {"edges": [1, 2, 3]},
            "a": {"b": {"nodes": [1, 2, 3], "pageInfo": {"hasNextPage": false}}}
        }}));
        let m = scan_page(&b, Some(&path("a.b"))).unwrap();
        assert_eq!((m.items, m.has_next_page), (3, Some(false)));
        let e = scan_page(&b, Some(&path("a.c"))).unwrap_err();
        assert!(matches!(e, Error::Pagination { message: ref s, .. } if s.contains("not found")), "{e}");
        assert!(scan_page(&b, None).unwrap_err().to_string().contains("path="));
    }

    #[test]
    fn reports_bad_shapes_and_errors() {
        let e = scan_page(&body(json!({"data": {"items": null}})), None).unwrap_err();
        assert!(e.to_string().contains("null"), "{e}");
        let e = scan_page(&body(json!({"data": {"items": 3}})), None).unwrap_err();
        assert!(e.to_string().contains("not a connection"), "{e}");
        let e = scan_page(&body(json!({"data": {"items": {"edges": 3}}})), None).unwrap_err();
        assert!(e.to_string().contains("edges is not a list"), "{e}");
        let e = scan_page(&body(json!({"data": null, "errors": [{"message": "no"}]})), None).unwrap_err();
        assert!(matches!(e, Error::GraphQL { .. }), "{e}");
        let e = scan_page(&body(json!({"data": null})), None).unwrap_err();
        assert!(e.to_string().contains("not found"), "{e}");
        assert!(matches!(scan_page(b"{\"data\": {", None), Err(Error::Transport(_))));
        assert!(matches!(scan_page(b"{} trailing", None), Err(Error::Transport(_))));
        let m = scan_page(&body(json!({"data": {"items": {"edges": null}}})), None).unwrap();
        assert!(m.has_list && !m.page_info && m.items == 0);
    }

    #[test]
    fn reads_page_info_leniently_and_checks_only_the_list_used() {
        let b = body(json!({"data": {"items": {
            "edges": [1], "nodes": 7,
            "pageInfo": {"hasNextPage": "yes", "endCursor": 5, "startCursor": "S", "hasNextPage ": 1}
        }}}));
        let m = scan_page(&b, None).unwrap();
        assert_eq!(
            (m.items, m.has_next_page, m.end_cursor, m.start_cursor.as_deref()),
            (1, None, None, Some("S"))
        );
        let b = body(json!({"data": {"items": {"nodes": {"a": 1}, "pageInfo": {"hasNextPage": false}}}}));
        assert!(scan_page(&b, None).unwrap_err().to_string().contains("nodes is not a list"));
    }

    #[test]
    fn edge_cursors_are_hashed_leniently() {
        let b = body(json!({"data": {"items": {
            "edges": [{"cursor": "a", "node": {}}, {"cursor": 5}, null, 7, {"node": {"cursor": "x"}}, {"cursor": "b"}],
            "pageInfo": {"hasNextPage": false}
        }}}));
        let m = scan_page(&b, None).unwrap();
        assert_eq!(m.items, 6);
        assert_eq!(m.edge_cursors.len(), 3);
        assert_eq!((m.edge_cursors[0], m.edge_cursors[2]), (hash_cursor("a"), hash_cursor("b")));
        // No cursor: the node's id stands for the item; `nodes` lists too.
        let b = body(json!({"data": {"items": {"nodes": [{"id": 1}, {"id": "x"}, {"t": 1}, null],
            "pageInfo": {"hasNextPage": false}, "total_count": 4}}}));
        let m = scan_page(&b, None).unwrap();
        assert_eq!((m.items, m.edge_cursors.len(), m.total), (4, 2, Some(4)));
    }

    /// Arbitrary bytes, and mutations of a real page, never panic the scanner or the decoder:
    /// each answer is a value or an error.
    #[test]
    fn fuzz_scan_and_decode_never_panic() {
        let page = body(json!({"data": {"items": {
            "edges": [{"cursor": "c1", "node": {"id": 1, "t": "x\u{e9}", "n": [1.5, -2, null, true]}}],
            "pageInfo": {"hasNextPage": true, "endCursor": "c1"}
        }}, "errors": [{"message": "m"}]}));
        let alphabet = br#"{}[]",:0123456789.eE+-truefalsnul \/u"#;
        let mut rng = fastrand::Rng::with_seed(7);
        let paths = [None, Some(path("items")), Some(path("items.edges")), Some(path("x.y"))];
        for round in 0..20_000 {
            let input: Vec<u8> = match round % 3 {
                0 => (0..rng.usize(0..64)).map(|_| rng.u8(..)).collect(),
                1 => (0..rng.usize(0..64)).map(|_| alphabet[rng.usize(..alphabet.len())]).collect(),
                _ => {
                    let mut b = page.clone();
                    for _ in 0..rng.usize(1..4) {
                        let i = rng.usize(..b.len());
                        match rng.u8(0..3) {
                            0 => b[i] = alphabet[rng.usize(..alphabet.len())],
                            1 => b.truncate(i),
                            _ => b.insert(i, alphabet[rng.usize(..alphabet.len())]),
                        }
                        if b.is_empty() {
                            break;
                        }
                    }
                    b
                }
            };
            let p = paths[round % paths.len()].as_deref();
            let _ = scan_page(&input, p);
            let _ = check_envelope(&input);
            let _ = decode_response(&input);
        }
        // Deep nesting is refused by the parser's recursion limit, not by the stack.
        let deep = format!("{{\"data\":{}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(scan_page(deep.as_bytes(), None).is_err());
        assert!(decode_response(deep.as_bytes()).is_err());
    }

    #[test]
    fn envelope_check() {
        assert!(check_envelope(br#"{"data":{"a":1}}"#).is_ok());
        assert!(check_envelope(br#"{"data":{"a":1},"errors":[]}"#).is_ok());
        assert!(matches!(
            check_envelope(br#"{"data":{"a":null},"errors":[{"message":"x"}]}"#),
            Err(Error::GraphQL { data: Some(_), .. })
        ));
        assert!(matches!(check_envelope(b"<html>"), Err(Error::Transport(_))));
    }
}
