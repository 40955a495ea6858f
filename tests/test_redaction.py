"""No API token, refresh token or JWT in a repr, exception, warning or log record, not even a
piece of one cut at the limit of an error body or a ``Location``."""

import base64
import json
import logging
from collections.abc import Iterable
from typing import Any

import pytest
from tests.conftest import FINDING_QUERY
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Response, connection_query, idp_answer, make_api_token, make_jwt

import secfindings
from secfindings import APIStatusError


def secrets_of(token):
    body = json.loads(base64.b64decode(token))
    return [token, body["AuthParameters"]["REFRESH_TOKEN"]]


@pytest.mark.reliability_hostile
def test_nothing_secret_anywhere(emulator, caplog, recwarn):
    caplog.set_level(logging.DEBUG, logger="secfindings")
    token = emulator.create_api_token()
    secret = secrets_of(token)
    jwt = emulator.issue_jwt()
    c = secfindings.Client(token, base_url=emulator.base_url, auth_url=emulator.auth_url, max_retries=1)
    texts = [repr(c), str(c)]
    c.execute(FINDING_QUERY, {"id": 1})
    emulator.expire_jwts()
    c.execute(FINDING_QUERY, {"id": 1})  # 401 -> refresh, logged
    emulator.inject("status", status=503)
    c.execute(FINDING_QUERY, {"id": 1})  # retry, logged
    for kind in ["status", "rate_limit"]:
        emulator.inject(kind, 2, status=502, retry_after=0)
        with pytest.raises(secfindings.SecFindingsError) as info:
            c.execute(FINDING_QUERY, {"id": 1})
        texts += [str(info.value), repr(info.value), repr(vars(info.value))]
        emulator.clear_faults()
    emulator.revoke_api_token(token)
    emulator.expire_jwts()
    with pytest.raises(secfindings.AuthenticationError) as info:
        c.execute(FINDING_QUERY, {"id": 1})
    texts += [str(info.value), repr(info.value)]
    with pytest.raises(secfindings.ConfigurationError) as info:
        secfindings.Client(token, jwt=jwt, base_url=emulator.base_url)
    texts += [str(info.value)]
    static = secfindings.Client(jwt=jwt, base_url=emulator.base_url)
    texts += [repr(static)]
    texts += [r.getMessage() for r in caplog.records]
    texts += [str(w.message) for w in recwarn]
    assert any("401" in t for t in texts)
    assert any("retry" in t for t in texts)
    joined = "\n".join(texts)
    for s in [*secret, jwt]:
        assert s not in joined
    assert "eyJ" not in joined


def test_debug_log_per_request(emulator, client, caplog):
    caplog.set_level(logging.DEBUG, logger="secfindings")
    secfindings._logging.sync_levels()
    client.execute(FINDING_QUERY, {"id": 1})
    msgs = [r.getMessage() for r in caplog.records if r.name.startswith("secfindings")]
    assert any("GetFinding -> HTTP 200" in m for m in msgs), msgs
    assert any("obtained a JWT" in m for m in msgs), msgs


# ---------------------------------------------------------- secrets at the cut (hostile server)

#: How much of an error body ``APIStatusError.body`` keeps, and of a ``Location`` a message.
BODY_KEEP = 4096
LOCATION_KEEP = 512


def pieces(secret: str, n: int = 8) -> set[str]:
    """Every ``n``-character substring of ``secret``."""
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def assert_no_piece(secret: str, texts: Iterable[str], n: int = 8) -> None:
    joined = "\n".join(texts)
    shown = sorted(p for p in pieces(secret, n) if p in joined)
    assert not shown, f"{len(shown)} pieces of a secret leaked, e.g. {shown[:3]}"


def opaque_idp(server: HostileServer) -> str:
    """The hostile IdP hands out one opaque JWT (masked by value only); returns it."""
    jwt = make_jwt(opaque=True)
    server.idp = lambda req: Response.of_json(idp_answer(jwt))
    return jwt


@pytest.mark.reliability_hostile
class TestSecretsAtTheCut:
    """A secret echoed across the point where a body or a Location is cut: not one piece of it
    may be shown (the part before the cut is not a whole secret, so masking whole values after
    cutting missed it)."""

    @pytest.mark.parametrize(
        "before_cut", [6, 40, -6], ids=["4090-x-then-jwt", "40-chars-in", "all-but-6-in"]
    )
    def test_a_jwt_across_the_body_cut(self, server: HostileServer, before_cut: int) -> None:
        jwt = opaque_idp(server)
        filler = BODY_KEEP - (before_cut if before_cut > 0 else len(jwt) + before_cut)
        body = "x" * filler + jwt + "y" * 2000
        server.api = lambda req: Response.text(body, 500, content_type="text/plain")
        with pytest.raises(APIStatusError) as info:
            hostile.client(server).execute("{ a }")
        err = info.value
        assert server.api_requests[0].headers["authorization"] == f"Bearer {jwt}"
        assert err.status_code == 500
        assert err.body.startswith("x" * filler)
        assert jwt[:6] not in err.body, "the start of the JWT is shown at the cut"
        assert_no_piece(jwt, [err.body, str(err), repr(err)])

    @pytest.mark.parametrize("before_cut", [20, 60, None], ids=["20-chars-in", "60-chars-in", "after-500-a"])
    def test_a_jwt_across_the_location_cut(self, server: HostileServer, before_cut: int | None) -> None:
        jwt = opaque_idp(server)
        prefix = "http://127.0.0.1:1/"
        filler = 500 if before_cut is None else LOCATION_KEEP - len(prefix) - before_cut
        server.api = lambda req: Response.redirect(prefix + "a" * filler + jwt, 307)
        with pytest.raises(APIStatusError) as info:
            hostile.client(server).execute("{ a }")
        err = info.value
        assert err.status_code == 307
        assert prefix + "a" * min(filler, 100) in str(err)
        assert_no_piece(jwt, [str(err), repr(err), err.body, repr(err.headers)])

    @pytest.mark.parametrize("secret", ["refresh_token", "api_token"])
    @pytest.mark.parametrize("before_cut", [10, 20])
    def test_the_api_tokens_secrets_across_the_body_cut(
        self, server: HostileServer, secret: str, before_cut: int
    ) -> None:
        token = make_api_token()
        value = token.refresh_token if secret == "refresh_token" else str(token)
        filler = BODY_KEEP - before_cut
        server.api = lambda req: Response.text(
            "x" * filler + value + "y" * 2000, 500, content_type="text/plain"
        )
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, api_token=token).execute("{ a }")
        err = info.value
        assert err.body.startswith("x" * filler)
        assert value[:6] not in err.body
        assert_no_piece(value, [err.body, str(err), repr(err)])


@pytest.mark.reliability_hostile
@pytest.mark.parametrize("edge_cursors", [False, True], ids=["end-cursor", "edge-cursors-too"])
def test_a_jwt_as_cursor_stays_out_of_the_paginators_repr(server: HostileServer, edge_cursors: bool) -> None:
    jwt = opaque_idp(server)
    edges: list[dict[str, Any]] = [{"node": {"id": 1}}, {"node": {"id": 2}}]
    if edge_cursors:
        edges = [{"cursor": jwt, **e} for e in edges]
    first = {"data": {"items": {"edges": edges, "pageInfo": {"hasNextPage": True, "endCursor": jwt}}}}
    last = {"data": {"items": {"edges": [], "pageInfo": {"hasNextPage": False, "endCursor": None}}}}
    server.api = hostile.sequence(Response.of_json(first), Response.of_json(last))
    selection = "edges { cursor node { id } }" if edge_cursors else "edges { node { id } }"
    p = hostile.client(server).paginate(connection_query(selection), path="items", page_size=2)
    page = next(iter(p.pages()))
    assert page.items == [{"id": 1}, {"id": 2}]
    assert p.cursor == jwt  # the resume point is the JWT itself: only its display is masked
    assert_no_piece(jwt, [repr(p)])
    # Mid-page: one item handed out (with edge cursors, the cursor is that item's: the JWT).
    server.api = lambda req: Response.of_json(first)
    p2 = hostile.client(server).paginate(connection_query(selection), path="items", page_size=2)
    it = iter(p2)
    assert next(it) == {"id": 1}
    assert p2.cursor == (jwt if edge_cursors else None)
    assert_no_piece(jwt, [repr(p2)])
