//! What the server keeps of its WebSocket sockets, shared by the connection tasks: the
//! subprotocols it accepts, the sockets counted, and the controls tests use on them.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use tokio::sync::broadcast;

/// Which subprotocols the emulator accepts (tests of the client's fallback turn one off).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WsProtocols {
    /// graphql-transport-ws when offered, else graphql-ws.
    Both,
    /// Only graphql-transport-ws.
    TransportWs,
    /// Only the legacy graphql-ws (subscriptions-transport-ws).
    LegacyOnly,
}

/// What tests can do to every open socket.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Control {
    /// Drop the TCP connection without a close frame.
    Drop,
}

pub(crate) struct WsState {
    protocols: AtomicU8,
    pub(crate) control: broadcast::Sender<Control>,
    /// Sockets accepted since start.
    pub accepted: AtomicU64,
    /// Sockets open now.
    pub open: AtomicU64,
    /// Sockets still to be dropped when their `connection_init` arrives (before the ack).
    drop_at_init: AtomicU64,
}

impl Default for WsState {
    fn default() -> Self {
        Self {
            protocols: AtomicU8::new(0),
            control: broadcast::channel(16).0,
            accepted: AtomicU64::new(0),
            open: AtomicU64::new(0),
            drop_at_init: AtomicU64::new(0),
        }
    }
}

impl WsState {
    pub fn set_protocols(&self, p: WsProtocols) {
        let v = match p {
            WsProtocols::Both => 0,
            WsProtocols::TransportWs => 1,
            WsProtocols::LegacyOnly => 2,
        };
        self.protocols.store(v, Ordering::Release);
    }

    pub(crate) fn protocols(&self) -> WsProtocols {
        match self.protocols.load(Ordering::Acquire) {
            1 => WsProtocols::TransportWs,
            2 => WsProtocols::LegacyOnly,
            _ => WsProtocols::Both,
        }
    }

    /// Drops every open socket abruptly (no close frame), as a network failure or a load
    /// balancer would.
    pub fn drop_all(&self) {
        let _ = self.control.send(Control::Drop);
    }

    /// Drops the next `count` sockets when their `connection_init` arrives, before the ack (a
    /// connection lost in its handshake).
    pub fn drop_next_at_init(&self, count: u64) {
        let _ = self
            .drop_at_init
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_add(count)));
    }

    pub(crate) fn take_drop_at_init(&self) -> bool {
        self.drop_at_init.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok()
    }
}
