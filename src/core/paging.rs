//! The Relay connection walker: cursors, `hasNextPage`, limits, and a guard against servers that
//! hand back a cursor twice (which would otherwise loop for ever). The stream prefetches the next
//! page while the caller works on the current one.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::graphql::{prepare, select_operation, PreparedRequest};
use super::scan::{scan_page, ConnectionMeta};
use super::transport::Transport;

/// The server's page-size cap (graphene-django's RELAY_CONNECTION_MAX_LIMIT).
pub(crate) const MAX_PAGE_SIZE: u32 = 100;
/// Empty pages in a row that still say `hasNextPage` before the walk is judged stuck.
pub(crate) const MAX_EMPTY_PAGES: u32 = 3;

/// A server's cursor for a message: quoted, and cut short if long (the error's `cursor`
/// attribute keeps it whole).
fn shown(cursor: &str) -> String {
    const KEEP: usize = 80;
    match cursor.char_indices().nth(KEEP) {
        Some((i, _)) => format!("{:?}...", &cursor[..i]),
        None => format!("{cursor:?}"),
    }
}

/// What to walk.
#[derive(Clone, Debug)]
pub(crate) struct PageSpec {
    pub query: String,
    pub variables: Map<String, Value>,
    pub operation_name: Option<String>,
    /// Dotted path to the connection in `data`; `None`: the only top-level field.
    pub path: Option<String>,
    pub page_size: u32,
    pub limit: Option<u64>,
    /// For a catalog operation: the node's type and the selection, which type its columns.
    pub node: Option<(String, String)>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PageInfo {
    pub has_next_page: bool,
    pub has_previous_page: bool,
    pub start_cursor: Option<String>,
    pub end_cursor: Option<String>,
}

/// One page answer, not yet decoded: the body, how many of its items to hand out (the limit may
/// cut the last page short) and its pageInfo. The caller decodes the body once, in its own
/// objects, and finds the connection at `path` (`None`: the only top-level field of `data`).
#[derive(Clone, Debug)]
pub(crate) struct RawPage {
    pub body: Bytes,
    pub take: usize,
    pub info: PageInfo,
    pub path: Option<Arc<[String]>>,
}

/// The pure stepping logic: which variables to send next and what a page answer means.
#[derive(Debug)]
pub(crate) struct Walker {
    spec: PageSpec,
    path: Option<Arc<[String]>>,
    after: Option<String>,
    /// Hashes of the end cursors seen (a hostile server's cursors may be long: not kept whole).
    seen: HashSet<u64>,
    /// Hashes of the first and last edge cursor of every page: an edge seen again means the
    /// server hands out items it already gave.
    seen_edges: HashSet<u64>,
    /// Empty pages in a row that said `hasNextPage`.
    empty_run: u32,
    /// The cursor after the last page that brought items: where a stuck walk resumes.
    resume: Option<String>,
    yielded: u64,
    /// The connection's own count of its items (`totalCount` / `total_count`), when selected.
    total: Option<u64>,
    /// The cursor the caller started after, until the first page shows the server read it.
    given_after: Option<String>,
    done: bool,
}

impl Walker {
    pub(crate) fn new(mut spec: PageSpec) -> Result<Self> {
        if spec.page_size == 0 || spec.page_size > MAX_PAGE_SIZE {
            return Err(Error::validation(format!(
                "page_size must be between 1 and {MAX_PAGE_SIZE} (the server's cap per page), got {}",
                spec.page_size
            )));
        }
        let op = select_operation(&spec.query, spec.operation_name.as_deref())?;
        if op.kind != super::graphql::OperationKind::Query {
            // Paging sends the document once per page and fetches one page ahead of the caller:
            // a mutation would run again for every page, before anyone asked for it.
            return Err(Error::validation(format!(
                "paginate() walks queries only; this document is a {}: send it once with execute()",
                if op.kind == super::graphql::OperationKind::Mutation { "mutation" } else { "subscription" }
            )));
        }
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
            .map(|p| p.split('.').filter(|s| !s.is_empty()).map(str::to_string).collect::<Arc<[String]>>());
        if path.as_ref().is_some_and(|p| p.is_empty()) {
            return Err(Error::validation("path must name the connection, e.g. \"findings_view\""));
        }
        let done = spec.limit == Some(0);
        Ok(Self {
            spec,
            path,
            resume: after.clone(),
            given_after: after.clone(),
            after,
            seen: HashSet::new(),
            seen_edges: HashSet::new(),
            empty_run: 0,
            yielded: 0,
            total: None,
            done,
        })
    }

    /// The end cursor of the last page accepted: resume with `after=`.
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.after.as_deref()
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done
    }

    /// The next page's request, or `None` when the walk is over.
    pub(crate) fn next_request(&self) -> Option<Result<PreparedRequest>> {
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

    /// The node's type and selection, for a catalog operation.
    pub(crate) fn node(&self) -> Option<(&str, &str)> {
        self.spec.node.as_ref().map(|(t, s)| (t.as_str(), s.as_str()))
    }

    /// The connection's count of its items, as the last page gave it (when selected).
    pub(crate) fn total(&self) -> Option<u64> {
        self.total
    }

    /// Where the connection is in `data`.
    pub(crate) fn path(&self) -> Option<&Arc<[String]>> {
        self.path.as_ref()
    }

    fn label(&self) -> String {
        self.path.as_ref().map_or_else(|| "the connection".to_string(), |p| format!("{:?}", p.join(".")))
    }

    /// Takes one page answer (as scanned): advances the cursor, applies the limit and checks for
    /// loops. Returns how many of the page's items to hand out and its pageInfo.
    pub(crate) fn accept(&mut self, meta: ConnectionMeta) -> Result<(usize, PageInfo)> {
        let result = self.accept_inner(meta);
        if let Err(Error::Pagination { cursor, .. }) = &result {
            if cursor.is_none() {
                self.done = true;
            }
        }
        result.map_err(|e| match e {
            Error::Pagination { message, cursor: None } => {
                let cursor = self.resume.clone();
                let message = match &cursor {
                    Some(c) => format!("{message}; resume with after={} (PaginationError.cursor)", shown(c)),
                    None => format!("{message}; resume from the start"),
                };
                Error::Pagination { message, cursor }
            }
            other => other,
        })
    }

    fn accept_inner(&mut self, meta: ConnectionMeta) -> Result<(usize, PageInfo)> {
        let label = self.label();
        if !meta.page_info {
            return Err(Error::pagination(format!(
                "connection {label} has no pageInfo: select pageInfo {{ hasNextPage endCursor }}"
            )));
        }
        let has_next_page = meta.has_next_page.ok_or_else(|| {
            Error::pagination(format!("connection {label}: select pageInfo {{ hasNextPage endCursor }}"))
        })?;
        let info = PageInfo {
            has_next_page,
            has_previous_page: meta.has_previous_page.unwrap_or(false),
            start_cursor: meta.start_cursor,
            end_cursor: meta.end_cursor,
        };
        if !meta.has_list {
            return Err(Error::pagination(format!("connection {label}: select edges {{ node {{ ... }} }}")));
        }
        if let Some(given) = self.given_after.take() {
            // graphql-relay (graphene, the emulator) reads a cursor it cannot decode as "from the
            // start": a mistyped resume cursor would hand out every item again.
            let ends_at = info.end_cursor.as_deref().and_then(relay_index);
            if meta.items > 0 && ends_at == u64::try_from(meta.items - 1).ok() {
                self.done = true;
                return Err(Error::validation(format!(
                    "after={} is not one of the server's cursors: it answered {label} from the first item, so \
                     the walk would repeat items; give a cursor the server gave (paginator.cursor, \
                     ExportResult.cursor, the command line's resume hint), or none",
                    shown(&given)
                )));
            }
        }
        if meta.edge_cursors.iter().any(|h| self.seen_edges.contains(h)) {
            return Err(Error::pagination(format!(
                "the server handed out items of {label} it had already given (an edge cursor came back); \
                 stopping instead of looping"
            )));
        }
        if info.has_next_page && meta.items == 0 {
            self.empty_run = self.empty_run.saturating_add(1);
            if self.empty_run >= MAX_EMPTY_PAGES {
                return Err(Error::pagination(format!(
                    "the server answered {} empty pages of {label} in a row that each say hasNextPage; \
                     stopping instead of looping",
                    self.empty_run
                )));
            }
        } else if meta.items > 0 {
            self.empty_run = 0;
        }
        if meta.total.is_some() {
            self.total = meta.total;
        }
        if let Some(total) = meta.total {
            // A walk far past the connection's own count is a server that does not advance
            // (counts may move while a walk runs, hence the slack).
            let bound = total.saturating_mul(2).saturating_add(10 * u64::from(self.spec.page_size));
            if self.yielded.saturating_add(meta.items as u64) > bound {
                return Err(Error::pagination(format!(
                    "the server has handed out {} items of {label}, far past its total of {total}; \
                     stopping instead of looping",
                    self.yielded.saturating_add(meta.items as u64)
                )));
            }
        }
        self.seen_edges.extend(meta.edge_cursors.first());
        self.seen_edges.extend(meta.edge_cursors.last());
        let mut take = meta.items;
        if let Some(limit) = self.spec.limit {
            let room = usize::try_from(limit.saturating_sub(self.yielded)).unwrap_or(usize::MAX);
            take = take.min(room);
        }
        self.yielded = self.yielded.saturating_add(u64::try_from(take).unwrap_or(u64::MAX));
        if info.has_next_page {
            let cursor = info.end_cursor.clone().ok_or_else(|| {
                Error::pagination(format!("connection {label} says hasNextPage but gives no endCursor"))
            })?;
            if !self.seen.insert(super::scan::hash_cursor(&cursor))
                || self.after.as_deref() == Some(cursor.as_str())
            {
                self.done = true;
                return Err(Error::pagination(format!(
                    "the server returned the cursor {} twice on {label}; stopping instead of looping",
                    shown(&cursor)
                )));
            }
            self.after = Some(cursor);
        } else if let Some(c) = &info.end_cursor {
            self.after = Some(c.clone());
        }
        if meta.items > 0 {
            self.resume.clone_from(&self.after);
        }
        if !info.has_next_page || self.spec.limit.is_some_and(|l| self.yielded >= l) {
            self.done = true;
        }
        Ok((take, info))
    }
}

/// The index in a graphql-relay array cursor (base64 of `arrayconnection:N`); `None` for any
/// other cursor (a server may make its own, which stay opaque).
fn relay_index(cursor: &str) -> Option<u64> {
    use base64::Engine as _;
    let raw = base64::engine::general_purpose::STANDARD.decode(cursor.trim()).ok()?;
    let text = std::str::from_utf8(&raw).ok()?;
    text.strip_prefix("arrayconnection:")?.parse().ok()
}

/// Walks a connection over the network, one page ahead of the caller. The page fetched ahead is
/// also scanned ahead, on the I/O thread; the caller decodes the body once, in its own objects.
pub(crate) struct PageStream {
    transport: Arc<Transport>,
    walker: Walker,
    inflight: Option<tokio::task::JoinHandle<Result<(Bytes, ConnectionMeta)>>>,
}

/// Fetches one page and scans it.
async fn fetch(
    transport: Arc<Transport>,
    req: PreparedRequest,
    path: Option<Arc<[String]>>,
) -> Result<(Bytes, ConnectionMeta)> {
    let body = transport.send(&req).await?;
    let meta = scan_page(&body, path.as_deref()).map_err(|e| e.redact(&transport.settings().redactor))?;
    Ok((body, meta))
}

impl PageStream {
    pub(crate) fn new(transport: Arc<Transport>, spec: PageSpec) -> Result<Self> {
        Ok(Self { transport, walker: Walker::new(spec)?, inflight: None })
    }

    /// The end cursor of the last page returned: pass it as `after` to resume.
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.walker.cursor()
    }

    /// The node's type and selection, for a catalog operation.
    pub(crate) fn node(&self) -> Option<(&str, &str)> {
        self.walker.node()
    }

    /// The connection's count of its items, when the query selects it.
    pub(crate) fn total(&self) -> Option<u64> {
        self.walker.total()
    }

    /// The client's transport (for its counters).
    pub(crate) fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    /// The next page, or `None` at the end. Starts fetching the page after it before returning.
    pub(crate) async fn next_page(&mut self) -> Result<Option<RawPage>> {
        let path = self.walker.path().cloned();
        let (body, meta) = match self.inflight.take() {
            Some(handle) => {
                handle.await.map_err(|e| Error::Transport(format!("page fetch was interrupted: {e}")))??
            }
            None => match self.walker.next_request() {
                None => return Ok(None),
                Some(req) => fetch(Arc::clone(&self.transport), req?, path.clone()).await?,
            },
        };
        self.take_page(body, meta, path)
    }

    /// The next page if no waiting is needed: the page fetched ahead has arrived (or the walk is
    /// over). `None` means not yet: use [`next_page`](Self::next_page). Must run inside the
    /// runtime's context (it starts the next fetch).
    pub(crate) fn try_next_page(&mut self) -> Option<Result<Option<RawPage>>> {
        let Some(handle) = self.inflight.as_mut() else {
            return self.walker.is_done().then_some(Ok(None));
        };
        if !handle.is_finished() {
            return None;
        }
        let done = futures_util::FutureExt::now_or_never(handle)?;
        self.inflight = None;
        let path = self.walker.path().cloned();
        Some(
            done.map_err(|e| Error::Transport(format!("page fetch was interrupted: {e}")))
                .and_then(|fetched| fetched)
                .and_then(|(body, meta)| self.take_page(body, meta, path)),
        )
    }

    /// Accepts a fetched page and starts fetching the one after it.
    fn take_page(
        &mut self,
        body: Bytes,
        meta: ConnectionMeta,
        path: Option<Arc<[String]>>,
    ) -> Result<Option<RawPage>> {
        let (take, info) =
            self.walker.accept(meta).map_err(|e| e.redact(&self.transport.settings().redactor))?;
        if let Some(req) = self.walker.next_request() {
            let req = req?;
            // The page fetched ahead belongs to the call that read this one (see observe.rs).
            let call = super::observe::current_call();
            self.inflight = Some(tokio::spawn(super::observe::scope(
                call,
                fetch(Arc::clone(&self.transport), req, path.clone()),
            )));
        }
        Ok(Some(RawPage { body, take, info, path }))
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
        PageSpec {
            query: Q.into(),
            variables,
            operation_name: None,
            path: None,
            page_size,
            limit,
            node: None,
        }
    }

    fn page(ids: std::ops::Range<u32>, next: bool, cursor: &str) -> Value {
        let edges: Vec<Value> = ids.map(|i| json!({"cursor": format!("c{i}"), "node": {"id": i}})).collect();
        json!({"items": {"edges": edges, "pageInfo": {"hasNextPage": next, "endCursor": cursor}}})
    }

    /// Scans `data` as the I/O thread does and hands it to the walker.
    fn accept(w: &mut Walker, data: Value) -> Result<(usize, PageInfo)> {
        let body = serde_json::to_vec(&json!({ "data": data })).unwrap();
        let meta = scan_page(&body, w.path().map(|p| &p[..]))?;
        w.accept(meta)
    }

    fn body_vars(w: &Walker) -> Value {
        let req = w.next_request().unwrap().unwrap();
        serde_json::from_slice::<Value>(&req.body).unwrap()["variables"].clone()
    }

    #[test]
    fn walks_pages_carrying_variables() {
        let mut w = Walker::new(spec(2, None)).unwrap();
        assert_eq!(body_vars(&w), json!({"f": "keep-me", "first": 2, "after": null}));
        let (take, info) = accept(&mut w, page(0..2, true, "A")).unwrap();
        assert_eq!(take, 2);
        assert_eq!(info.end_cursor.as_deref(), Some("A"));
        assert_eq!(body_vars(&w), json!({"f": "keep-me", "first": 2, "after": "A"}));
        let (take, info) = accept(&mut w, page(2..3, false, "B")).unwrap();
        assert_eq!(take, 1);
        assert!(!info.has_next_page);
        assert!(w.is_done());
        assert!(w.next_request().is_none());
        assert_eq!(w.cursor(), Some("B"));
    }

    fn relay(i: u64) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("arrayconnection:{i}"))
    }

    #[test]
    fn a_cursor_the_server_answered_from_the_start_is_refused() {
        let mut given = spec(3, None);
        given.variables.insert("after".into(), json!("garbage"));
        let mut w = Walker::new(given.clone()).unwrap();
        let e = accept(&mut w, page(0..3, true, &relay(2))).unwrap_err();
        assert!(
            matches!(e, Error::Validation(ref m) if m.contains("not one of the server's cursors")),
            "{e}"
        );
        assert!(w.next_request().is_none());
        // Read as asked: the page starts after the cursor.
        let mut w = Walker::new(given.clone()).unwrap();
        assert_eq!(accept(&mut w, page(5..8, true, &relay(7))).unwrap().0, 3);
        // Only the first page is judged, and opaque cursors are taken as they are.
        accept(&mut w, page(8..9, false, &relay(0))).unwrap();
        let mut w = Walker::new(given).unwrap();
        assert!(accept(&mut w, page(0..3, false, "opaque")).is_ok());
        // Without a cursor, a walk starts at 0 of course.
        let mut w = Walker::new(spec(3, None)).unwrap();
        assert!(accept(&mut w, page(0..3, false, &relay(2))).is_ok());
    }

    #[test]
    fn limit_trims_first_and_nodes() {
        let mut w = Walker::new(spec(100, Some(150))).unwrap();
        assert_eq!(body_vars(&w)["first"], 100);
        accept(&mut w, page(0..100, true, "A")).unwrap();
        assert_eq!(body_vars(&w)["first"], 50);
        let (take, _) = accept(&mut w, page(100..200, true, "B")).unwrap();
        assert_eq!(take, 50);
        assert!(w.is_done());
        assert!(Walker::new(spec(10, Some(0))).unwrap().next_request().is_none());
    }

    #[test]
    fn repeated_cursor_fails_instead_of_looping() {
        let mut w = Walker::new(spec(2, None)).unwrap();
        accept(&mut w, page(0..2, true, "A")).unwrap();
        let e = accept(&mut w, page(2..4, true, "A")).unwrap_err();
        assert!(matches!(e, Error::Pagination { message: ref m, .. } if m.contains("twice")), "{e}");
        assert!(w.next_request().is_none());
    }

    #[test]
    fn the_same_items_again_fail_with_the_cursor_to_resume_from() {
        let mut w = Walker::new(spec(2, None)).unwrap();
        accept(&mut w, page(0..2, true, "A")).unwrap();
        // A server that ignores `after`: the same edges under a new end cursor.
        match accept(&mut w, page(0..2, true, "B")).unwrap_err() {
            Error::Pagination { message, cursor } => {
                assert!(message.contains("already given"), "{message}");
                assert_eq!(cursor.as_deref(), Some("A"));
            }
            other => panic!("{other:?}"),
        }
        assert!(w.next_request().is_none());
        // Shifted by one item: the last edge of the page before comes back.
        let mut w = Walker::new(spec(2, None)).unwrap();
        accept(&mut w, page(0..2, true, "A")).unwrap();
        assert!(accept(&mut w, page(1..3, true, "B")).is_err());
    }

    #[test]
    fn empty_pages_that_say_more_fail_after_a_few() {
        let mut w = Walker::new(spec(2, None)).unwrap();
        accept(&mut w, page(0..2, true, "A")).unwrap();
        for i in 1..MAX_EMPTY_PAGES {
            accept(&mut w, page(0..0, true, &format!("E{i}"))).unwrap();
        }
        match accept(&mut w, page(0..0, true, "Z")).unwrap_err() {
            Error::Pagination { message, cursor } => {
                assert!(message.contains("empty pages"), "{message}");
                assert!(message.contains("after=\"A\""), "{message}");
                assert_eq!(cursor.as_deref(), Some("A"));
            }
            other => panic!("{other:?}"),
        }
        // A page with items in between resets the count.
        let mut w = Walker::new(spec(2, None)).unwrap();
        for round in 0..5u32 {
            for i in 1..MAX_EMPTY_PAGES {
                accept(&mut w, page(0..0, true, &format!("E{round}-{i}"))).unwrap();
            }
            accept(&mut w, page(round * 2..round * 2 + 2, true, &format!("P{round}"))).unwrap();
        }
        // An empty last page is fine.
        accept(&mut w, page(0..0, false, "end")).unwrap();
        assert!(w.is_done());
    }

    #[test]
    fn nodes_by_id_and_totals_guard_walks_without_cursors() {
        let nodes = |ids: std::ops::Range<u32>, cursor: &str, total: u32| {
            let nodes: Vec<Value> = ids.map(|i| json!({"id": i})).collect();
            json!({"items": {"nodes": nodes, "total_count": total, "pageInfo": {"hasNextPage": true, "endCursor": cursor}}})
        };
        let mut w = Walker::new(spec(2, None)).unwrap();
        accept(&mut w, nodes(0..2, "A", 1000)).unwrap();
        assert!(accept(&mut w, nodes(0..2, "B", 1000)).unwrap_err().to_string().contains("already given"));
        // Distinct items, but far past the total the server itself gave.
        let mut w = Walker::new(spec(2, None)).unwrap();
        let mut failed = None;
        for i in 0..100u32 {
            if let Err(e) = accept(&mut w, nodes(i * 2..i * 2 + 2, &format!("C{i}"), 10)) {
                failed = Some((i, e));
                break;
            }
        }
        let (at, e) = failed.unwrap();
        assert!(e.to_string().contains("total of 10"), "{e}");
        assert!(at <= 20, "{at}");
    }

    #[test]
    fn mutations_and_subscriptions_are_not_paged() {
        for kind in ["mutation", "subscription"] {
            let mut s = spec(10, None);
            s.query = format!(
                "{kind} M($first: Int, $after: String) {{ items(first: $first, after: $after) \
                 {{ edges {{ node {{ id }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
            );
            let e = Walker::new(s).unwrap_err().to_string();
            assert!(e.contains("queries only") && e.contains(kind), "{e}");
        }
    }

    #[test]
    fn rejects_bad_specs_and_answers() {
        assert!(Walker::new(spec(101, None)).unwrap_err().to_string().contains("between 1 and 100"));
        assert!(Walker::new(spec(0, None)).is_err());
        let mut s = spec(10, None);
        s.query = "query Q($first: Int) { items(first: $first) { edges { node { id } } } }".into();
        assert!(Walker::new(s).unwrap_err().to_string().contains("$after"));
        let mut w = Walker::new(spec(10, None)).unwrap();
        assert!(accept(&mut w, json!({"items": {"edges": []}}))
            .unwrap_err()
            .to_string()
            .contains("pageInfo"));
        assert!(accept(&mut w, json!({"items": null})).is_err());
        assert!(accept(&mut w, json!({"items": {"pageInfo": {"hasNextPage": false}}}))
            .unwrap_err()
            .to_string()
            .contains("select edges"));
        assert!(accept(&mut w, json!({"items": {"edges": [], "pageInfo": {"hasNextPage": true}}}))
            .unwrap_err()
            .to_string()
            .contains("endCursor"));
        let mut s = spec(10, None);
        s.path = Some("a.b".into());
        let mut w = Walker::new(s).unwrap();
        let (take, _) = accept(
            &mut w,
            json!({"a": {"b": {"nodes": [1, 2], "pageInfo": {"hasNextPage": false, "endCursor": null}}}}),
        )
        .unwrap();
        assert_eq!(take, 2);
        assert_eq!(w.cursor(), None);
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
