"""Partitions against servers that lie (issue 31, "Partitions trust the server"): a server that
ignores the id filter, one that strays 10 ids past each range, one that takes neither a range
nor ``offset``, and answers whose bounds or count cannot be true. Every row comes out exactly
once, or a typed error says why not; nothing is written from an answer that cannot be true.

The servers are the emulator behind a lying proxy (tests/servers/proxy.py)."""

from __future__ import annotations

import base64
import copy
import inspect
import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.servers.http import make_api_token
from tests.servers.proxy import LyingProxy, change_filter, id_conditions

import secfindings.dask as sfd
from secfindings import _partitions, _plan
from secfindings.errors import TransportError, ValidationError
from secfindings.testing import Emulator

FIELDS = "id id_int title"


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(tmp_path / "cache"))
    _plan.forget()
    _plan._WARNED.clear()


@pytest.fixture(scope="module")
def thousand() -> Iterator[Emulator]:
    """1,000 findings, the default profile (it honours range filters: the proxy lies about them)."""
    with Emulator(1_000, seed=7) as emu:
        yield emu


@pytest.fixture
def proxy(thousand: Emulator) -> Iterator[LyingProxy]:
    with LyingProxy(thousand) as p:
        yield p


def ignore_ids(leaf: dict[str, Any]) -> dict[str, Any] | None:
    return None if id_conditions(leaf) else leaf


def stray_ten(leaf: dict[str, Any]) -> dict[str, Any]:
    if leaf.get("field") == "id" and leaf.get("condition") == "gte":
        return {**leaf, "value": leaf["value"] - 10}
    if leaf.get("field") == "id" and leaf.get("condition") == "lte":
        return {**leaf, "value": leaf["value"] + 10}
    return leaf


def trust_ranges(client: Any) -> None:
    """As if a probe had found the range filter honoured (the server changed since, or lies
    only in walks): the walk's own check must still give each row once."""
    _plan.remember(client.base_url, client.schema(), _plan.ID_RANGE, True)


def lines(path: Path) -> list[int]:
    return [json.loads(line)["id_int"] for line in path.read_text().splitlines()]


async def settle(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
@pytest.mark.parametrize("liar", [ignore_ids, stray_ten], ids=["ignores-the-id-filter", "strays-ten-ids"])
@pytest.mark.parametrize("trusted", [False, True], ids=["probed", "trusted"])
async def test_every_row_once_from_a_server_that_lies_about_id_ranges(
    proxy: LyingProxy, tmp_path: Path, caplog: pytest.LogCaptureFixture, liar: Any, trusted: bool, kind: str
) -> None:
    proxy.request = change_filter(liar)
    client = proxy.client() if kind == "Client" else proxy.async_client()
    try:
        with caplog.at_level(logging.WARNING):
            if trusted:
                _plan.remember(client.base_url, await settle(client.schema()), _plan.ID_RANGE, True)
            table = await settle(client.findings_view(fields=FIELDS, page_size=100).to_arrow(partitions=4))
            written = await settle(
                client.findings_view(fields=FIELDS, page_size=100).write_jsonl(
                    tmp_path / "f.jsonl", partitions=4
                )
            )
            frame = await settle(client.findings_view(fields=FIELDS, page_size=100).to_list(partitions=4))
    finally:
        client.close()
    assert table.column("id_int").to_pylist() == list(range(1, 1_001))  # not 4,000 rows, nor 1,060
    assert sorted(lines(tmp_path / "f.jsonl")) == list(range(1, 1_001))
    assert written.rows == 1_000
    assert [f.id_int for f in frame] == list(range(1, 1_001))
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    if trusted:  # id ranges were used, and the server's strays were dropped (said once per walk)
        assert any("outside the partition" in r.getMessage() for r in warned)
    else:  # the probe saw the lie: offset slices, which the server does not lie about
        assert not warned
        assert any(b.get("operationName", "").startswith("findings_at") for b in proxy.forwarded)


def test_a_server_that_ignores_the_id_filter_in_dask(proxy: LyingProxy) -> None:
    dask = pytest.importorskip("dask")
    proxy.request = change_filter(ignore_ids)
    with proxy.client() as client, dask.config.set(scheduler="sync"):
        trust_ranges(client)
        got = sfd.read_findings(client, partitions=4, fields="id_int title").compute()
        lies = sfd.read_findings(client, partitions=4, fields="title", id_range=(101, 400)).compute()
    assert sorted(got["id_int"].tolist()) == list(range(1, 1_001))
    assert len(lies) == 300  # only the ids asked for, each once, the id column it added taken out
    assert list(lies.columns) == ["title"]


def refuses_offset(body: dict[str, Any]) -> dict[str, Any]:
    if "offset" in body.get("query", ""):
        body = {**body, "query": body["query"].replace("offset", "offzet")}  # an unknown argument
    return body


def ignores_offset(body: dict[str, Any]) -> dict[str, Any]:
    query = re.sub(r",?\s*offset: (\$offset|\d+)", "", body.get("query", ""))
    query = query.replace(", $offset: Int", "")
    variables = {k: v for k, v in (body.get("variables") or {}).items() if k != "offset"}
    return {**body, "query": query, "variables": variables}


@pytest.mark.parametrize("liar", [refuses_offset, ignores_offset], ids=["refuses-offset", "ignores-offset"])
def test_a_server_with_neither_ranges_nor_offset_is_one_walk_and_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, liar: Any
) -> None:
    with Emulator(300, seed=7, profile="known") as emu, LyingProxy(emu) as proxy:
        proxy.request = liar
        with proxy.client() as client, caplog.at_level(logging.WARNING):
            table = client.findings_view(fields=FIELDS).to_arrow(partitions=4)
            again = client.findings_view(fields=FIELDS).to_arrow(partitions=4)
            estimate = client.findings_view(fields=FIELDS).estimate(partitions=4)
    assert table.column("id_int").to_pylist() == list(range(1, 301))
    assert again.num_rows == 300
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1, warned  # one line, not one per walk
    assert "one sequential walk" in warned[0]
    assert (estimate.strategy, estimate.rows, estimate.requests) == ("sequential", None, None)
    assert estimate.note is not None
    assert "total_count" in estimate.note


# ------------------------------------------------------------------------------ answers that cannot be true


def bounds_answer(change: Any) -> Any:
    def hook(body: dict[str, Any], answer: Any) -> Any:
        if body.get("operationName") == "findings_bounds" and isinstance(answer.get("data"), dict):
            answer = copy.deepcopy(answer)
            change(answer["data"])
        return answer

    return hook


def swap(data: dict[str, Any]) -> None:
    data["low"]["edges"], data["high"]["edges"] = data["high"]["edges"], data["low"]["edges"]


def not_an_id(data: dict[str, Any]) -> None:
    data["low"]["edges"][0]["node"]["id_int"] = "abc"


def many(data: dict[str, Any]) -> None:
    data["low"]["total_count"] = "many"


@pytest.mark.parametrize(
    ("change", "message"),
    [(swap, "lowest finding id"), (not_an_id, "not an integer"), (many, "total_count")],
    ids=["low-above-high", "malformed-bounds", "total-count-many"],
)
def test_bounds_that_cannot_be_true_are_a_typed_error_and_write_nothing(
    proxy: LyingProxy, tmp_path: Path, change: Any, message: str
) -> None:
    proxy.answer = bounds_answer(change)
    out = tmp_path / "f.jsonl"
    with proxy.client() as client:
        with pytest.raises(TransportError, match=message):
            client.findings_view(fields=FIELDS).to_arrow(partitions=4)
        with pytest.raises(TransportError, match=message):
            client.findings_view(fields=FIELDS).write_jsonl(out, partitions=4)
        with pytest.raises(TransportError, match=message):
            client.findings_view(fields=FIELDS).estimate()
    assert not out.exists()  # no empty file that looks like a finished export


@pytest.mark.parametrize("change", [swap, many], ids=["low-above-high", "total-count-many"])
def test_export_dry_run_says_it_in_one_line(proxy: LyingProxy, tmp_path: Path, change: Any) -> None:
    proxy.answer = bounds_answer(change)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env.update(
        SECFINDINGS_API_TOKEN=make_api_token(),
        SECFINDINGS_BASE_URL=proxy.base_url,
        SECFINDINGS_AUTH_URL=proxy.server.auth_url,
        SECFINDINGS_SCHEMA_CACHE=str(tmp_path),
    )
    out = subprocess.run(
        [sys.executable, "-m", "secfindings", "export", "--dry-run", "--partitions", "4"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The server's answer is at fault, not the command: exit 1 (2 is for bad usage), one line.
    assert out.returncode == 1, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0
    assert out.stderr.startswith("error: TransportError:")


def test_resume_texts_with_impossible_parts_are_refused(proxy: LyingProxy, tmp_path: Path) -> None:
    with proxy.client() as client:
        key = _partitions.Plan(client.findings_view(fields=FIELDS), 2).key
        reversed_bounds = _partitions.encode_resume(key, [_partitions.Part(500, 100)])
        negative = _partitions.encode_resume(key, [_partitions.Part(1, 5, limit=-1)])
        deep = _partitions._RESUME + base64.urlsafe_b64encode(b"[" * 100_000).decode()
        for text in (reversed_bounds, negative, deep):
            with pytest.raises(ValidationError, match="damaged"):
                client.findings_view(fields=FIELDS).write_jsonl(tmp_path / "x.jsonl", resume=text)
            with pytest.raises(ValidationError, match="damaged"):
                _partitions.decode_resume(text, key)
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize(
    ("id_range", "message"),
    [((400, 100), "reversed"), (("1", 5), "ints"), ((1, 2, 3), "pair"), ((True, 5), "ints")],
)
def test_dask_refuses_an_id_range_that_is_not_one(proxy: LyingProxy, id_range: Any, message: str) -> None:
    pytest.importorskip("dask")
    with proxy.client() as client, pytest.raises(ValidationError, match=message):
        sfd.read_findings(client, partitions=2, id_range=id_range)
    assert not [b for b in proxy.forwarded if "findings" in b.get("query", "")]


def test_the_check_drops_from_columns_lines_and_nodes(thousand: Emulator) -> None:
    # The check itself, on pages a partition was given: what lies outside its ids goes.
    part = _partitions.Part(10, 20, filtered=False)
    with thousand.client() as client:
        plan = _partitions.Plan(client.findings_view(fields="title", page_size=30), 2)
        pager = client.findings_view(fields="title id_int", page_size=30)
        pager._as_columns()
        batch, _ = pager._pages.next_batch(False)
        kept = pa.record_batch(plan.keep_batch(part, batch))
        assert kept.num_rows == 11
        assert kept.schema.names == ["title"]  # the id the plan added for its check is taken out
        lines_pager = client.findings_view(fields="title id_int", page_size=30)
        lines_pager._as_columns()
        data, _ = lines_pager._pages.next_jsonl()
        kept_lines = plan.keep_lines(part, data).splitlines()
        assert len(kept_lines) == 11
        assert all(set(json.loads(line)) == {"title"} for line in kept_lines)
    assert plan.dropped == 2 * 19


def test_resumed_offset_slices_keep_the_order_they_were_cut_in(tmp_path: Path) -> None:
    # A server whose own order is not by id (here: descending when no sort is given): slices
    # cut in ID_ASC must be read in ID_ASC when resumed too, or they read other rows.
    with Emulator(300, seed=7, profile="known") as emu, LyingProxy(emu) as proxy:

        def newest_first(body: dict[str, Any]) -> dict[str, Any]:
            query = body.get("query", "")
            if body.get("operationName") == "findings_view" and "sort" not in query:
                body = {
                    **body,
                    "query": query.replace("{ findings_view(", "{ findings_view(sort: [ID_DESC], "),
                }
            return body

        proxy.request = newest_first
        with proxy.client() as client:
            # One page per request: a resumed slice walks after its server cursor with a sort
            # (aliased batches always send sort: [ID_ASC]).
            client.pages_per_request = 1
            pager = client.findings_view(fields=FIELDS, page_size=20)
            plan = _partitions.Plan(pager, 4)
            parts = _partitions._parts(pager, plan)
            assert plan.strategy == "offset_slices"
            state = _partitions.encode_resume(plan.key, parts)  # as if nothing was written yet
            result = client.findings_view(fields=FIELDS, page_size=20).write_jsonl(
                tmp_path / "f.jsonl", resume=state
            )
    assert sorted(lines(tmp_path / "f.jsonl")) == list(range(1, 301))
    assert result.rows == 300


def test_a_resume_text_of_the_previous_form_still_reads(proxy: LyingProxy) -> None:
    # Texts written before the walk plan hold 4 values a part (id ranges, filtered by the server).
    with proxy.client() as client:
        key = _partitions.Plan(client.findings_view(fields=FIELDS), 2).key
    body = {"key": key, "parts": [[None, 500, None, True], [501, None, "YXJyYXljb25uZWN0aW9uOjk=", False]]}
    text = _partitions._RESUME + base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
    parts = _partitions.decode_resume(text, key)
    assert parts == [
        _partitions.Part(None, 500, None, True, None, True),
        _partitions.Part(501, None, "YXJyYXljb25uZWN0aW9uOjk=", False, None, True),
    ]


def test_offset_slices_that_read_fewer_rows_than_counted_say_so(caplog: pytest.LogCaptureFixture) -> None:
    # A finding removed between the count and the walk (here: one row left out of one page)
    # shifts the rows after it; the walk cannot know which it missed, but it says it read less.
    with Emulator(300, seed=7, profile="known") as emu, LyingProxy(emu) as proxy:
        dropped: list[int] = []

        def lose_one(body: dict[str, Any], answer: Any) -> Any:
            edges = ((answer.get("data") or {}).get("findings_view") or {}).get("edges")
            if body.get("operationName") == "findings_view" and edges and not dropped:
                dropped.append(edges.pop(len(edges) // 2)["node"]["id_int"])
            return answer

        proxy.answer = lose_one
        with proxy.client() as client, caplog.at_level(logging.WARNING):
            client.pages_per_request = 1  # the proxy loses a row of a findings_view page
            table = client.findings_view(fields=FIELDS).to_arrow(partitions=4)
    assert table.num_rows == 299
    assert dropped[0] not in table.column("id_int").to_pylist()
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("read 299 rows of the 300 counted" in w for w in warned), warned


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("fields", ["id id_int title", "title score"], ids=["with-id", "without-id"])
def test_exports_of_columns_keep_each_row_once_and_the_columns_asked_for(
    proxy: LyingProxy, tmp_path: Path, fmt: str, fields: str
) -> None:
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    proxy.request = change_filter(ignore_ids)
    path = tmp_path / f"f.{fmt}"
    with proxy.client() as client:
        trust_ranges(client)  # id ranges, which this server ignores: 4 x 1,000 rows come
        result = getattr(client.findings_view(fields=fields, page_size=100), f"write_{fmt}")(
            path, partitions=4
        )
        whole = client.findings_view(fields=fields, page_size=100).to_arrow(partitions=4)
    table = pq.read_table(path) if fmt == "parquet" else pacsv.read_csv(path)
    assert result.rows == table.num_rows == whole.num_rows == 1_000
    assert table.column_names == whole.column_names == fields.split()  # the id the check added is gone
    if "title" in fields:
        with proxy.client() as client:
            titles = [f.title for f in client.findings_view(fields="title").to_list()]
        assert sorted(table.column("title").to_pylist()) == sorted(titles)


def match_nothing(leaf: dict[str, Any]) -> dict[str, Any]:
    """A server that answers a range condition it does not know with no rows (no error)."""
    if id_conditions(leaf):
        return {"field": "id", "condition": "in", "value": ["-999"]}
    return leaf


@pytest.mark.reliability_hostile
def test_a_server_that_answers_ranges_with_nothing_does_not_pass_the_probe(proxy: LyingProxy) -> None:
    """The probe only asked ranges no finding is in, so "nothing" for every range looked like a
    server that filters: partitions then read 0 of 1,000 rows, exit 0. A range every finding is
    in must come back with a row too."""
    proxy.request = change_filter(match_nothing)
    with proxy.client() as client:
        assert _plan.capable(client, _plan.ID_RANGE) is False
        table = client.findings_view(fields=FIELDS, page_size=100).to_arrow(partitions=4)
    assert table.column("id_int").to_pylist() == list(range(1, 1_001))
