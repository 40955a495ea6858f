"""Ending a subscription whatever the peer does: close() ends an iteration blocked in a pong the
server never reads or waiting on a stalled connect, and a cancelled __anext__ keeps the event it
had taken. Loopback only; no fixed sleeps: tests wait for conditions, and watchdogs turn a hang
into a failure."""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import threading
import time
from typing import Any

import pytest
from tests.servers.http import HostileServer, Request, Response, client, make_jwt
from tests.servers.ws import ACK, DEADLINE, DOC, WsPeer, event, frame, in_thread, wait_for, ws_client

import secfindings

pytestmark = pytest.mark.reliability_hostile


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
                # A position given: subscribe() returns without asking the (stalled) server for
                # one, and the stall is met by the connect that follows.
                started = time.monotonic()
                sub = c.subscribe(DOC, {"after": "c0"})
                assert time.monotonic() - started < 10, "subscribe() waited on the stalled server"
                t, out = in_thread(lambda: list(sub))
                wait_for(lambda: len(requests()) == 1, "the stalled request")
                sub.close()
                t.join(5)
                stuck = t.is_alive()
        finally:
            release.set()
    assert not stuck, f"close() did not end an iteration waiting on a stalled {where}"
    assert out == [[]]


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
                loop = asyncio.get_running_loop()
                # Yields, not waits, until the task has started its native wait (after a few
                # turns of the loop it gives first): the loop then has its completion queue.
                for _ in range(1000):
                    await asyncio.sleep(0)
                    if hasattr(loop, "_secfindings_completions"):
                        break
                completions = loop._secfindings_completions  # type: ignore[attr-defined]
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
