//! The task behind one subscription: connect (JWT in `connection_init`), ack, subscribe, and
//! queue events for the consumer; connect again and resume when the socket ends, with backoff
//! and the no-progress guard; end with an error after `max_reconnects`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use serde_json::{Map, Value};
use tokio::sync::{mpsc, watch};
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

use super::position::{cursor_order, Recent};
use super::protocol::{event_cursor, parse, Incoming, Proto};
use crate::core::auth::{windows, CachedToken};
use crate::core::error::{Error, Result};
use crate::core::graphql::{decode_response, prepare};
use crate::core::retry::RetryPolicy;
use crate::core::secret::Redactor;
use crate::core::transport::Transport;

/// A WebSocket-level ping goes out this often; nothing heard for [`SILENCE`] means the socket is
/// dead even if TCP has not noticed.
pub(super) const PING_EVERY: Duration = Duration::from_secs(15);
pub(super) const SILENCE: Duration = Duration::from_secs(45);
/// The first backoff step; it doubles up to the client's `max_retry_wait`.
pub(super) const BACKOFF_BASE: Duration = Duration::from_millis(250);
/// A JWT is replaced at least this long before it lapses, and never sooner than this from now.
pub(super) const MIN_RENEW_AHEAD: Duration = Duration::from_secs(1);
/// A connection that ended sooner than this is followed by a short wait even when it was healthy.
pub(super) const MIN_LIFETIME: Duration = Duration::from_secs(1);
/// How long closing a socket may take before it is simply dropped.
pub(super) const GOODBYE: Duration = Duration::from_secs(2);
/// Bytes the queued events of one subscription may hold together, in KiB (64 MiB): with the
/// count bound (`queue`), what keeps a slow consumer's memory bounded whatever the events' size.
pub(super) const BYTE_BUDGET_KIB: usize = 64 * 1024;
pub(super) const BYTE_BUDGET_KIB_U32: u32 = 64 * 1024;
/// Largest message read from the server.
pub(super) const MAX_MESSAGE_CAP: usize = 64 * 1024 * 1024;
/// How much one read of the socket asks for. tungstenite zero-fills the free part of its read
/// buffer (up to this size) on every read, including one that finds nothing: at its default of
/// 128 KiB that fill was the I/O thread's largest cost while events streamed in.
pub(super) const READ_CHUNK: usize = 16 * 1024;
/// The query that gives where a subscription starting now resumes from.
pub(super) const HEAD_QUERY: &str = "query SubscriptionCursor { subscription_cursor }";

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
pub(super) struct Item {
    pub(super) event: Result<Bytes>,
    pub(super) cursor: Option<String>,
    pub(super) _bytes: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// A taken item, or the end (`None`).
pub(super) type Taken = Option<Result<Bytes>>;

/// Sets the subscription's `ended` flag however the task finishes.
pub(super) struct Ended2(pub(super) Arc<std::sync::atomic::AtomicBool>);

impl Drop for Ended2 {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Why a connection ended.
pub(super) enum Ended {
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

pub(super) struct Task {
    pub(super) transport: Arc<Transport>,
    pub(super) redactor: Redactor,
    pub(super) closed: watch::Receiver<bool>,
    pub(super) spec: SubscribeSpec,
    pub(super) resume: Option<String>,
    pub(super) url: String,
    pub(super) tx: mpsc::Sender<Item>,
    /// Bytes (in KiB) queued events may hold together.
    pub(super) budget: Arc<tokio::sync::Semaphore>,
    pub(super) stopped: watch::Receiver<bool>,
    pub(super) stats: Arc<SubStats>,
    /// The cursor of the last event queued (before any, the start position): what a
    /// resubscription starts after.
    pub(super) cursor: Option<String>,
    /// Cursors delivered lately, to recognise an event handed out again.
    pub(super) recent: Recent,
    /// The consumer's position, set to the start position before any event is queued.
    pub(super) consumed: Arc<std::sync::Mutex<Option<String>>>,
    pub(super) started: watch::Sender<bool>,
    pub(super) protocol: Arc<std::sync::Mutex<Option<&'static str>>>,
    pub(super) _ended: Ended2,
}

pub(super) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How a send to the server ended.
pub(super) enum Sent {
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

    pub(super) async fn run(mut self) {
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
        request.headers_mut().insert("User-Agent", HeaderValue::from_static(crate::core::http::USER_AGENT));
        let max = settings.max_response_bytes.clamp(64 * 1024, MAX_MESSAGE_CAP);
        let config = WebSocketConfig::default()
            .max_message_size(Some(max))
            .max_frame_size(Some(max))
            .read_buffer_size(READ_CHUNK);
        let host = request
            .uri()
            .host()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = request.uri().port_u16().unwrap_or(if self.url.starts_with("wss://") { 443 } else { 80 });
        let connecting = async {
            // Through the client's proxy= (a CONNECT tunnel), as its HTTP requests go.
            let tcp = match &settings.proxy {
                Some(proxy) => crate::core::http::tunnel(proxy, &host, port).await,
                None => tokio::net::TcpStream::connect((host.as_str(), port)).await,
            }
            .map_err(WsError::Io)?;
            let _ = tcp.set_nodelay(true);
            let connector = if self.url.starts_with("wss://") {
                Some(tokio_tungstenite::Connector::Rustls(Arc::clone(self.transport.tls())))
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
    /// One connection, from its JWT to its end: opened, subscribed, then its events.
    async fn connection(&mut self) -> Ended {
        let (mut socket, proto, token) = match self.open().await {
            Ok(opened) => opened,
            Err(ended) => return ended,
        };
        if let Sent::Stopped = self.subscribe(&mut socket, proto).await {
            return self.goodbye(socket, proto).await;
        }
        self.events(socket, proto, &token).await
    }

    /// A JWT and a socket (a stop is heard while either is awaited), `connection_init`, and the
    /// server's ack.
    async fn open(&mut self) -> std::result::Result<(Socket, Proto, Arc<CachedToken>), Ended> {
        // A JWT and a socket, but a stop is heard while either is awaited.
        let mut stopped = self.stopped.clone();
        let mut closed = self.closed.clone();
        let token = tokio::select! {
            got = self.transport.tokens().get() => match got {
                Ok(t) => t,
                Err(e @ Error::Authentication { .. }) => return Err(Ended::Fatal(e)),
                Err(e) => return Err(Ended::Retry { why: e.to_string(), failed: true, retry_after: None }),
            },
            _ = stopped.changed() => return Err(Ended::Stopped),
            _ = closed.changed() => return Err(Ended::Stopped),
        };
        let connected = tokio::select! {
            c = self.connect(&token) => c,
            _ = stopped.changed() => return Err(Ended::Stopped),
            _ = closed.changed() => return Err(Ended::Stopped),
        };
        let (mut socket, proto) = match connected {
            Ok(pair) => pair,
            Err(ended) => return Err(ended),
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
            return Err(self.goodbye(socket, proto).await);
        }
        // Wait for the ack.
        let ack_deadline = tokio::time::sleep(self.transport.settings().timeout);
        tokio::pin!(ack_deadline);
        loop {
            tokio::select! {
                () = &mut ack_deadline => {
                    drop_socket(socket).await;
                    return Err(Ended::Retry { why: "no connection_ack from the server".into(), failed: true, retry_after: None });
                }
                _ = stopped.changed() => return Err(self.goodbye(socket, proto).await),
                _ = closed.changed() => return Err(self.goodbye(socket, proto).await),
                msg = socket.next() => match self.frame(msg, &mut socket, proto, &token).await {
                    Ok(Some(Incoming::Ack)) => break,
                    Ok(_) => {}
                    Err(ended) => return Err(self.failed_before_events(ended)),
                },
            }
        }
        Ok((socket, proto, token))
    }

    /// The subscription, from the position when there is one.
    async fn subscribe(&self, socket: &mut Socket, proto: Proto) -> Sent {
        let mut variables = self.spec.variables.clone();
        if let (Some(name), Some(cursor)) = (&self.resume, &self.cursor) {
            variables.insert(name.clone(), Value::String(cursor.clone()));
        }
        let mut payload = serde_json::json!({"query": self.spec.query, "variables": variables});
        if let (Some(n), Value::Object(m)) = (&self.spec.operation_name, &mut payload) {
            m.insert("operationName".into(), Value::String(n.clone()));
        }
        if let Sent::Stopped = self.send(socket, Message::Text(proto.subscribe(&payload).into())).await {
            return Sent::Stopped;
        }
        Sent::Done
    }

    /// The events of an open, subscribed connection until it ends: each handed to the consumer
    /// (with backpressure), pings while the server is quiet, a new connection before the JWT
    /// lapses.
    async fn events(&mut self, mut socket: Socket, proto: Proto, token: &CachedToken) -> Ended {
        let mut stopped = self.stopped.clone();
        let mut closed = self.closed.clone();
        // A new JWT before this one lapses: the connection is replaced a little ahead of it.
        let renew_at = renew_deadline(token, self.transport.settings());
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
                    match self.frame(msg, &mut socket, proto, token).await {
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
pub(super) async fn drop_socket(mut socket: Socket) {
    let _ = tokio::time::timeout(GOODBYE, socket.close(None)).await;
}

pub(super) fn handshake_error(e: WsError) -> Ended {
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
pub(super) fn renew_deadline(
    token: &CachedToken,
    settings: &crate::core::config::Settings,
) -> Option<Instant> {
    let expires = token.expires_at?;
    let (_, mandatory) = windows(token.lifetime, settings.refresh_advisory, settings.refresh_mandatory);
    let at = expires.checked_sub(mandatory).unwrap_or(expires);
    Some(at.max(Instant::now() + MIN_RENEW_AHEAD))
}

/// The wait before reconnect number `failures` (1 for the first): the retry engine's backoff
/// (`crate::core::retry`), from [`BACKOFF_BASE`] doubling up to `cap` (the client's
/// `max_retry_wait`), less up to a quarter by jitter.
pub(super) fn backoff(failures: u32, cap: Duration) -> Duration {
    let policy =
        RetryPolicy { max_retries: 0, max_retry_wait: cap, base: BACKOFF_BASE, cap: cap.max(BACKOFF_BASE) };
    policy.backoff(failures.saturating_sub(1), fastrand::f64())
}
