"""Parallel walks (``partitions=``) for both clients over real HTTP to the emulator, in both of
its profiles: the walk split as the server allows (id ranges on the default profile, offset
slices on the facts-only one) gives every row exactly once, in the sequential walk's order for
the columns; partitioned exports resume per partition (``resume=``) with nothing lost or
repeated; walks that cannot be split are refused before anything is sent. Servers that lie
(tests/test_partitions_hostile.py) are met there."""

from __future__ import annotations

import csv
import inspect
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import secfindings
from secfindings import _export, _partitions, _plan, field
from secfindings.errors import ValidationError

#: Fields both profiles have (the facts-only FindingsView has no severity).
FIELDS = "id id_int title score"
#: A filter both profiles take (no range condition on the facts-only one).
SEVERE = field("severity").in_(["3", "4", "5"])
#: How each profile's walks are split.
STRATEGY = {"default": "id_ranges", "known": "offset_slices"}


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test finds out what its server offers (a port may be reused by the next emulator)."""
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    _plan.forget()


@pytest.fixture(params=["Client", "AsyncClient"])
def any_client(request: pytest.FixtureRequest, profiled_client: Any, profiled_async_client: Any) -> Any:
    """Each test runs with the sync client (threads) and the async one (tasks), against both
    profiles of the emulator."""
    return profiled_client if request.param == "Client" else profiled_async_client


@pytest.fixture
def emulator(profiled_emulator: Any) -> Any:
    return profiled_emulator


def pages_and_probes(emulator: Any) -> tuple[int, int]:
    """The page requests of walks and the other requests (bounds, probes) the emulator saw."""
    names = [r["operation_name"] for r in emulator.request_log()]
    pages = names.count("findings_view")
    return pages, len(names) - pages


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def ids(path: Path, fmt: str) -> list[int]:
    if fmt == "jsonl":
        return [json.loads(line)["id_int"] for line in path.read_text().splitlines()]
    if fmt == "csv":
        with path.open(newline="") as f:
            return [int(row["id_int"]) for row in csv.DictReader(f)]
    return [int(v) for v in pq.read_table(path).column("id_int").to_pylist()]


def test_id_ranges_cover_the_span_once() -> None:
    for low, high, n in [(1, 300, 8), (5, 5, 4), (1, 3, 8), (10, 1000, 7), (1, 100_000, 8)]:
        ranges = _partitions.id_ranges(low, high, n)
        covered = [i for lo, hi in ranges for i in range(lo, hi + 1)]
        assert covered == list(range(low, high + 1))
        assert len(ranges) <= n


@pytest.mark.asyncio
@pytest.mark.parametrize("sort", [None, "ID_ASC", ["ID_DESC"]])
async def test_columns_in_partitions_are_the_sequential_walk(
    any_client: Any, emulator: Any, sort: Any
) -> None:
    any_client.pages_per_request = 1  # the pages of each part, counted (batches below)
    whole = await settle(any_client.findings_view(fields=FIELDS, filters=SEVERE, sort=sort).to_arrow())
    emulator.clear_request_log()
    pager = any_client.findings_view(fields=FIELDS, filters=SEVERE, sort=sort, page_size=20)
    split = await settle(pager.to_arrow(partitions=4))
    assert whole.num_rows > 50
    assert split.equals(whole)  # same rows, same order, same columns and types
    pages, other = pages_and_probes(emulator)
    sent = [r for r in emulator.request_log() if r["operation_name"] == "findings_view"]
    if emulator.profile == "default":
        # Id ranges: each partition's pages (none fetched twice), the bounds and one probe.
        per_part = [len(t) for t in _by_range(split, 4)]
        assert pages == sum(max(1, -(-n // 20)) for n in per_part)
        assert other == 2
        assert all("gte" in json.dumps(r["variables"]) or "lte" in json.dumps(r["variables"]) for r in sent)
    else:
        # Offset slices of even rows: no range condition is ever sent (the server has none).
        per_part = [-(-whole.num_rows // 4)] * 3
        per_part.append(whole.num_rows - sum(per_part))
        assert pages == sum(max(1, -(-n // 20)) for n in per_part)
        assert not any("gte" in json.dumps(r["variables"]) for r in sent)
    # By default each part reads in batches of ten pages (200 rows here: one request a part),
    # where its order is the id's.
    any_client.pages_per_request = 10
    emulator.clear_request_log()
    pager = any_client.findings_view(fields=FIELDS, filters=SEVERE, sort=sort, page_size=20)
    assert (await settle(pager.to_arrow(partitions=4))).equals(whole)
    names = [r["operation_name"] for r in emulator.request_log()]
    if sort != ["ID_DESC"]:
        assert names.count("findings_view_pages") == 4
        assert "findings_view" not in names
    else:
        assert "findings_view_pages" not in names


def _by_range(table: Any, n: int) -> list[list[int]]:
    got = sorted(table.column("id_int").to_pylist())
    ranges = _partitions.id_ranges(got[0], got[-1], n)
    return [[i for i in got if lo <= i <= hi] for lo, hi in ranges]


@pytest.mark.asyncio
async def test_pandas_and_polars_in_partitions(any_client: Any) -> None:
    frame = await settle(any_client.findings_view(fields=FIELDS).to_pandas(partitions=3))
    assert frame["id_int"].tolist() == list(range(1, 301))
    assert str(frame["id_int"].dtype) == "Int64"
    polars = await settle(any_client.findings_view(fields=FIELDS).to_polars(partitions=5))
    assert polars["id_int"].to_list() == list(range(1, 301))


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
async def test_a_partitioned_export_writes_every_row_exactly_once(
    any_client: Any, tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / f"findings.{fmt}"
    seen: list[dict[str, Any]] = []
    pager = any_client.findings_view(fields=FIELDS, page_size=25)
    result = await settle(getattr(pager, f"write_{fmt}")(path, partitions=6, progress=seen.append))
    got = ids(path, fmt)
    assert sorted(got) == list(range(1, 301))
    assert len(got) == 300
    assert result.rows == 300
    assert result.cursor is None
    assert result.resume is not None
    assert pager.resume == result.resume
    assert seen[-1]["items"] == 300
    assert seen[-1]["total"] == 300
    # Every partition is done: resuming from it writes nothing more.
    again = any_client.findings_view(fields=FIELDS, page_size=25)
    more = await settle(getattr(again, f"write_{fmt}")(tmp_path / f"more.{fmt}", resume=result.resume))
    assert more.rows == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
async def test_an_interrupted_partitioned_export_resumes_with_nothing_lost_or_repeated(
    any_client: Any, emulator: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    # Parquet buffers row groups: small ones, so that some are in the file and some are not.
    monkeypatch.setattr(_export.Export, "ROW_GROUP", 40)
    path = tmp_path / f"findings.{fmt}"
    injected: list[int] = []

    def fail_soon(info: dict[str, Any]) -> None:
        # After a few pages, the next request of the walk fails (no retries on this client).
        if info["pages"] == 4 and not injected:
            injected.append(1)
            emulator.inject("status", 1, status=400)

    # Batches of two pages (20 rows): each part of 75 rows takes several requests, so the
    # fault lands part-way, and the resume text holds the parts' batched cursors.
    any_client.pages_per_request = 2
    pager = any_client.findings_view(fields=FIELDS, page_size=10)
    with pytest.raises(secfindings.SecFindingsError):
        await settle(getattr(pager, f"write_{fmt}")(path, partitions=4, progress=fail_soon))
    assert injected
    state = pager.resume
    assert state is not None
    key = _partitions.Plan(any_client.findings_view(fields=FIELDS, page_size=10), 4).key
    assert any(str(p.cursor).startswith("sfb1:") for p in _partitions.decode_resume(state, key))
    first = ids(path, fmt)
    assert 0 < len(first) < 300
    with pytest.raises(secfindings.PaginationError, match=r"resume=paginator\.resume"):
        await settle(pager.to_list())  # the failed paginator refuses to go on
    rest_path = path if fmt != "parquet" else tmp_path / "findings.part2.parquet"
    append = {} if fmt == "parquet" else {"append": True}
    again = any_client.findings_view(fields=FIELDS, page_size=10)
    result = await settle(getattr(again, f"write_{fmt}")(rest_path, resume=state, **append))
    got = ids(path, fmt) + (ids(rest_path, fmt) if fmt == "parquet" else [])
    assert sorted(got) == list(range(1, 301)), "a row was lost or written twice"
    assert result.rows == 300 - len(first)


@pytest.mark.asyncio
async def test_new_findings_past_the_highest_id_are_read(any_client: Any, emulator: Any) -> None:
    # The last range is open above: a finding created once the split is made is not left out.
    pager = any_client.findings_view(fields="id_int")
    await settle(pager.estimate(partitions=3))  # the split's bounds are taken now
    new_id, _ = emulator.create_finding(5)
    table = await settle(pager.to_arrow(partitions=3))
    assert table.column("id_int").to_pylist() == [*range(1, 301), new_id]


@pytest.mark.asyncio
async def test_filters_that_select_nothing(any_client: Any, tmp_path: Path) -> None:
    nothing = field("id").in_([10_000_001])
    table = await settle(any_client.findings_view(fields=FIELDS, filters=nothing).to_arrow(partitions=4))
    assert table.num_rows == 0
    assert "id_int" in table.column_names
    result = await settle(
        any_client.findings_view(fields=FIELDS, filters=nothing).write_jsonl(
            tmp_path / "f.jsonl", partitions=4
        )
    )
    assert result.rows == 0


@pytest.mark.asyncio
async def test_walks_that_cannot_be_split_are_refused_before_anything_is_sent(
    any_client: Any, emulator: Any, tmp_path: Path
) -> None:
    await settle(any_client.findings_view(limit=1).to_list())  # the schema is loaded
    emulator.reset_stats()
    cases = [
        (lambda: any_client.findings_view(sort="SCORE_DESC").to_arrow(partitions=2), "only an id order"),
        (lambda: any_client.findings_view(limit=10).to_arrow(partitions=2), "limit="),
        (lambda: any_client.findings_view(after="YXJyYXljb25uZWN0aW9uOjQ=").to_arrow(partitions=2), "after="),
        (lambda: any_client.get_resources_ch().to_arrow(partitions=2), "only findings_view"),
        (lambda: any_client.findings_view().to_arrow(partitions=0), "from 1 to 64"),
        (lambda: any_client.findings_view().to_arrow(partitions=65), "from 1 to 64"),
        (lambda: any_client.findings_view().to_arrow(partitions=True), "must be an int"),
        (lambda: any_client.findings_view().write_jsonl(tmp_path / "x", resume="garbage"), "resume="),
        (lambda: any_client.findings_view().write_jsonl(tmp_path / "x", resume="sfparts1.!!"), "damaged"),
    ]
    for make, message in cases:
        with pytest.raises(ValidationError, match=message):
            await settle(make())
    assert emulator.stats()["api_requests"] == 0


@pytest.mark.asyncio
async def test_a_resume_of_another_walk_is_refused(any_client: Any, tmp_path: Path) -> None:
    done = await settle(
        any_client.findings_view(fields=FIELDS, filters=field("severity").in_(["4", "5"])).write_jsonl(
            tmp_path / "a.jsonl", partitions=2
        )
    )
    other = any_client.findings_view(fields=FIELDS, filters=field("severity").in_(["2", "3"]))
    with pytest.raises(ValidationError, match="another walk"):
        await settle(other.write_jsonl(tmp_path / "b.jsonl", resume=done.resume))
    same = any_client.findings_view(fields=FIELDS, filters=field("severity").in_(["4", "5"]))
    with pytest.raises(ValidationError, match="holds 2 partitions"):
        await settle(same.write_jsonl(tmp_path / "b.jsonl", resume=done, partitions=3))


@pytest.mark.asyncio
async def test_a_started_paginator_is_refused(any_client: Any) -> None:
    pager = any_client.findings_view(fields=FIELDS, page_size=10)
    if inspect.isasyncgen(pages := pager.pages()):
        await pages.__anext__()
    else:
        next(pages)
    with pytest.raises(ValidationError, match="has not started"):
        await settle(pager.to_arrow(partitions=2))


def test_partitions_one_is_the_sequential_walk(profiled_client: Any, emulator: Any) -> None:
    client = profiled_client
    client.findings_view(limit=1).to_list()
    emulator.reset_stats()
    table = client.findings_view(fields=FIELDS, page_size=100).to_arrow(partitions=1)
    assert table.num_rows == 300
    # no bounds request: today's walk (300 rows in one aliased batch; the walk above asked the
    # offset probe)
    assert emulator.stats()["api_requests"] == 1


def test_an_interrupted_partitioned_cli_export_prints_its_resume(emulator: Any, tmp_path: Path) -> None:
    import os
    import shlex
    import signal
    import subprocess
    import sys
    import time

    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env.update(
        SECFINDINGS_API_TOKEN=emulator.create_api_token(),
        SECFINDINGS_BASE_URL=emulator.base_url,
        SECFINDINGS_AUTH_URL=emulator.auth_url,
        SECFINDINGS_SCHEMA_CACHE=str(tmp_path / "schema"),
    )
    out = tmp_path / "f.jsonl"
    args = ["export", "--out", str(out), "--partitions", "3", "--page-size", "5", "--fields", "id id_int"]
    emulator.set_latency(30)  # slow enough to be interrupted part-way
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "secfindings", *args, "--no-progress"],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 60
        while (not out.exists() or out.stat().st_size == 0) and time.monotonic() < deadline:
            time.sleep(0.02)  # polls for the first rows written; nothing waits on a timer
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        emulator.set_latency(0)
    assert proc.returncode == 130, err
    command = next(line.strip() for line in err.splitlines() if line.strip().startswith("secfindings export"))
    argv = shlex.split(command)
    assert "--resume" in argv
    assert "--append" in argv
    assert "--after" not in argv
    first = ids(out, "jsonl")
    assert 0 < len(first) < 300
    done = subprocess.run(
        [sys.executable, "-m", "secfindings", *argv[1:]], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert sorted(ids(out, "jsonl")) == list(range(1, 301)), "a row was lost or written twice"


def test_parquet_takes_its_columns_from_the_first_partition_that_gave_a_page(profiled_client: Any) -> None:
    # The first row group's schema comes from a walk that has columns: a partition that has not
    # given a page yet has none (a Parquet file of no columns would refuse every later page).
    pager = profiled_client.findings_view(fields=FIELDS, page_size=10)
    plan = _partitions.Plan(pager, 3)
    run = _partitions.Run(plan, _partitions._parts(pager, plan))
    _, last = run.walks[-1]
    got = last.next_batch(False)
    handle = run.exporter(_NoFile(), _NoReport())
    handle(run.walks[-1][0], got)
    table = pa.table(run.natives.finish_table([got[0]]))
    assert table.column_names == ["id", "id_int", "title", "score"]


class _NoFile:
    cursor = None

    def page(self, data: Any, cursor: str | None) -> int:
        return 0


class _NoReport:
    def page(self, rows: int) -> None:
        pass


@pytest.mark.asyncio
@pytest.mark.parametrize("sort", [None, "ID_DESC"])
async def test_to_list_in_partitions_is_the_sequential_walk(
    any_client: Any, emulator: Any, sort: Any
) -> None:
    whole = await settle(any_client.findings_view(fields=FIELDS, sort=sort).to_list())
    seen: list[dict[str, Any]] = []
    split = await settle(
        any_client.findings_view(fields=FIELDS, sort=sort, page_size=30).to_list(
            partitions=4, progress=seen.append
        )
    )
    assert [f.id_int for f in split] == [f.id_int for f in whole]
    assert type(split[0]) is type(whole[0])  # typed models, as the sequential walk gives
    assert split[0].title == whole[0].title
    assert seen[-1]["items"] == 300


@pytest.mark.asyncio
async def test_fields_without_id_int_give_the_columns_asked_for(any_client: Any, tmp_path: Path) -> None:
    # The partitions' check reads id_int: they ask for it, and take it out again.
    whole = await settle(any_client.findings_view(fields="title score").to_arrow())
    split = await settle(any_client.findings_view(fields="title score", page_size=40).to_arrow(partitions=3))
    assert split.equals(whole)
    result = await settle(
        any_client.findings_view(fields="title score").write_jsonl(tmp_path / "f.jsonl", partitions=3)
    )
    rows = [json.loads(line) for line in (tmp_path / "f.jsonl").read_text().splitlines()]
    assert result.rows == len(rows) == 300
    assert all(set(r) == {"title", "score"} for r in rows)
