"""A subscription's position is fixed when it starts: a socket that drops at any point (before the
ack, between the ack and the first event, between events) loses nothing the server holds, and no
event is handed out twice, even by a server that replays the same one on every reconnect."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from tests.servers.http import HostileServer, Request, Response, client
from tests.servers.ws import ACK, close_frame, event, upgrade
from tests.test_subscriptions import take, wait_for

import secfindings
from secfindings.testing import Emulator

pytestmark = pytest.mark.reliability_fault

DEADLINE = 20.0


@pytest.fixture
def emu() -> Iterator[Emulator]:
    with Emulator(findings=20, seed=5) as e:
        yield e


def stats(emu: Emulator) -> dict[str, int]:
    return emu.subscription_stats()


def test_a_drop_before_the_ack_loses_nothing(emu: Emulator) -> None:
    emu.drop_next_websockets(1)
    with emu.client() as c, c.subscribe("finding_created") as sub:
        # Published while the first socket is being dropped in its handshake.
        a = emu.create_finding(5)
        wait_for(lambda: stats(emu)["active"] == 1, "the second connection's subscription")
        b = emu.create_finding(3)
        events = take(sub, 2)
        assert sub.connects == 2
    assert [e.cursor for e in events] == [a[1], b[1]]


def test_a_drop_between_the_ack_and_the_first_event_loses_nothing(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_created") as sub:
        wait_for(lambda: stats(emu)["active"] == 1, "the server-side subscription")
        emu.drop_websockets()
        # Published while no subscription is open on the server (the client waits before it
        # connects again, as the connection delivered nothing).
        a = emu.create_finding(5)
        b = emu.create_finding(1)
        events = take(sub, 2)
    assert [e.cursor for e in events] == [a[1], b[1]]


def test_the_position_before_any_event_is_the_start(emu: Emulator) -> None:
    before = emu.create_finding(2)
    with emu.client() as c, c.subscribe("finding_created") as sub:
        assert sub.cursor == before[1]
        after = emu.create_finding(4)
        assert [e.cursor for e in take(sub, 1)] == [after[1]]
        assert sub.cursor == after[1]


def test_a_drop_between_events_loses_nothing(emu: Emulator) -> None:
    with emu.client() as c, c.subscribe("finding_created") as sub:
        a = emu.create_finding(5)
        assert [e.cursor for e in take(sub, 1)] == [a[1]]
        emu.drop_websockets()
        b = emu.create_finding(2)
        c2 = emu.create_finding(3)
        assert [e.cursor for e in take(sub, 2)] == [b[1], c2[1]]


def test_async_with_fixes_the_position_before_the_ack(emu: Emulator) -> None:
    async def main() -> list[str]:
        emu.drop_next_websockets(1)
        async with emu.async_client() as c, c.subscribe("finding_created") as sub:
            a = emu.create_finding(5)
            out = []
            async with asyncio.timeout(DEADLINE):
                async for e in sub:
                    out.append(e.cursor)
                    break
            assert out == [a[1]]
            return out

    asyncio.run(main())


def test_an_explicit_after_is_the_start(emu: Emulator) -> None:
    a = emu.create_finding(5)
    b = emu.create_finding(5)
    with emu.client() as c, c.subscribe("finding_created", {"after": a[1]}) as sub:
        assert sub.cursor == a[1]
        assert [e.cursor for e in take(sub, 1)] == [b[1]]


# --------------------------------------------------------------------- hostile replaying server


def _replaying_server(server: HostileServer, cursor: str) -> None:
    """Every connection gets the event at ``cursor`` again, then a normal close."""

    def api(req: Request) -> Response:
        if req.method == "POST":
            return Response.of_json({"data": {"subscription_cursor": "3"}})
        return upgrade(req, ACK + event(cursor) + close_frame(1000, "bye"))

    server.api = api


def test_an_event_replayed_on_every_reconnect_is_delivered_once_and_the_subscription_ends() -> None:
    with HostileServer() as server:
        _replaying_server(server, "5")
        with client(server, max_retry_wait=0.05) as c:
            sub = c.subscribe(
                "subscription S($after: String) { e(after: $after) { cursor } }", max_reconnects=3
            )
            got: list[Any] = []
            watchdog = threading.Timer(DEADLINE, sub.close)
            watchdog.start()
            try:
                with pytest.raises(secfindings.SubscriptionError) as info:
                    got.extend(sub)
            finally:
                watchdog.cancel()
    assert got == [{"e": {"cursor": "5"}}]
    assert info.value.cursor == "5"
    upgrades = [r for r in server.api_requests if r.method == "GET"]
    # One healthy delivery, then max_reconnects + 1 attempts that brought nothing new.
    assert len(upgrades) == 1 + 4


def test_an_event_at_or_before_the_start_is_not_delivered() -> None:
    with HostileServer() as server:
        frames = ACK + event("2") + event("3") + event("4")

        def api(req: Request) -> Response:
            if req.method == "POST":
                return Response.of_json({"data": {"subscription_cursor": "3"}})
            return upgrade(req, frames + close_frame(1000, "bye"))

        server.api = api
        with client(server, max_retry_wait=0.05) as c:
            sub = c.subscribe(
                "subscription S($after: String) { e(after: $after) { cursor } }", max_reconnects=1
            )
            assert sub.cursor == "3"
            assert take(sub, 1) == [{"e": {"cursor": "4"}}]
            sub.close()


def test_a_server_without_the_start_query_is_asked_once_per_client() -> None:
    with HostileServer() as server:

        def api(req: Request) -> Response:
            if req.method == "POST":
                return Response.of_json({"errors": [{"message": "Cannot query field 'subscription_cursor'"}]})
            return upgrade(req, ACK + event("7"))

        server.api = api
        with client(server, max_retry_wait=0.05) as c:
            for _ in range(2):
                with c.subscribe("subscription S($after: String) { e(after: $after) { cursor } }") as sub:
                    assert sub.cursor is None
                    assert take(sub, 1) == [{"e": {"cursor": "7"}}]
    posts = [r for r in server.api_requests if r.method == "POST"]
    assert len(posts) == 1
