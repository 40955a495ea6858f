//! Aliased page batches: many pages of one connection in one request.
//!
//! The service counts requests, not rows, and caps a page at 100 rows. A connection that takes
//! `offset` can be read ten pages at a time: one document with `p0: findings_view(first: 100,
//! offset: 0) {...} p1: findings_view(first: 100, offset: 100) {...}` costs one request of the
//! budget. graphene resolves aliased fields on its own.
//!
//! Correct under change. The walk reads in id order (`sort: [ID_ASC]`) and hands out only rows
//! whose key (the integer in the node's global id) is above the last one handed out, so no row
//! comes twice. Consecutive batches overlap by one row: every batch after the first starts at
//! the last row handed out, and its first row must be that row (or one before it). A later row
//! there means rows before it were removed and the rows shifted back past the batch's start;
//! the batch is then thrown away and the walk reads again from earlier, farther each time, until
//! its first row is one already seen. So every row present at both ends of the walk is handed
//! out exactly once; a row added or removed meanwhile may or may not be.
//!
//! Resumable. Every row handed out carries a cursor of the walk's own, `sfb1:<offset>:<key>`
//! (the row's offset in id order and its key), set as the edge's `cursor` and the page's end
//! cursor: a walk given it back (`BatchSpec::resume`) starts at that offset with that key as the
//! last handed out, so the overlap check above holds across the pause too. The server never sees
//! it: only a batched walk takes it.
//!
//! A server that refuses a document for its size (too many aliases, too large, too deep or
//! complex) gets fewer pages per request: as many as a limit its message names (`limit 4`),
//! else half as many; the size that worked is remembered per server for the process, as batched
//! lookups do.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::error::{Error, Result};
use super::gql::{OperationInfo, OperationKind};
use super::graphql::PreparedRequest;
use super::ids::from_global_id;
use super::lookup::is_refusal;
use super::operations::Operation;
use super::paging::{PageInfo, RawPage, MAX_PAGE_SIZE};
use super::prepared::Prepared;
use super::retry::RetryClass;
use super::transport::Transport;

/// The most pages one request may carry.
pub(crate) const MAX_PAGES_PER_REQUEST: u32 = 50;

/// The path every page handed out has: its body is `{"data":{"p": <the page's connection>}}`.
const PAGE_ALIAS: &str = "p";

/// The pages per request that worked, by server (base URL), for the process.
fn remembered() -> &'static Mutex<HashMap<String, u32>> {
    static SIZES: OnceLock<Mutex<HashMap<String, u32>>> = OnceLock::new();
    SIZES.get_or_init(|| Mutex::new(HashMap::new()))
}

fn remembered_size(server: &str, asked: u32) -> u32 {
    let known = remembered().lock().ok().and_then(|m| m.get(server).copied());
    known.map_or(asked, |k| k.min(asked)).max(1)
}

fn refused(server: &str, size: u32) {
    if let Ok(mut m) = remembered().lock() {
        let slot = m.entry(server.to_string()).or_insert(size);
        *slot = (*slot).min(size);
    }
}

/// The pages per request the server at `base_url` took after refusing more, if it refused.
pub(crate) fn remembered_for(base_url: &str) -> Option<u32> {
    let key = url::Url::parse(base_url).map_or_else(|_| base_url.to_string(), |u| u.to_string());
    let sizes = remembered().lock().ok()?;
    sizes.get(&key).or_else(|| sizes.get(base_url)).copied()
}

/// Forgets the size that worked for the server at `base_url` (a new server answers there).
pub(crate) fn forget(base_url: &str) {
    let key = url::Url::parse(base_url).map_or_else(|_| base_url.to_string(), |u| u.to_string());
    if let Ok(mut m) = remembered().lock() {
        m.remove(&key);
        m.remove(base_url);
    }
}

/// What a batched walk reads.
#[derive(Clone, Debug)]
pub(crate) struct BatchSpec {
    pub page_size: u32,
    pub pages_per_request: u32,
    /// The offset of the first row to read.
    pub start: u64,
    pub limit: Option<u64>,
    /// The key of the last row handed out before the walk starts (a resumed walk).
    pub last: Option<u64>,
}

/// The prefix of a batched walk's own cursors.
pub(crate) const CURSOR_PREFIX: &str = "sfb1:";

/// The cursor of the row at `offset` whose key is `key`.
fn cursor_of(offset: u64, key: u64) -> String {
    format!("{CURSOR_PREFIX}{offset}:{key}")
}

/// Where a batched walk's cursor resumes: `(offset, key)`; `None` when `text` is not one.
pub(crate) fn parse_cursor(text: &str) -> Option<(u64, u64)> {
    let (offset, key) = text.strip_prefix(CURSOR_PREFIX)?.split_once(':')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(offset) || !digits(key) {
        return None;
    }
    Some((offset.parse().ok()?, key.parse().ok()?))
}

/// The stepping of a batched walk, without I/O: the documents to send and what answers mean.
pub(crate) struct BatchWalker {
    op: &'static Operation,
    node: (String, String),
    /// `($name: Type, ...)` and `, name: $name ...` of the operation's own arguments.
    declared: String,
    passed: String,
    variables: Map<String, Value>,
    spec: BatchSpec,
    /// The offset the next batch's first page starts at.
    offset: u64,
    /// The key of the last row handed out.
    last: Option<u64>,
    /// After a shift: how far back the next read starts (doubled while it is not far enough).
    back: u64,
    yielded: u64,
    done: bool,
    ready: VecDeque<RawPage>,
    /// Shifts seen (rows removed before the walk's position while it walked).
    pub(crate) shifts: u64,
    /// Whether no batch was taken yet of a walk resumed from a cursor.
    resumed: bool,
}

/// A walk of a catalog connection in aliased page batches (see the module's text).
pub(crate) struct BatchStream {
    transport: Arc<Transport>,
    server: String,
    walker: BatchWalker,
    /// The end cursor of the last page returned.
    cursor: Option<String>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    data: Option<HashMap<String, &'a RawValue>>,
    #[serde(default)]
    errors: Vec<Value>,
}

#[derive(Deserialize)]
struct Keys {
    #[serde(default)]
    edges: Option<Vec<Option<KeyEdge>>>,
}

#[derive(Deserialize)]
struct KeyEdge {
    #[serde(default)]
    node: Option<KeyNode>,
}

#[derive(Deserialize)]
struct KeyNode {
    #[serde(default)]
    id: Option<Value>,
}

/// The integer key of a node's global id (`"RmluZGluZ3NWaWV3OjE3"` -> 17).
fn key_of(id: Option<&Value>) -> Result<u64> {
    let text = id.and_then(Value::as_str).ok_or_else(|| {
        Error::pagination("a batched walk needs every node's `id`; a node came without one")
    })?;
    let (_, pk) = from_global_id(text)?;
    pk.parse::<u64>().map_err(|_| {
        Error::pagination(format!(
            "a batched walk orders rows by the integer key of their id; {text:?} holds {pk:?}"
        ))
    })
}

/// The keys of a page's rows, in order (`None` for a null node, which has no place in the order).
fn keys(raw: &RawValue) -> Result<Vec<Option<u64>>> {
    let page: Keys = serde_json::from_str(raw.get())
        .map_err(|e| Error::pagination(format!("a page of a batched walk is not a connection: {e}")))?;
    page.edges
        .unwrap_or_default()
        .iter()
        .map(|edge| match edge.as_ref().and_then(|e| e.node.as_ref()) {
            None => Ok(None),
            Some(node) => key_of(node.id.as_ref()).map(Some),
        })
        .collect()
}

/// `{"data":{"p": <raw>}}`.
fn wrap(raw: &str) -> Bytes {
    let mut out = Vec::with_capacity(raw.len() + 16);
    out.extend_from_slice(br#"{"data":{""#);
    out.extend_from_slice(PAGE_ALIAS.as_bytes());
    out.extend_from_slice(br#"":"#);
    out.extend_from_slice(raw.as_bytes());
    out.extend_from_slice(b"}}");
    Bytes::from(out)
}

#[derive(Deserialize)]
struct RawEdges<'a> {
    #[serde(borrow, default)]
    edges: Vec<&'a RawValue>,
}

/// The page `raw` with only the edges at `keep`, each given its cursor (`cursors`, one per kept
/// edge): the edges' text as it came, no node decoded (the first page of every batch drops the
/// row it overlaps with).
fn kept(raw: &RawValue, keep: &[usize], cursors: &[String]) -> Result<Bytes> {
    let page: RawEdges<'_> = serde_json::from_str(raw.get())
        .map_err(|e| Error::pagination(format!("a page of a batched walk is not a connection: {e}")))?;
    let mut text = String::with_capacity(raw.get().len() + keep.len() * 40);
    text.push_str(r#"{"edges":["#);
    for (n, (at, cursor)) in keep.iter().zip(cursors).enumerate() {
        let edge = page.edges.get(*at).ok_or_else(|| Error::pagination("a kept row is not in its page"))?;
        if n > 0 {
            text.push(',');
        }
        // An edge is an object (`{"node": ...}`; `null` was refused by `keys`): the cursor goes
        // first in it. The cursor is digits and a prefix, nothing to escape.
        match edge.get().strip_prefix('{') {
            None if edge.get() == "null" => text.push_str("null"),
            Some(rest) => {
                text.push_str(r#"{"cursor":""#);
                text.push_str(cursor);
                text.push('"');
                if !rest.trim_start().starts_with('}') {
                    text.push(',');
                }
                text.push_str(rest);
            }
            None => return Err(Error::pagination("an edge of a batched walk is not an object")),
        }
    }
    text.push_str("]}");
    Ok(wrap(&text))
}

/// The pages per request to try after `pages` were refused with `error`: a limit the message
/// names (the last number in it below the pages sent), else half.
fn fewer(pages: u32, error: &Error) -> u32 {
    let text = match error {
        Error::GraphQL { errors, .. } => errors
            .iter()
            .filter_map(|e| e.get("message").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        Error::ApiStatus { body, .. } => body.clone(),
        _ => String::new(),
    };
    let named = text
        .rsplit(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse::<u32>().ok())
        .find(|n| *n >= 1 && *n < pages);
    named.unwrap_or(pages / 2).max(1)
}

impl BatchWalker {
    /// The walk of `prepared` (a connection that takes `offset`, with `id` in the node's
    /// selection and no sort other than `ID_ASC`).
    pub(crate) fn new(prepared: &Prepared, spec: BatchSpec) -> Result<Self> {
        let op = prepared.operation();
        if !op.is_connection() || op.kind != OperationKind::Query {
            return Err(Error::validation(format!("{}() is not a connection to walk", op.name)));
        }
        if spec.page_size == 0 || spec.page_size > MAX_PAGE_SIZE {
            return Err(Error::validation(format!(
                "page_size must be between 1 and {MAX_PAGE_SIZE}, got {}",
                spec.page_size
            )));
        }
        if spec.pages_per_request == 0 || spec.pages_per_request > MAX_PAGES_PER_REQUEST {
            return Err(Error::validation(format!(
                "pages_per_request must be between 1 and {MAX_PAGES_PER_REQUEST}, got {}",
                spec.pages_per_request
            )));
        }
        let selection = prepared.selection().to_string();
        if !super::gql::selection(&selection)
            .map(|fields| fields.iter().any(|f| f.key() == "id" && f.name == "id"))
            .unwrap_or(false)
        {
            return Err(Error::validation(
                "a batched walk needs `id` in the selection (it orders and checks rows by it)",
            ));
        }
        let mut variables = Map::new();
        let (mut declared, mut passed) = (Vec::new(), Vec::new());
        for (name, value) in prepared.variables() {
            match name.as_str() {
                "after" | "before" | "first" | "last" | "offset" if value.is_null() => continue,
                "after" | "before" | "first" | "last" | "offset" => {
                    return Err(Error::validation(format!(
                        "a batched walk sets the paging itself; `{name}` cannot be given"
                    )))
                }
                "sort" => {
                    let by_id = value.is_null()
                        || value.as_array().is_some_and(|s| s.iter().all(|v| v.as_str() == Some("ID_ASC")));
                    if !by_id {
                        return Err(Error::validation(
                            "a batched walk reads in id order (ID_ASC); another sort walks one page per request",
                        ));
                    }
                    continue;
                }
                _ => {}
            }
            let Some(arg) = op.args.iter().find(|a| a.name == name) else { continue };
            declared.push(format!("${name}: {}", arg.ty));
            passed.push(format!("{name}: ${name}"));
            variables.insert(name.clone(), value.clone());
        }
        let (offset, last) = (spec.start, spec.last);
        Ok(Self {
            op,
            node: (op.returns.type_name().to_string(), selection),
            declared: if declared.is_empty() { String::new() } else { format!("({})", declared.join(", ")) },
            passed: passed.iter().map(|p| format!(", {p}")).collect(),
            variables,
            spec,
            offset,
            last,
            back: 0,
            yielded: 0,
            done: false,
            ready: VecDeque::new(),
            shifts: 0,
            resumed: last.is_some(),
        })
    }

    /// At most `pages`, and no more than a limited walk still needs: its remaining rows and the
    /// row the batch overlaps with (a walk of `limit=5` reads one page, not ten).
    pub(crate) fn pages_wanted(&self, pages: u32) -> u32 {
        let Some(limit) = self.spec.limit else { return pages };
        let rows = limit.saturating_sub(self.yielded).saturating_add(u64::from(self.last.is_some()));
        let size = u64::from(self.spec.page_size.max(1));
        let needed = rows.div_ceil(size).max(1);
        u32::try_from(needed).map_or(pages, |n| n.min(pages)).max(1)
    }

    /// The next page ready, if any.
    pub(crate) fn pop(&mut self) -> Option<RawPage> {
        self.ready.pop_front()
    }

    /// The document for `pages` pages from `self.offset`.
    fn document(&self, pages: u32) -> String {
        let (name, selection) = (self.op.name, &self.node.1);
        let size = self.spec.page_size;
        let mut doc = format!("query {name}_pages{} {{", self.declared);
        for i in 0..u64::from(pages) {
            let at = self.offset.saturating_add(i.saturating_mul(u64::from(size)));
            doc.push_str(&format!(
                " p{i}: {name}(first: {size}, offset: {at}, sort: [ID_ASC]{}) {{ edges {{ node {{ {selection} }} }} }}",
                self.passed
            ));
        }
        doc.push_str(" }");
        doc
    }

    pub(crate) fn request(&self, pages: u32) -> Result<PreparedRequest> {
        let mut body = Map::with_capacity(3);
        body.insert("query".into(), Value::String(self.document(pages)));
        body.insert("variables".into(), Value::Object(self.variables.clone()));
        let label = format!("{}_pages", self.op.name);
        body.insert("operationName".into(), Value::String(label.clone()));
        let bytes = serde_json::to_vec(&Value::Object(body))
            .map_err(|e| Error::validation(format!("variables cannot be encoded as JSON: {e}")))?;
        let operation = OperationInfo {
            kind: OperationKind::Query,
            name: Some(label.clone()),
            variables: Vec::new(),
            defaulted: Vec::new(),
        };
        Ok(PreparedRequest { body: bytes.into(), operation, label, retry: RetryClass::Idempotent })
    }

    /// Accepts the answer to a batch of `pages` pages.
    pub(crate) fn take(&mut self, body: &[u8], pages: u32) -> Result<()> {
        let envelope: Envelope<'_> = serde_json::from_slice(body)
            .map_err(|e| Error::pagination(format!("the answer to a batched walk is not JSON: {e}")))?;
        let data = envelope.data.unwrap_or_default();
        let size = u64::from(self.spec.page_size);
        let mut fresh = 0usize;
        for i in 0..pages {
            let alias = format!("p{i}");
            let raw = data.get(alias.as_str()).ok_or_else(|| {
                Error::pagination(format!(
                    "the answer to a batched walk has no {alias:?}; it is not the answer sent"
                ))
            })?;
            let keys = keys(raw)?;
            if keys.iter().flatten().zip(keys.iter().flatten().skip(1)).any(|(a, b)| a >= b) {
                return Err(Error::pagination(
                    "the server does not order this connection by id (ID_ASC): a batched walk cannot \
                     check it; walk one page per request",
                ));
            }
            if let (0, Some(last)) = (i, self.last) {
                // The batch starts at the last row handed out; a later row there means rows
                // before it went, and rows moved back past the start: read again from earlier.
                match keys.iter().flatten().next() {
                    // At the list's start nothing can be before it: every row there is new.
                    Some(first) if *first <= last || self.offset == 0 => {}
                    None if keys.is_empty() && self.offset == 0 => {
                        self.done = true;
                        return Ok(());
                    }
                    _ => {
                        self.shift();
                        return Ok(());
                    }
                }
            }
            let mut keep = Vec::with_capacity(keys.len());
            let mut cursors = Vec::with_capacity(keys.len());
            let mut previous = self.last;
            let page_at = self.offset.saturating_add(u64::from(i).saturating_mul(size));
            for (at, key) in keys.iter().enumerate() {
                match (key, previous) {
                    (Some(k), Some(p)) if *k <= p => continue,
                    (Some(k), _) => previous = Some(*k),
                    (None, _) => {}
                }
                keep.push(at);
                // A null node resumes where the row before it would.
                cursors.push(cursor_of(page_at.saturating_add(at as u64), previous.unwrap_or(0)));
            }
            fresh = fresh.saturating_add(keep.len());
            let remaining = self.spec.limit.map(|l| l.saturating_sub(self.yielded));
            let take =
                remaining.map_or(keep.len(), |r| keep.len().min(usize::try_from(r).unwrap_or(usize::MAX)));
            let full = keys.len() as u64 >= size;
            self.last = previous;
            if take > 0 {
                let body = kept(raw, &keep, &cursors)?;
                let end_cursor = take.checked_sub(1).and_then(|last| cursors.get(last)).cloned();
                self.yielded = self.yielded.saturating_add(take as u64);
                let reached = self.spec.limit.is_some_and(|l| self.yielded >= l);
                self.ready.push_back(RawPage {
                    body,
                    take,
                    info: PageInfo {
                        has_next_page: full && !reached,
                        has_previous_page: false,
                        start_cursor: cursors.first().cloned(),
                        end_cursor,
                    },
                    path: Some(Arc::from(vec![PAGE_ALIAS.to_string()])),
                });
                if reached {
                    self.done = true;
                    return Ok(());
                }
            }
            if !full {
                self.done = true;
                return Ok(());
            }
        }
        if fresh == 0 && self.back == 0 && self.resumed {
            // The first batch of a walk resumed from a cursor found only rows at or before the
            // cursor's: the cursor is another walk's (other filters), not this one's.
            return Err(Error::validation(
                "the cursor given as after= (sfb1:...) is not of this walk: at its offset this walk \
                 holds no row past the cursor's row, so the walk that gave it had other filters or \
                 fields; resume with the walk that gave it",
            ));
        }
        if fresh == 0 && self.back == 0 {
            // Full pages and not one row past the last handed out: the server does not skip to
            // the offsets asked (it ignores `offset`), and the walk would go on for ever.
            return Err(Error::pagination(
                "the server answered a batch of full pages with no row past the last one handed \
                 out: it does not page by offset; walk one page per request",
            ));
        }
        self.back = 0;
        self.resumed = false;
        // The next batch starts at this one's last row: the overlap that shows a shift.
        let read = u64::from(pages).saturating_mul(size);
        self.offset = self.offset.saturating_add(read.saturating_sub(1));
        Ok(())
    }

    /// Rows moved back past the batch's start: read again from earlier, farther each time.
    fn shift(&mut self) {
        self.shifts = self.shifts.saturating_add(1);
        self.back = if self.back == 0 { u64::from(self.spec.page_size) } else { self.back.saturating_mul(2) };
        self.offset = self.offset.saturating_sub(self.back);
    }
}

impl BatchStream {
    pub(crate) fn new(transport: Arc<Transport>, prepared: &Prepared, spec: BatchSpec) -> Result<Self> {
        let server = transport.settings().base_url.to_string();
        Ok(Self { transport, server, walker: BatchWalker::new(prepared, spec)?, cursor: None })
    }

    /// The node's type and selection (the columns' layout).
    pub(crate) fn node(&self) -> (&str, &str) {
        (&self.walker.node.0, &self.walker.node.1)
    }

    /// The client's transport (for its counters).
    pub(crate) fn transport(&self) -> &Arc<Transport> {
        &self.transport
    }

    /// The end cursor of the last page returned (the walk's own: see the module's text).
    pub(crate) fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref()
    }

    fn returned(&mut self, page: RawPage) -> RawPage {
        if page.info.end_cursor.is_some() {
            self.cursor.clone_from(&page.info.end_cursor);
        }
        page
    }

    /// The next page, or `None` at the end.
    pub(crate) async fn next_page(&mut self) -> Result<Option<RawPage>> {
        loop {
            if let Some(page) = self.walker.pop() {
                return Ok(Some(self.returned(page)));
            }
            if self.walker.done {
                return Ok(None);
            }
            self.read_batch().await?;
        }
    }

    /// The next page if no request is needed for it.
    pub(crate) fn try_next_page(&mut self) -> Option<Result<Option<RawPage>>> {
        match self.walker.pop() {
            Some(page) => Some(Ok(Some(self.returned(page)))),
            None if self.walker.done => Some(Ok(None)),
            None => None,
        }
    }

    /// Sends one batch (halving it while the server refuses its size) and takes its pages.
    async fn read_batch(&mut self) -> Result<()> {
        let mut pages =
            self.walker.pages_wanted(remembered_size(&self.server, self.walker.spec.pages_per_request));
        loop {
            let req = self.walker.request(pages)?;
            let sent = self.transport.send(&req).await.and_then(|body| {
                let refusal = refusal_of(&body)?;
                Ok((body, refusal))
            });
            match sent {
                Ok((body, None)) => return self.walker.take(&body, pages),
                Ok((_, Some(e))) | Err(e)
                    if pages > 1 && is_refusal(&e) && !matches!(e, Error::Timeout(_)) =>
                {
                    pages = fewer(pages, &e);
                    refused(&self.server, pages);
                }
                Ok((_, Some(e))) | Err(e) => return Err(e.redact(&self.transport.settings().redactor)),
            }
        }
    }
}

/// A refusal carried in a 2xx answer's errors (a document refused with no data), as an error.
fn refusal_of(body: &[u8]) -> Result<Option<Error>> {
    let envelope: Envelope<'_> = serde_json::from_slice(body)
        .map_err(|e| Error::pagination(format!("the answer to a batched walk is not JSON: {e}")))?;
    if envelope.errors.is_empty() {
        return Ok(None);
    }
    Ok(Some(Error::graphql(envelope.errors, None)))
}

#[cfg(test)]
mod tests;
