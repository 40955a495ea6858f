//! GraphQL subscriptions over WebSocket: graphql-transport-ws, or the legacy graphql-ws when the
//! server picks it.
//!
//! One subscription is one socket, driven by one task:
//! connect (JWT in `connection_init`) -> ack -> subscribe -> events into a bounded queue.
//! When the socket drops, the server closes it, or the JWT is about to lapse, the task connects
//! again with a fresh JWT and subscribes again; when the document declares the resume variable
//! (`$after` by default), it is set to the last event's `cursor`, so a server that holds its
//! recent events replays what was missed. Consecutive failures back off and, past the limit, end
//! the subscription with [`Error::Subscription`].
//!
//! The position is fixed when the subscription starts, not at its first event: before the first
//! connection the task asks the server for the newest event's cursor (`subscription_cursor`, a
//! query the emulator models) and resumes from it, so a socket that drops before the ack, or
//! between the ack and the first event, loses nothing the server still holds. A server without
//! that query is asked once per client; its subscriptions start at their first event, as before.
//!
//! No event is handed out twice: an event whose cursor is at or before the position (or one of
//! the last few thousand delivered) is not new, and a connection that brings nothing new counts
//! as a failed attempt, so a server that replays the same event on every reconnect ends the
//! subscription after `max_reconnects` instead of looping forever.
//!
//! Backpressure: the queue holds `queue` events. When it is full the task stops reading the
//! socket, so nothing is dropped by the client and memory stays bounded; the server's buffers and
//! TCP flow control hold the rest (a server that gives up on a slow reader closes the socket, and
//! the task resumes from the last queued event's cursor).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::auth::{windows, CachedToken};
use super::error::{Error, Result};
use super::graphql::{decode_response, prepare, OperationKind};
use super::secret::Redactor;
use super::transport::Transport;

/// A WebSocket-level ping goes out this often; nothing heard for [`SILENCE`] means the socket is
/// dead even if TCP has not noticed.
const PING_EVERY: Duration = Duration::from_secs(15);
const SILENCE: Duration = Duration::from_secs(45);
/// The first backoff step; it doubles up to the client's `max_retry_wait`.
const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// A JWT is replaced at least this long before it lapses, and never sooner than this from now.
const MIN_RENEW_AHEAD: Duration = Duration::from_secs(1);
/// A connection that ended sooner than this is followed by a short wait even when it was healthy.
const MIN_LIFETIME: Duration = Duration::from_secs(1);
/// How long closing a socket may take before it is simply dropped.
const GOODBYE: Duration = Duration::from_secs(2);
/// Bytes the queued events of one subscription may hold together, in KiB (64 MiB): with the
/// count bound (`queue`), what keeps a slow consumer's memory bounded whatever the events' size.
const BYTE_BUDGET_KIB: usize = 64 * 1024;
const BYTE_BUDGET_KIB_U32: u32 = 64 * 1024;
/// Largest message read from the server.
const MAX_MESSAGE_CAP: usize = 64 * 1024 * 1024;
/// The id of the one operation on each socket.
const OP_ID: &str = "1";
/// The query that gives where a subscription starting now resumes from.
const HEAD_QUERY: &str = "query SubscriptionCursor { subscription_cursor }";
/// Delivered cursors remembered to recognise an event handed out again (cursors that cannot be
/// ordered are recognised only by these).
const RECENT_CURSORS: usize = 4096;

/// What to subscribe to and how.
#[derive(Clone, Debug)]
pub struct SubscribeSpec {
    pub query: String,
    pub variables: Map<String, Value>,
    pub operation_name: Option<String>,
    /// The variable set to the last event's cursor when subscribing again (when declared).
    pub resume: Option<String>,
    /// Events held for the consumer; at least 1.
    pub queue: usize,
    /// Consecutive failed attempts before the subscription ends with an error.
    pub max_reconnects: u32,
}

/// Counters of one subscription, for tests and benchmarks.
#[derive(Debug, Default)]
pub struct SubStats {
    pub connects: AtomicU64,
    pub events: AtomicU64,
}

/// One queued item: an event (or the error that ended the subscription), the event's cursor, and
/// its share of the byte budget (given back when the consumer takes it).
struct Item {
    event: Result<Bytes>,
    cursor: Option<String>,
    _bytes: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A taken item, or the end (`None`).
type Taken = Option<Result<Bytes>>;

/// A running subscription: events (the `{data, errors}` payloads, undecoded) in arrival order.
/// Dropping it, or calling [`close`](Self::close), ends it on the server.
pub struct Subscription {
    rx: tokio::sync::Mutex<mpsc::Receiver<Item>>,
    /// What [`wait_ready`](Self::wait_ready) took off the queue for the next taker: a waiter that
    /// is cancelled after taking an event leaves it here instead of losing it.
    stash: std::sync::Mutex<std::collections::VecDeque<Taken>>,
    stop: watch::Sender<bool>,
    stats: Arc<SubStats>,
    /// The cursor of the last event the consumer took, or the start position before any (where
    /// a new subscription resumes).
    consumed: Arc<std::sync::Mutex<Option<String>>>,
    /// Becomes true (or its sender goes away with the task) once the start position is fixed.
    started: watch::Receiver<bool>,
    protocol: Arc<std::sync::Mutex<Option<&'static str>>>,
    ended: Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

impl Subscription {
    /// Checks the document and starts the subscription's task on `handle`.
    pub fn start(
        transport: Arc<Transport>,
        spec: SubscribeSpec,
        handle: &tokio::runtime::Handle,
    ) -> Result<Self> {
        if transport.is_closed() {
            return Err(Error::Closed("the client is closed".into()));
        }
        let prepared = prepare(&spec.query, Some(&spec.variables), spec.operation_name.as_deref())?;
        if prepared.operation.kind != OperationKind::Subscription {
            return Err(Error::validation(
                "subscribe() needs a subscription operation; run queries and mutations with execute()",
            ));
        }
        let resume = spec.resume.clone().filter(|r| prepared.operation.variables.iter().any(|(n, _)| n == r));
        // A position the caller gives is where the subscription starts.
        let given = resume.as_ref().and_then(|r| match spec.variables.get(r) {
            Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
            _ => None,
        });
        let consumed = Arc::new(std::sync::Mutex::new(given.clone()));
        let (started_tx, started) = watch::channel(false);
        let url = ws_url(transport.settings().base_url.as_str())?;
        let (tx, rx) = mpsc::channel(spec.queue.max(1));
        let (stop, stopped) = watch::channel(false);
        let stats = Arc::new(SubStats::default());
        let protocol = Arc::new(std::sync::Mutex::new(None));
        let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let task = Task {
            redactor: transport.settings().redactor.clone(),
            closed: transport.on_close(),
            transport,
            spec,
            resume,
            url,
            tx,
            budget: Arc::new(tokio::sync::Semaphore::new(BYTE_BUDGET_KIB)),
            stopped,
            stats: Arc::clone(&stats),
            cursor: given,
            recent: Recent::default(),
            consumed: Arc::clone(&consumed),
            started: started_tx,
            protocol: Arc::clone(&protocol),
            _ended: Ended2(Arc::clone(&ended)),
        };
        handle.spawn(task.run());
        Ok(Self {
            rx: tokio::sync::Mutex::new(rx),
            stash: std::sync::Mutex::new(std::collections::VecDeque::new()),
            stop,
            stats,
            consumed,
            started,
            protocol,
            ended,
        })
    }

    fn taken(&self, item: Option<Item>) -> Taken {
        let item = item?;
        if let (Some(c), Ok(mut consumed)) = (item.cursor, self.consumed.lock()) {
            *consumed = Some(c);
        }
        Some(item.event)
    }

    fn stashed(&self) -> Option<Taken> {
        self.stash.lock().ok().and_then(|mut s| s.pop_front())
    }

    /// Returns once the subscription's start position is fixed (see the module's notes), or it
    /// has ended: from then on, every event the server publishes (and still holds) is delivered
    /// whenever the socket connects.
    pub async fn started(&self) {
        let mut started = self.started.clone();
        let mut stop = self.stop.subscribe();
        if *stop.borrow_and_update() {
            return;
        }
        tokio::select! {
            _ = started.wait_for(|s| *s) => {}
            _ = stop.changed() => {}
        }
    }

    /// The next event; `None` once the subscription has ended (completed by the server or
    /// closed). An error ends it too.
    pub async fn next(&self) -> Taken {
        if let Some(taken) = self.stashed() {
            return taken;
        }
        let mut stop = self.stop.subscribe();
        if *stop.borrow_and_update() {
            return None;
        }
        let mut rx = tokio::select! {
            rx = self.rx.lock() => rx,
            _ = stop.changed() => return None,
        };
        if let Some(taken) = self.stashed() {
            return taken;
        }
        tokio::select! {
            item = rx.recv() => self.taken(item),
            _ = stop.changed() => None,
        }
    }

    /// Waits until [`try_next`](Self::try_next) has something to give (an event or the end),
    /// taking nothing for itself: cancelling this wait never loses an event.
    pub async fn wait_ready(&self) {
        if self.stash.lock().map_or(true, |s| !s.is_empty()) {
            return;
        }
        let mut stop = self.stop.subscribe();
        if *stop.borrow_and_update() {
            return;
        }
        let mut rx = tokio::select! {
            rx = self.rx.lock() => rx,
            _ = stop.changed() => return,
        };
        if self.stash.lock().map_or(true, |s| !s.is_empty()) {
            return;
        }
        let taken = tokio::select! {
            item = rx.recv() => self.taken(item),
            _ = stop.changed() => None,
        };
        // Pushed while the queue lock is held: nothing can overtake it.
        if let Ok(mut s) = self.stash.lock() {
            s.push_back(taken);
        }
    }

    /// The next event if one is ready now, without waiting: `None` when none is (or another
    /// caller is reading), `Some(None)` at the end.
    pub fn try_next(&self) -> Option<Taken> {
        if let Some(taken) = self.stashed() {
            return Some(taken);
        }
        if *self.stop.borrow() {
            return Some(None);
        }
        let mut rx = self.rx.try_lock().ok()?;
        match rx.try_recv() {
            Ok(item) => Some(self.taken(Some(item))),
            Err(mpsc::error::TryRecvError::Empty) => None,
            Err(mpsc::error::TryRecvError::Disconnected) => Some(None),
        }
    }

    /// Ends the subscription (the server is told) and wakes a waiting [`next`](Self::next).
    pub fn close(&self) {
        let _ = self.stop.send(true);
    }

    /// Closed by the consumer or the client, or ended by the server or an error.
    pub fn is_closed(&self) -> bool {
        *self.stop.borrow() || self.ended.load(Ordering::Acquire)
    }

    pub fn stats(&self) -> &SubStats {
        &self.stats
    }

    /// The cursor of the last event the consumer took (before any, the start position): a new
    /// subscription with it as `after` goes on with the next one.
    pub fn cursor(&self) -> Option<String> {
        self.consumed.lock().ok().and_then(|c| c.clone())
    }

    /// The subprotocol of the current (or last) connection.
    pub fn protocol(&self) -> Option<&'static str> {
        self.protocol.lock().ok().and_then(|p| *p)
    }

    /// Events waiting for the consumer.
    pub fn buffered(&self) -> usize {
        let stashed = self.stash.lock().map_or(0, |s| s.iter().filter(|t| t.is_some()).count());
        stashed + self.rx.try_lock().map_or(0, |rx| rx.len())
    }
}

/// Sets the subscription's `ended` flag however the task finishes.
struct Ended2(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Ended2 {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// `http(s)://host/api/v1` -> `ws(s)://host/api/v1`.
pub fn ws_url(base: &str) -> Result<String> {
    if let Some(rest) = base.strip_prefix("https://") {
        Ok(format!("wss://{rest}"))
    } else if let Some(rest) = base.strip_prefix("http://") {
        Ok(format!("ws://{rest}"))
    } else {
        Err(Error::config(format!("cannot derive a WebSocket URL from {base}")))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// graphql-transport-ws (the graphql-ws library's protocol).
    TransportWs,
    /// subscriptions-transport-ws, whose subprotocol is named graphql-ws.
    Legacy,
}

impl Proto {
    pub fn name(self) -> &'static str {
        match self {
            Self::TransportWs => "graphql-transport-ws",
            Self::Legacy => "graphql-ws",
        }
    }

    fn from_header(h: Option<&HeaderValue>) -> Option<Self> {
        match h.and_then(|v| v.to_str().ok()).map(str::trim) {
            Some("graphql-transport-ws") => Some(Self::TransportWs),
            Some("graphql-ws") => Some(Self::Legacy),
            _ => None,
        }
    }

    pub fn init(self, authorization: &str) -> String {
        serde_json::json!({"type": "connection_init", "payload": {"Authorization": authorization}})
            .to_string()
    }

    pub fn subscribe(self, payload: &Value) -> String {
        let kind = match self {
            Self::TransportWs => "subscribe",
            Self::Legacy => "start",
        };
        serde_json::json!({"id": OP_ID, "type": kind, "payload": payload}).to_string()
    }

    pub fn stop(self) -> String {
        let kind = match self {
            Self::TransportWs => "complete",
            Self::Legacy => "stop",
        };
        serde_json::json!({"id": OP_ID, "type": kind}).to_string()
    }
}

/// A server message, as far as the client needs it.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Ack,
    Ping,
    /// pong, ka (legacy keep-alive): proof of life only.
    Alive,
    /// An event of our operation: its `{data, errors}` payload.
    Next(Bytes),
    /// Our operation failed: its errors.
    Error(Vec<Value>),
    /// The server ended our operation.
    Complete,
    /// legacy connection_error (a refused connection_init).
    ConnectionError(String),
    /// Another id, or a type the client does not know.
    Other,
}

pub fn parse(text: &str) -> std::result::Result<Incoming, String> {
    #[derive(Deserialize)]
    struct Msg<'a> {
        #[serde(rename = "type", borrow)]
        kind: std::borrow::Cow<'a, str>,
        #[serde(default, borrow)]
        id: Option<std::borrow::Cow<'a, str>>,
        #[serde(default, borrow)]
        payload: Option<&'a RawValue>,
    }
    let msg: Msg<'_> = serde_json::from_str(text).map_err(|e| format!("not a protocol message: {e}"))?;
    let ours = msg.id.as_deref() == Some(OP_ID);
    Ok(match msg.kind.as_ref() {
        "connection_ack" => Incoming::Ack,
        "ping" => Incoming::Ping,
        "pong" | "ka" => Incoming::Alive,
        "next" | "data" if ours => match msg.payload {
            Some(p) if p.get().trim_start().starts_with('{') => {
                Incoming::Next(Bytes::copy_from_slice(p.get().as_bytes()))
            }
            _ => return Err("an event without a payload object".into()),
        },
        "error" if ours => {
            let errors = match msg.payload.map(|p| serde_json::from_str::<Value>(p.get())) {
                Some(Ok(Value::Array(errors))) => errors,
                Some(Ok(one @ Value::Object(_))) => vec![one],
                _ => vec![serde_json::json!({"message": "the server refused the subscription"})],
            };
            Incoming::Error(errors)
        }
        "complete" if ours => Incoming::Complete,
        "connection_error" => {
            // Whole: the caller masks secrets first and cuts after, so no cut splits a secret.
            Incoming::ConnectionError(msg.payload.map(|p| p.get().to_string()).unwrap_or_default())
        }
        _ => Incoming::Other,
    })
}

/// The `cursor` member of the event's root field: `{"data": {"<field>": {"cursor": "..."}}}`.
pub fn event_cursor(payload: &[u8]) -> Option<String> {
    // Only the cursor is kept: every other member is skipped without being built (the Python
    // side decodes the event itself), and a subscription has exactly one root field.
    #[derive(Deserialize)]
    struct Root {
        cursor: Option<Value>,
    }
    #[derive(Deserialize)]
    struct Payload {
        data: Option<std::collections::BTreeMap<String, Option<Root>>>,
    }
    let p: Payload = serde_json::from_slice(payload).ok()?;
    let (_, root) = p.data?.into_iter().next()?;
    match root?.cursor? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Why a connection ended.
enum Ended {
    /// The consumer or the client stopped it: done.
    Stopped,
    /// The server completed the operation: done, no error.
    Completed,
    /// Cannot go on (the error goes to the consumer).
    Fatal(Error),
    /// Connect again: after `wait` when the attempt failed (counted), at once when a healthy
    /// connection ended (the failure count starts again).
    Retry { why: String, failed: bool, retry_after: Option<Duration> },
    /// The JWT was refused: forget it, then connect again (counted; `healthy` when the refused
    /// connection had delivered or lasted, which starts the count again first).
    Unauthorized { why: String, healthy: bool },
}

struct Task {
    transport: Arc<Transport>,
    redactor: Redactor,
    closed: watch::Receiver<bool>,
    spec: SubscribeSpec,
    resume: Option<String>,
    url: String,
    tx: mpsc::Sender<Item>,
    /// Bytes (in KiB) queued events may hold together.
    budget: Arc<tokio::sync::Semaphore>,
    stopped: watch::Receiver<bool>,
    stats: Arc<SubStats>,
    /// The cursor of the last event queued (before any, the start position): what a
    /// resubscription starts after.
    cursor: Option<String>,
    /// Cursors delivered lately, to recognise an event handed out again.
    recent: Recent,
    /// The consumer's position, set to the start position before any event is queued.
    consumed: Arc<std::sync::Mutex<Option<String>>>,
    started: watch::Sender<bool>,
    protocol: Arc<std::sync::Mutex<Option<&'static str>>>,
    _ended: Ended2,
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How a send to the server ended.
enum Sent {
    Done,
    /// The consumer or the client stopped the subscription meanwhile.
    Stopped,
    /// The socket failed, or the server did not take the data in time.
    Failed(String),
}

impl Task {
    fn stopping(&self) -> bool {
        *self.stopped.borrow() || *self.closed.borrow()
    }

    /// Queues the error that ends the subscription.
    async fn fail(&self, e: Error) {
        let item = Item { event: Err(e.redact(&self.redactor)), cursor: None, _bytes: None };
        let mut stopped = self.stopped.clone();
        tokio::select! {
            _ = self.tx.send(item) => {}
            _ = stopped.changed() => {}
        }
    }

    async fn run(mut self) {
        if let Err(e) = self.start_position().await {
            return self.fail(e).await;
        }
        let _ = self.started.send(true);
        let mut failures: u32 = 0;
        let max_wait = self.transport.settings().max_retry_wait;
        loop {
            if self.stopping() {
                return;
            }
            let ended = self.connection().await;
            let (why, wait) = match ended {
                Ended::Stopped | Ended::Completed => return,
                Ended::Fatal(e) => return self.fail(e).await,
                Ended::Retry { why, failed: false, retry_after } => {
                    failures = 0;
                    (why, retry_after.unwrap_or_default())
                }
                Ended::Retry { why, failed: true, retry_after } => {
                    failures = failures.saturating_add(1);
                    let step = backoff(failures, max_wait);
                    if let Some(asked) = retry_after.filter(|r| *r > max_wait) {
                        // As for HTTP calls: a wait longer than max_retry_wait is not waited.
                        let message = format!(
                            "{why}; the server asks to wait {:.0}s, longer than max_retry_wait ({:.0}s)",
                            asked.as_secs_f64(),
                            max_wait.as_secs_f64()
                        );
                        return self.fail(Error::Subscription { message, cursor: self.cursor.clone() }).await;
                    }
                    (why, retry_after.map_or(step, |r| r.max(step)))
                }
                Ended::Unauthorized { why, healthy } => {
                    if healthy {
                        failures = 0;
                    }
                    failures = failures.saturating_add(1);
                    if !self.transport.tokens().can_refresh() {
                        return self.fail(Error::Authentication { error_type: None, message: why }).await;
                    }
                    (why, backoff(failures, max_wait))
                }
            };
            if failures > self.spec.max_reconnects {
                let message =
                    format!("the subscription could not be resumed after {failures} attempts: {why}");
                return self.fail(Error::Subscription { message, cursor: self.cursor.clone() }).await;
            }
            if wait.is_zero() {
                log::info!("subscription: {why}; connecting again");
            } else {
                log::info!("subscription: {why}; connecting again in {:.2}s", wait.as_secs_f64());
                let mut stopped = self.stopped.clone();
                let mut closed = self.closed.clone();
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    _ = stopped.changed() => return,
                    _ = closed.changed() => return,
                }
            }
        }
    }

    /// Fixes where the subscription starts when the caller gave no position: the server's
    /// newest event cursor, asked for over HTTP before the first connection.
    async fn start_position(&mut self) -> Result<()> {
        if self.resume.is_none() || self.cursor.is_some() || self.transport.lacks_event_head() {
            return Ok(());
        }
        let req = prepare(HEAD_QUERY, None, None)?;
        let mut stopped = self.stopped.clone();
        let mut closed = self.closed.clone();
        let sent = tokio::select! {
            sent = self.transport.send(&req) => sent,
            _ = stopped.changed() => return Ok(()),
            _ = closed.changed() => return Ok(()),
        };
        let head = match sent.and_then(|body| decode_response(&body)) {
            Ok(data) => match data.get("subscription_cursor") {
                Some(Value::String(c)) if !c.is_empty() => Some(c.clone()),
                _ => None,
            },
            // The server does not have the query: subscriptions start at their first event.
            Err(Error::GraphQL { .. } | Error::ApiStatus { status: 400, .. }) => None,
            Err(e @ (Error::Authentication { .. } | Error::Closed(_))) => return Err(e),
            Err(e) => {
                // Not a reason to give up: the socket has its own retries. This start only is
                // at the first event.
                log::info!(
                    "subscription: the start position could not be asked for ({e}); it is the first event"
                );
                return Ok(());
            }
        };
        match head {
            Some(c) => {
                if let Ok(mut consumed) = self.consumed.lock() {
                    consumed.get_or_insert_with(|| c.clone());
                }
                self.cursor = Some(c);
            }
            None => {
                self.transport.set_lacks_event_head();
                log::info!(
                    "subscription: the server gives no subscription_cursor; a subscription starts at its \
                     first event (a reconnect before it resumes from the server's present)"
                );
            }
        }
        Ok(())
    }

    /// An event the consumer has not had yet: not one of the last delivered, and not at or before
    /// the position when the cursors can be ordered.
    fn is_new(&self, cursor: &str) -> bool {
        if self.recent.contains(cursor) {
            return false;
        }
        match &self.cursor {
            Some(last) => !matches!(
                cursor_order(cursor, last),
                Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
            ),
            None => true,
        }
    }

    /// Sends one message, giving up when the server does not take it within the client's
    /// timeout (a peer that does not read) or when the subscription is stopped meanwhile.
    async fn send(&self, socket: &mut Socket, message: Message) -> Sent {
        let mut stopped = self.stopped.clone();
        let mut closed = self.closed.clone();
        tokio::select! {
            sent = tokio::time::timeout(self.transport.settings().timeout, socket.send(message)) => match sent {
                Ok(Ok(())) => Sent::Done,
                Ok(Err(e)) => Sent::Failed(format!("the connection broke: {e}")),
                Err(_) => Sent::Failed("the server does not read what the client sends".into()),
            },
            _ = stopped.changed() => Sent::Stopped,
            _ = closed.changed() => Sent::Stopped,
        }
    }

    async fn connect(&self, token: &CachedToken) -> std::result::Result<(Socket, Proto), Ended> {
        let settings = self.transport.settings();
        let mut request = self
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| Ended::Fatal(Error::config(format!("bad WebSocket URL: {e}"))))?;
        request
            .headers_mut()
            .insert("Sec-WebSocket-Protocol", HeaderValue::from_static("graphql-transport-ws, graphql-ws"));
        request.headers_mut().insert("User-Agent", HeaderValue::from_static(super::http::USER_AGENT));
        let max = settings.max_response_bytes.clamp(64 * 1024, MAX_MESSAGE_CAP);
        let config = WebSocketConfig::default().max_message_size(Some(max)).max_frame_size(Some(max));
        let host = request
            .uri()
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = request.uri().port_u16().unwrap_or(if self.url.starts_with("wss://") { 443 } else { 80 });
        let connecting = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port)).await.map_err(WsError::Io)?;
            let _ = tcp.set_nodelay(true);
            let connector = if self.url.starts_with("wss://") {
                Some(tokio_tungstenite::Connector::Rustls(
                    super::http::tls_config(settings)
                        .map_err(|e| WsError::Io(std::io::Error::other(e.to_string())))?,
                ))
            } else {
                None
            };
            tokio_tungstenite::client_async_tls_with_config(request, tcp, Some(config), connector).await
        };
        let _ = token;
        let (socket, response) =
            match tokio::time::timeout(settings.connect_timeout.max(settings.timeout), connecting).await {
                Err(_) => {
                    return Err(Ended::Retry {
                        why: "connecting timed out".into(),
                        failed: true,
                        retry_after: None,
                    })
                }
                Ok(Err(e)) => return Err(handshake_error(e)),
                Ok(Ok(pair)) => pair,
            };
        let Some(proto) = Proto::from_header(response.headers().get("Sec-WebSocket-Protocol")) else {
            return Err(Ended::Fatal(Error::Subscription {
                message:
                    "the server chose no GraphQL WebSocket subprotocol (graphql-transport-ws or graphql-ws)"
                        .into(),
                cursor: None,
            }));
        };
        Ok((socket, proto))
    }

    /// One connection, from connect to its end.
    async fn connection(&mut self) -> Ended {
        // A JWT and a socket, but a stop is heard while either is awaited.
        let mut stopped = self.stopped.clone();
        let mut closed = self.closed.clone();
        let token = tokio::select! {
            got = self.transport.tokens().get() => match got {
                Ok(t) => t,
                Err(e @ Error::Authentication { .. }) => return Ended::Fatal(e),
                Err(e) => return Ended::Retry { why: e.to_string(), failed: true, retry_after: None },
            },
            _ = stopped.changed() => return Ended::Stopped,
            _ = closed.changed() => return Ended::Stopped,
        };
        let connected = tokio::select! {
            c = self.connect(&token) => c,
            _ = stopped.changed() => return Ended::Stopped,
            _ = closed.changed() => return Ended::Stopped,
        };
        let (mut socket, proto) = match connected {
            Ok(pair) => pair,
            Err(ended) => return ended,
        };
        self.stats.connects.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut p) = self.protocol.lock() {
            *p = Some(proto.name());
        }
        let authorization = token.header.to_str().unwrap_or_default().to_string();
        // A failed send is not the end yet: what the server sent before it closed is still to be
        // read (and a dead socket shows on the next read).
        if let Sent::Stopped = self.send(&mut socket, Message::Text(proto.init(&authorization).into())).await
        {
            return self.goodbye(socket, proto).await;
        }
        // Wait for the ack.
        let ack_deadline = tokio::time::sleep(self.transport.settings().timeout);
        tokio::pin!(ack_deadline);
        loop {
            tokio::select! {
                () = &mut ack_deadline => {
                    drop_socket(socket).await;
                    return Ended::Retry { why: "no connection_ack from the server".into(), failed: true, retry_after: None };
                }
                _ = stopped.changed() => return self.goodbye(socket, proto).await,
                _ = closed.changed() => return self.goodbye(socket, proto).await,
                msg = socket.next() => match self.frame(msg, &mut socket, proto, &token).await {
                    Ok(Some(Incoming::Ack)) => break,
                    Ok(_) => {}
                    Err(ended) => return self.failed_before_events(ended),
                },
            }
        }
        let mut variables = self.spec.variables.clone();
        if let (Some(name), Some(cursor)) = (&self.resume, &self.cursor) {
            variables.insert(name.clone(), Value::String(cursor.clone()));
        }
        let mut payload = serde_json::json!({"query": self.spec.query, "variables": variables});
        if let (Some(n), Value::Object(m)) = (&self.spec.operation_name, &mut payload) {
            m.insert("operationName".into(), Value::String(n.clone()));
        }
        if let Sent::Stopped = self.send(&mut socket, Message::Text(proto.subscribe(&payload).into())).await {
            return self.goodbye(socket, proto).await;
        }
        // A new JWT before this one lapses: the connection is replaced a little ahead of it.
        let renew_at = renew_deadline(&token, self.transport.settings());
        let renew = async move {
            match renew_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(renew);
        let mut ping = tokio::time::interval_at((Instant::now() + PING_EVERY).into(), PING_EVERY);
        let mut heard = Instant::now();
        let opened = Instant::now();
        let mut delivered = false;
        let healthy = |delivered: bool| delivered || opened.elapsed() > PING_EVERY;
        loop {
            tokio::select! {
                _ = stopped.changed() => return self.goodbye(socket, proto).await,
                _ = closed.changed() => return self.goodbye(socket, proto).await,
                () = &mut renew => {
                    let _ = self.goodbye(socket, proto).await;
                    return Ended::Retry { why: "the JWT is about to lapse".into(), failed: false, retry_after: None };
                }
                _ = ping.tick() => {
                    if heard.elapsed() > SILENCE {
                        drop_socket(socket).await;
                        return Ended::Retry { why: "the server went silent".into(), failed: false, retry_after: None };
                    }
                    match self.send(&mut socket, Message::Ping(Bytes::new())).await {
                        Sent::Done => {}
                        Sent::Stopped => return self.goodbye(socket, proto).await,
                        Sent::Failed(why) => return Ended::Retry { why, failed: !healthy(delivered), retry_after: None },
                    }
                }
                msg = socket.next() => {
                    heard = Instant::now();
                    match self.frame(msg, &mut socket, proto, &token).await {
                        Ok(Some(Incoming::Next(payload))) => {
                            let cursor = if self.resume.is_some() { event_cursor(&payload) } else { None };
                            if cursor.as_deref().is_some_and(|c| !self.is_new(c)) {
                                // Handed out before: not delivered again, and no sign of progress.
                                log::debug!("subscription: an event at or before the position was skipped");
                                continue;
                            }
                            self.stats.events.fetch_add(1, Ordering::Relaxed);
                            delivered = true;
                            // A full queue or byte budget: wait (backpressure), but hear a stop.
                            let kib = u32::try_from(payload.len().div_ceil(1024)).unwrap_or(u32::MAX).clamp(1, BYTE_BUDGET_KIB_U32);
                            let permit = tokio::select! {
                                p = Arc::clone(&self.budget).acquire_many_owned(kib) => p.ok(),
                                _ = stopped.changed() => return self.goodbye(socket, proto).await,
                                _ = closed.changed() => return self.goodbye(socket, proto).await,
                            };
                            let item = Item { event: Ok(payload), cursor: cursor.clone(), _bytes: permit };
                            tokio::select! {
                                sent = self.tx.send(item) => if sent.is_err() { return self.goodbye(socket, proto).await },
                                _ = stopped.changed() => return self.goodbye(socket, proto).await,
                                _ = closed.changed() => return self.goodbye(socket, proto).await,
                            }
                            if let Some(c) = cursor {
                                self.recent.push(&c);
                                self.cursor = Some(c);
                            }
                            // Waiting for the consumer is not the server's silence.
                            heard = Instant::now();
                        }
                        Ok(Some(Incoming::Error(errors))) => return Ended::Fatal(Error::graphql(errors, None)),
                        Ok(Some(Incoming::Complete)) => {
                            drop_socket(socket).await;
                            return Ended::Completed;
                        }
                        Ok(_) => {}
                        Err(Ended::Retry { why, retry_after, .. }) => {
                            // A connection that delivered or lasted was healthy: start counting
                            // again. A short one is still spaced from the next, so a server that
                            // hands out an event and hangs up cannot make the client spin.
                            let failed = !healthy(delivered);
                            let retry_after = if !failed && opened.elapsed() < MIN_LIFETIME {
                                let space = backoff(1, self.transport.settings().max_retry_wait);
                                Some(retry_after.map_or(space, |r| r.max(space)))
                            } else {
                                retry_after
                            };
                            return Ended::Retry { why, failed, retry_after };
                        }
                        Err(Ended::Unauthorized { why, .. }) => {
                            return Ended::Unauthorized { why, healthy: healthy(delivered) };
                        }
                        Err(ended) => return ended,
                    }
                }
            }
        }
    }

    fn failed_before_events(&self, ended: Ended) -> Ended {
        match ended {
            Ended::Retry { why, retry_after, .. } => Ended::Retry { why, failed: true, retry_after },
            other => other,
        }
    }

    /// Ends our operation on the server and closes the socket (bounded in time).
    async fn goodbye(&self, mut socket: Socket, proto: Proto) -> Ended {
        let bye = async {
            let _ = socket.send(Message::Text(proto.stop().into())).await;
            let _ = socket.close(Some(CloseFrame { code: CloseCode::Normal, reason: "".into() })).await;
        };
        let _ = tokio::time::timeout(GOODBYE, bye).await;
        Ended::Stopped
    }

    /// Reads one frame: protocol pings are answered here; what the caller must act on is returned.
    async fn frame(
        &self,
        msg: Option<std::result::Result<Message, WsError>>,
        socket: &mut Socket,
        proto: Proto,
        token: &CachedToken,
    ) -> std::result::Result<Option<Incoming>, Ended> {
        let text = match msg {
            None => {
                return Err(Ended::Retry {
                    why: "the server closed the connection".into(),
                    failed: false,
                    retry_after: None,
                })
            }
            Some(Err(e)) => {
                return Err(Ended::Retry {
                    why: format!("the connection broke: {e}"),
                    failed: false,
                    retry_after: None,
                })
            }
            Some(Ok(Message::Text(t))) => t,
            Some(Ok(Message::Binary(b))) => match String::from_utf8(b.to_vec()) {
                Ok(t) => t.into(),
                Err(_) => {
                    return Err(Ended::Retry {
                        why: "the server sent binary data".into(),
                        failed: true,
                        retry_after: None,
                    })
                }
            },
            Some(Ok(Message::Close(frame))) => return Err(self.closed_by_server(frame, token)),
            Some(Ok(_)) => return Ok(None),
        };
        match parse(text.as_str()) {
            Ok(Incoming::Ping) => {
                if proto == Proto::TransportWs {
                    match self.send(socket, Message::Text(r#"{"type":"pong"}"#.into())).await {
                        Sent::Done => {}
                        Sent::Stopped => return Ok(None),
                        Sent::Failed(why) => {
                            return Err(Ended::Retry { why, failed: true, retry_after: None })
                        }
                    }
                }
                Ok(None)
            }
            Ok(Incoming::ConnectionError(detail)) => {
                self.transport.tokens().invalidate(token.generation);
                let (detail, _) = self.redactor.scrub_cut(&detail, 300);
                Err(Ended::Unauthorized {
                    why: format!("the server refused connection_init: {detail}"),
                    healthy: false,
                })
            }
            Ok(other) => Ok(Some(other)),
            Err(why) => {
                Err(Ended::Retry { why: format!("protocol error: {why}"), failed: true, retry_after: None })
            }
        }
    }

    fn closed_by_server(&self, frame: Option<CloseFrame>, token: &CachedToken) -> Ended {
        let (code, reason) =
            frame.map_or((1005, String::new()), |f| (u16::from(f.code), f.reason.to_string()));
        let (reason, _) = self.redactor.scrub_cut(&reason, 200);
        let why = format!(
            "the server closed the connection ({code}{})",
            if reason.is_empty() { String::new() } else { format!(": {reason}") }
        );
        match code {
            4401 | 4403 => {
                self.transport.tokens().invalidate(token.generation);
                Ended::Unauthorized { why, healthy: false }
            }
            // The server judged our messages or the operation invalid: trying again cannot help.
            4400 | 4406 | 4409 | 1002 | 1003 | 1007 | 1008 => {
                Ended::Fatal(Error::Subscription { message: why, cursor: self.cursor.clone() })
            }
            4429 => Ended::Retry { why, failed: true, retry_after: None },
            _ => Ended::Retry { why, failed: false, retry_after: None },
        }
    }
}

/// Closes a socket without waiting long for a peer that does not answer.
async fn drop_socket(mut socket: Socket) {
    let _ = tokio::time::timeout(GOODBYE, socket.close(None)).await;
}

fn handshake_error(e: WsError) -> Ended {
    match e {
        WsError::Http(response) => {
            let status = response.status();
            let retry_after = response
                .headers()
                .get("Retry-After")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map(|s| Duration::from_secs(s.min(3600)));
            let why = format!("the server refused the WebSocket upgrade: HTTP {}", status.as_u16());
            match status {
                StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                    Ended::Unauthorized { why, healthy: false }
                }
                StatusCode::TOO_MANY_REQUESTS => Ended::Retry { why, failed: true, retry_after },
                s if s.is_server_error() => Ended::Retry { why, failed: true, retry_after },
                _ => Ended::Fatal(Error::Subscription {
                    message: format!("{why}; the server does not serve subscriptions at this URL"),
                    cursor: None,
                }),
            }
        }
        WsError::Io(e) => {
            Ended::Retry { why: format!("cannot connect: {e}"), failed: true, retry_after: None }
        }
        WsError::Protocol(
            tokio_tungstenite::tungstenite::error::ProtocolError::SecWebSocketSubProtocolError(e),
        ) => Ended::Fatal(Error::Subscription {
            message: format!(
                "the server chose no GraphQL WebSocket subprotocol (graphql-transport-ws or graphql-ws): {e}"
            ),
            cursor: None,
        }),
        other => Ended::Retry {
            why: format!("the WebSocket handshake failed: {other}"),
            failed: true,
            retry_after: None,
        },
    }
}

/// When to replace the connection for a fresh JWT: ahead of its lapse by the mandatory refresh
/// window, and never sooner than [`MIN_RENEW_AHEAD`] from now.
fn renew_deadline(token: &CachedToken, settings: &super::config::Settings) -> Option<Instant> {
    let expires = token.expires_at?;
    let (_, mandatory) = windows(token.lifetime, settings.refresh_advisory, settings.refresh_mandatory);
    let at = expires.checked_sub(mandatory).unwrap_or(expires);
    Some(at.max(Instant::now() + MIN_RENEW_AHEAD))
}

/// `BACKOFF_BASE * 2^(failures-1)`, capped, with jitter in [50 %, 100 %].
/// The last [`RECENT_CURSORS`] cursors delivered.
#[derive(Default)]
struct Recent {
    order: std::collections::VecDeque<String>,
    set: std::collections::HashSet<String>,
}

impl Recent {
    fn contains(&self, cursor: &str) -> bool {
        self.set.contains(cursor)
    }

    fn push(&mut self, cursor: &str) {
        if !self.set.insert(cursor.to_owned()) {
            return;
        }
        self.order.push_back(cursor.to_owned());
        if self.order.len() > RECENT_CURSORS {
            if let Some(old) = self.order.pop_front() {
                self.set.remove(&old);
            }
        }
    }
}

/// A cursor's place in its stream when it shows one: a decimal sequence number, or a Relay
/// cursor (`base64("prefix:N")`).
fn cursor_position(c: &str) -> Option<(String, u128)> {
    use base64::Engine as _;
    if !c.is_empty() && c.len() <= 38 && c.bytes().all(|b| b.is_ascii_digit()) {
        return c.parse().ok().map(|n| (String::new(), n));
    }
    let raw = base64::engine::general_purpose::STANDARD.decode(c).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (prefix, n) = text.rsplit_once(':')?;
    if n.is_empty() || n.len() > 38 || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((prefix.to_owned(), n.parse().ok()?))
}

/// How two cursors of one stream are ordered, when both show their place in it.
fn cursor_order(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    if a == b {
        return Some(std::cmp::Ordering::Equal);
    }
    let (pa, na) = cursor_position(a)?;
    let (pb, nb) = cursor_position(b)?;
    (pa == pb).then(|| na.cmp(&nb))
}

fn backoff(failures: u32, cap: Duration) -> Duration {
    let exp = failures.saturating_sub(1).min(16);
    let full = BACKOFF_BASE.saturating_mul(1u32 << exp).min(cap.max(BACKOFF_BASE));
    full.mul_f64(0.5 + fastrand::f64() / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            ws_url("https://api.example.com/api/v1").ok().as_deref(),
            Some("wss://api.example.com/api/v1")
        );
        assert_eq!(ws_url("http://127.0.0.1:9/api/v1").ok().as_deref(), Some("ws://127.0.0.1:9/api/v1"));
        assert!(ws_url("ftp://x").is_err());
    }

    #[test]
    fn messages_of_both_protocols() {
        assert_eq!(parse(r#"{"type":"connection_ack"}"#), Ok(Incoming::Ack));
        assert_eq!(parse(r#"{"type":"ka"}"#), Ok(Incoming::Alive));
        assert_eq!(parse(r#"{"type":"ping","payload":{}}"#), Ok(Incoming::Ping));
        assert_eq!(
            parse(r#"{"type":"next","id":"1","payload":{"data":{"a":1}}}"#),
            Ok(Incoming::Next(Bytes::from_static(br#"{"data":{"a":1}}"#)))
        );
        assert_eq!(
            parse(r#"{"type":"data","id":"1","payload":{"data":null}}"#),
            Ok(Incoming::Next(Bytes::from_static(br#"{"data":null}"#)))
        );
        // Another operation's event is not ours.
        assert_eq!(parse(r#"{"type":"next","id":"2","payload":{"data":{}}}"#), Ok(Incoming::Other));
        assert_eq!(parse(r#"{"type":"complete","id":"1"}"#), Ok(Incoming::Complete));
        assert!(
            matches!(parse(r#"{"type":"error","id":"1","payload":[{"message":"no"}]}"#), Ok(Incoming::Error(e)) if e.len() == 1)
        );
        assert!(
            matches!(parse(r#"{"type":"error","id":"1","payload":{"message":"no"}}"#), Ok(Incoming::Error(e)) if e.len() == 1)
        );
        assert!(matches!(parse(r#"{"type":"error","id":"1"}"#), Ok(Incoming::Error(e)) if e.len() == 1));
        assert_eq!(parse(r#"{"type":"surprise"}"#), Ok(Incoming::Other));
    }

    #[test]
    fn hostile_messages_are_errors_not_panics() {
        for bad in [
            "",
            "[]",
            "null",
            "{",
            r#"{"type":1}"#,
            r#"{"type":"next","id":"1","payload":[1]}"#,
            r#"{"type":"next","id":"1"}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn client_messages() {
        let init: Value = serde_json::from_str(&Proto::TransportWs.init("Bearer x")).unwrap_or_default();
        assert_eq!(init["payload"]["Authorization"], "Bearer x");
        let sub: Value = serde_json::from_str(&Proto::Legacy.subscribe(&serde_json::json!({"query": "q"})))
            .unwrap_or_default();
        assert_eq!(sub["type"], "start");
        let stop: Value = serde_json::from_str(&Proto::TransportWs.stop()).unwrap_or_default();
        assert_eq!(stop["type"], "complete");
        let stop: Value = serde_json::from_str(&Proto::Legacy.stop()).unwrap_or_default();
        assert_eq!(stop["type"], "stop");
    }

    #[test]
    fn cursors_of_events() {
        assert_eq!(
            event_cursor(br#"{"data":{"finding_created":{"cursor":"42","kind":"x"}}}"#).as_deref(),
            Some("42")
        );
        assert_eq!(event_cursor(br#"{"data":{"e":{"cursor":7}}}"#).as_deref(), Some("7"));
        assert_eq!(event_cursor(br#"{"data":{"e":{}}}"#), None);
        assert_eq!(event_cursor(br#"{"data":null}"#), None);
        assert_eq!(event_cursor(b"garbage"), None);
        assert_eq!(event_cursor(br#"{"data":{"e":null}}"#), None);
        assert_eq!(
            event_cursor(br#"{"data":{"e":{"cursor":"9","big":[1,{"x":[2]}]}},"errors":[]}"#).as_deref(),
            Some("9")
        );
    }

    #[test]
    fn cursors_are_ordered_when_they_show_their_place() {
        use std::cmp::Ordering::{Equal, Greater, Less};
        assert_eq!(cursor_order("9", "10"), Some(Less));
        assert_eq!(cursor_order("10", "10"), Some(Equal));
        assert_eq!(cursor_order("11", "10"), Some(Greater));
        // Relay cursors: base64 of "arrayconnection:N".
        assert_eq!(cursor_order("YXJyYXljb25uZWN0aW9uOjk=", "YXJyYXljb25uZWN0aW9uOjEw"), Some(Less));
        assert_eq!(cursor_order("opaque-a", "opaque-b"), None);
        assert_eq!(cursor_order("opaque-a", "opaque-a"), Some(Equal));
        assert_eq!(cursor_order("1", "YXJyYXljb25uZWN0aW9uOjEw"), None);
        assert_eq!(cursor_order("", "1"), None);
        assert_eq!(cursor_order(&"9".repeat(60), "1"), None);
    }

    #[test]
    fn recent_cursors_are_bounded() {
        let mut r = Recent::default();
        for i in 0..(RECENT_CURSORS + 10) {
            r.push(&i.to_string());
            r.push(&i.to_string());
        }
        assert!(!r.contains("0"));
        assert!(r.contains(&(RECENT_CURSORS + 9).to_string()));
        assert_eq!(r.order.len(), RECENT_CURSORS);
        assert_eq!(r.set.len(), RECENT_CURSORS);
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let cap = Duration::from_secs(2);
        assert!(backoff(1, cap) <= BACKOFF_BASE);
        assert!(backoff(3, cap) >= BACKOFF_BASE * 2);
        assert!(backoff(u32::MAX, cap) <= cap);
    }
}
