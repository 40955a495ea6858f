"""Reconnects and resuming against peers that misbehave: a Retry-After beyond max_retry_wait is
not slept, a server that ends each JWT's connection after serving it does not use up
max_reconnects, and the cursor to resume after is the last event consumed. Loopback only; no
fixed sleeps: tests wait for conditions, and watchdogs turn a hang into a failure."""

from __future__ import annotations

import socket
import threading

import pytest
from tests.servers.http import HostileServer, Response, client
from tests.servers.ws import (
    ACK,
    DEADLINE,
    DOC,
    WsPeer,
    close_frame,
    event,
    in_thread,
    upgrade,
    wait_for,
    websocket_only,
    ws_client,
)

import secfindings

pytestmark = pytest.mark.reliability_hostile


def test_retry_after_longer_than_max_retry_wait_does_not_block_for_an_hour() -> None:
    """DEFECT: `handshake_error` takes `Retry-After` up to 3600 s and `Task::run` sleeps
    `retry_after.max(step)` ignoring `max_retry_wait`. HTTP calls raise RateLimitError when the
    server asks for longer than max_retry_wait (retry.rs); a subscription blocks its consumer for
    up to an hour instead (the same for a 429)."""
    with HostileServer() as server:
        server.api = lambda req: Response.text("busy", 503, [("Retry-After", "3600")])
        with client(server, max_retry_wait=0.5) as c:
            sub = c.subscribe(DOC, max_reconnects=1)
            t, out = in_thread(lambda: list(sub))
            try:
                wait_for(lambda: not t.is_alive(), "the subscription to give up on a 3600 s wait")
            finally:
                sub.close()
                t.join(5)
    # Nothing was slept: the subscription ended with an error that names the wait it refused.
    assert len(out) == 1, out
    assert isinstance(out[0], secfindings.SubscriptionError), out
    assert "3600s, longer than max_retry_wait" in str(out[0])


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
