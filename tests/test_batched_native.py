"""The core's aliased page batches (``NativeClient.paginate_batched``) over real HTTP: every row
once in id order on both profiles, ten pages a request, the document halved when the server
refuses its aliases, and the emulator's count of aliases per request."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import secfindings
from secfindings import _native
from secfindings.testing import Emulator


def _native_client(client: secfindings.Client) -> Any:
    return client._native._n  # type: ignore[attr-defined]


def _walk(client: secfindings.Client, **kw: Any) -> pa.Table:
    prepared = _native.prepare_operation("findings_view", {}, "id id_int title")
    pages = _native_client(client).paginate_batched(prepared, **kw)
    return pa.table(pages.read_table())


@pytest.mark.parametrize("profile", ["default", "known"])
def test_every_row_once_in_id_order_ten_pages_a_request(profile: str) -> None:
    emulator = Emulator(findings=2500, profile=profile)  # type: ignore[arg-type]
    client = emulator.client()
    emulator.clear_request_log()
    table = _walk(client, page_size=100, pages_per_request=10)
    ids = table.column("id_int").to_pylist()
    assert ids == sorted(ids)
    assert len(ids) == len(set(ids)) == 2500
    log = emulator.request_log()
    assert len(log) == 3  # 1,000 rows a request
    assert max(r["aliases"] for r in log) == 10  # ten pages a request


def test_a_refused_document_is_halved_and_the_size_remembered() -> None:
    emulator = Emulator(findings=1000)
    emulator.set_document_limits(max_aliases=4)
    client = emulator.client()
    emulator.clear_request_log()
    table = _walk(client, page_size=100, pages_per_request=10)
    assert sorted(table.column("id_int").to_pylist()) == list(range(1, 1001))
    log = emulator.request_log()
    assert all(r["aliases"] <= 4 for r in log if r["status"] == 200)
    refused = [r for r in log if r["status"] != 200]
    assert len(refused) == 1  # 10 pages, then the 4 the message names
    emulator.clear_request_log()
    _walk(client, page_size=100, pages_per_request=10, limit=300)
    assert all(r["status"] == 200 for r in emulator.request_log())  # the size that worked is kept


def test_the_limit_and_the_start_offset() -> None:
    emulator = Emulator(findings=500)
    client = emulator.client()
    table = _walk(client, page_size=50, pages_per_request=3, start=100, limit=120)
    assert table.column("id_int").to_pylist() == list(range(101, 221))


def test_bad_walks_are_refused_before_sending() -> None:
    emulator = Emulator(findings=10)
    native = _native_client(emulator.client())
    emulator.clear_request_log()
    no_id = _native.prepare_operation("findings_view", {}, "title")
    with pytest.raises(secfindings.ValidationError, match="needs `id`"):
        native.paginate_batched(no_id)
    by_severity = _native.prepare_operation("findings_view", {"sort": ["SEVERITY_DESC"]}, "id")
    with pytest.raises(secfindings.ValidationError, match="id order"):
        native.paginate_batched(by_severity)
    with pytest.raises(secfindings.ValidationError, match="pages_per_request"):
        native.paginate_batched(_native.prepare_operation("findings_view", {}, "id"), pages_per_request=0)
    assert emulator.request_log() == []


def test_a_new_server_at_the_url_is_asked_afresh() -> None:
    emulator = Emulator(findings=300)
    emulator.set_document_limits(max_aliases=4)
    client = emulator.client()
    _walk(client, page_size=100, pages_per_request=10)
    emulator.set_document_limits(max_aliases=None)
    secfindings._schema_loading.forget_server(emulator.base_url)  # what a new Emulator there does
    emulator.clear_request_log()
    _walk(client, page_size=10, pages_per_request=10)
    assert max(r["aliases"] for r in emulator.request_log()) == 10  # ten pages again
