"""Exports and the Arrow stream for both clients: ``write_jsonl``, ``write_csv`` and
``write_parquet`` (awaited on the async paginator) and ``__arrow_c_stream__`` do the same on
:class:`Paginator` and :class:`AsyncPaginator`: every row once, whole pages only after a failure,
a cursor to resume from, and a paginator that refuses to go on once its walk moved past it."""

from __future__ import annotations

import asyncio
import csv
import errno
import inspect
import json
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import secfindings
from secfindings import _export

FIELDS = "id id_int title score"


@pytest.fixture(params=["Client", "AsyncClient"])
def any_client(request: pytest.FixtureRequest, client: Any, async_client: Any) -> Any:
    """Each test runs once with the sync client and once with the async one."""
    return client if request.param == "Client" else async_client


async def settle(value: Any) -> Any:
    """The result of a paginator method of either client (the async one's is awaited)."""
    return await value if inspect.isawaitable(value) else value


def ids(path: Path, fmt: str) -> list[int]:
    if fmt == "jsonl":
        return [json.loads(line)["id_int"] for line in path.read_text().splitlines()]
    if fmt == "csv":
        with path.open(newline="") as f:
            return [int(row["id_int"]) for row in csv.DictReader(f)]
    return [int(v) for v in pq.read_table(path).column("id_int").to_pylist()]


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
async def test_an_export_writes_every_row_once(any_client: Any, tmp_path: Path, fmt: str) -> None:
    pager = any_client.findings_view(fields=FIELDS, page_size=50)
    seen: list[dict[str, Any]] = []
    path = tmp_path / f"findings.{fmt}"
    result = await settle(getattr(pager, f"write_{fmt}")(path, progress=seen.append))
    assert isinstance(result, secfindings.ExportResult)
    assert (result.path, result.rows, result.pages) == (str(path), 300, 6)
    assert result.cursor == pager.cursor is not None
    assert ids(path, fmt) == list(range(1, 301))
    assert [s["items"] for s in seen] == [50, 100, 150, 200, 250, 300]


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
async def test_an_interrupted_export_keeps_whole_pages_and_resumes_with_nothing_lost(
    any_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    real = _export.Export._write_all
    writes: list[int] = []

    def full_on_the_second_page(self: _export.Export, data: bytes) -> None:
        writes.append(len(data))
        if len(writes) == 2:
            real(self, data[: len(data) // 2])  # part of the page went in, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    monkeypatch.setattr(_export.Export, "_write_all", full_on_the_second_page)
    path = tmp_path / f"findings.{fmt}"
    pager = any_client.findings_view(fields=FIELDS, page_size=50)
    with pytest.raises(OSError, match="No space left"):
        await settle(getattr(pager, f"write_{fmt}")(path))
    assert ids(path, fmt) == list(range(1, 51))  # the half page was taken out again
    # The walk moved past the page that failed: this paginator does not go on, a new one does.
    with pytest.raises(secfindings.PaginationError, match="interrupted"):
        await settle(getattr(pager, f"write_{fmt}")(path, append=True))
    monkeypatch.setattr(_export.Export, "_write_all", real)
    rest = any_client.findings_view(fields=FIELDS, page_size=50, after=pager.cursor)
    result = await settle(getattr(rest, f"write_{fmt}")(path, append=True))
    assert result.rows == 250
    assert ids(path, fmt) == list(range(1, 301))


@pytest.mark.asyncio
async def test_arrow_consumers_read_the_rest_of_the_walk(any_client: Any) -> None:
    pager = any_client.findings_view(fields=FIELDS, page_size=50)
    pages = pager.pages()
    first = next(pages) if isinstance(pager, secfindings.Paginator) else await pages.__anext__()
    assert len(first) == 50
    table = pa.table(pager)  # the pages after the one handed out, pulled as read
    assert table.num_rows == 250
    assert table.column("id_int").to_pylist() == list(range(51, 301))
    assert pager.cursor is not None
    # Nothing more to read from it; a new walk for polars.
    frame = pl.DataFrame(any_client.findings_view(fields=FIELDS, page_size=100))
    assert frame.height == 300
    assert frame["score"].dtype == pl.Float64


@pytest.mark.asyncio
async def test_the_arrow_stream_refuses_to_skip_the_rest_of_a_page(any_client: Any) -> None:
    pager = any_client.findings_view(fields=FIELDS, page_size=50)
    if isinstance(pager, secfindings.Paginator):
        next(iter(pager))
    else:
        await pager.__aiter__().__anext__()
    with pytest.raises(secfindings.ValidationError, match="part of a page"):
        pa.table(pager)


@pytest.mark.asyncio
async def test_the_async_stream_can_be_read_in_a_thread_while_the_loop_runs(async_client: Any) -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    ticker = asyncio.ensure_future(tick())
    try:
        pager = async_client.findings_view(fields=FIELDS, page_size=20)
        frame = await asyncio.to_thread(pl.DataFrame, pager)
    finally:
        ticker.cancel()
    assert frame.height == 300
    assert ticks > 1  # the loop went on while the pages came


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
@pytest.mark.parametrize("pages", [0, 3])
async def test_a_cancelled_async_export_leaves_whole_pages_and_refuses_to_go_on(
    async_client: Any, tmp_path: Path, fmt: str, pages: int
) -> None:
    path = tmp_path / f"findings.{fmt}"
    pager = async_client.findings_view(fields=FIELDS, page_size=10)

    def cancel_after(info: dict[str, Any]) -> None:
        if info["pages"] == pages:
            task.cancel()  # lands at the export's next wait for a page

    task = asyncio.ensure_future(getattr(pager, f"write_{fmt}")(path, progress=cancel_after))
    if not pages:
        await asyncio.sleep(0)  # started: the first page is on its way
        task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(secfindings.PaginationError, match="cancelled"):
        await getattr(pager, f"write_{fmt}")(path)
    written = ids(path, fmt) if path.exists() and path.stat().st_size else []
    assert written == list(range(1, 10 * pages + 1))  # whole pages, Parquet's buffered ones too
    rest = async_client.findings_view(fields=FIELDS, page_size=100, after=pager.cursor)
    await getattr(rest, f"write_{fmt}")(tmp_path / f"rest.{fmt}")
    assert written + ids(tmp_path / f"rest.{fmt}", fmt) == list(range(1, 301))
