"""The sync against both emulator profiles (issue 30): on the facts-only one (no range filters,
no last_reported_time on FindingsView, the sort by it kept) a first sync equals the server row
for row, a second one with nothing changed reads at most 3 pages and writes no version, and a
finding reported again is found; the default columns follow the live schema, with one WARNING
naming what the server lacks."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from tests.test_sync import (
    DATABASES,
    assert_equal_to_server,
    history,
    make_dest,
    pg,  # noqa: F401 (the session's PostgreSQL server, a fixture)
    state,
    table_rows,
)

from secfindings.testing import Emulator

FINDINGS = 1_000


@pytest.fixture
def emu(profile: str) -> Iterator[Emulator]:
    """An emulator of the run's profile with 1,000 findings (a reconcile is 10 pages)."""
    with Emulator(findings=FINDINGS, seed=7, profile=profile) as e:
        yield e


@pytest.fixture(params=DATABASES)
def dest(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return make_dest(request.param, tmp_path, request)


def pages(emu: Emulator) -> int:
    return sum(1 for r in emu.request_log() if r["operation_name"] == "findings_view")


def test_a_first_sync_equals_the_server_and_a_quiet_second_reads_at_most_3_pages(
    emu: Emulator, dest: str
) -> None:
    client = emu.client()
    first = client.sync(dest)
    assert first.kind == "first"
    assert first.created == FINDINGS
    # The pages (in aliased batches of 10, one more to see the end, after the offset probe;
    # issue 37), the newest time, and on "known" that time's lookup (docs/guides/sync.md).
    assert first.requests == FINDINGS // 1000 + 2 + (2 if emu.profile == "known" else 1)
    assert_equal_to_server(dest, client)
    assert state(dest)["watermark"] is not None  # by the sort and, on "known", by lookups
    emu.clear_request_log()
    second = client.sync(dest)
    assert second.kind == "incremental"
    assert (second.created, second.updated, second.removed) == (0, 0, 0)
    assert pages(emu) <= 3
    assert second.requests <= 3  # on "known": 2 pages (one read ahead) and 1 lookup of times
    assert len(history(dest)) == FINDINGS
    assert_equal_to_server(dest, client)


def test_a_finding_changed_and_reported_again_is_found_by_the_incremental_run(
    emu: Emulator, tmp_path: Any
) -> None:
    client = emu.client()
    dest = str(tmp_path / "f.duckdb")
    client.sync(dest)
    before = table_rows(dest)[17]["score"]
    emu.update_finding(17, score=1.5)
    emu.rereport_finding(17)
    emu.clear_request_log()
    result = client.sync(dest)
    assert result.kind == "incremental"
    assert result.updated == 1
    assert table_rows(dest)[17]["score"] == 1.5 != before
    assert pages(emu) <= 3
    assert_equal_to_server(dest, client)
    assert len([r for r in history(dest) if r["id_int"] == 17]) == 2


def test_the_default_columns_follow_the_live_schema_with_one_warning(
    emu: Emulator, tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client = emu.client()
    dest = str(tmp_path / "f.duckdb")
    with caplog.at_level(logging.WARNING, logger="secfindings.sync"):
        result = client.sync(dest)
    lacking = [w for w in result.warnings if "FindingsView has no" in w]
    logged = [r for r in caplog.records if "FindingsView has no" in r.getMessage()]
    columns = set(table_rows(dest)[1])
    if emu.profile == "known":
        assert len(lacking) == len(logged) == 1
        assert "severity, due_date, discovered_time, last_reported_time" in lacking[0]
        assert not {"severity", "due_date", "last_reported_time"} & columns
    else:
        assert lacking == logged == []
        assert {"severity", "due_date", "last_reported_time"} <= columns


def test_a_selection_of_the_callers_gets_last_reported_time_only_where_the_rows_have_it(
    emu: Emulator, tmp_path: Any
) -> None:
    client = emu.client()
    dest = str(tmp_path / "f.duckdb")
    client.sync(dest, fields="id_int title score")
    expected = {"id_int", "title", "score"} | ({"last_reported_time"} if emu.profile == "default" else set())
    assert set(table_rows(dest)[1]) == expected
    assert client.sync(dest, fields="id_int title score").kind == "incremental"


def test_a_killed_first_load_resumes_on_both_profiles(emu: Emulator, tmp_path: Any) -> None:
    """A first load that stopped after some chunks goes on past them: by an id range where the
    server honours one, else by reading from the start and dropping what was committed."""
    import secfindings.sync._dest as dest_module
    import secfindings.sync._engine as engine

    client = emu.client()
    dest = str(tmp_path / "f.duckdb")
    stop = {"pages": 0}

    def progress(info: dict[str, Any]) -> None:
        stop["pages"] = info["pages"]
        if info["pages"] == 5:
            raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, "CHUNK_PAGES", 2)
        mp.setattr(dest_module.DuckDB, "chunk_pages", None)
        with pytest.raises(KeyboardInterrupt):
            client.sync(dest, progress=progress)
    assert 0 < len(table_rows(dest)) < FINDINGS
    assert state(dest)["reconcile_after_id"] == max(table_rows(dest))
    again = client.sync(dest)
    assert again.kind == "first"
    assert again.reconciled
    assert_equal_to_server(dest, client)
    assert len(history(dest)) == FINDINGS


def test_the_async_client_reads_newer_findings_the_same(emu: Emulator, tmp_path: Any) -> None:
    import asyncio

    dest = str(tmp_path / "f.duckdb")
    emu.update_finding(17, score=2.5)

    async def main() -> tuple[Any, Any]:
        async with emu.async_client() as client:
            first = await client.sync(dest)
            emu.update_finding(17, score=1.5)
            emu.rereport_finding(17)
            return first, await client.sync(dest)

    first, second = asyncio.run(main())
    assert first.kind == "first"
    assert (second.kind, second.updated) == ("incremental", 1)
    assert table_rows(dest)[17]["score"] == 1.5
    assert_equal_to_server(dest, emu.client())
