"""Findings as data: pages decoded into Arrow columns in Rust, against the emulator over HTTP.

Every connection operation gives the same values through ``to_list()`` and ``to_arrow()`` /
``to_pandas()``; columns have real types; ``paginate`` infers and widens; exports stream and an
interrupted export resumes with nothing lost or repeated. The columns of the typed walks are
checked for both clients (the `either` fixture, tests/clients.py).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import sys
from typing import Any

import pytest
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Response

import secfindings
from secfindings import APIStatusError, ValidationError

pa = pytest.importorskip("pyarrow")
pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
pq = pytest.importorskip("pyarrow.parquet")

UTC = dt.timezone.utc
CONNECTIONS = [
    "finding_filters",
    "findings_view",
    "get_resources_ch",
    "remediation_queues",
    "scoring_rules",
    "sla_groups",
    "sla_preferences",
    "status_rules",
    "ticket_sla_rules",
]
ANALYST = (
    "id id_int title score severity due_date last_reported_time actual_status { category } "
    "datasource_tags_values tickets { edges { node { id } } }"
)


def at(raw: Any, path: list[str]) -> Any:
    for key in path:
        if not isinstance(raw, dict):
            return None
        raw = raw.get(key)
    return raw


def same(expected: Any, actual: Any, field: pa.Field) -> bool:
    """The raw JSON value the server sent against the column's value."""
    if expected is None or actual is None:
        return expected is None and actual is None
    if pa.types.is_timestamp(field.type):
        parsed = dt.datetime.fromisoformat(expected.replace("Z", "+00:00"))
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)) == actual
    if isinstance(expected, (dict, list)) and isinstance(actual, str):
        return json.loads(actual) == expected  # a nested object or connection as JSON text
    return bool(expected == actual)


def check_agree(models: list[Any], table: pa.Table) -> None:
    assert table.num_rows == len(models)
    rows = table.to_pylist()
    for model, row in zip(models, rows, strict=True):
        raw = model._data
        for field in table.schema:
            expected, actual = at(raw, field.name.split(".")), row[field.name]
            assert same(expected, actual, field), (field.name, expected, actual)


@pytest.mark.parametrize("name", CONNECTIONS)
def test_every_connection_agrees_value_for_value(either, name):
    method, run = getattr(either.client, name), either.run
    models = run(method(fields="*").to_list())
    table = run(method(fields="*").to_arrow())
    check_agree(models, table)
    frame = run(method(fields="*").to_pandas())
    assert list(frame.columns) == table.schema.names
    assert len(frame) == table.num_rows


def test_findings_view_columns_have_real_types(either):
    client, run = either.client, either.run
    table = run(client.findings_view(fields=ANALYST, limit=250).to_arrow())
    types = {f.name: f.type for f in table.schema}
    assert types["id"] == pa.string()
    assert types["id_int"] == pa.int64()
    assert types["score"] == pa.float64()
    assert types["due_date"] == pa.timestamp("us", tz="UTC")
    assert types["last_reported_time"] == pa.timestamp("us", tz="UTC")
    assert types["actual_status.category"] == pa.string()
    assert types["datasource_tags_values"] == pa.list_(pa.string())
    assert types["tickets"] == pa.string()  # a nested connection, as JSON text
    assert table.num_rows == 250
    check_agree(run(client.findings_view(fields=ANALYST, limit=250).to_list()), table)


def test_pandas_gets_nullable_ints_and_utc_timestamps(either):
    client, run = either.client, either.run
    frame = run(client.findings_view(fields=ANALYST, limit=300).to_pandas())
    assert str(frame["id_int"].dtype) == "Int64"
    assert str(frame["severity"].dtype) == "Int64"
    assert str(frame["due_date"].dtype) == "datetime64[us, UTC]"
    assert frame["due_date"].notna().all()
    assert frame.groupby("severity").size().sum() == 300
    models = run(client.findings_view(fields=ANALYST, limit=300).to_list())
    for model, (_, row) in zip(models, frame.iterrows(), strict=True):
        assert row["id_int"] == model.id_int
        assert (pd.isna(row["due_date"]) and model.due_date is None) or row["due_date"] == model.due_date


def test_polars_and_the_capsule_interface(either):
    client = either.client
    frame = either.run(client.findings_view(fields=ANALYST, limit=120).to_polars())
    assert frame.schema["due_date"] == pl.Datetime("us", "UTC")
    assert frame.height == 120
    # Any Arrow consumer takes the paginator itself (__arrow_c_stream__), no pyarrow needed.
    direct = pl.DataFrame(client.findings_view(fields=ANALYST, limit=120))
    assert direct.equals(frame)
    assert pa.table(client.findings_view(fields=ANALYST, limit=120)).num_rows == 120


@pytest.mark.parametrize(
    ("page_size", "limit", "sizes"), [(50, 180, [50, 50, 50, 30]), (100, 150, [100, 50])]
)
def test_batches_stream_one_page_each_and_move_the_cursor(either, page_size, limit, sizes):
    client = either.client
    pager = client.findings_view(fields="id id_int", page_size=page_size, limit=limit)

    def moved(batch):
        assert pager.cursor is not None

    batches = either.items(pager.to_arrow_batches(), each=moved)
    assert [b.num_rows for b in batches] == sizes
    rest = either.run(client.findings_view(fields="id id_int", after=pager.cursor, limit=5).to_list())
    assert rest[0].id_int == limit + 1


def test_paginate_infers_and_widens():
    server_pages = [
        {"id": 1, "score": 1, "tag": None, "nested": {"a": "x"}},
        {"id": 2, "score": 2.5, "tag": "late", "nested": None, "extra": [1, 2]},
    ]
    with HostileServer() as server:
        server.api = pages_of(server_pages, page_size=1)
        with hostile.client(server) as c:
            table = c.paginate(PAGE_DOC, path="items", page_size=1).to_arrow()
    assert table.schema.names == ["id", "score", "tag", "nested.a", "extra"]
    assert table.schema.field("score").type == pa.float64()
    assert table.column("tag").to_pylist() == [None, "late"]
    assert table.column("extra").to_pylist() == [None, [1, 2]]


def test_a_value_that_cannot_fit_is_an_error_not_a_null():
    server_pages = [{"id": 1, "score": 1}, {"id": 2, "score": "high"}]
    with HostileServer() as server:
        server.api = pages_of(server_pages, page_size=1)
        with hostile.client(server) as c, pytest.raises(secfindings.TransportError, match="score"):
            c.paginate(PAGE_DOC, path="items", page_size=1).to_arrow()


def test_a_stream_keeps_the_first_pages_schema():
    server_pages = [{"id": 1, "tag": None}, {"id": 2, "tag": "now"}]
    with HostileServer() as server:
        server.api = pages_of(server_pages, page_size=1)
        with hostile.client(server) as c, pytest.raises(secfindings.TransportError, match="to_arrow"):
            list(c.paginate(PAGE_DOC, path="items", page_size=1).to_arrow_batches())


def test_columns_after_items_of_a_page_refuse_to_skip(client):
    pager = client.findings_view(page_size=10)
    next(iter(pager))
    with pytest.raises(ValidationError, match="after="):
        pager.to_arrow()


def test_a_missing_extra_is_named(either, monkeypatch):
    client, run = either.client, either.run
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(ImportError, match=r"secfindings\[arrow\]"):
        run(client.findings_view(limit=1).to_arrow())
    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(ImportError, match=r"secfindings\[polars\]"):
        run(client.findings_view(limit=1).to_polars())


def test_async_columns_agree_with_the_sync_walk(async_client, client):
    """The same walk through each client gives the same table."""
    table = asyncio.run(async_client.findings_view(fields=ANALYST, limit=150).to_arrow())
    check_agree(client.findings_view(fields=ANALYST, limit=150).to_list(), table)


def test_exports_write_every_row(client, tmp_path):
    ids = [m.id_int for m in client.findings_view(fields="id_int").to_list()]
    r = client.findings_view(fields=ANALYST).write_parquet(tmp_path / "f.parquet")
    assert (r.rows, r.pages) == (300, 3)
    assert pq.read_table(tmp_path / "f.parquet").column("id_int").to_pylist() == ids
    r = client.findings_view(fields=ANALYST).write_jsonl(tmp_path / "f.jsonl")
    lines = (tmp_path / "f.jsonl").read_text().splitlines()
    assert [json.loads(line)["id_int"] for line in lines] == ids
    r = client.findings_view(fields=ANALYST).write_csv(tmp_path / "f.csv")
    frame = pd.read_csv(tmp_path / "f.csv")
    assert frame["id_int"].tolist() == ids
    assert json.loads(frame["datasource_tags_values"].dropna().iloc[0])  # lists as JSON text


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_an_interrupted_export_resumes_with_nothing_lost_or_repeated(tmp_path, fmt):
    rows = [{"id": i, "name": f"n{i}"} for i in range(10)]
    with HostileServer() as server:
        server.api = pages_of(rows, page_size=2, fail_on_page=3)
        with hostile.client(server, max_retries=0) as c:
            first = c.paginate(PAGE_DOC, path="items", page_size=2)
            path = tmp_path / f"out.{fmt}"
            with pytest.raises(APIStatusError):
                getattr(first, f"write_{fmt}")(path)
            cursor = first.cursor
            assert cursor is not None
            rest = c.paginate(PAGE_DOC, {"after": cursor}, path="items", page_size=2)
            if fmt == "parquet":
                second = tmp_path / "rest.parquet"
                rest.write_parquet(second)
                ids = [pq.read_table(p).column("id").to_pylist() for p in (path, second)]
                got = ids[0] + ids[1]
            elif fmt == "csv":
                rest.write_csv(path, append=True)
                got = pd.read_csv(path)["id"].tolist()
            else:
                rest.write_jsonl(path, append=True)
                got = [json.loads(line)["id"] for line in path.read_text().splitlines()]
    assert got == list(range(10))


PAGE_DOC = (
    "query Q($first: Int, $after: String) { items(first: $first, after: $after) "
    "{ edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }"
)


def pages_of(rows: list[dict[str, Any]], page_size: int, fail_on_page: int | None = None) -> Any:
    """An API that pages `rows` by an offset cursor; the `fail_on_page`-th request answers 500 once."""
    served = {"n": 0, "failed": False}

    def answer(req: Any) -> Response:
        served["n"] += 1
        if fail_on_page is not None and served["n"] == fail_on_page and not served["failed"]:
            served["failed"] = True
            return Response(status=500, body=b"boom")
        variables = json.loads(req.body)["variables"]
        start = int(variables.get("after") or 0)
        chunk = rows[start : start + page_size]
        end = start + len(chunk)
        edges = [{"cursor": str(start + i + 1), "node": n} for i, n in enumerate(chunk)]
        info = {"hasNextPage": end < len(rows), "endCursor": str(end)}
        body = json.dumps({"data": {"items": {"edges": edges, "pageInfo": info}}}).encode()
        return Response(status=200, body=body, headers=[("Content-Type", "application/json")])

    return answer


# -- regressions found by review -----------------------------------------------------------


def test_a_failed_column_read_refuses_to_go_on_and_says_where_to_resume():
    rows = [{"id": i} for i in range(10)]
    with HostileServer() as server:
        server.api = pages_of(rows, page_size=2, fail_on_page=3)
        with hostile.client(server, max_retries=0) as c:
            pager = c.paginate(PAGE_DOC, path="items", page_size=2)
            with pytest.raises(APIStatusError):
                pager.to_arrow()
            # The pages read before the failure went with the call: going on would skip them.
            with pytest.raises(secfindings.PaginationError) as info:
                pager.to_arrow()
            assert info.value.cursor is None  # nothing was delivered: resume from the start
            assert c.paginate(PAGE_DOC, path="items", page_size=2).to_arrow().num_rows == 10


@pytest.mark.asyncio
async def test_a_cancelled_async_column_read_refuses_to_go_on(async_client):
    import asyncio

    pager = async_client.findings_view(page_size=10)
    task = asyncio.ensure_future(pager.to_arrow())
    await asyncio.sleep(0)  # let it start; then cancel it while pages are on their way
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(secfindings.PaginationError):
        await pager.to_arrow()


def test_an_interrupted_csv_page_is_taken_out_again(client, tmp_path, monkeypatch):
    # An interruption in the middle of writing a page's rows: the file keeps whole pages only,
    # and the cursor stands after the last of them, so the resume repeats nothing.
    from secfindings import _export

    calls = {"n": 0}
    real = _export._csv_cell

    def flaky(v):
        calls["n"] += 1
        if calls["n"] == 100 * 5 + 7:  # part-way into the second page
            raise KeyboardInterrupt
        return real(v)

    monkeypatch.setattr(_export, "_csv_cell", flaky)
    path = tmp_path / "f.csv"
    pager = client.findings_view(fields="id id_int title score age", page_size=100)
    with pytest.raises(KeyboardInterrupt):
        pager.write_csv(path)
    monkeypatch.setattr(_export, "_csv_cell", real)
    client.findings_view(fields="id id_int title score age", after=pager.cursor).write_csv(path, append=True)
    assert pd.read_csv(path)["id_int"].tolist() == list(range(1, 301))


def test_parquet_widens_a_column_that_is_null_on_the_first_page(tmp_path):
    rows = [{"id": i, "closed_at": None if i < 3 else f"day {i}"} for i in range(8)]
    with HostileServer() as server:
        server.api = pages_of(rows, page_size=2)
        with hostile.client(server) as c:
            c.paginate(PAGE_DOC, path="items", page_size=2).write_parquet(tmp_path / "f.parquet")
    table = pq.read_table(tmp_path / "f.parquet")
    assert table.schema.field("closed_at").type == pa.string()
    assert table.column("closed_at").to_pylist()[2:4] == [None, "day 3"]


def test_the_cursor_follows_a_capsule_consumer(either):
    # By default in batches: the walk's own cursor (sfb1:...), which resumes a batched walk (its
    # selection has id).
    client = either.client
    pager = client.findings_view(fields="id id_int", limit=150)
    assert pa.table(pager).num_rows == 150
    assert pager.cursor.startswith("sfb1:")
    after = either.run(client.findings_view(fields="id id_int", after=pager.cursor, limit=1).to_list())
    assert after[0].id_int == 151
    # One page per request: the server's cursor, which resumes any selection.
    client.pages_per_request = 1
    pager = client.findings_view(fields="id id_int", limit=150)
    assert pa.table(pager).num_rows == 150
    assert not pager.cursor.startswith("sfb1:")
    after = either.run(client.findings_view(fields="id_int", after=pager.cursor, limit=1).to_list())
    assert after[0].id_int == 151


def test_json_lines_keep_big_integers_exactly(tmp_path):
    rows = [{"id": 1, "big": 12345678901234567890123}]
    with HostileServer() as server:
        server.api = pages_of(rows, page_size=2)
        with hostile.client(server) as c:
            c.paginate(PAGE_DOC, path="items", page_size=2).write_jsonl(tmp_path / "f.jsonl")
    assert '"big":12345678901234567890123' in (tmp_path / "f.jsonl").read_text()


def test_a_million_findings_stream_to_parquet_in_bounded_memory(tmp_path):
    """The export streams: 1,000,000 findings to Parquet with peak RSS measured in the exporting
    process (the emulator runs in a process of its own)."""
    import re
    import subprocess
    import time

    emu = subprocess.Popen(
        [sys.executable, "-u", "-m", "secfindings.emulator", "--port", "0", "--findings", "1000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        env: dict[str, str] = {}
        deadline = time.monotonic() + 300
        assert emu.stdout is not None
        while time.monotonic() < deadline:
            line = emu.stdout.readline()
            if m := re.match(r"export (SECFINDINGS_\w+)=(\S+)", line):
                env[m.group(1)] = m.group(2)
            if line.startswith("serving") or not line:
                break
        assert len(env) == 3, env
        code = (
            "import secfindings, sys\n"
            "c = secfindings.Client()\n"
            "r = c.findings_view(fields='id id_int title score severity due_date actual_status { category }')"
            ".write_parquet(sys.argv[1])\n"
            "peak = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]\n"
            "print(r.rows, int(peak) // 1024)\n"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path / "all.parquet")],
            env={**os.environ, **env},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        rows, peak_mb = map(int, out.stdout.split())
        print(f"1,000,000 findings to Parquet: peak RSS {peak_mb} MB")
        assert rows == 1_000_000
        assert peak_mb < 300
        assert pq.ParquetFile(tmp_path / "all.parquet").metadata.num_rows == 1_000_000
    finally:
        emu.terminate()
        emu.wait(30)
        if emu.stdout is not None:
            emu.stdout.close()


def test_a_page_that_fails_to_decode_does_not_move_a_streamed_cursor():
    # Read through the capsule interface, the cursor is the walk's own: a page whose values do
    # not fit the stream's schema must leave it before that page, so a resume does not skip it.
    server_pages = [{"id": 1, "n": 1}, {"id": 2, "n": "text"}]
    with HostileServer() as server:
        server.api = pages_of(server_pages, page_size=1)
        with hostile.client(server) as c:
            pager = c.paginate(PAGE_DOC, path="items", page_size=1)
            with pytest.raises(pa.ArrowInvalid, match=r'column "n" \(int\): row 1 is a string, not a int'):
                pa.table(pager)
            assert pager.cursor == "1"
