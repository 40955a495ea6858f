//! Live events for the `Subscription` type (modelled by the emulator: the specification says the
//! type exists and shows none of its fields).
//!
//! Every event gets a sequence number; its `cursor` is that number in decimal. The bus keeps the
//! last [`HISTORY`] events, so a subscriber that reconnects with `after: <last cursor seen>` gets
//! every event it missed that the server still holds, then the live ones, in order and once.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::Stream;
use tokio::sync::broadcast;

/// Events the server holds for resuming subscribers.
const HISTORY: usize = 10_000;
/// Live events a subscriber may fall behind by before it catches up from the history.
const LIVE_CAPACITY: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// A finding (by index in the store) was created or changed.
    Finding { idx: u32, severity: u8 },
    /// A rule was added, edited, enabled or deleted.
    Rule { rule_type: String, rule_id: Option<String> },
}

#[derive(Debug)]
pub struct Event {
    pub seq: u64,
    /// The subscription field it is delivered to (`finding_created`, ...).
    pub field: &'static str,
    /// What happened (`created`, `sla_and_comment`, `add`, `edit`, ...).
    pub kind: String,
    /// Unix seconds.
    pub at: i64,
    pub body: Body,
}

pub struct EventBus {
    next: AtomicU64,
    history: Mutex<VecDeque<Arc<Event>>>,
    live: broadcast::Sender<Arc<Event>>,
    active: Arc<AtomicUsize>,
}

impl Default for EventBus {
    fn default() -> Self {
        Self {
            next: AtomicU64::new(1),
            history: Mutex::new(VecDeque::new()),
            live: broadcast::channel(LIVE_CAPACITY).0,
            active: Arc::new(AtomicUsize::new(0)),
        }
    }
}

/// Counts a subscription as active while its stream lives.
struct Active(Arc<AtomicUsize>);

impl Drop for Active {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Reader {
    live: broadcast::Receiver<Arc<Event>>,
    pending: VecDeque<Arc<Event>>,
    last: u64,
    field: &'static str,
    _active: Active,
}

impl EventBus {
    /// Records and broadcasts an event; returns its sequence number.
    pub fn publish(&self, field: &'static str, kind: &str, at: i64, body: Body) -> u64 {
        // The history lock orders sequence numbers, history and broadcast the same way.
        let mut history = crate::lock(&self.history);
        let seq = self.next.fetch_add(1, Ordering::AcqRel);
        let event = Arc::new(Event { seq, field, kind: kind.to_owned(), at, body });
        if history.len() >= HISTORY {
            history.pop_front();
        }
        history.push_back(Arc::clone(&event));
        // No receiver is not an error: nobody is subscribed.
        let _ = self.live.send(event);
        seq
    }

    /// The cursor of the newest event (0 before any): subscribing with it as `after` delivers
    /// every event published from now on, however late the subscription reaches the server.
    pub fn head(&self) -> u64 {
        self.next.load(Ordering::Acquire).saturating_sub(1)
    }

    /// Server-side subscriptions open now.
    pub fn active(&self) -> usize {
        self.active.load(Ordering::Acquire)
    }

    fn held_after(&self, field: &'static str, after: u64) -> VecDeque<Arc<Event>> {
        crate::lock(&self.history).iter().filter(|e| e.seq > after && e.field == field).cloned().collect()
    }

    /// The events of `field` after `after` (0: only new ones): first those still held, then the
    /// live ones, each once and in order.
    pub fn stream(
        self: &Arc<Self>,
        field: &'static str,
        after: Option<u64>,
    ) -> impl Stream<Item = Arc<Event>> {
        self.active.fetch_add(1, Ordering::AcqRel);
        let active = Active(Arc::clone(&self.active));
        // Subscribing before reading the history: an event published in between is in both and
        // is skipped the second time by its sequence number.
        let live = self.live.subscribe();
        let (pending, last) = match after {
            // Pending events come first and move `last` past any duplicate in the live channel.
            Some(after) => (self.held_after(field, after), after),
            None => (VecDeque::new(), self.next.load(Ordering::Acquire).saturating_sub(1)),
        };
        let bus = Arc::clone(self);
        let reader = Reader { live, pending, last, field, _active: active };
        futures_util::stream::unfold(reader, move |mut r| {
            let bus = Arc::clone(&bus);
            async move {
                loop {
                    if let Some(event) = r.pending.pop_front() {
                        if event.seq > r.last {
                            r.last = event.seq;
                            return Some((event, r));
                        }
                        continue;
                    }
                    match r.live.recv().await {
                        Ok(event) if event.field == r.field && event.seq > r.last => {
                            r.last = event.seq;
                            return Some((event, r));
                        }
                        Ok(_) => {}
                        // Fell behind the live channel: catch up from the history.
                        Err(broadcast::error::RecvError::Lagged(_)) => {
                            r.pending = bus.held_after(r.field, r.last);
                        }
                        Err(broadcast::error::RecvError::Closed) => return None,
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt as _;

    fn finding(bus: &EventBus, idx: u32) -> u64 {
        bus.publish("finding_created", "created", 0, Body::Finding { idx, severity: 5 })
    }

    #[tokio::test]
    async fn replays_held_events_then_live_ones_once_and_in_order() {
        let bus = Arc::new(EventBus::default());
        let first = finding(&bus, 1);
        finding(&bus, 2);
        bus.publish("rule_changed", "add", 0, Body::Rule { rule_type: "status_rule".into(), rule_id: None });
        let mut s = Box::pin(bus.stream("finding_created", Some(first)));
        assert_eq!(bus.active(), 1);
        finding(&bus, 3);
        let a = s.next().await.map(|e| e.seq);
        let b = s.next().await.map(|e| e.seq);
        let got: Vec<u64> = [a, b].into_iter().flatten().collect();
        assert_eq!(got, vec![2, 4]);
        drop(s);
        assert_eq!(bus.active(), 0);
    }

    #[tokio::test]
    async fn a_subscriber_from_the_head_gets_what_was_published_before_it_subscribed() {
        let bus = Arc::new(EventBus::default());
        finding(&bus, 1);
        let head = bus.head();
        let missed = finding(&bus, 2);
        let mut s = Box::pin(bus.stream("finding_created", Some(head)));
        assert_eq!(s.next().await.map(|e| e.seq), Some(missed));
    }

    #[tokio::test]
    async fn a_new_subscriber_gets_only_new_events() {
        let bus = Arc::new(EventBus::default());
        finding(&bus, 1);
        let mut s = Box::pin(bus.stream("finding_created", None));
        let seq = finding(&bus, 2);
        assert_eq!(s.next().await.map(|e| e.seq), Some(seq));
    }

    #[tokio::test]
    async fn a_subscriber_that_lags_catches_up_from_the_history() {
        let bus = Arc::new(EventBus::default());
        let mut s = Box::pin(bus.stream("finding_created", None));
        for i in 0..(LIVE_CAPACITY as u32 * 2) {
            finding(&bus, i);
        }
        let mut seen = 0u64;
        for _ in 0..(LIVE_CAPACITY * 2) {
            let e = s.next().await.map(|e| e.seq).unwrap_or_default();
            assert_eq!(e, seen + 1);
            seen = e;
        }
    }
}
