"""Servers that answer the client's introspection with a schema of the test's choosing, over the
scripted HTTP server of :mod:`tests.servers.http` (loopback only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import graphql
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response

import secfindings

__all__ = ["graphql_core_server", "introspection_of", "is_introspection", "live_client", "scripted"]


def introspection_of(sdl: str) -> dict[str, Any]:
    return dict(graphql.introspection_from_schema(graphql.build_schema(sdl)))


def is_introspection(req: Request) -> bool:
    return req.json().get("operationName") == "IntrospectionQuery"


def scripted(introspection: Callable[[Request], Response]) -> HostileServer:
    """A server answering the client's introspection with ``introspection(req)`` and any other
    document with ``{"data": {"__typename": "Query"}}``."""
    server = HostileServer()

    def api(req: Request) -> Response:
        if is_introspection(req):
            return introspection(req)
        return Response.of_json({"data": {"__typename": "Query"}})

    server.api = api
    return server


def graphql_core_server(schema: graphql.GraphQLSchema, root: dict[str, Any] | None = None) -> HostileServer:
    """A server executing documents against ``schema`` with graphql-core (a spec-following server)."""
    server = HostileServer()

    def api(req: Request) -> Response:
        body = req.json()
        result = graphql.graphql_sync(
            schema,
            body["query"],
            root_value=root or {},
            variable_values=body.get("variables"),
            operation_name=body.get("operationName"),
        )
        out: dict[str, Any] = {"data": result.data}
        if result.errors:
            out["errors"] = [e.formatted for e in result.errors]
        return Response.of_json(out)

    server.api = api
    return server


def live_client(server: HostileServer, **kw: Any) -> secfindings.Client:
    return hostile.client(server, schema="live", **kw)
