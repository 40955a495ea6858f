"""A server whose ``findings_view`` takes ``first``, ``offset`` and ``after`` on every aliased field
of a document (as graphene does) but ignores ``sort``: its rows come in a fixed order that is not
the id order. The walk plan's offset probe passes (offsets are consistent); a batched walk must
notice the order. Loopback only; it answers introspection with the built-in schema."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from graphql import FieldNode, OperationDefinitionNode, parse, value_from_ast_untyped
from tests.servers.http import HostileServer, Request, Response, make_api_token
from tests.servers.schema import introspection_of, is_introspection

from secfindings import _native

__all__ = ["unsorted_server"]


def _cursor(i: int) -> str:
    return base64.b64encode(f"arrayconnection:{i}".encode()).decode()


def _start(after: Any) -> int:
    if not after:
        return 0
    return int(base64.b64decode(after).decode().split(":", 1)[1]) + 1


def _node(ident: int, selection: Any) -> dict[str, Any]:
    node: dict[str, Any] = {}
    for f in selection.selections if selection is not None else []:
        name = f.name.value
        key = f.alias.value if f.alias else name
        node[key] = (
            base64.b64encode(f"FindingsView:{ident}".encode()).decode()
            if name == "id"
            else ident
            if name == "id_int"
            else f"finding {ident}"
            if name == "title"
            else None
        )
    return node


def _connection(
    field: FieldNode, ids: list[int], variables: dict[str, Any], offset: bool = True
) -> dict[str, Any]:
    args = {a.name.value: value_from_ast_untyped(a.value, variables) for a in field.arguments}
    start = (int(args.get("offset") or 0) if offset else 0) + _start(args.get("after"))
    first = int(args.get("first") or 100)
    rows = ids[start : start + first]
    out: dict[str, Any] = {}
    for sel in field.selection_set.selections if field.selection_set else []:
        if not isinstance(sel, FieldNode):
            continue
        name = sel.name.value
        if name == "edges":
            node_sel = next(
                (s.selection_set for s in sel.selection_set.selections if s.name.value == "node"), None
            )
            out[name] = [
                {"cursor": _cursor(start + i), "node": _node(ident, node_sel)} for i, ident in enumerate(rows)
            ]
        elif name == "pageInfo":
            out[name] = {
                "hasNextPage": start + first < len(ids),
                "endCursor": _cursor(start + len(rows) - 1) if rows else None,
            }
        elif name == "total_count":
            out[name] = len(ids)
    return out


@contextmanager
def unsorted_server(
    findings: int, seed: int = 3, *, offset: bool = True, shuffled: bool = True, cap: int = 400
) -> Iterator[tuple[HostileServer, list[int]]]:
    """The server and its rows' ids in the order it serves them (every walk, every sort).
    ``offset=False``: it ignores ``offset`` too (every aliased page starts at the walk's
    cursor); ``shuffled=False``: its order is the id order. Past ``cap`` queries it answers
    400, so a walk that never ends fails its test instead of hanging it."""
    ids = list(range(1, findings + 1))
    if shuffled:
        random.Random(seed).shuffle(ids)
    schema = {"data": introspection_of(_native.builtin_sdl())}
    server = HostileServer()
    served: list[int] = []

    def api(req: Request) -> Response:
        if is_introspection(req):
            return Response.of_json(schema)
        served.append(1)
        if len(served) > cap:
            return Response.of_json({"errors": [{"message": "test server: request cap reached"}]}, 400)
        body = req.json()
        doc = parse(body["query"])
        variables = body.get("variables") or {}
        op = next(d for d in doc.definitions if isinstance(d, OperationDefinitionNode))
        data = {
            (f.alias.value if f.alias else f.name.value): _connection(f, ids, variables, offset)
            for f in op.selection_set.selections
            if isinstance(f, FieldNode)
        }
        return Response.text(json.dumps({"data": data}).encode(), content_type="application/json")

    server.api = api
    with server:
        yield server, ids


def api_token() -> str:
    return make_api_token()
