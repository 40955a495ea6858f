"""A server whose ``findings_view`` hands out nodes of the test's choosing (null ones, scores of
``1e999``, titles that attack Markdown or XML), on one page, over the scripted HTTP server of
:mod:`tests.servers.http`; it answers the client's introspection with the built-in schema, so the
command line (which checks against the live schema) runs against it unchanged. Loopback only."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from tests.servers.http import HostileServer, Request, Response, make_api_token
from tests.servers.schema import introspection_of, is_introspection

from secfindings import _native

__all__ = ["findings_server"]


def _page(nodes: Sequence[Any]) -> bytes:
    edges = ",".join(
        f'{{"cursor":"c{i}","node":{n if isinstance(n, str) else json.dumps(n)}}}'
        for i, n in enumerate(nodes)
    )
    last = json.dumps(f"c{len(nodes) - 1}" if nodes else None)
    return (
        '{"data":{"findings_view":{"edges":['
        + edges
        + '],"pageInfo":{"hasNextPage":false,"endCursor":'
        + last
        + "}}}}"
    ).encode()


@contextmanager
def findings_server(
    nodes: Sequence[Any] | Callable[[Request], Sequence[Any] | Response],
    sdl: str | None = None,
) -> Iterator[tuple[HostileServer, dict[str, str]]]:
    """The server and the environment of a command pointed at it. ``nodes``: the nodes of every
    ``findings_view`` page (a node given as text is sent as that raw JSON, ``1e999`` for one), or
    a function of the request that gives them (or a whole answer). ``sdl``: the schema its
    introspection shows (default: the built-in one)."""
    schema = {"data": introspection_of(sdl or _native.builtin_sdl())}
    server = HostileServer()

    def api(req: Request) -> Response:
        if is_introspection(req):
            return Response.of_json(schema)
        got = nodes(req) if callable(nodes) else nodes
        if isinstance(got, Response):
            return got
        return Response.text(_page(got), content_type="application/json")

    server.api = api
    with server:
        env = {
            "SECFINDINGS_API_TOKEN": make_api_token(),
            "SECFINDINGS_BASE_URL": server.base_url,
            "SECFINDINGS_AUTH_URL": server.auth_url,
            "GITHUB_STEP_SUMMARY": "",
        }
        yield server, env
