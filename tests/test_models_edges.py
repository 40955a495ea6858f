"""Typed results at the edges (issue 19): an answer whose shape does not fit the selection is a
TransportError naming where and what was expected, never an AttributeError about selection; and
GraphQL fields named like a model's own attributes (``to_dict``, ``_data``) stay readable. The
answers come from hostile servers of the tests' own, on 127.0.0.1."""

from __future__ import annotations

import asyncio
import pickle
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Request, Response

import secfindings
from secfindings import TransportError, models

pytestmark = pytest.mark.reliability_hostile


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with HostileServer() as s:
        yield s


def answering(server: HostileServer, data: Any) -> secfindings.Client:
    def api(req: Request) -> Response:
        return Response.of_json({"data": data})

    server.api = api
    return hostile.client(server)


# ------------------------------------------------------------------------------ shapes


SHAPES: list[tuple[str, Any, Callable[[secfindings.Client], Any], str]] = [
    (
        "a string for an object",
        {"finding": "str"},
        lambda c: c.finding(1).title,
        r"^finding: expected an object \(Finding\), got a string$",
    ),
    (
        "a list for an object",
        {"finding": [{"title": "x"}]},
        lambda c: c.finding(1).title,
        r"^finding: expected an object \(Finding\), got a list$",
    ),
    (
        "a string for a nested object",
        {"finding": {"finding_score": "high"}},
        lambda c: c.finding(1, fields="finding_score { score }").finding_score.score,
        r"^Finding\.finding_score: expected a JSON object for FindingScore, got a string$",
    ),
    (
        "a list for a connection",
        {"finding": {"tickets": [{"id": "1"}]}},
        lambda c: list(c.finding(1, fields="tickets { edges { node { id } } }").tickets),
        r"^Finding\.tickets: expected a JSON object for a connection of Ticket, got a list$",
    ),
    (
        "a string for the edges",
        {"finding": {"tickets": {"edges": "abc"}}},
        lambda c: list(c.finding(1, fields="tickets { edges { node { id } } }").tickets),
        r"^Finding\.tickets\.edges: expected a list, got a string$",
    ),
    (
        "an object for the edges",
        {"finding": {"tickets": {"edges": {"node": {"id": "1"}}}}},
        lambda c: len(c.finding(1, fields="tickets { edges { node { id } } }").tickets),
        r"^Finding\.tickets\.edges: expected a list, got an object$",
    ),
    (
        "a number for an edge",
        {"finding": {"tickets": {"edges": [7]}}},
        lambda c: list(c.finding(1, fields="tickets { edges { node { id } } }").tickets),
        r"^Finding\.tickets\.edges\[0\]: expected an object \(an edge\), got a number$",
    ),
    (
        "a string for a node",
        {"finding": {"tickets": {"edges": [{"node": "x"}]}}},
        lambda c: list(c.finding(1, fields="tickets { edges { node { id } } }").tickets),
        r"^Finding\.tickets\.edges\[0\]\.node: expected an object \(Ticket\), got a string$",
    ),
    (
        "a string for page info",
        {"finding": {"tickets": {"pageInfo": "done"}}},
        lambda c: c.finding(1, fields="tickets { pageInfo { hasNextPage } }").tickets.page_info,
        r"^Finding\.tickets\.pageInfo: expected an object \(PageInfo\), got a string$",
    ),
    (
        "an object for a list of objects",
        {"scope_hierarchy": {"nodes": {"id": "1"}}},
        lambda c: c.scope_hierarchy(fields="nodes { id }").nodes,
        r"^ScopeHierarchy\.nodes: expected a list, got an object$",
    ),
    (
        "an object for a list of scalars",
        {
            "findings_view": {
                "edges": [{"node": {"datasource_tags_values": {"a": 1}}}],
                "pageInfo": {"hasNextPage": False, "endCursor": None},
            }
        },
        lambda c: c.findings_view(fields="datasource_tags_values").to_list()[0].datasource_tags_values,
        r"^FindingsView\.datasource_tags_values: expected a list, got an object$",
    ),
    (
        "a string for a node of a page",
        {"findings_view": {"edges": [{"node": "x"}], "pageInfo": {"hasNextPage": False, "endCursor": None}}},
        lambda c: c.findings_view().to_list(),
        r"^FindingsView: expected an object, got a string$",
    ),
]


@pytest.mark.parametrize(("data", "read", "message"), [s[1:] for s in SHAPES], ids=[s[0] for s in SHAPES])
def test_an_answer_of_the_wrong_shape_is_a_transport_error_naming_the_path(
    server: HostileServer, data: Any, read: Callable[[secfindings.Client], Any], message: str
) -> None:
    with answering(server, data) as c, pytest.raises(TransportError, match=message) as info:
        read(c)
    # Raised where the shape is checked, not while handling a crash of the model code.
    assert info.value.__context__ is None


def test_the_async_client_says_the_same(server: HostileServer) -> None:
    server.api = lambda req: Response.of_json({"data": {"finding": 17}})

    async def main() -> None:
        async with hostile.async_client(server) as ac:
            with pytest.raises(
                TransportError, match=r"^finding: expected an object \(Finding\), got a number$"
            ):
                await ac.finding(1)

    asyncio.run(main())


def test_a_generic_object_the_live_schema_types_as_an_object_must_be_one() -> None:
    f = models.Finding({"extra": "text"})
    assert f.extra == "text"  # no schema says otherwise: as sent

    def types(owner: str, name: str) -> tuple[str, bool] | None:
        return ("Risk", False) if name == "risk" else None

    with pytest.raises(TransportError, match=r"^Finding\.risk: expected an object \(Risk\), got a string$"):
        _ = models.Finding({"risk": "high"}, types).risk
    assert models.Finding({"risk": [{"level": 1}, None]}, types).risk[0].level == 1


# ------------------------------------------------------------------------------ shadowed names


SHADOWED = {"id": "1", "to_dict": "field value", "_data": 5, "selection": [1, 2], "declared_fields": None}


def test_fields_named_like_model_attributes_read_by_item_in_a_known_type(server: HostileServer) -> None:
    with answering(server, {"finding": {**SHADOWED, "title": "t"}}) as c:
        f = c.finding(1, fields="id title to_dict _data selection declared_fields")
    assert f["to_dict"] == "field value"
    assert f["_data"] == 5
    assert f["selection"] == [1, 2]
    assert f["declared_fields"] is None
    assert f["title"] == f.title == "t"
    # The model's own attributes are untouched, and work.
    assert callable(f.to_dict)
    assert f.to_dict() == {**SHADOWED, "title": "t"}
    assert "title" in f.selection()
    assert "to_dict" in f
    assert "to_dict=" in repr(f)
    assert pickle.loads(pickle.dumps(f)) == f
    with pytest.raises(KeyError, match=r"Finding\.description was not selected"):
        _ = f["description"]
    with pytest.raises(KeyError, match=r"'Finding' object has no field 'nope'"):
        _ = f["nope"]
    with pytest.raises(TypeError, match="is not iterable"):
        iter(f)


def test_fields_named_like_model_attributes_read_by_item_in_a_generic_model(server: HostileServer) -> None:
    with answering(server, {"finding": {"id": "1", "risk": {**SHADOWED, "nested": {"_cache": 1}}}}) as c:
        f = c.finding(1, fields="id risk { id to_dict _data selection declared_fields nested { _cache } }")
    risk = f.risk  # type: ignore[attr-defined]
    assert isinstance(risk, models.GenericModel)
    assert risk["to_dict"] == "field value"
    assert risk["_data"] == 5
    assert risk["nested"]["_cache"] == 1
    assert isinstance(risk["nested"], models.GenericModel)
    assert risk.to_dict() == {**SHADOWED, "nested": {"_cache": 1}}
    assert f.to_dict()["risk"]["to_dict"] == "field value"
    assert pickle.loads(pickle.dumps(risk)) == risk
    assert "_data=5" in repr(risk)


def test_the_rule_is_documented() -> None:
    doc = models.Model.__doc__ or ""
    assert 'model["to_dict"]' in doc
