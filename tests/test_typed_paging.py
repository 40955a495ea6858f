"""The typed paginators (findings_view and the other connection operations): page boundaries,
filters on every page, resume, the loop guard, 10,000 items; each walk for both clients (the
`either` fixture, tests/clients.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from tests.clients import KINDS, Either, Hostile, Kind, either_client
from tests.servers.http import HostileServer, Request, Response

from secfindings import PaginationError, ValidationError
from secfindings.models import FindingsView
from secfindings.testing import Emulator


def ids(n: int) -> dict[str, Any]:
    return {"field": "id", "condition": "in", "value": list(range(1, n + 1))}


@pytest.mark.parametrize("n", [0, 1, 100, 101])
def test_page_boundaries(emulator: Emulator, either: Either, n: int) -> None:
    either.client.pages_per_request = 1  # the walk of one page per request
    pager = either.client.findings_view(filters=ids(n))
    items = either.run(pager.to_list())
    assert [i.id_int for i in items] == list(range(1, n + 1))
    assert all(isinstance(i, FindingsView) for i in items)
    assert len(emulator.request_log()) == max(1, -(-n // 100))
    # The default walk reads the same rows in one batch of ten pages (one request).
    emulator.clear_request_log()
    batched = either.run(either.make().findings_view(filters=ids(n)).to_list())
    assert [i.id_int for i in batched] == list(range(1, n + 1))
    pages = [r for r in emulator.request_log() if str(r["operation_name"]).startswith("findings_view")]
    assert [r["operation_name"] for r in pages] == ["findings_view_pages"]


def test_filters_and_sort_are_carried_to_every_page(emulator: Emulator, either: Either) -> None:
    items = either.run(either.client.findings_view(filters=ids(250), sort="ID_DESC", page_size=50).to_list())
    assert [i.id_int for i in items] == list(range(250, 0, -1))
    log = emulator.request_log()
    assert len(log) == 5
    for entry in log:
        assert json.loads(entry["variables"]["filters_config"]["filtersjson"]) == ids(250)
        assert entry["variables"]["sort"] == ["ID_DESC"]
        assert entry["variables"]["first"] == 50
    assert [e["variables"]["after"] is None for e in log] == [True, False, False, False, False]


def test_pages_limit_and_cursor(either: Either) -> None:
    pager = either.client.sla_preferences(page_size=3, limit=5)
    pages = either.pages(pager)
    assert [len(p) for p in pages] == [3, 2]
    assert pager.cursor == pages[-1].page_info.end_cursor
    resumed = either.run(either.client.sla_preferences(after=pager.cursor).to_list())
    assert len(resumed) == 2  # 7 seeded SLA preferences


def test_page_size_is_capped_before_sending(emulator: Emulator, either: Either) -> None:
    for bad in (0, 101, -1):
        with pytest.raises(ValidationError, match="page_size must be between 1 and 100"):
            either.run(either.client.findings_view(page_size=bad).to_list())
    assert emulator.stats()["api_requests"] == 0


@pytest.fixture(scope="module")
def big() -> Iterator[Emulator]:
    with Emulator(findings=10_000, seed=3) as emu:
        yield emu


@pytest.mark.parametrize("kind", KINDS)
def test_ten_thousand_typed_items(big: Emulator, kind: Kind) -> None:
    big.clear_request_log()  # the emulator is the module's: only this walk's requests count
    with either_client(kind, big) as either:
        either.client.pages_per_request = 1  # the walk of one page per request
        seen = [f.id_int for f in either.items(either.client.findings_view())]
        assert seen == list(range(1, 10_001))
        assert len(big.request_log()) == 100
        # By default in batches of ten pages: 999 new rows a request after the first (their
        # overlap), and the offset probe where this server was not asked it yet.
        big.clear_request_log()
        seen = [f.id_int for f in either.items(either.make().findings_view())]
        assert seen == list(range(1, 10_001))
        pages = [r for r in big.request_log() if r["operation_name"] == "findings_view_pages"]
        assert len(pages) == 11


@pytest.mark.parametrize("kind", KINDS)
def test_a_filtered_typed_walk_a_limit_and_pages(big: Emulator, kind: Kind) -> None:
    with either_client(kind, big) as either:
        pager = either.client.findings_view(filters=ids(150), fields="id_int score")
        seen = [f.id_int for f in either.items(pager)]
        assert seen == list(range(1, 151))
        assert pager.cursor is not None
        few = either.run(either.client.findings_view(limit=7).to_list())
        assert len(few) == 7
        pages = [len(p) for p in either.pages(either.client.scoring_rules(page_size=2))]
        assert pages == [2, 1]


def stuck(req: Request) -> Response:
    """A GraphQL server that hands back the same cursor on every page."""
    page: dict[str, Any] = {"edges": [{"node": {"id": "RmluZGluZ3NWaWV3OjE=", "id_int": 1}}]}
    page["pageInfo"] = {"hasNextPage": True, "endCursor": "c2FtZQ=="}
    return Response.of_json({"data": {"findings_view": page}})


@pytest.mark.parametrize("kind", KINDS)
def test_a_server_repeating_a_cursor_fails_the_paginator(server: HostileServer, kind: Kind) -> None:
    server.api = stuck
    with either_client(kind, Hostile(server), jwt="a.b.c") as either:
        pager = either.client.findings_view()
        # The same node again, under the same cursor: either guard stops the walk.
        with pytest.raises(PaginationError, match="stopping instead of looping"):
            either.items(pager)
