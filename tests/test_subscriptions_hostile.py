"""Subscriptions against hostile WebSocket peers (raw sockets on loopback): every misbehaviour
ends in a typed error, without a hang, a spin, a secret in a message or a followed redirect."""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from collections.abc import Callable
from typing import Any

import pytest
from tests.hostile import HostileServer, Request, Response, client, make_jwt

import secfindings

pytestmark = pytest.mark.reliability_hostile

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


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


ACK = frame('{"type":"connection_ack"}')


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


def event(cursor: str) -> bytes:
    return frame(json.dumps({"type": "next", "id": "1", "payload": {"data": {"e": {"cursor": cursor}}}}))


def first_error(sub: secfindings.Subscription[Any]) -> BaseException:
    watchdog = threading.Timer(20, sub.close)
    watchdog.start()
    try:
        with pytest.raises(secfindings.SecFindingsError) as info:
            for _ in sub:
                pass
        return info.value
    finally:
        watchdog.cancel()


DOC = "subscription S($after: String) { e(after: $after) { cursor } }"


def test_an_upgrade_answered_404_is_a_subscription_error_at_once() -> None:
    with HostileServer() as server:
        server.api = lambda req: Response.of_json({"message": "Not Found"}, 404)
        with client(server) as c:
            err = first_error(c.subscribe(DOC, max_reconnects=5))
        assert isinstance(err, secfindings.SubscriptionError)
        assert "404" in str(err)
        assert "does not serve subscriptions" in str(err)
        assert len(upgrades(server)) == 1


def test_a_redirect_is_not_followed() -> None:
    with HostileServer() as server:
        server.api = lambda req: Response.redirect("http://127.0.0.1:9/steal")
        with client(server) as c:
            err = first_error(c.subscribe(DOC, max_reconnects=5))
        assert isinstance(err, secfindings.SubscriptionError)
        assert len(upgrades(server)) == 1


def test_no_subprotocol_chosen_is_a_subscription_error() -> None:
    with HostileServer() as server:
        server.api = lambda req: upgrade(req, ACK, protocol=None)
        with client(server) as c:
            err = first_error(c.subscribe(DOC))
        assert isinstance(err, secfindings.SubscriptionError)
        assert len(upgrades(server)) == 1


@pytest.mark.parametrize(
    "frames",
    [
        pytest.param(ACK + frame("this is not json"), id="garbage"),
        pytest.param(ACK + frame('{"type":"next","id":"1","payload":[1,2]}'), id="payload-not-object"),
        pytest.param(ACK + frame(b"\xff\xfe", opcode=2), id="binary-not-utf8"),
        # A frame that announces 2**62 bytes: refused by its header, nothing allocated.
        pytest.param(ACK + struct.pack("!BBQ", 0x81, 127, 1 << 62), id="huge-frame"),
        pytest.param(b"", id="closed-before-ack"),
        pytest.param(frame('{"type":"ping"}'), id="ping-then-gone"),
    ],
)
def test_a_misbehaving_server_ends_with_a_subscription_error_after_the_retries(frames: bytes) -> None:
    with HostileServer() as server:
        server.api = lambda req: upgrade(req, frames)
        with client(server, max_retry_wait=0.05) as c:
            err = first_error(c.subscribe(DOC, max_reconnects=2))
        assert isinstance(err, secfindings.SubscriptionError)
        assert "after 3 attempts" in str(err)
        assert len(upgrades(server)) == 3


def test_a_server_that_delivers_then_hangs_up_is_resumed_after_the_last_cursor() -> None:
    seen: list[Any] = []

    @websocket_only
    def api(req: Request) -> Response:
        seen.append(req)
        return upgrade(req, ACK + event(str(len(seen))))

    with HostileServer() as server:
        server.api = api
        with client(server, max_retry_wait=0.05) as c, c.subscribe(DOC) as sub:
            cursors = []
            for e in sub:
                cursors.append(e["e"]["cursor"])
                if len(cursors) == 3:
                    break
        assert cursors == ["1", "2", "3"]
        # Each event came on a connection of its own: the client went on after each hang-up.
        assert len(upgrades(server)) >= 3


def test_a_refused_given_jwt_is_an_authentication_error_without_the_jwt() -> None:
    jwt = make_jwt()
    with HostileServer() as server:
        # The server echoes the credential in its close reason.
        server.api = lambda req: upgrade(req, close_frame(4403, f"Forbidden: {jwt[:100]}"))
        with client(server, jwt=jwt) as c:
            err = first_error(c.subscribe(DOC))
        assert isinstance(err, secfindings.AuthenticationError)
        assert jwt[:100] not in str(err)
        assert len(upgrades(server)) == 1


def test_an_error_message_for_our_operation_is_a_graphql_error() -> None:
    bad = frame('{"type":"error","id":"1","payload":[{"message":"Unknown field"}]}')
    with HostileServer() as server:
        server.api = lambda req: upgrade(req, ACK + bad)
        with client(server) as c:
            err = first_error(c.subscribe(DOC))
        assert isinstance(err, secfindings.GraphQLError)
        assert err.errors == [{"message": "Unknown field"}]


def test_the_server_completing_the_subscription_ends_the_iteration() -> None:
    done = frame('{"type":"complete","id":"1"}')
    with HostileServer() as server:
        server.api = lambda req: upgrade(req, ACK + event("1") + done)
        with client(server) as c, c.subscribe(DOC) as sub:
            assert [e["e"]["cursor"] for e in sub] == ["1"]
