"""The client against peers that misbehave or attack, and callers that pass absurd input.

The peer is tests/servers/http.py: a scripted HTTP/1.1 server on raw sockets playing both the
identity provider and the API. What these tests prove:

- redirects are never followed: no request, JWT or refresh token reaches another server;
- response bodies are capped (``max_response_bytes``), gzip bombs included, and memory stays
  bounded; an enormous error page leaves a short ``body``;
- no credential shows in an exception, even when the server echoes it back in headers or body;
- absurd token lifetimes from the identity provider neither panic nor hang;
- a paged walk stops on a server that never ends or ignores ``after``; a mutation is not paged;
- an answer of the wrong shape is an error, and numbers come back exact;
- cyclic, too deep or out-of-range inputs are ValidationErrors and never crash the process (the
  crash-prone cases run in a subprocess, so a regression fails one test, not the whole run);
- the faults handled today (resets, truncation, stalls, 5xx, 429, 401) stay handled.
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import gzip
import http.client
import itertools
import json
import re
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest
from tests.clients import KINDS, Hostile, Kind, either_client
from tests.servers import http as hostile
from tests.servers.http import (
    HostileServer,
    Request,
    Response,
    idp_answer,
    json_stream,
    make_api_token,
    make_jwt,
)

import secfindings
from secfindings import (
    APIStatusError,
    AuthenticationError,
    ConfigurationError,
    GraphQLError,
    PaginationError,
    RateLimitError,
    TransportError,
    ValidationError,
)

T = TypeVar("T")

PAGE_Q = (
    "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }"
)
MUTATION_PAGE_Q = (
    "mutation M($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ edges { node { id } } pageInfo { hasNextPage endCursor } } }"
)
TWO_EDGES = [{"cursor": "c1", "node": {"id": 1}}, {"cursor": "c2", "node": {"id": 2}}]
SECRET_HEADERS = {"authorization", "set-cookie", "cookie", "proxy-authorization"}
MiB = 1 << 20


@pytest.fixture
def other() -> Iterator[HostileServer]:
    """A second server, the target of redirects: it must never hear from the client."""
    with HostileServer() as s:
        yield s


# ----------------------------------------------------------------------------- helpers


def page(edges: list[dict[str, Any]], end_cursor: str | None, more: bool = True) -> dict[str, Any]:
    return {"data": {"items": {"edges": edges, "pageInfo": {"hasNextPage": more, "endCursor": end_cursor}}}}


def endless(edges: list[dict[str, Any]], stop_after: int = 40) -> Callable[[Request], Response]:
    """Pages with a fresh endCursor each time and hasNextPage true; after ``stop_after`` pages the
    server gives up (hasNextPage false), so a client without guards ends instead of looping."""
    n = itertools.count()

    def api(req: Request) -> Response:
        return Response.of_json(page(edges, str(uuid.uuid4()), more=next(n) < stop_after))

    return api


def collect(items: Iterable[Any], into: list[Any], cap: int = 200) -> None:
    for item in items:
        into.append(item)
        if len(into) >= cap:
            return


async def acollect(items: Any, into: list[Any], cap: int = 200) -> None:
    async for item in items:
        into.append(item)
        if len(into) >= cap:
            return


def first_item(c: secfindings.Client, query: str, **kw: Any) -> Any:
    return next(iter(c.paginate(query, **kw)), None)


def no_panic(fn: Callable[[], T]) -> T:
    """Runs ``fn``; a Rust panic (pyo3_runtime.PanicException, a BaseException) fails the test."""
    try:
        return fn()
    except BaseException as exc:
        if type(exc).__name__ == "PanicException":
            pytest.fail(f"the native core panicked: {exc}")
        raise


async def no_panic_async(aw: Awaitable[T]) -> T:
    try:
        return await aw
    except BaseException as exc:
        if type(exc).__name__ == "PanicException":
            pytest.fail(f"the native core panicked: {exc}")
        raise


def assert_clean(texts: Iterable[str], secrets: Iterable[str]) -> None:
    joined = "\n".join(texts)
    for s in secrets:
        assert s not in joined, f"a secret leaked: {s[:12]}..."


def html_page(total: int) -> Callable[[], Iterator[bytes]]:
    block = b"<p>502 Bad Gateway: the upstream did not answer in time.</p>\n" * 4096

    def chunks() -> Iterator[bytes]:
        yield b"<html><head><title>502 Bad Gateway</title></head><body>"
        yield from itertools.repeat(block, total // len(block) + 1)
        yield b"</body></html>"

    return chunks


ISOLATED = """
import json, sys
import secfindings
token, base_url, auth_url = sys.argv[1:4]
client = secfindings.Client(token, base_url=base_url, auth_url=auth_url, max_retries=0, timeout=10,
                            schema="off")
{setup}
try:
    value = {call}
    out = {{"raised": None, "value": repr(value)[:300]}}
except Exception as exc:
    out = {{"raised": type(exc).__name__, "message": str(exc)[:3000]}}
print(json.dumps(out))
"""


def isolated(server: HostileServer, setup: str, call: str, timeout: float = 60) -> dict[str, Any]:
    """Runs ``call`` (after ``setup``) with a Client of ``server`` in a fresh interpreter; the
    process must live. Returns ``{"raised": exception class name or None, "message": ...}``."""
    code = ISOLATED.format(setup=textwrap.dedent(setup), call=call)
    args = [sys.executable, "-c", code, make_api_token(), server.base_url, server.auth_url]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"the process died (returncode {proc.returncode}): {proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# A fresh interpreter, 4 GiB of address space at most (a client that inflates a bomb dies of it
# instead of taking the machine), measuring the growth of its peak RSS over one call.
MEMORY_PROBE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
import secfindings

def peak():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))

token, base_url, auth_url = sys.argv[1:4]
c = secfindings.Client(token, base_url=base_url, auth_url=auth_url, max_retries=0, timeout=60, schema="off")
c.execute("{ warm }")
before = peak()
try:
    c.execute("{ a }")
    out = {"raised": None}
except Exception as exc:
    out = {"raised": type(exc).__name__, "message": str(exc)[:2000]}
out["grew"] = peak() - before
print(json.dumps(out))
"""


# ----------------------------------------------------------------------------- the harness itself


class TestHarness:
    """The hostile server does what the other tests rely on."""

    def test_keep_alive_and_parsing(self, server: HostileServer) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("POST", "/api/v1", body=b'{"q": 1}', headers={"Content-Type": "application/json"})
        assert json.loads(conn.getresponse().read()) == {"data": {}}
        conn.request("POST", "/", body=b"{}", headers={"X-Amz-Target": hostile.IDP_TARGET})
        assert "AccessToken" in json.loads(conn.getresponse().read())["AuthenticationResult"]
        conn.close()
        api, idp = server.requests
        assert (api.method, api.path, api.body, api.is_idp) == ("POST", "/api/v1", b'{"q": 1}', False)
        assert api.headers["content-type"] == "application/json"
        assert idp.is_idp
        assert idp.connection == api.connection

    def test_streams_and_actions(self, server: HostileServer) -> None:
        server.api = hostile.sequence(Response.stream(json_stream(3 * MiB)), Response.truncated())
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        conn.request("POST", "/api/v1", body=b"{}")
        assert len(json.loads(conn.getresponse().read())["data"]["items"][0]) >= 3 * MiB
        conn.request("POST", "/api/v1", body=b"{}")
        with pytest.raises(http.client.IncompleteRead):
            conn.getresponse().read()
        conn.close()

    def test_a_client_talks_to_it(self, server: HostileServer) -> None:
        c = hostile.client(server)
        assert c.execute("{ a }") == {}
        assert c.execute("{ a }") == {}
        assert len(server.idp_requests) == 1
        assert len(server.api_requests) == 2
        assert server.api_requests[0].headers["authorization"].startswith("Bearer ey")

    def test_credentials(self) -> None:
        token = make_api_token()
        assert token.refresh_token in json.loads(base64.b64decode(token))["AuthParameters"].values()
        opaque = make_jwt(exp=1e300, opaque=True)
        assert opaque.count(".") == 2
        assert "eyJ" not in opaque
        assert make_jwt().startswith("eyJ")

    def test_gzip_bomb_is_valid_gzip(self) -> None:
        small = hostile.gzip_bomb(8 * MiB, chunk=MiB)
        assert gzip.decompress(small) == bytes(8 * MiB)
        assert len(hostile.gzip_bomb()) < 12_000_000  # 10 GiB of zeros


# ----------------------------------------------------------------------------- redirects


@pytest.mark.reliability_hostile
class TestRedirects:
    @pytest.mark.parametrize("status", [301, 302, 307, 308])
    def test_an_api_redirect_is_an_error_and_not_followed(
        self, server: HostileServer, other: HostileServer, status: int
    ) -> None:
        server.api = lambda req: Response.redirect(other.base_url, status)
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, max_retries=2).execute("{ a }")
        assert info.value.status_code == status
        assert other.base_url in str(info.value)
        assert other.requests == []
        assert len(server.api_requests) == 1

    def test_an_idp_redirect_keeps_the_refresh_token_home(
        self, server: HostileServer, other: HostileServer
    ) -> None:
        server.idp = lambda req: Response.redirect(other.auth_url, 307)
        with pytest.raises(AuthenticationError) as info:
            hostile.client(server).execute("{ a }")
        assert re.search("redirect|location", str(info.value), re.IGNORECASE)
        assert other.requests == []
        assert server.api_requests == []


# ----------------------------------------------------------------------------- body cap


@pytest.mark.reliability_hostile
class TestBodyCap:
    @pytest.mark.parametrize("framing", ["content-length", "chunked"])
    def test_a_body_over_the_cap_is_refused(self, server: HostileServer, framing: str) -> None:
        chunks = json_stream(5_000_000)
        if framing == "chunked":
            server.api = lambda req: Response.stream(chunks)
        else:
            body = b"".join(chunks())
            server.api = lambda req: Response.text(body, content_type="application/json")
        c = hostile.client(server, max_response_bytes=1_000_000)
        with pytest.raises(TransportError, match="max_response_bytes"):
            c.execute("{ a }")

    def test_a_body_under_the_cap_is_read(self, server: HostileServer) -> None:
        server.api = lambda req: Response.stream(json_stream(500_000))
        c = hostile.client(server, max_response_bytes=1_000_000)
        assert len(c.execute("{ a }")["items"][0]) >= 500_000

    def test_a_500_mb_answer_stops_at_the_cap(self, server: HostileServer) -> None:
        server.api = lambda req: Response.stream(json_stream(500_000_000))
        c = hostile.client(server, max_response_bytes=1_000_000)
        with pytest.raises(TransportError, match="max_response_bytes"):
            c.execute("{ a }")

    @pytest.mark.parametrize("kind", ["gzip-bomb-10GiB", "chunked-500MB"])
    def test_the_default_cap_bounds_memory(self, server: HostileServer, kind: str) -> None:
        if kind.startswith("gzip"):
            huge = Response.gzip(hostile.gzip_bomb())
        else:
            huge = Response.stream(json_stream(500_000_000))
        server.api = hostile.sequence(Response.of_json({"data": {}}), huge)
        args = [sys.executable, "-c", MEMORY_PROBE, make_api_token(), server.base_url, server.auth_url]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)
        assert proc.returncode == 0, f"the process died (returncode {proc.returncode}): {proc.stderr[-3000:]}"
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert out["raised"] == "TransportError", out
        assert "max_response_bytes" in out["message"]
        assert out["grew"] < 700_000_000, f"peak RSS grew by {out['grew'] / MiB:.0f} MiB"

    def test_a_huge_error_page_leaves_a_short_body(self, server: HostileServer) -> None:
        server.api = lambda req: Response.stream(html_page(50_000_000), status=502, content_type="text/html")
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, max_retries=1).execute("{ a }")
        assert info.value.status_code == 502
        assert len(info.value.body) <= 5000
        assert "Bad Gateway" in info.value.body
        assert len(server.api_requests) == 2


# ----------------------------------------------------------------------------- secrets


@pytest.mark.reliability_hostile
class TestEchoedSecrets:
    """The server echoes every credential back; none may reach an exception. The JWT is opaque
    (no ``eyJ``), so only masking by value catches it."""

    @pytest.fixture
    def creds(self, server: HostileServer) -> tuple[hostile.ApiToken, str]:
        token, jwt = make_api_token(), make_jwt(opaque=True)
        server.idp = lambda req: Response.of_json(idp_answer(jwt))
        return token, jwt

    def test_status_error(self, server: HostileServer, creds: tuple[hostile.ApiToken, str]) -> None:
        token, jwt = creds
        echo = [
            ("Authorization", f"Bearer {jwt}"),
            ("Set-Cookie", f"session={jwt}; HttpOnly"),
            ("Cookie", f"session={jwt}"),
            ("Proxy-Authorization", f"Bearer {jwt}"),
            ("X-Echo", token.refresh_token),
        ]
        body = f"<html>you sent {jwt}, from {token} with {token.refresh_token}</html>"
        server.api = lambda req: Response.text(body, 500, echo)
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, api_token=token).execute("{ a }")
        err = info.value
        assert server.api_requests[0].headers["authorization"] == f"Bearer {jwt}"
        assert err.status_code == 500
        assert not {k.lower() for k in err.headers} & SECRET_HEADERS, err.headers.keys()
        assert_clean(
            [str(err), repr(err), err.body, repr(err.headers), repr(vars(err))],
            [jwt, token, token.refresh_token],
        )
        assert "****" in err.body

    def test_graphql_error(self, server: HostileServer, creds: tuple[hostile.ApiToken, str]) -> None:
        token, jwt = creds
        answer = {
            "errors": [{"message": f"bad token {jwt}", "extensions": {"t": token.refresh_token}}],
            "data": {"x": jwt},
        }
        server.api = lambda req: Response.of_json(answer)
        with pytest.raises(GraphQLError) as info:
            hostile.client(server, api_token=token).execute("{ x }")
        err = info.value
        assert_clean(
            [str(err), repr(err), repr(err.errors), repr(err.data)], [jwt, token, token.refresh_token]
        )
        assert "****" in repr(err.errors)

    def test_identity_provider_error(self, server: HostileServer) -> None:
        token = make_api_token()
        answer = {
            "__type": "NotAuthorizedException",
            "message": f"Invalid Refresh Token {token.refresh_token}",
        }
        server.idp = lambda req: Response.of_json(answer, 400, [("x-amzn-ErrorType", token.refresh_token)])
        with pytest.raises(AuthenticationError) as info:
            hostile.client(server, api_token=token).execute("{ a }")
        err = info.value
        assert_clean(
            [str(err), repr(err), err.error_type or "", repr(vars(err))], [token, token.refresh_token]
        )
        assert "****" in str(err)


# ----------------------------------------------------------------------------- lifetimes

LIFETIMES = [
    pytest.param({"expires_in": 1e19}, id="ExpiresIn=1e19"),
    pytest.param({"expires_in": 1e300}, id="ExpiresIn=1e300"),
    pytest.param({"expires_in": -5}, id="ExpiresIn=-5"),
    pytest.param({"expires_in": "abc"}, id="ExpiresIn=abc"),
    pytest.param({"expires_in": None, "exp": 1e300}, id="exp=1e300"),
]


def hostile_lifetime(server: HostileServer, expires_in: Any, exp: float | None = None) -> None:
    server.idp = lambda req: Response.of_json(idp_answer(make_jwt(exp=exp), expires_in))


@pytest.mark.reliability_hostile
class TestHostileLifetimes:
    @pytest.mark.parametrize("answer", LIFETIMES)
    @pytest.mark.parametrize("kind", KINDS)
    def test_either_client(self, server: HostileServer, kind: Kind, answer: dict[str, Any]) -> None:
        hostile_lifetime(server, **answer)
        with either_client(kind, Hostile(server)) as either:
            c, run = either.client, either.run
            assert no_panic(lambda: run(c.execute("{ a }"))) == {}
            assert no_panic(lambda: run(c.execute("{ a }"))) == {}  # the cached token's expiry, read again

    @pytest.mark.parametrize("exp", [1e300, 1e19])
    def test_a_static_jwt_that_never_expires(self, server: HostileServer, exp: float) -> None:
        c = no_panic(
            lambda: secfindings.Client(jwt=make_jwt(exp=exp), base_url=server.base_url, schema="off")
        )
        assert no_panic(lambda: c.execute("{ a }")) == {}
        assert server.idp_requests == []


# ----------------------------------------------------------------------------- paging guards


@pytest.mark.reliability_hostile
class TestPagingGuards:
    @pytest.mark.parametrize("path", ["items", None])
    def test_empty_pages_that_never_end(self, server: HostileServer, path: str | None) -> None:
        server.api = endless([])
        c = hostile.client(server)
        with pytest.raises(PaginationError) as info:
            list(c.paginate(PAGE_Q, path=path))
        assert len(server.api_requests) <= 5
        # No page brought items: resume from the start.
        assert info.value.cursor is None, f"PaginationError.cursor: {info.value.cursor!r}"

    def test_a_server_that_ignores_after(self, server: HostileServer) -> None:
        server.api = endless(TWO_EDGES)
        got: list[Any] = []
        with pytest.raises(PaginationError) as info:
            collect(hostile.client(server).paginate(PAGE_Q, path="items", page_size=2), got)
        assert len(got) <= 4
        assert len(server.api_requests) <= 3
        assert hasattr(info.value, "cursor")

    def test_the_same_end_cursor_twice(self, server: HostileServer) -> None:
        server.api = lambda req: Response.of_json(page(TWO_EDGES[:1], "same"))
        got: list[Any] = []
        with pytest.raises(PaginationError):
            collect(hostile.client(server).paginate(PAGE_Q, path="items"), got)
        assert len(got) <= 2

    @pytest.mark.reliability_input
    def test_a_mutation_is_not_paged(self, server: HostileServer) -> None:
        server.api = lambda req: Response.of_json(page([], None, more=False))
        with pytest.raises(ValidationError):
            first_item(hostile.client(server), MUTATION_PAGE_Q)
        assert server.api_requests == []


# ----------------------------------------------------------------------------- loose shapes

NOT_DATA = [
    pytest.param({}, id="no-data"),
    pytest.param({"data": "hello"}, id="data-str"),
    pytest.param({"data": [1]}, id="data-list"),
    pytest.param({"data": 5}, id="data-number"),
    pytest.param([1], id="top-level-list"),
    pytest.param("x", id="top-level-str"),
]


@pytest.mark.reliability_hostile
class TestLooseShapes:
    @pytest.mark.parametrize("answer", NOT_DATA)
    def test_an_answer_without_a_data_object(self, server: HostileServer, answer: Any) -> None:
        server.api = lambda req: Response.of_json(answer)
        with pytest.raises(TransportError):
            hostile.client(server).execute("{ a }")

    def test_a_big_int_stays_exact(self, server: HostileServer) -> None:
        server.api = lambda req: Response.text(b'{"data": {"n": 123456789012345678901234567890}}')
        n = hostile.client(server).execute("{ n }")["n"]
        assert type(n) is int
        assert n == 123456789012345678901234567890

    @pytest.mark.parametrize("x", [96.72102736093625, 952467.3882682695, 7.4373065529319836e-06, 0.1])
    def test_a_float_comes_back_exactly(self, server: HostileServer, x: float) -> None:
        # What json.loads reads; 1 ulp off means a parser that does not round correctly.
        server.api = lambda req: Response.text(f'{{"data": {{"x": {x!r}}}}}'.encode())
        assert hostile.client(server).execute("{ x }")["x"] == x

    def test_a_huge_float(self, server: HostileServer) -> None:
        server.api = lambda req: Response.text(b'{"data": {"n": 1e300, "m": -2.5e-300}}')
        assert hostile.client(server).execute("{ n m }") == {"n": 1e300, "m": -2.5e-300}


# ----------------------------------------------------------------------------- bad inputs

DEEP = "deep = []\nfor _ in range(15000):\n    deep = [deep]\n"


@pytest.mark.reliability_input
class TestBadInputs:
    """Nothing is sent, and the process lives."""

    def test_a_cyclic_dict(self, server: HostileServer) -> None:
        out = isolated(
            server, 'd = {}\nd["s"] = d\n', 'client.execute("query Q($d: String) { a }", {"d": d})'
        )
        assert out["raised"] == "ValidationError", out
        assert re.search(r"\bd\b|variables", out["message"]), out
        assert server.api_requests == []

    def test_a_cyclic_list(self, server: HostileServer) -> None:
        out = isolated(server, "x = []\nx.append(x)\n", 'client.execute("query Q($x: JSON) { a }", {"x": x})')
        assert out["raised"] == "ValidationError", out
        assert server.api_requests == []

    def test_a_list_15000_deep(self, server: HostileServer) -> None:
        out = isolated(server, DEEP, 'client.execute("query Q($v: JSON) { a }", {"v": deep})')
        assert out["raised"] == "ValidationError", out
        assert server.api_requests == []

    def test_a_deep_value_inside_a_typed_input(self, server: HostileServer) -> None:
        rule = '{"name": "x", "method": "SET", "value": 1.0, "filters_config": {"filtersjson": deep}}'
        out = isolated(server, DEEP, f"client.add_scoring_rule({rule})")
        assert out["raised"] == "ValidationError", out
        assert server.api_requests == []

    def test_a_variable_type_nested_100000_deep(self, server: HostileServer) -> None:
        doc = '"query Q($x: " + "[" * 100000 + "Int" + "]" * 100000 + ") { a }"'
        out = isolated(server, "", f"client.execute({doc})")
        assert out["raised"] in (None, "ValidationError"), out

    def test_a_naive_datetime(self, server: HostileServer) -> None:
        naive = datetime.datetime(2024, 1, 1)
        with pytest.raises(ValidationError, match=r"(?i)time ?zone|tzinfo"):
            hostile.client(server).execute("query Q($t: DateTime) { a }", {"t": naive})
        assert server.api_requests == []

    @pytest.mark.parametrize(
        "kw",
        [{"page_size": 2**70}, {"limit": 2**70}, {"limit": -1}],
        ids=["page_size=2**70", "limit=2**70", "limit=-1"],
    )
    def test_paging_numbers_out_of_range(self, server: HostileServer, kw: dict[str, int]) -> None:
        with pytest.raises(ValidationError):
            first_item(hostile.client(server), PAGE_Q, **kw)
        assert server.api_requests == []

    def test_max_retries_out_of_range(self, server: HostileServer) -> None:
        with pytest.raises(ConfigurationError):
            hostile.client(server, max_retries=2**70)


# ----------------------------------------------------------------------------- faults (hold today)

BROKEN = [
    pytest.param(Response.reset(), id="reset"),
    pytest.param(Response.close(), id="close-without-answer"),
    pytest.param(Response.truncated(), id="truncated-body"),
]
RETRY_AFTER_NOW = ["0", "-1", "abc", "Wed, 21 Oct 2015 07:28:00 GMT", "1e999"]
IDP_NONSENSE = [
    pytest.param(Response.raw(b"\x00\xffnot http at all\r\n\r\n"), id="garbage-bytes"),
    pytest.param(Response.text("<html><body>Welcome to nginx!</body></html>"), id="html-200"),
    pytest.param(Response.text(b""), id="empty-200"),
    pytest.param(Response.raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{{{{{"), id="bad-json-200"),
]


@pytest.mark.reliability_fault
class TestFaults:
    @pytest.mark.parametrize("answer", BROKEN)
    def test_a_broken_answer_is_a_transport_error(self, server: HostileServer, answer: Response) -> None:
        server.api = lambda req: answer
        with pytest.raises(TransportError):
            hostile.client(server).execute("{ a }")
        assert len(server.api_requests) == 1

    def test_a_stalled_body_times_out(self, server: HostileServer) -> None:
        server.api = lambda req: Response.slow()
        with pytest.raises(secfindings.TimeoutError) as info:
            hostile.client(server, timeout=0.3).execute("{ a }")
        assert isinstance(info.value, TransportError)

    def test_a_query_is_retried_after_a_reset(self, server: HostileServer) -> None:
        server.api = hostile.sequence(Response.reset(), Response.of_json({"data": {"a": 1}}))
        assert hostile.client(server, max_retries=1).execute("{ a }") == {"a": 1}
        assert len(server.api_requests) == 2

    @pytest.mark.parametrize("kind", KINDS)
    def test_a_mutation_is_not_resent_after_a_reset(self, server: HostileServer, kind: Kind) -> None:
        server.api = lambda req: Response.reset()
        with either_client(kind, Hostile(server), max_retries=3) as either, pytest.raises(TransportError):
            either.run(either.client.execute("mutation M { a }"))
        assert len(server.api_requests) == 1

    def test_a_gateway_page_after_retries(self, server: HostileServer) -> None:
        html = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
        server.api = lambda req: Response.text(html, 502)
        with pytest.raises(APIStatusError) as info:
            hostile.client(server, max_retries=1).execute("{ a }")
        assert info.value.status_code == 502
        assert "<html" in info.value.body
        assert len(server.api_requests) == 2

    @pytest.mark.parametrize("retry_after", RETRY_AFTER_NOW)
    def test_429_is_retried_then_raised(self, server: HostileServer, retry_after: str) -> None:
        server.api = lambda req: Response.of_json(
            {"message": "slow down"}, 429, [("Retry-After", retry_after)]
        )
        with pytest.raises(RateLimitError):
            hostile.client(server, max_retries=1).execute("{ a }")
        assert len(server.api_requests) == 2

    @pytest.mark.parametrize("kind", KINDS)
    def test_429_with_a_long_wait_raises_at_once(self, server: HostileServer, kind: Kind) -> None:
        server.api = lambda req: Response.of_json({"message": "slow down"}, 429, [("Retry-After", "99999")])
        with (
            either_client(kind, Hostile(server), max_retries=3) as either,
            pytest.raises(RateLimitError) as info,
        ):
            either.run(either.client.execute("{ a }"))
        assert info.value.retry_after == 99999
        assert len(server.api_requests) == 1

    def test_https_to_a_plain_http_port(self, server: HostileServer) -> None:
        with pytest.raises(TransportError):
            hostile.client(server, base_url=f"https://127.0.0.1:{server.port}/api/v1").execute("{ a }")
        assert server.api_requests == []

    @pytest.mark.parametrize("answer", IDP_NONSENSE)
    def test_identity_provider_nonsense(self, server: HostileServer, answer: Response) -> None:
        server.idp = lambda req: answer
        with pytest.raises((AuthenticationError, TransportError)):
            hostile.client(server).execute("{ a }")
        assert server.api_requests == []

    @pytest.mark.parametrize("kind", KINDS)
    def test_401_for_ever_refreshes_once(self, server: HostileServer, kind: Kind) -> None:
        server.api = lambda req: Response.of_json({"message": "Unauthorized"}, 401)
        with (
            either_client(kind, Hostile(server), max_retries=3) as either,
            pytest.raises(AuthenticationError),
        ):
            either.run(either.client.execute("{ a }"))
        assert len(server.idp_requests) == 2
        assert len(server.api_requests) == 2


# ----------------------------------------------------------------------------- concurrency


@pytest.mark.reliability_concurrency
class TestConcurrency:
    def test_threads_share_one_exchange(self, server: HostileServer) -> None:
        c = hostile.client(server)
        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(lambda _: c.execute("{ a }"), range(48)))
        assert results == [{}] * 48
        assert len(server.idp_requests) == 1

    def test_threads_each_meet_the_cap(self, server: HostileServer) -> None:
        server.api = lambda req: Response.stream(json_stream(5_000_000))
        c = hostile.client(server, max_response_bytes=1_000_000)

        def one(_: int) -> str:
            try:
                c.execute("{ a }")
            except TransportError as exc:
                return str(exc)
            return "no error"

        with ThreadPoolExecutor(8) as pool:
            messages = list(pool.map(one, range(8)))
        assert all("max_response_bytes" in m for m in messages), messages

    def test_threads_walking_endless_connections(self, server: HostileServer) -> None:
        server.api = endless([], stop_after=200)
        c = hostile.client(server)

        def walk(_: int) -> str:
            try:
                list(c.paginate(PAGE_Q, path="items"))
            except PaginationError:
                return "stopped"
            return "ran to the end"

        with ThreadPoolExecutor(4) as pool:
            assert list(pool.map(walk, range(4))) == ["stopped"] * 4
        assert len(server.api_requests) <= 20

    @pytest.mark.asyncio
    async def test_tasks_with_a_hostile_lifetime(self, server: HostileServer) -> None:
        hostile_lifetime(server, 1e19)
        async with hostile.async_client(server) as ac:
            calls = asyncio.gather(*(ac.execute("{ a }") for _ in range(20)))
            assert await no_panic_async(asyncio.wait_for(calls, 10)) == [{}] * 20
        assert len(server.idp_requests) == 1


# ----------------------------------------------------------------------------- async twins


class TestAsyncTwins:
    @pytest.mark.asyncio
    @pytest.mark.reliability_hostile
    async def test_redirect(self, server: HostileServer, other: HostileServer) -> None:
        server.api = lambda req: Response.redirect(other.base_url, 307)
        async with hostile.async_client(server) as ac:
            with pytest.raises(APIStatusError) as info:
                await ac.execute("{ a }")
        assert info.value.status_code == 307
        assert other.requests == []

    @pytest.mark.asyncio
    @pytest.mark.reliability_hostile
    async def test_body_cap(self, server: HostileServer) -> None:
        server.api = lambda req: Response.stream(json_stream(5_000_000))
        async with hostile.async_client(server, max_response_bytes=1_000_000) as ac:
            with pytest.raises(TransportError, match="max_response_bytes"):
                await ac.execute("{ a }")

    @pytest.mark.asyncio
    @pytest.mark.reliability_hostile
    async def test_paging_guard(self, server: HostileServer) -> None:
        server.api = endless(TWO_EDGES)
        got: list[Any] = []
        async with hostile.async_client(server) as ac:
            with pytest.raises(PaginationError):
                await acollect(ac.paginate(PAGE_Q, path="items", page_size=2), got)
        assert len(got) <= 4
        assert len(server.api_requests) <= 3

    @pytest.mark.asyncio
    @pytest.mark.reliability_hostile
    @pytest.mark.parametrize("answer", NOT_DATA[:3])
    async def test_loose_shapes(self, server: HostileServer, answer: Any) -> None:
        server.api = lambda req: Response.of_json(answer)
        async with hostile.async_client(server) as ac:
            with pytest.raises(TransportError):
                await ac.execute("{ a }")

    @pytest.mark.asyncio
    @pytest.mark.reliability_input
    async def test_a_mutation_is_not_paged(self, server: HostileServer) -> None:
        async with hostile.async_client(server) as ac:
            with pytest.raises(ValidationError):
                await acollect(ac.paginate(MUTATION_PAGE_Q), [])
        assert server.api_requests == []
