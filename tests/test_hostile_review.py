"""Regression tests for defects a hostile review found (all fixed), against tests/servers/http.py.

- a value whose ``to_dict()`` / ``isoformat()`` grows its parent dict made the argument
  conversion panic;
- a long key repeated at every level of a deep value cost memory in the square of the depth;
- a failing identity provider was asked once per call (thousands of exchanges a second);
- a paged walk without edge cursors, or past the connection's own total, never stopped;
- a comment ended by ``\\r`` hid a mutation (paged, and re-sent on retries);
- a secret across the cut of an error body or a ``Location`` was half shown;
- a cursor that is the JWT showed in ``repr(paginator)``;
- ``ExpiresIn: 1e-9`` cost an exchange per call;
- filters nested deeper than Python's recursion limit raised RecursionError;
- a naive DateTime given as a string was sent.

The crash-prone or memory-hungry cases run in a fresh interpreter, so a regression fails one
test, not the whole run.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response, idp_answer, make_api_token, make_jwt

import secfindings
from secfindings import APIStatusError, AuthenticationError, PaginationError, ValidationError
from secfindings.filters import filter_tree

MiB = 1 << 20
#: How much of an error body ``APIStatusError.body`` keeps, and of a ``Location`` a message.
BODY_KEEP = 4096
LOCATION_KEEP = 512
NOT_AUTHORIZED = {"__type": "NotAuthorizedException", "message": "no"}


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer() as s:
        yield s
    assert not s.errors, f"the hostile server itself failed: {s.errors!r}"


# ----------------------------------------------------------------------------- helpers


def run_isolated(code: str, *args: str, timeout: float = 120) -> dict[str, Any]:
    """Runs ``code`` in a fresh interpreter (``sys.argv[1:]`` = ``args``); the process must live
    and print one JSON line last."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, f"the process died (returncode {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def pieces(secret: str, n: int = 8) -> set[str]:
    """Every ``n``-character substring of ``secret``."""
    return {secret[i : i + n] for i in range(len(secret) - n + 1)}


def assert_no_piece(secret: str, texts: Iterable[str], n: int = 8) -> None:
    joined = "\n".join(texts)
    shown = sorted(p for p in pieces(secret, n) if p in joined)
    assert not shown, f"{len(shown)} pieces of a secret leaked, e.g. {shown[:3]}"


def not_authorized(req: Request) -> Response:
    return Response.of_json(NOT_AUTHORIZED, 400, [("Content-Type", "application/x-amz-json-1.1")])


def endless(make_page: Callable[[int], dict[str, Any]], stop_after: int) -> Callable[[Request], Response]:
    """Page ``i`` is ``make_page(i)`` with hasNextPage true and a fresh endCursor, until the server
    gives up after ``stop_after`` pages (so a client without guards ends instead of looping)."""
    n = itertools.count()

    def api(req: Request) -> Response:
        i = next(n)
        conn = make_page(i)
        conn["pageInfo"] = {"hasNextPage": i < stop_after, "endCursor": str(uuid.uuid4())}
        return Response.of_json({"data": {"items": conn}})

    return api


def walk(paginator: Iterable[Any], cap: int = 1000) -> list[Any]:
    got: list[Any] = []
    for item in paginator:
        got.append(item)
        if len(got) >= cap:
            break
    return got


def connection_query(selection: str) -> str:
    return (
        "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
        f"{{ {selection} pageInfo {{ hasNextPage endCursor }} }} }}"
    )


# ----------------------------------------------------------------------------- 1. mutating values

MUTATING_VALUE = """
import json, sys
import secfindings
from secfindings import _native

method, returns, token, base_url, auth_url = sys.argv[1:6]
returned = json.loads(returns)

class Evil:
    def __init__(self, parent):
        self.parent = parent

def grow(self):
    # Enough new keys to make the dict resize while it is being converted.
    for i in range(200):
        self.parent[f"k{len(self.parent)}-{i}"] = i
    return returned

setattr(Evil, method, grow)

def fresh():
    d = {}
    d["a"] = Evil(d)
    return d

def outcome(call):
    try:
        value = call()
    except BaseException as exc:
        name, message = type(exc).__name__, str(exc)[:500]
        return {"raised": name, "exception": isinstance(exc, Exception), "message": message}
    return {"raised": None, "value": value}

client = secfindings.Client(token, base_url=base_url, auth_url=auth_url, max_retries=0, timeout=10,
                            schema="off")
out = {
    "prepare": outcome(lambda: _native.prepare_request("query Q($v: JSON) { a }", {"v": fresh()})),
    "execute": outcome(lambda: client.execute("query Q($v: JSON) { a }", {"v": fresh()})),
}
print(json.dumps(out, default=repr))
"""


@pytest.mark.reliability_input
@pytest.mark.parametrize(
    ("method", "returns"),
    [("to_dict", {"x": 1}), ("isoformat", {"x": 1}), ("isoformat", "2024-01-01T00:00:00+00:00")],
    ids=["to_dict", "isoformat-dict", "isoformat-str"],
)
def test_a_value_that_grows_its_parent_dict_does_not_panic(
    server: HostileServer, method: str, returns: Any
) -> None:
    out = run_isolated(
        MUTATING_VALUE, method, json.dumps(returns), make_api_token(), server.base_url, server.auth_url
    )
    for call in ("prepare", "execute"):
        got = out[call]
        assert got["raised"] != "PanicException", f"{call}: the native core panicked: {got}"
        if got["raised"] is not None:
            assert got["exception"], f"{call}: raised a BaseException that is no Exception: {got}"
    prepared = out["prepare"]
    if prepared["raised"] is None:
        # Converted: the value is what the object's own protocol gave.
        assert prepared["value"]["variables"]["v"]["a"] == returns, prepared
    if out["execute"]["raised"] is None:
        assert out["execute"]["value"] == {}, out
        assert len(server.api_requests) == 1
    else:
        assert server.api_requests == [], out


# ----------------------------------------------------------------------------- 2. long key, deep

LONG_KEY_DEEP = """
import json, sys
from secfindings import ValidationError, _native

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

key = "k" * 100_000
def chain(depth):
    d = {"leaf": 1}
    for _ in range(depth):
        d = {key: d}
    return d

fits, too_deep = chain(110), chain(130)
query = "query Q($v: JSON) { a }"
before = peak()
prepared = _native.prepare_request(query, {"v": fits})
node, depth = prepared["variables"]["v"], 0
while isinstance(node, dict) and list(node) == [key]:
    node, depth = node[key], depth + 1
try:
    _native.prepare_request(query, {"v": too_deep})
    deep = {"raised": None}
except Exception as exc:
    deep = {"raised": type(exc).__name__, "is_validation": isinstance(exc, ValidationError),
            "length": len(str(exc)), "message": str(exc)[:2000]}
print(json.dumps({"depth": depth, "leaf": node, "deep": deep, "grew": peak() - before}))
"""


@pytest.mark.reliability_input
def test_a_long_key_repeated_deep_costs_no_square_memory() -> None:
    out = run_isolated(LONG_KEY_DEEP)
    assert out["depth"] == 110, out
    assert out["leaf"] == {"leaf": 1}, out
    deep = out["deep"]
    assert deep["raised"] == "ValidationError", deep
    assert deep["is_validation"], deep
    assert deep["length"] < 1000, f"a message of {deep['length']} characters: {deep['message'][:300]}..."
    assert out["grew"] < 300 * MiB, f"peak RSS grew by {out['grew'] / MiB:.0f} MiB"


# ----------------------------------------------------------------------------- 3. failing IdP


@pytest.mark.reliability_hostile
class TestFailingIdentityProvider:
    def test_a_provider_that_fails_after_a_short_jwt_is_not_asked_per_call(
        self, server: HostileServer
    ) -> None:
        first = Response.of_json(idp_answer(make_jwt(), expires_in=2))
        server.idp = hostile.sequence(first, not_authorized)
        c = hostile.client(server, max_retries=0)
        calls = served = refused = 0
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            calls += 1
            try:
                assert c.execute("{ a }") == {}
                served += 1
            except AuthenticationError:
                refused += 1
        assert calls >= 20, f"only {calls} calls in 1.5 s: the test proves nothing"
        assert served >= 1, "the first JWT served no call"
        assert len(server.idp_requests) <= 6, (
            f"{len(server.idp_requests)} exchanges for {calls} calls ({refused} refused)"
        )

    def test_a_provider_that_always_refuses_is_not_asked_per_call(self, server: HostileServer) -> None:
        server.idp = not_authorized
        c = hostile.client(server, max_retries=0)
        for _ in range(200):
            with pytest.raises(AuthenticationError):
                c.execute("{ a }")
        assert 1 <= len(server.idp_requests) <= 3, f"{len(server.idp_requests)} exchanges for 200 calls"
        assert server.api_requests == []


# ----------------------------------------------------------------------------- 4. paging guards

SAME_EDGES = connection_query("edges { node { id } }")
SAME_NODES = connection_query("nodes { id }")
WITH_TOTAL = connection_query("total_count edges { node { id } }")


@pytest.mark.reliability_hostile
class TestPagingGuardsWithoutEdgeCursors:
    @pytest.mark.parametrize(
        ("query", "make_page"),
        [
            (SAME_EDGES, lambda i: {"edges": [{"node": {"id": 1}}, {"node": {"id": 2}}]}),
            (SAME_NODES, lambda i: {"nodes": [{"id": 1}, {"id": 2}]}),
        ],
        ids=["edges", "nodes"],
    )
    def test_the_same_nodes_again(
        self, server: HostileServer, query: str, make_page: Callable[[int], dict[str, Any]]
    ) -> None:
        server.api = endless(make_page, stop_after=40)
        c = hostile.client(server)
        with pytest.raises(PaginationError):
            walk(c.paginate(query, path="items", page_size=2))
        assert len(server.api_requests) <= 3

    def test_distinct_ids_far_past_the_total(self, server: HostileServer) -> None:
        def make_page(i: int) -> dict[str, Any]:
            return {"total_count": 10, "edges": [{"node": {"id": 2 * i}}, {"node": {"id": 2 * i + 1}}]}

        server.api = endless(make_page, stop_after=100)
        c = hostile.client(server)
        with pytest.raises(PaginationError) as info:
            walk(c.paginate(WITH_TOTAL, path="items", page_size=2))
        assert len(server.api_requests) <= 25
        assert "total of 10" in str(info.value)


# ----------------------------------------------------------------------------- 5. \r comments

DISGUISED_PAGED_MUTATION = (
    "#\rmutation M($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ edges { node { id } } pageInfo { hasNextPage endCursor } } }"
)
DISGUISED_MUTATION = "#\rmutation M { a }"


@pytest.mark.reliability_input
class TestCommentEndedByCarriageReturn:
    def test_the_mutation_is_seen(self) -> None:
        assert secfindings._native.prepare_request(DISGUISED_MUTATION)["kind"] == "mutation"

    def test_a_disguised_mutation_is_not_paged(self, server: HostileServer) -> None:
        server.api = lambda req: Response.of_json(
            {"data": {"items": {"edges": [], "pageInfo": {"hasNextPage": False, "endCursor": None}}}}
        )
        c = hostile.client(server)
        # Refused as a mutation (not, say, as a document without an operation).
        with pytest.raises(ValidationError, match="is a mutation"):
            next(iter(c.paginate(DISGUISED_PAGED_MUTATION)), None)
        assert server.api_requests == []

    def test_a_disguised_mutation_is_sent_once(self, server: HostileServer) -> None:
        server.api = lambda req: Response.text("<html>502 Bad Gateway</html>", 502)
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, max_retries=3).execute(DISGUISED_MUTATION)
        assert info.value.status_code == 502
        assert len(server.api_requests) == 1


# ----------------------------------------------------------------------------- 6. secrets at the cut


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


# ----------------------------------------------------------------------------- 7. JWT as cursor


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


# ----------------------------------------------------------------------------- 8. ExpiresIn 1e-9


@pytest.mark.reliability_hostile
def test_a_nanosecond_lifetime_does_not_cost_an_exchange_per_call(server: HostileServer) -> None:
    server.idp = lambda req: Response.of_json(idp_answer(make_jwt(), expires_in=1e-9))
    c = hostile.client(server)
    for _ in range(300):
        assert c.execute("{ a }") == {}
    assert len(server.api_requests) == 300
    assert 1 <= len(server.idp_requests) <= 3, f"{len(server.idp_requests)} exchanges for 300 calls"


# ----------------------------------------------------------------------------- 9. deep filters

LEAF = {"field": "a", "condition": "equals", "value": 1}


def deep_filter_dict(depth: int) -> dict[str, Any]:
    node: dict[str, Any] = LEAF
    for _ in range(depth):
        node = {"operator": "and", "operands": [node]}
    return node


def deep_filter_text(depth: int) -> str:
    # Built as text: json.dumps itself recurses too deep on a tree this deep.
    return '{"operator": "and", "operands": [' * depth + json.dumps(LEAF) + "]}" * depth


def deep_filter(depth: int) -> secfindings.filters.Filter:
    """``depth`` nested groups. ``&`` flattens ``(a & b) & c`` into one group, so the groups
    alternate ``any_of`` / ``all_of``, which cannot be flattened."""
    f = secfindings.field("a").equals(0)
    for i in range(1, depth + 1):
        combine = secfindings.any_of if i % 2 else secfindings.all_of
        f = combine(f, secfindings.field("a").equals(i))
    return f


@pytest.mark.reliability_input
class TestDeepFilters:
    def test_and_flattens(self) -> None:
        a, b, c = (secfindings.field("a").equals(i) for i in range(3))
        assert (a & b) & c == secfindings.all_of(a, b, c)

    @pytest.mark.parametrize("form", ["dict", "json"])
    def test_filter_tree_5000_deep(self, form: str) -> None:
        value = deep_filter_dict(5000) if form == "dict" else deep_filter_text(5000)
        with pytest.raises(ValidationError) as info:
            filter_tree(value)
        assert not isinstance(info.value, RecursionError)
        assert info.value.__cause__ is None or not isinstance(info.value.__cause__, RecursionError)

    def test_a_3000_deep_filter_is_refused_before_sending(self, server: HostileServer) -> None:
        f = deep_filter(3000)
        depth, node = 0, f
        while isinstance(node, secfindings.filters.Group):
            depth, node = depth + 1, node.operands[0]
        assert depth == 3000
        c = hostile.client(server)
        with pytest.raises(ValidationError):
            next(iter(c.findings_view(filters=f)), None)
        assert server.api_requests == []


# ----------------------------------------------------------------------------- 10. naive DateTime text


@pytest.mark.reliability_input
class TestNaiveDateTimeText:
    QUERY = "query Q($t: DateTime) { a }"

    def test_a_naive_datetime_string_is_refused(self, server: HostileServer) -> None:
        with pytest.raises(ValidationError, match="timezone-aware"):
            hostile.client(server).execute(self.QUERY, {"t": "2024-01-01T00:00:00"})
        assert server.api_requests == []

    def test_an_aware_datetime_string_is_sent(self, server: HostileServer) -> None:
        assert hostile.client(server).execute(self.QUERY, {"t": "2024-01-01T00:00:00Z"}) == {}
        (req,) = server.api_requests
        assert req.json()["variables"] == {"t": "2024-01-01T00:00:00Z"}
