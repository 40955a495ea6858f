"""The walk plan (secfindings._plan): probes answer what a server offers, once per server, kept
in memory and beside the schema cache; a refusal picks a fallback and a failure of the server is
raised; the count by offset probes is exact for any number of rows; ``newer_than`` (the hook of
watch and the incremental sync) reads each profile as it allows."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.servers.proxy import LyingProxy

from secfindings import _plan, _probes
from secfindings.errors import APIStatusError, GraphQLError


@pytest.fixture(autouse=True)
def fresh_probes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "cache"
    monkeypatch.setenv("SECFINDINGS_SCHEMA_CACHE", str(folder))
    _plan.forget()
    yield folder
    _plan.forget()


def probes_sent(emulator: Any) -> list[str]:
    return [r["operation_name"] for r in emulator.request_log() if r["operation_name"].startswith("probe_")]


def test_capabilities_follow_the_profile_and_are_probed_once(
    profiled_client: Any, profiled_emulator: Any, fresh_probes: Path
) -> None:
    expected = {"default": (True, True, True), "known": (False, True, False)}[profiled_emulator.profile]
    profiled_emulator.clear_request_log()
    found = tuple(
        _plan.capable(profiled_client, name) for name in (_plan.ID_RANGE, _plan.OFFSET, _plan.TOTAL_COUNT)
    )
    assert found == expected
    # total_count is read off the live schema: two probes, not three.
    assert sorted(probes_sent(profiled_emulator)) == ["probe_id_range", "probe_offset"]
    profiled_emulator.clear_request_log()
    assert tuple(_plan.capable(profiled_client, n) for n in (_plan.ID_RANGE, _plan.OFFSET)) == expected[:2]
    assert probes_sent(profiled_emulator) == []  # remembered in memory
    # ... and on disk beside the schema cache: another process (memory gone) asks nothing.
    (kept,) = fresh_probes.glob("*.probes.json")
    assert oct(kept.stat().st_mode & 0o777) == oct(0o600)
    with _probes._LOCK:
        _probes._MEMORY.clear()
    assert _plan.capable(profiled_client, _plan.ID_RANGE) == expected[0]
    assert probes_sent(profiled_emulator) == []


def test_a_damaged_probe_file_is_dropped_and_probed_again(
    client: Any, emulator: Any, fresh_probes: Path
) -> None:
    assert _plan.capable(client, _plan.ID_RANGE)
    (kept,) = fresh_probes.glob("*.probes.json")
    body = json.loads(kept.read_text())
    for server in body["servers"].values():
        server["id_range"] = ["yes", "soon"]  # not a bool, not a time
    kept.write_text(json.dumps(body))
    with _probes._LOCK:
        _probes._MEMORY.clear()
    emulator.clear_request_log()
    assert _plan.capable(client, _plan.ID_RANGE)
    assert probes_sent(emulator) == ["probe_id_range"]
    kept.write_text("{not json")
    with _probes._LOCK:
        _probes._MEMORY.clear()
    assert _plan.capable(client, _plan.ID_RANGE)
    assert json.loads(kept.read_text())["format"] == 1  # rewritten whole


def test_a_server_failure_is_raised_and_not_remembered(emulator: Any) -> None:
    with LyingProxy(emulator) as proxy, proxy.client() as client:
        client.schema()
        proxy.answer = lambda body, answer: (
            {"errors": [{"message": "upstream down"}]} if "probe" in body.get("operationName", "") else answer
        )
        # A GraphQL error is the server saying no: the fallback, remembered.
        assert _plan.capable(client, _plan.OFFSET) is False
        assert _plan.known(client.base_url, client.schema(), _plan.OFFSET) is False

        def unavailable(req: Any) -> Any:
            from tests.servers.http import Response

            return Response.of_json({"message": "unavailable"}, 503)

        proxy.server.api = unavailable
        with pytest.raises(APIStatusError):
            _plan.capable(client, _plan.ID_RANGE)
        assert _plan.known(client.base_url, client.schema(), _plan.ID_RANGE) is None  # asked again later


def fake_rows(rows: int, refuse_aliases: bool = False) -> Any:
    """Answers a count's requests as a server with ``rows`` rows would (offsets by variable, or
    as literals of aliased fields)."""

    def edges(offset: int) -> list[dict[str, Any]]:
        return [{"cursor": f"c{offset}", "node": {"id_int": offset + 1}}] if offset < rows else []

    def answer(ask: Any) -> Any:
        doc, variables, name = ask
        if name == "findings_at":
            return {"findings_view": {"edges": edges(variables["offset"])}}
        if refuse_aliases:
            raise GraphQLError("too many aliases")
        found = re.findall(r"(o\d+): findings_view\([^)]*offset: (\d+)", doc)
        return {alias: {"edges": edges(int(o))} for alias, o in found}

    return answer


def drive_fake(steps: Any, answer: Any) -> tuple[Any, int]:
    asked = 0
    try:
        ask = next(steps)
        while True:
            asked += 1
            try:
                data = answer(ask)
            except Exception as exc:
                ask = steps.throw(exc)
            else:
                ask = steps.send(data)
    except StopIteration as done:
        return done.value, asked


@pytest.mark.parametrize(
    "rows", [0, 1, 2, 15, 16, 17, 63, 64, 65, 511, 512, 513, 1000, 4096, 100_000, 262_145]
)
def test_the_count_by_offset_is_exact(rows: int) -> None:
    walk = _plan.Walk(None, "findings_view", {})
    counted, asked = drive_fake(_plan.count_steps(walk, None), fake_rows(rows))
    assert counted.rows == rows
    assert counted.probes == asked
    assert asked <= 8  # a ladder, then 16 ways a request: 7 for 262,145 rows
    # A server that refuses documents of many aliased fields is asked one offset at a time: the
    # ladder, then a binary search.
    one_by_one, slow = drive_fake(_plan.count_steps(walk, None), fake_rows(rows, refuse_aliases=True))
    assert one_by_one.rows == rows
    assert asked <= slow <= 14 + max(64, rows).bit_length()


def test_newer_than_reads_each_profile_as_it_allows(profiled_client: Any, profiled_emulator: Any) -> None:
    watermark = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    plan = _plan.newer_than(
        _plan.Walk.of(profiled_client.findings_view(fields="id_int")),
        "last_reported_time",
        watermark,
        dt.timedelta(hours=1),
    )
    assert plan.since == watermark - dt.timedelta(hours=1)
    if profiled_emulator.profile == "default":
        assert (plan.sorted, plan.filtered, plan.readable, plan.sortable) == (True, True, True, True)
        assert plan.sort == "LAST_REPORTED_TIME_DESC"
        assert plan.past("2023-12-31T22:00:00+00:00")
        assert not plan.past("2023-12-31T23:30:00Z")
        rows = plan.paginator(fields="id_int last_reported_time").to_list()
        times = [r.last_reported_time for r in rows]
        assert times == sorted(times, reverse=True)
        assert all(plan.keep(t) for t in times)
    else:  # no such field on a facts-only FindingsView, and no range condition: nothing to use
        assert (plan.sorted, plan.filtered, plan.readable) == (False, False, False)
        assert plan.sortable  # its sort values name the key: a caller reading it elsewhere may
        assert plan.extra_filter() is None
        assert not plan.past("2000-01-01T00:00:00Z")
    assert os.environ["SECFINDINGS_SCHEMA_CACHE"]


@pytest.mark.asyncio
async def test_newer_than_with_the_async_client(profiled_async_client: Any, profiled_emulator: Any) -> None:
    watermark = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    walk = _plan.Walk.of(profiled_async_client.findings_view(fields="id_int"))
    plan = await _plan.newer_than_async(walk, "last_reported_time", watermark)
    assert plan.filtered == (profiled_emulator.profile == "default")
    assert await _plan.capable_async(profiled_async_client, _plan.OFFSET)
    if plan.sorted:
        rows = await plan.paginator(fields="id_int last_reported_time", limit=5).to_list()
        assert all(plan.keep(r.last_reported_time) for r in rows)


def test_a_server_that_refuses_many_aliases_is_counted_one_offset_at_a_time() -> None:
    from secfindings.testing import Emulator

    with Emulator(300, seed=7, profile="known", max_aliases=3) as emu, emu.client() as client:
        pager = client.findings_view(fields="id_int", page_size=20)
        estimate = pager.estimate(partitions=4)
        table = pager.to_arrow(partitions=4)
        log = emu.request_log()
    assert (estimate.rows, estimate.strategy) == (300, "offset_slices")
    assert any(r["status"] == 400 for r in log)  # the ladder of 9 aliased fields was refused
    singles = [r for r in log if r["operation_name"] == "findings_at"]
    assert len(singles) > 9  # then asked one offset at a time (a binary search)
    assert table.column("id_int").to_pylist() == list(range(1, 301))
