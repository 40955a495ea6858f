//! What the emulator answers with: response bodies (whole, or cut short on purpose), the
//! helpers that build answers, and the per-connection state a fault uses to reset a connection.
//! The HTTP server (`http`) routes to the API, the identity provider and WebSockets, which all
//! answer through this module without importing the server.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use tokio::time::Sleep;

use crate::state::Shared;

/// How long a truncated answer waits between sending its part and closing, so the part is flushed
/// to the socket before hyper drops the connection.
const TRUNCATE_PAUSE: Duration = Duration::from_millis(20);

#[derive(Debug, thiserror::Error)]
#[error("connection reset on purpose")]
pub(crate) struct ResetConnection;

#[derive(Debug, thiserror::Error)]
#[error("response truncated on purpose")]
pub(crate) struct Truncated;

/// Per-connection state shared by the service and the socket wrapper.
pub(crate) struct Conn {
    pub shared: Arc<Shared>,
    reset: AtomicBool,
}

impl Conn {
    pub fn new(shared: Arc<Shared>) -> Self {
        Self { shared, reset: AtomicBool::new(false) }
    }

    /// Whether a fault asked for this connection to end with a reset.
    pub fn is_reset(&self) -> bool {
        self.reset.load(Ordering::Acquire)
    }

    /// Makes the connection end with a TCP reset instead of an answer.
    pub fn reset(&self) -> ResetConnection {
        self.reset.store(true, Ordering::Release);
        ResetConnection
    }
}

/// A response body: complete, or deliberately cut short.
pub(crate) struct RespBody {
    kind: Kind,
}

enum Kind {
    Full(Option<Bytes>),
    Truncated { part: Option<Bytes>, declared: u64, pause: Option<Pin<Box<Sleep>>> },
}

impl RespBody {
    pub fn full(bytes: Bytes) -> Self {
        Self { kind: Kind::Full(Some(bytes)) }
    }

    #[cfg(test)]
    pub fn bytes(&self) -> Option<&Bytes> {
        match &self.kind {
            Kind::Full(bytes) => bytes.as_ref(),
            Kind::Truncated { part, .. } => part.as_ref(),
        }
    }
}

impl Body for RespBody {
    type Data = Bytes;
    type Error = Truncated;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Truncated>>> {
        match &mut self.kind {
            Kind::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Kind::Truncated { part, pause, .. } => {
                if let Some(part) = part.take() {
                    return Poll::Ready(Some(Ok(Frame::data(part))));
                }
                // Pending for a moment lets hyper flush the part; the error then makes it drop
                // the connection with the body incomplete.
                let sleep = pause.get_or_insert_with(|| Box::pin(tokio::time::sleep(TRUNCATE_PAUSE)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(Truncated))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Full(bytes) => bytes.as_ref().is_none_or(Bytes::is_empty),
            Kind::Truncated { .. } => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Full(bytes) => SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64)),
            Kind::Truncated { declared, .. } => SizeHint::with_exact(*declared),
        }
    }
}

/// Keeps status and headers, announces the full length, and sends only the first half.
pub(crate) fn truncate(response: Response<RespBody>) -> Response<RespBody> {
    let (mut parts, body) = response.into_parts();
    let full = match body.kind {
        Kind::Full(bytes) => bytes.unwrap_or_default(),
        Kind::Truncated { .. } => return Response::from_parts(parts, body),
    };
    let declared = full.len() as u64;
    parts.headers.insert(CONTENT_LENGTH, HeaderValue::from(declared));
    let part = full.slice(..full.len() / 2);
    Response::from_parts(
        parts,
        RespBody { kind: Kind::Truncated { part: Some(part), declared, pause: None } },
    )
}

pub(crate) fn respond(status: StatusCode, content_type: &'static str, body: Bytes) -> Response<RespBody> {
    let mut response = Response::new(RespBody::full(body));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

pub(crate) fn json(status: StatusCode, body: Bytes) -> Response<RespBody> {
    respond(status, "application/json", body)
}

pub(crate) fn with_header(
    mut response: Response<RespBody>,
    name: HeaderName,
    value: HeaderValue,
) -> Response<RespBody> {
    response.headers_mut().insert(name, value);
    response
}

/// The body a status-code fault answers with, shaped like what sits in front of real services.
pub(crate) fn status_fault(code: u16) -> Response<RespBody> {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    match status.as_u16() {
        502 => respond(
            status,
            "text/html",
            Bytes::from_static(
                b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n</body>\r\n</html>\r\n",
            ),
        ),
        503 => json(status, Bytes::from_static(br#"{"message":"Service Unavailable"}"#)),
        504 => json(status, Bytes::from_static(br#"{"message": "Endpoint request timed out"}"#)),
        500 => respond(status, "text/plain", Bytes::from_static(b"Internal Server Error")),
        _ => {
            let message = serde_json::json!({"message": status.canonical_reason().unwrap_or("Error")});
            json(status, Bytes::from(message.to_string()))
        }
    }
}
