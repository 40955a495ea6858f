"""paginate(): cursors, limits, variables carried to every page, loop guard, resume; the walks
for both clients (the `either` fixture, tests/clients.py)."""

import json

import pytest
from tests.clients import KINDS, either_client
from tests.conftest import PAGE_QUERY

from secfindings import PaginationError, ValidationError
from secfindings.testing import Emulator


def ids_filter(ids):
    return {"filtersjson": json.dumps({"field": "id", "condition": "in", "value": list(ids)})}


@pytest.mark.parametrize("n", [0, 1, 100, 101])
def test_page_boundaries(emulator, either, n):
    pager = either.client.paginate(PAGE_QUERY, {"filters": ids_filter(range(1, n + 1))})
    items = either.run(pager.to_list())
    assert [i["id_int"] for i in items] == list(range(1, n + 1))
    pages = [len(v) for v in [r["variables"] for r in emulator.request_log()]]
    assert len(pages) == max(1, -(-n // 100))


def test_filters_are_carried_to_every_page(emulator, either):
    flt = ids_filter(range(1, 251))
    pager = either.client.paginate(PAGE_QUERY, {"filters": flt, "sort": ["ID_DESC"]}, page_size=50)
    items = either.run(pager.to_list())
    assert [i["id_int"] for i in items] == list(range(250, 0, -1))
    log = emulator.request_log()
    assert len(log) == 5
    for entry in log:
        assert entry["variables"]["filters"] == flt
        assert entry["variables"]["sort"] == ["ID_DESC"]
        assert entry["variables"]["first"] == 50
    assert [e["variables"]["after"] is None for e in log] == [True, False, False, False, False]


def test_limit_and_pages(either):
    pager = either.client.paginate(PAGE_QUERY, page_size=40, limit=90)
    pages = either.pages(pager)
    assert [len(p) for p in pages] == [40, 40, 10]
    assert pages[0].page_info.has_next_page is True
    assert pager.cursor == pages[-1].page_info.end_cursor


def test_resume_from_cursor(either):
    c, run = either.client, either.run
    first = c.paginate(PAGE_QUERY, page_size=30, limit=60)
    head = run(first.to_list())
    rest = run(c.paginate(PAGE_QUERY, {"after": first.cursor}, page_size=100, limit=30).to_list())
    assert [i["id_int"] for i in head + rest] == list(range(1, 91))


def test_page_size_cap_is_checked_before_sending(emulator, either):
    with pytest.raises(ValidationError, match="between 1 and 100"):
        either.client.paginate(PAGE_QUERY, page_size=101)
    assert emulator.stats()["api_requests"] == 0


def test_server_cap_error_from_raw_execute(client):
    from secfindings import GraphQLError

    with pytest.raises(GraphQLError, match="exceeds the `first` limit of 100"):
        client.execute("{ findings_view(first: 101) { edges { node { id } } } }")


def test_repeated_cursor_fails_instead_of_looping(client):
    # $after goes to another field, not the connection: the server returns the same page for ever.
    q = """query Stuck($first: Int, $after: String) {
      findings_view(first: $first) { edges { node { id_int } } pageInfo { hasNextPage endCursor } }
      finding_filters(first: 1, after: $after) { edges { node { id } } }
    }"""
    pager = client.paginate(q, path="findings_view", page_size=10)
    with pytest.raises(PaginationError, match="twice"):
        pager.to_list()


def test_query_must_declare_paging_variables(client):
    with pytest.raises(ValidationError, match=r"\$after"):
        client.paginate("query Q($first: Int) { findings_view(first: $first) { edges { node { id } } } }")


def test_missing_page_info_is_explained(client):
    q = """query Q($first: Int, $after: String) {
      findings_view(first: $first, after: $after) { edges { node { id } } }
    }"""
    with pytest.raises(PaginationError, match="pageInfo"):
        client.paginate(q).to_list()


def test_explicit_path(client):
    q = """query Q($first: Int, $after: String) {
      f: findings_view(first: $first, after: $after) {
        edges { node { id_int } } pageInfo { hasNextPage endCursor }
      }
    }"""
    assert len(client.paginate(q, path="f", limit=5).to_list()) == 5


@pytest.fixture(scope="module")
def big():
    with Emulator(findings=10_000, seed=3) as emu:
        yield emu


@pytest.mark.parametrize("kind", KINDS)
def test_ten_thousand_items(big, kind):
    big.clear_request_log()  # the emulator is the module's: only this walk's requests count
    with either_client(kind, big) as either:
        ids = [i["id_int"] for i in either.items(either.client.paginate(PAGE_QUERY))]
    assert ids == list(range(1, 10_001))
    assert len(big.request_log()) == 100


@pytest.mark.parametrize("kind", KINDS)
def test_a_filtered_walk_and_a_limit(big, kind):
    with either_client(kind, big) as either:
        pager = either.client.paginate(PAGE_QUERY, {"filters": ids_filter(range(1, 151))})
        seen = [i["id_int"] for i in either.items(pager)]
        assert seen == list(range(1, 151))
        again = either.run(either.client.paginate(PAGE_QUERY, limit=7).to_list())
        assert len(again) == 7
