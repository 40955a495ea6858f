//! The HTTP server: accept loop, connections and routing (answers are built in `response`).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::response::{json, Conn, ResetConnection, RespBody};
use crate::state::Shared;

/// Request bodies above this are refused; GraphQL requests are far smaller.
const MAX_BODY: usize = 16 * 1024 * 1024;

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

async fn serve(stream: TcpStream, shared: Arc<Shared>) {
    let conn = Arc::new(Conn::new(shared));
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
        self.conn.is_reset()
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
