//! Subscriptions over WebSocket at the API's URL: graphql-transport-ws (preferred) and the legacy
//! graphql-ws, both spoken by async-graphql over tungstenite's framing.
//!
//! The JWT travels in `connection_init` (`{"Authorization": "Bearer <jwt>"}`) and is checked
//! again every [`RECHECK`]: once it expires (or is revoked, or `expire_jwts` is called) the server
//! closes the socket with 4401, as a server that enforces token lifetimes on long-lived
//! connections would. A refused `connection_init` closes with 4403.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_graphql::http::{WebSocket, WebSocketProtocols as Protocols, WsMessage};
use bytes::Bytes;
use futures_util::{SinkExt as _, StreamExt as _};
use hyper::body::Incoming;
use hyper::header::{
    HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_PROTOCOL,
    SEC_WEBSOCKET_VERSION, UPGRADE,
};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::locks::lock;
use crate::response::{json, RespBody};
use crate::sockets::{Control, WsProtocols};
use crate::state::Shared;

/// How often an open socket's JWT is checked again.
const RECHECK: Duration = Duration::from_millis(100);
/// Largest client message accepted (a subscribe with its document and variables).
const MAX_MESSAGE: usize = 1024 * 1024;
/// One read of a socket asks for this much. tungstenite zero-fills the free part of its read buffer
/// (up to this size) on every poll of the read half, which the protocol loop polls after every
/// event it sends: at the default 128 KiB that fill was a large part of the cost of an event.
const READ_CHUNK: usize = 16 * 1024;

pub(crate) fn is_upgrade(req: &Request<Incoming>) -> bool {
    req.headers()
        .get(UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

fn choose(offered: &str, accepted: WsProtocols) -> Option<Protocols> {
    let offered: Vec<&str> = offered.split(',').map(str::trim).collect();
    let modern = offered.contains(&"graphql-transport-ws");
    let legacy = offered.contains(&"graphql-ws");
    match accepted {
        WsProtocols::Both if modern => Some(Protocols::GraphQLWS),
        WsProtocols::Both if legacy => Some(Protocols::SubscriptionsTransportWS),
        WsProtocols::TransportWs if modern => Some(Protocols::GraphQLWS),
        WsProtocols::LegacyOnly if legacy => Some(Protocols::SubscriptionsTransportWS),
        _ => None,
    }
}

fn refuse(status: StatusCode, message: &str) -> Response<RespBody> {
    json(status, Bytes::from(serde_json::json!({ "message": message }).to_string()))
}

/// Answers the upgrade request and serves the socket in the background.
pub(crate) fn accept(shared: &Arc<Shared>, mut req: Request<Incoming>) -> Response<RespBody> {
    let headers = req.headers();
    if headers.get(SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok()) != Some("13") {
        return refuse(StatusCode::BAD_REQUEST, "WebSocket version 13 is required");
    }
    let Some(key) = headers.get(SEC_WEBSOCKET_KEY) else {
        return refuse(StatusCode::BAD_REQUEST, "Sec-WebSocket-Key is missing");
    };
    let offered = headers.get(SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok()).unwrap_or_default();
    let Some(protocol) = choose(offered, shared.ws.protocols()) else {
        return refuse(StatusCode::BAD_REQUEST, "no supported WebSocket subprotocol was offered");
    };
    let accept_key = derive_accept_key(key.as_bytes());
    let upgrade = hyper::upgrade::on(&mut req);
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        if let Ok(upgraded) = upgrade.await {
            shared.ws.accepted.fetch_add(1, Ordering::AcqRel);
            shared.ws.open.fetch_add(1, Ordering::AcqRel);
            serve(&shared, TokioIo::new(upgraded), protocol).await;
            shared.ws.open.fetch_sub(1, Ordering::AcqRel);
        }
    });
    let mut response = Response::new(RespBody::full(Bytes::new()));
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = response.headers_mut();
    h.insert(UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&accept_key) {
        h.insert(SEC_WEBSOCKET_ACCEPT, v);
    }
    h.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol.sec_websocket_protocol()));
    response
}

/// The bearer JWT of a `connection_init` payload.
fn bearer(payload: &serde_json::Value) -> Option<String> {
    let raw = ["Authorization", "authorization"].iter().find_map(|k| payload.get(*k)?.as_str())?;
    let token = raw.strip_prefix("Bearer ").unwrap_or(raw);
    Some(token.trim().to_owned())
}

fn close(code: u16, reason: &str) -> Message {
    Message::Close(Some(CloseFrame { code: CloseCode::from(code), reason: reason.to_owned().into() }))
}

async fn serve(shared: &Arc<Shared>, io: TokioIo<hyper::upgrade::Upgraded>, protocol: Protocols) {
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
        .read_buffer_size(READ_CHUNK);
    let socket = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
    let (mut sink, incoming) = socket.split();
    let input = incoming
        .take_while(|m| {
            std::future::ready(matches!(
                m,
                Ok(Message::Text(_) | Message::Binary(_) | Message::Ping(_) | Message::Pong(_))
            ))
        })
        .filter_map(|m| {
            std::future::ready(match m {
                Ok(Message::Text(t)) => Some(Bytes::from(t)),
                Ok(Message::Binary(b)) => Some(b),
                _ => None,
            })
        });
    let jwt: Arc<Mutex<Option<String>>> = Arc::default();
    let refused = Arc::new(AtomicBool::new(false));
    let kill = Arc::new(tokio::sync::Notify::new());
    let on_init = {
        let shared = Arc::clone(shared);
        let jwt = Arc::clone(&jwt);
        let refused = Arc::clone(&refused);
        let kill = Arc::clone(&kill);
        move |payload: serde_json::Value| async move {
            if shared.ws.take_drop_at_init() {
                // Never acknowledged: the socket is dropped by the loop below.
                kill.notify_one();
                std::future::pending::<()>().await;
            }
            let token = bearer(&payload);
            match token.as_deref().and_then(|t| shared.auth.verify(t)) {
                Some(caller) => {
                    *lock(&jwt) = token;
                    let mut data = async_graphql::Data::default();
                    data.insert(caller);
                    Ok(data)
                }
                None => {
                    refused.store(true, Ordering::Release);
                    Err(async_graphql::Error::new("Forbidden"))
                }
            }
        }
    };
    let mut graphql =
        Box::pin(WebSocket::new(shared.graphql.schema(), input, protocol).on_connection_init(on_init));
    let mut control = shared.ws.control.subscribe();
    let mut recheck = tokio::time::interval(RECHECK);
    // Made once: a `notified()` per turn of the loop would register and unregister a waiter for
    // every message sent. `notify_one` keeps a permit, so a drop asked before this is not missed.
    let killed = kill.notified();
    tokio::pin!(killed);
    loop {
        tokio::select! {
            out = graphql.next() => match out {
                Some(WsMessage::Text(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() {
                        return;
                    }
                }
                Some(WsMessage::Close(code, reason)) => {
                    let code = if refused.load(Ordering::Acquire) { 4403 } else { code };
                    let _ = sink.send(close(code, &reason)).await;
                    return;
                }
                None => {
                    let _ = sink.close().await;
                    return;
                }
            },
            _ = recheck.tick() => {
                let token = lock(&jwt).clone();
                if let Some(token) = token {
                    if shared.auth.verify(&token).is_none() {
                        let _ = sink.send(close(4401, "Unauthorized: the JWT expired or was revoked")).await;
                        return;
                    }
                }
            }
            () = &mut killed => return,
            ctl = control.recv() => match ctl {
                Ok(Control::Drop) => return,
                Err(_) => return,
            },
        }
    }
}
