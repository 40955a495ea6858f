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

mod position;
mod protocol;
mod task;
#[cfg(test)]
mod tests;

use std::sync::atomic::Ordering;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, watch};

pub(crate) use protocol::ws_url;
#[cfg(test)]
use protocol::{event_cursor, parse, Incoming, Proto};
pub(crate) use task::{SubStats, SubscribeSpec};

use crate::core::error::{Error, Result};
use crate::core::graphql::{prepare, OperationKind};
use crate::core::transport::Transport;
use position::Recent;
use task::{Ended2, Item, Taken, Task, BYTE_BUDGET_KIB};

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
