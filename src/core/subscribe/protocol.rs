//! The two GraphQL-over-WebSocket protocols as messages: graphql-transport-ws (preferred) and
//! the legacy graphql-ws; what the server sends, read without trusting it.

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio_tungstenite::tungstenite::http::HeaderValue;

use crate::core::error::{Error, Result};

/// The id of the one operation on each socket.
pub(super) const OP_ID: &str = "1";

/// `http(s)://host/api/v1` -> `ws(s)://host/api/v1`.
pub(crate) fn ws_url(base: &str) -> Result<String> {
    if let Some(rest) = base.strip_prefix("https://") {
        Ok(format!("wss://{rest}"))
    } else if let Some(rest) = base.strip_prefix("http://") {
        Ok(format!("ws://{rest}"))
    } else {
        Err(Error::config(format!("cannot derive a WebSocket URL from {base}")))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Proto {
    /// graphql-transport-ws (the graphql-ws library's protocol).
    TransportWs,
    /// subscriptions-transport-ws, whose subprotocol is named graphql-ws.
    Legacy,
}

impl Proto {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::TransportWs => "graphql-transport-ws",
            Self::Legacy => "graphql-ws",
        }
    }

    pub(super) fn from_header(h: Option<&HeaderValue>) -> Option<Self> {
        match h.and_then(|v| v.to_str().ok()).map(str::trim) {
            Some("graphql-transport-ws") => Some(Self::TransportWs),
            Some("graphql-ws") => Some(Self::Legacy),
            _ => None,
        }
    }

    pub(crate) fn init(self, authorization: &str) -> String {
        serde_json::json!({"type": "connection_init", "payload": {"Authorization": authorization}})
            .to_string()
    }

    pub(crate) fn subscribe(self, payload: &Value) -> String {
        let kind = match self {
            Self::TransportWs => "subscribe",
            Self::Legacy => "start",
        };
        serde_json::json!({"id": OP_ID, "type": kind, "payload": payload}).to_string()
    }

    pub(crate) fn stop(self) -> String {
        let kind = match self {
            Self::TransportWs => "complete",
            Self::Legacy => "stop",
        };
        serde_json::json!({"id": OP_ID, "type": kind}).to_string()
    }
}

/// A server message, as far as the client needs it.
#[derive(Debug, PartialEq)]
pub(crate) enum Incoming {
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

pub(crate) fn parse(text: &str) -> std::result::Result<Incoming, String> {
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
pub(crate) fn event_cursor(payload: &[u8]) -> Option<String> {
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
