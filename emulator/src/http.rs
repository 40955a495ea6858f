//! The HTTP server: accept loop, connections, routing, and the response plumbing that lets faults
//! reset or truncate a connection.

use std::future::Future as _;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Sleep;

use crate::Shared;

/// Request bodies above this are refused; GraphQL requests are far smaller.
const MAX_BODY: usize = 16 * 1024 * 1024;

/// How long a truncated answer waits between sending its part and closing, so the part is flushed
/// to the socket before hyper drops the connection.
const TRUNCATE_PAUSE: Duration = Duration::from_millis(20);

pub(crate) async fn accept_loop(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Small request/response exchanges: Nagle would add latency to every answer.
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(serve(stream, shared.clone()));
                }
                // Out of descriptors and the like: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            },
        }
    }
}

/// Per-connection state shared by the service and the socket wrapper.
pub(crate) struct Conn {
    pub shared: Arc<Shared>,
    reset: AtomicBool,
}

impl Conn {
    /// Makes the connection end with a TCP reset instead of an answer.
    pub fn reset(&self) -> ResetConnection {
        self.reset.store(true, Ordering::Release);
        ResetConnection
    }
}

async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    let conn = Arc::new(Conn { shared, reset: AtomicBool::new(false) });
    let io = TokioIo::new(ConnIo { stream, conn: conn.clone() });
    let service = service_fn(move |req| {
        let conn = conn.clone();
        async move { route(&conn, req).await }
    });
    let _ = http1::Builder::new()
        .keep_alive(true)
        .header_read_timeout(None)
        .serve_connection(io, service)
        .with_upgrades()
        .await;
}

#[derive(Debug, thiserror::Error)]
#[error("connection reset on purpose")]
pub(crate) struct ResetConnection;

#[derive(Debug, thiserror::Error)]
#[error("response truncated on purpose")]
pub(crate) struct Truncated;

async fn route(conn: &Conn, req: Request<Incoming>) -> Result<Response<RespBody>, ResetConnection> {
    if matches!(req.uri().path(), "/api/v1" | "/api/v1/") && crate::ws::is_upgrade(&req) {
        return Ok(crate::ws::accept(&conn.shared, req));
    }
    let (parts, body) = req.into_parts();
    let is_api = match parts.uri.path() {
        "/api/v1" | "/api/v1/" => true,
        "/" => false,
        _ => {
            return Ok(json(StatusCode::NOT_FOUND, Bytes::from_static(br#"{"message":"Not Found"}"#)));
        }
    };
    // The whole body is read before anything else so that even a reset or an early rejection
    // leaves nothing unread, and keep-alive connections stay usable.
    let body = match http_body_util::Limited::new(body, MAX_BODY).collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return Ok(json(
                StatusCode::PAYLOAD_TOO_LARGE,
                Bytes::from_static(br#"{"message":"Request Entity Too Large"}"#),
            ));
        }
    };
    if is_api {
        crate::api::handle(conn, &parts, body).await
    } else {
        crate::idp::handle(conn, &parts, body).await
    }
}

/// The socket, with a `Drop` that turns the close into a reset when a fault asked for one.
struct ConnIo {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl ConnIo {
    fn resetting(&self) -> bool {
        self.conn.reset.load(Ordering::Acquire)
    }
}

impl Drop for ConnIo {
    fn drop(&mut self) {
        if self.resetting() {
            let _ = self.stream.set_zero_linger();
        }
    }
}

impl AsyncRead for ConnIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for ConnIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.resetting() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if self.resetting() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // A FIN before the reset would let the client see a clean end of stream first.
        if self.resetting() {
            return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
        }
        Pin::new(&mut self.stream).poll_shutdown(cx)
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
