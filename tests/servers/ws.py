"""Raw WebSocket peers on loopback, for subscriptions against servers that misbehave.

Two ways to play the server:

- the frames of a whole connection as one answer of :class:`tests.servers.http.HostileServer`:
  ``server.api = lambda req: upgrade(req, ACK + event("1") + close_frame(4401, "expired"))``
  (the connection closes after the frames);
- :class:`WsPeer`, which keeps each connection open and runs a script on it in a thread of its
  own (a peer that floods, stalls, or sends when told).

The helpers at the end drive a subscription against them without fixed sleeps: they wait for a
condition, and a watchdog turns a hang into a failure.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.servers.http import HostileServer, Request, Response, make_jwt

import secfindings

__all__ = [
    "ACK",
    "DEADLINE",
    "DOC",
    "GUID",
    "WsPeer",
    "close_frame",
    "event",
    "first_error",
    "frame",
    "in_thread",
    "upgrade",
    "upgrades",
    "wait_for",
    "websocket_only",
    "ws_client",
]

#: The GUID of RFC 6455 that the ``Sec-WebSocket-Accept`` answer hashes with the client's key.
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

#: A subscription document these peers serve (the events carry a cursor).
DOC = "subscription S($after: String) { e(after: $after) { cursor } }"

#: How long a test waits for a condition before it fails.
DEADLINE = 20.0


# ----------------------------------------------------------------------------- frames


def frame(payload: bytes | str, opcode: int = 1) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    n = len(data)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + data


def close_frame(code: int, reason: str) -> bytes:
    return frame(struct.pack("!H", code) + reason.encode(), opcode=8)


ACK = frame('{"type":"connection_ack"}')


def event(cursor: str) -> bytes:
    return frame(json.dumps({"type": "next", "id": "1", "payload": {"data": {"e": {"cursor": cursor}}}}))


# ----------------------------------------------------------------------------- one-shot answers


def upgrade(req: Request, frames: bytes = b"", protocol: str | None = "graphql-transport-ws") -> Response:
    """A valid 101 answer to ``req``, then ``frames``, then the connection closes."""
    key = req.headers.get("sec-websocket-key", "")
    accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
    head = [
        "HTTP/1.1 101 Switching Protocols",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Accept: {accept}",
    ]
    if protocol:
        head.append(f"Sec-WebSocket-Protocol: {protocol}")
    return Response.raw(("\r\n".join(head) + "\r\n\r\n").encode() + frames)


def upgrades(server: HostileServer) -> list[Request]:
    """The WebSocket upgrade requests (a subscription first asks for its start position with a
    POST, which these servers do not understand)."""
    return [r for r in server.api_requests if r.method == "GET"]


def websocket_only(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``handler`` for the upgrades; a POST (the start position) gets a GraphQL error, as from a
    server without the query."""

    def api(req: Request) -> Response:
        if req.method == "POST":
            return Response.of_json({"errors": [{"message": "Cannot query field 'subscription_cursor'"}]})
        return handler(req)

    return api


# ----------------------------------------------------------------------------- a peer that stays


class WsPeer:
    """A WebSocket server on 127.0.0.1 that keeps its connections open: after the 101 it runs
    ``script(conn, n)`` for the n-th connection, in a thread of its own."""

    def __init__(self, script: Callable[[socket.socket, int], None], protocol: str = "graphql-transport-ws"):
        self.script = script
        self.protocol = protocol
        self.stop = threading.Event()
        self.upgrades = 0
        self._conns: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v1"

    def __enter__(self) -> WsPeer:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
        self._acceptor.join(5)
        self._sock.close()
        for c in list(self._conns):
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
        for t in self._threads:
            t.join(5)

    def _accept(self) -> None:
        n = 0
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            if self.stop.is_set():
                conn.close()
                return
            self._conns.append(conn)
            t = threading.Thread(target=self._serve, args=(conn, n), daemon=True)
            n += 1
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket, n: int) -> None:
        try:
            buf = b""
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            headers = {}
            for line in buf.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            accept = base64.b64encode(
                hashlib.sha1((headers.get("sec-websocket-key", "") + GUID).encode()).digest()
            ).decode()
            conn.sendall(
                (
                    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: {self.protocol}\r\n\r\n"
                ).encode()
            )
            self.upgrades += 1
            self.script(conn, n)
        except OSError:
            pass
        finally:
            conn.close()

    def hold(self, conn: socket.socket) -> None:
        """Reads (and drops) what the client sends until it hangs up or the server stops."""
        conn.settimeout(0.1)
        while not self.stop.is_set():
            try:
                if not conn.recv(65536):
                    return
            except TimeoutError:
                continue


def ws_client(peer: WsPeer, **kw: Any) -> secfindings.Client:
    return secfindings.Client(
        jwt=make_jwt(), base_url=peer.base_url, timeout=10.0, max_retries=0, schema="off", **kw
    )


# ----------------------------------------------------------------------------- the client side


def first_error(sub: secfindings.Subscription[Any]) -> BaseException:
    """Iterates ``sub`` until it raises (a SecFindingsError, or the test fails); a watchdog closes
    it after 20 s."""
    watchdog = threading.Timer(20, sub.close)
    watchdog.start()
    try:
        with pytest.raises(secfindings.SecFindingsError) as info:
            for _ in sub:
                pass
        return info.value
    finally:
        watchdog.cancel()


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    """Runs ``fn`` in a daemon thread; the list gets its result or exception."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn())
        except BaseException as e:
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out
