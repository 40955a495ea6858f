"""Paging answers the emulator does not give: GraphQL errors on a page fetched ahead, `nodes`
instead of `edges`, odd pageInfo types; and cancelling an async walk while a page is on its way;
the loop guards of a walk without edge cursors (the same nodes again, ids past the total).

A small scripted HTTP server on loopback answers page after page from a list (or the hostile
server of tests/servers/http.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response, connection_query

import secfindings
from secfindings import GraphQLError, PaginationError

# These tests are about the core and the server's own answers: no local schema checks in front.
pytestmark = [pytest.mark.reliability_hostile, pytest.mark.schema_off]


def _edges(ids: range, nxt: bool, cursor: str | None) -> dict[str, Any]:
    edges = [{"cursor": f"c{i}", "node": {"id_int": i}} for i in ids]
    return {"data": {"items": {"edges": edges, "pageInfo": {"hasNextPage": nxt, "endCursor": cursor}}}}


class _Scripted(BaseHTTPRequestHandler):
    script: ClassVar[list[dict[str, Any]]] = []
    seen: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        n = len(type(self).seen)
        type(self).seen.append(req)
        body = json.dumps(self.script[min(n, len(self.script) - 1)]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[tuple[type[_Scripted], str]]:
    handler = type("Handler", (_Scripted,), {"script": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield handler, f"http://127.0.0.1:{server.server_address[1]}/api/v1"
    finally:
        server.shutdown()
        server.server_close()


EDGES_QUERY = (
    "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ edges { cursor node { id_int } } pageInfo { hasNextPage endCursor } } }"
)
NODES_QUERY = (
    "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ nodes { id_int } pageInfo { hasNextPage endCursor } } }"
)
PARTIAL = {
    "data": {"items": None},
    "errors": [{"message": "page two failed", "path": ["items"]}],
}


async def step(it: Any) -> Any:
    """The next item of a walk of either client (the async one's is awaited)."""
    return await it.__anext__() if hasattr(it, "__anext__") else next(it)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
async def test_an_error_on_the_page_fetched_ahead_is_raised_after_the_first_page(
    scripted: tuple[type[_Scripted], str], kind: str
) -> None:
    handler, url = scripted
    handler.script = [_edges(range(3), True, "A"), PARTIAL]
    c = getattr(secfindings, kind)(jwt="a.b.c", schema="off", base_url=url, max_retries=0)
    try:
        pager = c.paginate(EDGES_QUERY, page_size=3)
        it = pager.__aiter__() if kind == "AsyncClient" else iter(pager)
        got = [(await step(it))["id_int"] for _ in range(3)]
        with pytest.raises(GraphQLError, match="page two failed") as info:
            await step(it)
        assert got == [0, 1, 2]
        assert info.value.data == {"items": None}
        assert pager.cursor == "c2"
    finally:
        if kind == "AsyncClient":
            await c.aclose()
        else:
            c.close()


def test_nodes_lists_and_a_limit_that_cuts_a_page(scripted: tuple[type[_Scripted], str]) -> None:
    handler, url = scripted

    def page(cursor: str) -> dict[str, Any]:
        nodes = [{"id_int": i} for i in range(4)]
        return {"data": {"items": {"nodes": nodes, "pageInfo": {"hasNextPage": True, "endCursor": cursor}}}}

    handler.script = [page("N"), page("M")]
    with secfindings.Client(jwt="a.b.c", schema="off", base_url=url) as c:
        pages = list(c.paginate(NODES_QUERY, page_size=4, limit=6).pages())
    assert [len(p) for p in pages] == [4, 2]
    assert pages[1].items == [{"id_int": 0}, {"id_int": 1}]
    assert pages[0].cursors == []  # no edge cursors selected
    assert [r["variables"]["first"] for r in handler.seen] == [4, 2]
    assert handler.seen[1]["variables"]["after"] == "N"


def test_page_info_of_odd_types_is_read_like_a_dict(scripted: tuple[type[_Scripted], str]) -> None:
    handler, url = scripted
    handler.script = [{"data": {"items": {"edges": [], "pageInfo": {"hasNextPage": "yes", "endCursor": 5}}}}]
    with (
        secfindings.Client(jwt="a.b.c", schema="off", base_url=url) as c,
        pytest.raises(PaginationError, match="hasNext"),
    ):
        list(c.paginate(EDGES_QUERY))


@pytest.mark.asyncio
async def test_cancelling_a_walk_while_a_page_is_on_its_way(emulator: Any) -> None:
    ac = emulator.async_client()
    emulator.inject("delay", delay=10.0)
    pager = ac.findings_view(page_size=5, fields="id_int")
    task = asyncio.create_task(pager.to_list())
    await asyncio.sleep(0.05)  # the first page's request is out; the server holds it for 10 s
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(PaginationError, match="cancelled"):
        await pager.to_list()
    emulator.clear_faults()
    rest = await ac.findings_view(after=pager.cursor, limit=7, fields="id_int").to_list()
    assert [f.id_int for f in rest] == list(range(1, 8))


# ------------------------------------------------------------- no edge cursors: the loop guards


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


SAME_EDGES = connection_query("edges { node { id } }")
SAME_NODES = connection_query("nodes { id }")
WITH_TOTAL = connection_query("total_count edges { node { id } }")


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
