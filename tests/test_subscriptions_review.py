"""Review of subscriptions against hostile peers and callers: each test here failed on the code
it was written against (see the docstrings for the defect each one shows). Loopback only; no
fixed sleeps: tests wait for conditions, and watchdogs turn a hang into a failure."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from tests.hostile import HostileServer, Request, Response, client, make_jwt
from tests.test_subscriptions_hostile import (
    ACK,
    DOC,
    GUID,
    close_frame,
    event,
    frame,
    upgrade,
    websocket_only,
)

import secfindings

pytestmark = pytest.mark.reliability_hostile

DEADLINE = 20.0


def wait_for(cond: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


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


# ----------------------------------------------------------------------------- hangs


def test_close_ends_an_iteration_stuck_answering_pings_to_a_server_that_does_not_read() -> None:
    """DEFECT: `Task::frame` answers a ping with `socket.send(pong).await` (and the ping tick
    sends with `socket.send(Ping).await`) outside any `select!` on the stop/closed channels or a
    timeout. A server that floods pings and never reads fills the client's send buffer; the task
    then waits forever in `send`, so `close()` (and client.close()) cannot end it, nor does the
    45 s silence check ever run: `for event in sub` hangs for as long as the peer likes."""
    blocked = threading.Event()

    def script(conn: socket.socket, n: int) -> None:
        conn.sendall(ACK)
        burst = frame('{"type":"ping"}') * 4096
        conn.setblocking(False)
        pending = b""
        while not peer.stop.is_set():
            if not pending:
                pending = burst
            _, writable, _ = select.select([], [conn], [], 2.0)
            if not writable:
                # Two seconds without room: the client stopped reading.
                blocked.set()
                peer.stop.wait()
                return
            with contextlib.suppress(BlockingIOError):
                pending = pending[conn.send(pending) :]

    with WsPeer(script) as peer, ws_client(peer) as c:
        sub = c.subscribe(DOC)
        t, out = in_thread(lambda: list(sub))
        blocked.wait(DEADLINE)
        sub.close()
        t.join(5)
        stuck = t.is_alive()
        peer.stop.set()  # let the server go (it unblocks the client when it closes)
    assert not stuck, "close() did not end an iteration blocked in a pong the server never reads"
    assert out == [[]]


@pytest.mark.parametrize("where", ["upgrade", "identity-provider"])
def test_close_ends_an_iteration_waiting_for_a_stalled_connect(where: str) -> None:
    """DEFECT: `Task::connection` awaits `tokens().get()` and `connect()` (bounded only by
    `timeout`, with IdP retries on top) without a `select!` on stop/closed, so `close()` of a
    subscription whose server (or identity provider) stalls leaves `next(sub)` blocked until the
    timeout: `Subscription.close` promises to wake a waiting next."""
    release = threading.Event()
    with HostileServer() as server:

        def stall(req: Request) -> Response:
            release.wait(60)
            return Response.close()

        def requests() -> list[Request]:
            return (
                [r for r in server.api_requests if r.method == "GET"]
                if where == "upgrade"
                else server.idp_requests
            )

        if where == "upgrade":
            server.api = stall
        else:
            server.idp = stall
        try:
            with client(server, timeout=40.0) as c:
                sub = c.subscribe(DOC)
                t, out = in_thread(lambda: list(sub))
                wait_for(lambda: len(requests()) == 1, "the stalled request")
                sub.close()
                t.join(5)
                stuck = t.is_alive()
        finally:
            release.set()
    assert not stuck, f"close() did not end an iteration waiting on a stalled {where}"
    assert out == [[]]


def test_retry_after_longer_than_max_retry_wait_does_not_block_for_an_hour() -> None:
    """DEFECT: `handshake_error` takes `Retry-After` up to 3600 s and `Task::run` sleeps
    `retry_after.max(step)` ignoring `max_retry_wait`. HTTP calls raise RateLimitError when the
    server asks for longer than max_retry_wait (retry.rs); a subscription blocks its consumer for
    up to an hour instead (the same for a 429)."""
    with HostileServer() as server:
        server.api = lambda req: Response.text("busy", 503, [("Retry-After", "3600")])
        with client(server, max_retry_wait=0.5) as c:
            sub = c.subscribe(DOC, max_reconnects=1)
            t, _ = in_thread(lambda: list(sub))
            try:
                with contextlib.suppress(AssertionError):
                    wait_for(
                        lambda: (
                            len([r for r in server.api_requests if r.method == "GET"]) >= 2
                            or not t.is_alive()
                        ),
                        "",
                        10,
                    )
                progressed = (
                    len([r for r in server.api_requests if r.method == "GET"]) >= 2 or not t.is_alive()
                )
            finally:
                sub.close()
                t.join(5)
    assert progressed, "the subscription slept on the server's Retry-After: 3600 (max_retry_wait=0.5)"


# ----------------------------------------------------------------------------- logic


def test_a_server_that_rejects_each_jwt_after_serving_it_does_not_exhaust_max_reconnects() -> None:
    """DEFECT: in `Task::run`, `Ended::Unauthorized` always counts as a failure, and a 4401/4403
    close after the ack bypasses the `delivered || lived` check in `connection`, so the count
    never starts again: a server that ends every JWT's connection with 4401 (its JWT expiry, a
    clock skew past the renew window) kills the subscription after max_reconnects+1 healthy,
    event-delivering connections, and the backoff grows each time."""
    n = iter(range(1, 1000))
    with HostileServer() as server:
        server.api = websocket_only(
            lambda req: upgrade(req, ACK + event(str(next(n))) + close_frame(4401, "expired"))
        )
        with client(server, max_retry_wait=0.05) as c:
            sub = c.subscribe(DOC, max_reconnects=2)
            watchdog = threading.Timer(DEADLINE, sub.close)
            watchdog.start()
            got: list[str] = []
            try:
                for e in sub:
                    got.append(e["e"]["cursor"])
                    if len(got) == 6:
                        break
            except secfindings.SubscriptionError as err:
                pytest.fail(f"ended after {got} although every connection delivered: {err}")
            finally:
                watchdog.cancel()
                sub.close()
    assert got == ["1", "2", "3", "4", "5", "6"]


def test_the_cursor_to_resume_after_is_the_last_consumed_event_not_the_last_received() -> None:
    """DEFECT: `Task::connection` stores an event's cursor when it is read off the socket, before
    the consumer gets it; `Subscription.cursor` is documented as "give it as ``after`` to a new
    subscription to resume". A consumer that breaks out after event 1 while 2..5 are queued and
    resumes from `sub.cursor` silently skips 2..5. The public cursor should follow the events
    handed out (the reconnect can keep using the last received one)."""

    def script(conn: socket.socket, n: int) -> None:
        conn.sendall(ACK + b"".join(event(str(i)) for i in range(1, 6)))
        peer.hold(conn)

    with WsPeer(script) as peer, ws_client(peer) as c, c.subscribe(DOC, queue_size=8) as sub:
        watchdog = threading.Timer(DEADLINE, sub.close)
        watchdog.start()
        try:
            first = next(sub)
        finally:
            watchdog.cancel()
        wait_for(lambda: sub.buffered == 4, "the rest to be queued")
        cursor = sub.cursor
    assert first["e"]["cursor"] == "1"
    assert cursor == "1", f"resuming after {cursor!r} would skip the 4 events not yet consumed"


def test_a_cancelled_anext_does_not_lose_the_event_it_had_taken() -> None:
    """DEFECT: `next_async` takes the event off the queue in a Rust task; if the asyncio future
    is cancelled (asyncio.wait_for timing out, a task cancelled) after that task finished but
    before the loop resolved it, `Completions::drain` drops the result ("A cancelled future is
    done already; its result is dropped"), so the event is lost although the class promises the
    subscription stays usable after a cancelled wait. Here the loop is busy when the event
    comes; the next `__anext__` never sees event 1. Fix: hand a dropped subscription event back
    (a one-slot stash on NativeSubscription read first by try_next/next)."""
    go = threading.Event()

    def script(conn: socket.socket, n: int) -> None:
        conn.sendall(ACK)
        go.wait(DEADLINE)
        conn.sendall(event("1"))
        peer.hold(conn)

    async def main() -> Any:
        async with secfindings.AsyncClient(
            jwt=make_jwt(), base_url=peer.base_url, timeout=10, schema="off"
        ) as c:
            sub = c.subscribe(DOC)
            try:
                task = asyncio.ensure_future(sub.__anext__())
                await asyncio.sleep(0)  # a yield, not a wait: the task starts its native next
                completions = asyncio.get_running_loop()._secfindings_completions  # type: ignore[attr-defined]
                go.set()
                # The loop is busy (blocked here) when the event arrives and its Rust task ends.
                ready, _, _ = select.select([completions.fileno()], [], [], DEADLINE)
                assert ready, "the event never reached the completion queue"
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
                try:
                    return await asyncio.wait_for(sub.__anext__(), 5)
                except TimeoutError:
                    return "lost"
            finally:
                await sub.aclose()

    with WsPeer(script) as peer:
        got = asyncio.run(main())
    assert got != "lost", "the event taken by the cancelled __anext__ was dropped"
    assert got["e"]["cursor"] == "1"


# ----------------------------------------------------------------------------- secrets


def test_a_connection_error_cut_inside_the_jwt_does_not_leak_its_prefix() -> None:
    """DEFECT: `parse` keeps the first 300 characters of a legacy `connection_error` payload with
    `chars().take(300)`; the redactor then masks only whole known secrets (or `eyJ` shapes), so
    a JWT that the cut splits survives as a prefix in the AuthenticationError. Elsewhere the
    client cuts with `Redactor::scrub_cut`, which masks a cut inside a secret."""
    jwt = make_jwt(opaque=True)  # masked by its value only, not by its shape
    payload = '{"message":"' + "x" * 188 + jwt + '"}'  # characters 200..300 are jwt[:100]
    msg = frame('{"type":"connection_error","payload":' + payload + "}")
    with HostileServer() as server:
        server.api = lambda req: upgrade(req, msg, protocol="graphql-ws")
        with client(server, jwt=jwt) as c:
            sub = c.subscribe(DOC)
            watchdog = threading.Timer(DEADLINE, sub.close)
            watchdog.start()
            try:
                with pytest.raises(secfindings.AuthenticationError) as info:
                    list(sub)
            finally:
                watchdog.cancel()
    text = str(info.value) + repr(info.value)
    assert jwt[:100] not in text, "a cut prefix of the JWT is in the error"
