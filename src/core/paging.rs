//! The Relay connection walker: cursors, `hasNextPage`, limits, and a guard against servers that
//! hand back a cursor twice (which would otherwise loop for ever). The stream prefetches the next
//! page while the caller works on the current one.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::graphql::{prepare, select_operation, PreparedRequest};
use super::transport::Transport;

/// The server's page-size cap (graphene-django's RELAY_CONNECTION_MAX_LIMIT).
pub const MAX_PAGE_SIZE: u32 = 100;

/// What to walk.
#[derive(Clone, Debug)]
pub struct PageSpec {
    pub query: String,
    pub variables: Map<String, Value>,
    pub operation_name: Option<String>,
    /// Dotted path to the connection in `data`; `None`: the only top-level field.
    pub path: Option<String>,
    pub page_size: u32,
    pub limit: Option<u64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageInfo {
    pub has_next_page: bool,
    pub has_previous_page: bool,
    pub start_cursor: Option<String>,
    pub end_cursor: Option<String>,
}

/// One page: its nodes (after the limit is applied) and the server's pageInfo.
#[derive(Clone, Debug)]
pub struct Page {
    pub nodes: Vec<Value>,
    /// Each node's edge cursor, when the query selects `edges { cursor }` (else empty).
    pub cursors: Vec<Option<String>>,
    pub info: PageInfo,
}

/// The pure stepping logic: which variables to send next and what a page answer means.
#[derive(Debug)]
pub struct Walker {
    spec: PageSpec,
    path: Option<Vec<String>>,
    after: Option<String>,
    seen: HashSet<String>,
    yielded: u64,
    done: bool,
}

impl Walker {
    pub fn new(mut spec: PageSpec) -> Result<Self> {
        if spec.page_size == 0 || spec.page_size > MAX_PAGE_SIZE {
            return Err(Error::validation(format!(
                "page_size must be between 1 and {MAX_PAGE_SIZE} (the server's cap per page), got {}",
                spec.page_size
            )));
        }
        let op = select_operation(&spec.query, spec.operation_name.as_deref())?;
        for var in ["first", "after"] {
            if !op.variables.iter().any(|(n, _)| n == var) {
                return Err(Error::validation(format!(
                    "a paged query must declare ${var} (e.g. `query Q($first: Int, $after: String)`) and pass it \
                     to the connection"
                )));
            }
        }
        if spec.variables.contains_key("first") {
            return Err(Error::validation("pass page_size= instead of a `first` variable"));
        }
        let after = match spec.variables.remove("after") {
            Some(Value::String(s)) => Some(s),
            Some(Value::Null) | None => None,
            Some(_) => return Err(Error::validation("variable `after` must be a cursor string")),
        };
        let path = spec
            .path
            .as_deref()
            .map(|p| p.split('.').filter(|s| !s.is_empty()).map(str::to_string).collect::<Vec<_>>());
        if path.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::validation("path must name the connection, e.g. \"findings_view\""));
        }
        let done = spec.limit == Some(0);
        Ok(Self { spec, path, after, seen: HashSet::new(), yielded: 0, done })
    }

    /// The end cursor of the last page accepted: resume with `after=`.
    pub fn cursor(&self) -> Option<&str> {
        self.after.as_deref()
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The next page's request, or `None` when the walk is over.
    pub fn next_request(&self) -> Option<Result<PreparedRequest>> {
        if self.done {
            return None;
        }
        let remaining = self.spec.limit.map(|l| l.saturating_sub(self.yielded));
        let first = match remaining {
            Some(r) => u64::from(self.spec.page_size).min(r),
            None => u64::from(self.spec.page_size),
        };
        let mut vars = self.spec.variables.clone();
        vars.insert("first".into(), Value::from(first));
        vars.insert("after".into(), self.after.clone().map_or(Value::Null, Value::String));
        Some(prepare(&self.spec.query, Some(&vars), self.spec.operation_name.as_deref()))
    }

    fn connection<'a>(&self, data: &'a Value) -> Result<(&'a Map<String, Value>, String)> {
        let (mut node, label) = match &self.path {
            Some(p) => {
                let mut cur = data;
                for key in p {
                    cur = cur.get(key).ok_or_else(|| {
                        Error::Pagination(format!("path {:?} not found in the response data", p.join(".")))
                    })?;
                }
                (cur, p.join("."))
            }
            None => match data.as_object() {
                Some(m) if m.len() == 1 => {
                    let (k, v) = m.iter().next().ok_or_else(|| Error::Pagination("empty data".into()))?;
                    (v, k.clone())
                }
                _ => {
                    return Err(Error::validation(
                        "the query selects several top-level fields: pass path= to name the connection",
                    ))
                }
            },
        };
        if node.is_null() {
            node = &Value::Null;
            return Err(Error::Pagination(format!("connection {label:?} is null in the response ({node})")));
        }
        let obj = node
            .as_object()
            .ok_or_else(|| Error::Pagination(format!("{label:?} is not a connection object")))?;
        Ok((obj, label))
    }

    /// Takes one page answer: extracts its nodes, advances the cursor and checks for loops.
    pub fn accept(&mut self, mut data: Value) -> Result<Page> {
        let (conn, label) = self.connection(&data)?;
        let pi = conn.get("pageInfo").and_then(Value::as_object).ok_or_else(|| {
            Error::Pagination(format!(
                "connection {label:?} has no pageInfo: select pageInfo {{ hasNextPage endCursor }}"
            ))
        })?;
        let text = |k: &str| pi.get(k).and_then(Value::as_str).map(str::to_string);
        let info = PageInfo {
            has_next_page: pi.get("hasNextPage").and_then(Value::as_bool).ok_or_else(|| {
                Error::Pagination(format!(
                    "connection {label:?}: select pageInfo {{ hasNextPage endCursor }}"
                ))
            })?,
            has_previous_page: pi.get("hasPreviousPage").and_then(Value::as_bool).unwrap_or(false),
            start_cursor: text("startCursor"),
            end_cursor: text("endCursor"),
        };
        let has_edges = conn.contains_key("edges");
        let has_nodes = conn.contains_key("nodes");
        if !has_edges && !has_nodes {
            return Err(Error::Pagination(format!(
                "connection {label:?}: select edges {{ node {{ ... }} }}"
            )));
        }
        // Take the nodes out of the tree instead of cloning them.
        let conn_mut = match &self.path {
            Some(p) => p.iter().try_fold(&mut data, |cur, k| cur.get_mut(k)),
            None => data.as_object_mut().and_then(|m| m.values_mut().next()),
        }
        .and_then(Value::as_object_mut)
        .ok_or_else(|| Error::Pagination("connection vanished".into()))?;
        let mut cursors: Vec<Option<String>> = Vec::new();
        let mut nodes: Vec<Value> = if has_edges {
            match conn_mut.remove("edges") {
                Some(Value::Array(edges)) => {
                    let mut nodes = Vec::with_capacity(edges.len());
                    for e in edges {
                        match e {
                            Value::Object(mut m) => {
                                if let Some(Value::String(c)) = m.remove("cursor") {
                                    cursors.resize(nodes.len(), None);
                                    cursors.push(Some(c));
                                }
                                nodes.push(m.remove("node").unwrap_or(Value::Null));
                            }
                            _ => nodes.push(Value::Null),
                        }
                    }
                    if !cursors.is_empty() {
                        cursors.resize(nodes.len(), None);
                    }
                    nodes
                }
                Some(Value::Null) | None => Vec::new(),
                Some(_) => return Err(Error::Pagination(format!("{label:?}.edges is not a list"))),
            }
        } else {
            match conn_mut.remove("nodes") {
                Some(Value::Array(n)) => n,
                _ => Vec::new(),
            }
        };
        if let Some(limit) = self.spec.limit {
            let room = usize::try_from(limit.saturating_sub(self.yielded)).unwrap_or(usize::MAX);
            nodes.truncate(room);
            cursors.truncate(room);
        }
        self.yielded += nodes.len() as u64;
        if info.has_next_page {
            let cursor = info.end_cursor.clone().ok_or_else(|| {
                Error::Pagination(format!("connection {label:?} says hasNextPage but gives no endCursor"))
            })?;
            if !self.seen.insert(cursor.clone()) || self.after.as_deref() == Some(cursor.as_str()) {
                self.done = true;
                return Err(Error::Pagination(format!(
                    "the server returned the cursor {cursor:?} twice on {label:?}; stopping instead of looping"
                )));
            }
            self.after = Some(cursor);
        } else if let Some(c) = &info.end_cursor {
            self.after = Some(c.clone());
        }
        if !info.has_next_page || self.spec.limit.is_some_and(|l| self.yielded >= l) {
            self.done = true;
        }
        Ok(Page { nodes, cursors, info })
    }
}

/// Walks a connection over the network, one page ahead of the caller.
pub struct PageStream {
    transport: Arc<Transport>,
    walker: Walker,
    inflight: Option<tokio::task::JoinHandle<Result<Value>>>,
}

impl PageStream {
    pub fn new(transport: Arc<Transport>, spec: PageSpec) -> Result<Self> {
        Ok(Self { transport, walker: Walker::new(spec)?, inflight: None })
    }

    pub fn cursor(&self) -> Option<&str> {
        self.walker.cursor()
    }

    /// The next page, or `None` at the end. Starts fetching the page after it before returning.
    pub async fn next_page(&mut self) -> Result<Option<Page>> {
        let data = match self.inflight.take() {
            Some(handle) => {
                handle.await.map_err(|e| Error::Transport(format!("page fetch was interrupted: {e}")))??
            }
            None => match self.walker.next_request() {
                None => return Ok(None),
                Some(req) => self.transport.execute(&req?).await?,
            },
        };
        let page = self.walker.accept(data)?;
        if let Some(req) = self.walker.next_request() {
            let req = req?;
            let transport = Arc::clone(&self.transport);
            self.inflight = Some(tokio::spawn(async move { transport.execute(&req).await }));
        }
        Ok(Some(page))
    }
}

impl Drop for PageStream {
    fn drop(&mut self) {
        if let Some(h) = self.inflight.take() {
            h.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const Q: &str =
        "query Q($first: Int, $after: String, $f: String) { items(first: $first, after: $after, f: $f) \
                     { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }";

    fn spec(page_size: u32, limit: Option<u64>) -> PageSpec {
        let mut variables = Map::new();
        variables.insert("f".into(), json!("keep-me"));
        PageSpec { query: Q.into(), variables, operation_name: None, path: None, page_size, limit }
    }

    fn page(ids: std::ops::Range<u32>, next: bool, cursor: &str) -> Value {
        let edges: Vec<Value> = ids.map(|i| json!({"cursor": format!("c{i}"), "node": {"id": i}})).collect();
        json!({"items": {"edges": edges, "pageInfo": {"hasNextPage": next, "endCursor": cursor}}})
    }

    fn body_vars(w: &Walker) -> Value {
        let req = w.next_request().unwrap().unwrap();
        serde_json::from_slice::<Value>(&req.body).unwrap()["variables"].clone()
    }

    #[test]
    fn walks_pages_carrying_variables() {
        let mut w = Walker::new(spec(2, None)).unwrap();
        assert_eq!(body_vars(&w), json!({"f": "keep-me", "first": 2, "after": null}));
        let p = w.accept(page(0..2, true, "A")).unwrap();
        assert_eq!(p.nodes, vec![json!({"id": 0}), json!({"id": 1})]);
        assert_eq!(p.cursors, vec![Some("c0".to_string()), Some("c1".to_string())]);
        assert_eq!(body_vars(&w), json!({"f": "keep-me", "first": 2, "after": "A"}));
        let p = w.accept(page(2..3, false, "B")).unwrap();
        assert_eq!(p.nodes.len(), 1);
        assert!(w.is_done());
        assert!(w.next_request().is_none());
        assert_eq!(w.cursor(), Some("B"));
    }

    #[test]
    fn limit_trims_first_and_nodes() {
        let mut w = Walker::new(spec(100, Some(150))).unwrap();
        assert_eq!(body_vars(&w)["first"], 100);
        w.accept(page(0..100, true, "A")).unwrap();
        assert_eq!(body_vars(&w)["first"], 50);
        let p = w.accept(page(100..200, true, "B")).unwrap();
        assert_eq!(p.nodes.len(), 50);
        assert!(w.is_done());
        assert!(Walker::new(spec(10, Some(0))).unwrap().next_request().is_none());
    }

    #[test]
    fn repeated_cursor_fails_instead_of_looping() {
        let mut w = Walker::new(spec(2, None)).unwrap();
        w.accept(page(0..2, true, "A")).unwrap();
        let e = w.accept(page(0..2, true, "A")).unwrap_err();
        assert!(matches!(e, Error::Pagination(ref m) if m.contains("twice")), "{e}");
        assert!(w.next_request().is_none());
    }

    #[test]
    fn rejects_bad_specs_and_answers() {
        assert!(Walker::new(spec(101, None)).unwrap_err().to_string().contains("between 1 and 100"));
        assert!(Walker::new(spec(0, None)).is_err());
        let mut s = spec(10, None);
        s.query = "query Q($first: Int) { items(first: $first) { edges { node { id } } } }".into();
        assert!(Walker::new(s).unwrap_err().to_string().contains("$after"));
        let mut w = Walker::new(spec(10, None)).unwrap();
        assert!(w.accept(json!({"items": {"edges": []}})).unwrap_err().to_string().contains("pageInfo"));
        assert!(w.accept(json!({"items": null})).is_err());
        assert!(w
            .accept(json!({"items": {"edges": [], "pageInfo": {"hasNextPage": true}}}))
            .unwrap_err()
            .to_string()
            .contains("endCursor"));
        let mut s = spec(10, None);
        s.path = Some("a.b".into());
        let mut w = Walker::new(s).unwrap();
        let p = w
            .accept(
                json!({"a": {"b": {"nodes": [1, 2], "pageInfo": {"hasNextPage": false, "endCursor": null}}}}),
            )
            .unwrap();
        assert_eq!(p.nodes, vec![json!(1), json!(2)]);
    }

    #[test]
    fn resume_from_after_variable() {
        let mut s = spec(5, None);
        s.variables.insert("after".into(), json!("X"));
        let w = Walker::new(s).unwrap();
        assert_eq!(body_vars(&w)["after"], "X");
        assert_eq!(w.cursor(), Some("X"));
    }
}
