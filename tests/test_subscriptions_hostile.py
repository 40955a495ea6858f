"""Subscriptions against hostile WebSocket peers (raw sockets on loopback): every misbehaviour
ends in a typed error, without a hang, a spin, a secret in a message or a followed redirect."""

from __future__ import annotations

import struct
import threading
from typing import Any

import pytest
from tests.servers.http import HostileServer, Request, Response, client, make_jwt
from tests.servers.ws import (
    ACK,
    DEADLINE,
    DOC,
    close_frame,
    event,
    first_error,
    frame,
    upgrade,
    upgrades,
    websocket_only,
)

import secfindings

pytestmark = pytest.mark.reliability_hostile


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
