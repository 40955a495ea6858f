"""client.sync(): a local copy of the findings in DuckDB, SQLite and a real PostgreSQL server,
against the emulator. The acceptance cases of issue 22 run for each of the three databases."""

from __future__ import annotations

import datetime as dt
import importlib
import math
import os
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from tests.servers.postgres import PostgresServer, postgres_server

import secfindings
import secfindings.sync
from secfindings.sync import parse_destination
from secfindings.sync._engine import column_name
from secfindings.testing import Emulator

# The drivers come with the test extra; under CI a missing one fails the tests instead of
# skipping them.
for _driver in ("duckdb", "adbc_driver_sqlite", "adbc_driver_postgresql"):
    if os.environ.get("CI"):
        importlib.import_module(_driver)
    else:
        pytest.importorskip(_driver)

DATABASES = ["duckdb", "sqlite", "postgresql"]
SEEDED = 20_000


# ------------------------------------------------------------------------------ fixtures


@pytest.fixture(scope="session")
def pg() -> Iterator[PostgresServer]:
    """One PostgreSQL 15 server for the session (a database per test)."""
    with postgres_server() as server:
        yield server


def make_dest(kind: str, tmp_path: Any, request: pytest.FixtureRequest) -> str:
    if kind == "duckdb":
        return str(tmp_path / "findings.duckdb")
    if kind == "sqlite":
        return f"sqlite:///{tmp_path}/findings.sqlite"
    server: PostgresServer = request.getfixturevalue("pg")
    return server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=DATABASES)
def dest(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return make_dest(request.param, tmp_path, request)


@pytest.fixture
def big() -> Iterator[Emulator]:
    with Emulator(findings=SEEDED, seed=11) as emu:
        yield emu


# ------------------------------------------------------------------------------ reading back


def _norm(value: Any) -> Any:
    """A value as the three databases can all give it back: timestamps as naive UTC ISO text
    with microseconds (SQLite's form), booleans as 0/1."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, bool):
        return int(value)
    return value


def fetch(dest: str, sql: str) -> list[dict[str, Any]]:
    """Rows of a query on the destination, through Arrow (DuckDB hands out TIMESTAMPTZ values
    as Python objects only with pytz)."""
    d = parse_destination(dest)
    if d.scheme == "duckdb":
        import duckdb

        con = duckdb.connect(d.path, read_only=True)
        try:
            rel = con.sql(sql)
            # arrow() in DuckDB 1.x, to_arrow_table() from 2.0
            table = rel.to_arrow_table() if hasattr(rel, "to_arrow_table") else rel.arrow()
        finally:
            con.close()
    else:
        if d.scheme == "sqlite":
            import adbc_driver_sqlite.dbapi as driver
        else:
            import adbc_driver_postgresql.dbapi as driver  # type: ignore[no-redef]
        con = driver.connect(d.path if d.scheme == "sqlite" else d.url)
        try:
            cur = con.cursor()
            cur.execute(sql)
            table = cur.fetch_arrow_table()
            cur.close()
        finally:
            con.close()
    return [{k: _norm(v) for k, v in row.items()} for row in table.to_pylist()]


def table_rows(dest: str) -> dict[int, dict[str, Any]]:
    rows = fetch(dest, "SELECT * FROM findings")
    out = {r["id_int"]: r for r in rows}
    assert len(out) == len(rows), "a finding is in the table twice"
    return out


def server_rows(client: secfindings.Client, fields: str = "analyst") -> dict[int, dict[str, Any]]:
    table = client.findings_view(fields=fields, sort="ID_ASC").to_arrow()
    out = {}
    for row in table.to_pylist():
        row = {column_name(k): _norm(v) for k, v in row.items()}
        out[row["id_int"]] = row
    return out


def state(dest: str) -> dict[str, Any]:
    rows = fetch(dest, "SELECT * FROM sync_state WHERE collection = 'findings'")
    return rows[0] if rows else {}


def history(dest: str) -> list[dict[str, Any]]:
    return fetch(dest, "SELECT * FROM findings_history")


def assert_equal_to_server(dest: str, client: secfindings.Client) -> None:
    local, remote = table_rows(dest), server_rows(client)
    assert set(local) == set(remote), (
        f"missing {sorted(set(remote) - set(local))[:10]}, extra {sorted(set(local) - set(remote))[:10]}"
    )
    differ = [k for k in remote if local[k] != remote[k]]
    assert not differ, f"{len(differ)} rows differ, e.g. {local[differ[0]]} != {remote[differ[0]]}"


def open_ids(client: secfindings.Client, count: int, rng: random.Random, before: dt.datetime) -> list[int]:
    """``count`` ids of open findings last reported before ``before``."""
    rows = client.findings_view(fields="id_int last_reported_time actual_status { category }").to_list()
    ids = [
        r.id_int
        for r in rows
        if r.actual_status is not None
        and r.actual_status.category == "OPEN"
        and r.last_reported_time is not None
        and _aware(r.last_reported_time) < before
    ]
    return rng.sample(sorted(ids), count)


def _aware(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))


# ------------------------------------------------------------------------------ acceptance


def test_first_sync_then_changes_converge_within_the_budget(big: Emulator, dest: str) -> None:
    """20,000 findings; then 50 updated and re-reported, 20 created, 10 closed and 5 re-reported
    a few minutes back inside the lookback: the second sync makes the table equal the server
    row for row, the history holds exactly the changed versions, and the incremental part made
    at most ceil(changed / 100) + 3 requests (the reconcile counted separately)."""
    client = big.client()
    first = client.sync(dest)
    assert first.kind == "first"
    assert first.reconciled
    assert first.created == SEEDED
    assert first.rows_read == SEEDED
    assert_equal_to_server(dest, client)
    assert len(history(dest)) == SEEDED
    watermark = _aware(state(dest)["watermark"] + "+00:00")
    assert watermark == max(_aware(r["last_reported_time"] + "+00:00") for r in table_rows(dest).values())

    rng = random.Random(22)
    lookback = dt.timedelta(minutes=15)
    picked = open_ids(client, 65, rng, watermark - lookback)
    updated, closed, late = picked[:50], picked[50:60], picked[60:]
    for i in updated:
        big.update_finding(i, severity=1 + i % 5, score=round(10 + i % 80 + 0.5, 2))
        big.rereport_finding(i)
    created = [big.create_finding(severity=4)[0] for _ in range(20)]
    for i in closed:
        big.close_finding(i)
    for i in late:
        big.rereport_finding(i, at=watermark - dt.timedelta(minutes=4))
    changed = len(updated) + len(created) + len(closed) + len(late)

    big.reset_stats()
    second = client.sync(dest, reconcile=True)
    sent = big.stats()["api_requests"]
    assert second.kind == "incremental+reconcile"
    assert second.incremental_requests <= math.ceil(changed / 100) + 3
    assert second.incremental_requests + second.reconcile_requests == sent
    assert (second.created, second.updated, second.removed) == (20, 65, 0)
    assert_equal_to_server(dest, client)

    rows = history(dest)
    versions: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        versions.setdefault(r["id_int"], []).append(r)
    assert len(rows) == SEEDED + 20 + 65
    assert {k for k, v in versions.items() if len(v) == 2} == set(updated + closed + late)
    assert all(len(v) == 1 for k, v in versions.items() if k not in set(updated + closed + late))
    assert set(created) <= set(versions)
    current = {k: [r for r in v if r["valid_to"] is None] for k, v in versions.items()}
    assert all(len(v) == 1 for v in current.values())
    local = table_rows(dest)
    for k, (row,) in current.items():
        assert {c: row[c] for c in local[k]} == local[k]
    for k in updated + closed + late:
        old = next(r for r in versions[k] if r["valid_to"] is not None)
        assert old["valid_to"] == current[k][0]["valid_from"]
    new_mark = _aware(state(dest)["watermark"] + "+00:00")
    assert new_mark == max(_aware(r["last_reported_time"] + "+00:00") for r in local.values())
    assert new_mark > watermark


def test_an_unchanged_server_writes_no_version(profiled_emulator: Emulator, tmp_path: Any) -> None:
    client = profiled_emulator.client()
    dest = str(tmp_path / "f.duckdb")
    client.sync(dest)
    profiled_emulator.reset_stats()
    again = client.sync(dest, reconcile=True)
    assert (again.created, again.updated, again.removed) == (0, 0, 0)
    assert again.rows_read >= profiled_emulator.findings  # the reconcile read everything
    assert len(history(dest)) == profiled_emulator.findings
    runs = fetch(dest, "SELECT kind, status FROM sync_runs ORDER BY started_at")
    assert [(r["kind"], r["status"]) for r in runs] == [("first", "ok"), ("incremental+reconcile", "ok")]


def test_an_incremental_run_alone_misses_a_bare_status_change_until_the_reconcile(
    emulator: Emulator, tmp_path: Any
) -> None:
    """Documented: a status change does not move last_reported_time, so only the reconcile (or
    the watch's events) finds it."""
    client = emulator.client()
    dest = str(tmp_path / "f.duckdb")
    client.sync(dest)
    rng = random.Random(3)
    mark = _aware(state(dest)["watermark"] + "+00:00")
    (target,) = open_ids(client, 1, rng, mark - dt.timedelta(hours=1))
    emulator.close_finding(target)
    quick = client.sync(dest)
    assert quick.kind == "incremental"
    assert quick.updated == 0
    assert table_rows(dest)[target]["actual_status_category"] == "OPEN"
    full = client.sync(dest, reconcile=True)
    assert full.updated == 1
    assert table_rows(dest)[target]["actual_status_category"] == "FIXED"


def test_removed_findings_leave_the_table_and_close_their_version(
    profiled_emulator: Emulator, dest: str
) -> None:
    client = profiled_emulator.client()
    client.sync(dest)
    gone = [5, 17, profiled_emulator.findings]  # the last one too: the walk's final chunk has no upper bound
    for i in gone:
        profiled_emulator.remove_finding(i)
    result = client.sync(dest, reconcile=True)
    assert result.removed == 3
    assert not set(gone) & set(table_rows(dest))
    closed = [r for r in history(dest) if r["id_int"] in gone]
    assert len(closed) == 3
    assert all(r["valid_to"] is not None for r in closed)
    assert_equal_to_server(dest, client)


def test_a_reconcile_is_due_after_reconcile_every(profiled_emulator: Emulator, tmp_path: Any) -> None:
    client = profiled_emulator.client()
    dest = str(tmp_path / "f.duckdb")
    client.sync(dest)
    assert client.sync(dest).kind == "incremental"
    assert client.sync(dest, reconcile_every=0).kind == "incremental+reconcile"
    assert client.sync(dest, reconcile=False, reconcile_every=0).kind == "incremental"


def test_a_server_that_cannot_sort_by_last_reported_time_reconciles_every_run(
    profiled_emulator: Emulator, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import secfindings.sync._engine as engine

    monkeypatch.setattr(engine, "_by_time", lambda schema: False)
    client = profiled_emulator.client()
    dest = str(tmp_path / "f.duckdb")
    first = client.sync(dest)
    profiled_emulator.create_finding(severity=2)
    again = client.sync(dest)
    assert again.kind == "reconcile"
    assert again.created == 1
    assert again.incremental_requests == 0
    # no newest-time request; the first load walks by id in aliased batches of 10 pages (issue
    # 37), after the offset probe
    assert first.reconcile_requests == math.ceil(profiled_emulator.findings / 1000) + 1
    assert_equal_to_server(dest, client)


def test_the_async_client_syncs_the_same(profiled_emulator: Emulator, tmp_path: Any) -> None:
    import asyncio

    dest = str(tmp_path / "f.duckdb")

    async def main() -> Any:
        async with profiled_emulator.async_client() as client:
            return await client.sync(dest)

    result = asyncio.run(main())
    assert result.created == profiled_emulator.findings
    assert_equal_to_server(dest, profiled_emulator.client())


def test_a_different_selection_is_refused_with_a_clear_error(emulator: Emulator, tmp_path: Any) -> None:
    client = emulator.client()
    dest = str(tmp_path / "f.duckdb")
    client.sync(dest, fields="id_int title severity")
    with pytest.raises(secfindings.ConfigurationError, match="fields='id_int title severity"):
        client.sync(dest)
    # The fields the sync needs are added to a selection of the caller's.
    assert set(table_rows(dest)[1]) == {"id_int", "title", "severity", "last_reported_time"}


def test_other_collections_are_snapshots_with_history(profiled_emulator: Emulator, dest: str) -> None:
    client = profiled_emulator.client()
    first = client.sync(dest, collections="all")
    assert set(first.collections) == set(secfindings.sync.COLLECTIONS)

    def server(name: str) -> dict[Any, dict[str, Any]]:
        rows = getattr(client, name)(fields="*").to_arrow().to_pylist()
        return {r["id"]: {column_name(k): _norm(v) for k, v in r.items()} for r in rows}

    def local(name: str) -> dict[Any, dict[str, Any]]:
        return {r["id"]: r for r in fetch(dest, f"SELECT * FROM {name}")}

    for name in secfindings.sync.COLLECTIONS:
        assert local(name) == server(name), name
        assert first.collections[name].created == len(server(name))
    rules = sorted(server("scoring_rules"), key=str)
    client.delete_scoring_rule(server("scoring_rules")[rules[0]]["id_int"])
    client.add_sla_group("Crown jewels", description="payment systems", priority=1)
    again = client.sync(dest, collections=["scoring_rules", "sla_groups"])
    assert set(again.collections) == {"scoring_rules", "sla_groups"}
    assert again.collections["scoring_rules"].removed == 1
    assert again.collections["sla_groups"].created == 1
    assert local("scoring_rules") == server("scoring_rules")
    assert local("sla_groups") == server("sla_groups")
    closed = [r for r in fetch(dest, "SELECT * FROM scoring_rules_history") if r["valid_to"] is not None]
    assert [r["id"] for r in closed] == [rules[0]]
    with pytest.raises(secfindings.ValidationError, match="did you mean 'sla_groups'"):
        client.sync(dest, collections=["sla_group"])


def test_cancelling_the_async_sync_rolls_the_run_back(tmp_path: Any) -> None:
    import asyncio

    dest = str(tmp_path / "f.duckdb")
    with Emulator(findings=3_000, seed=2) as emu:

        async def main() -> None:
            async with emu.async_client() as client:
                loop = asyncio.get_running_loop()
                task: asyncio.Task[Any] | None = None

                def progress(info: dict[str, Any]) -> None:
                    if info["pages"] == 3 and task is not None:
                        loop.call_soon_threadsafe(task.cancel)

                task = asyncio.ensure_future(client.sync(dest, progress=progress))
                with pytest.raises(asyncio.CancelledError):
                    await task
                assert state(dest).get("last_full_reconcile") is None
                assert not fetch(dest, "SELECT * FROM sync_runs WHERE status = 'ok'")
                result = await client.sync(dest)
                assert result.created == 3_000

        asyncio.run(main())
        assert_equal_to_server(dest, emu.client())


def test_the_plain_progress_line_counts_in_words(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`secfindings sync` printed "sync: 100 findings, 1 pages" (its first page) beside the
    summary's "5000 read": now "1 page", and "so far" says it is not the total."""
    import secfindings.sync as sync_module
    from secfindings.sync import _progress

    monkeypatch.setattr(sync_module.time, "monotonic", lambda: 1000.0)  # a line is due
    on_page = _progress(True)
    assert on_page is not None
    on_page(100)
    assert capsys.readouterr().err == "sync: 100 findings, 1 page so far\n"


def test_the_summary_says_1_request() -> None:
    """An incremental run of one request printed "1 requests (1 incremental, 0 reconcile)"."""
    from secfindings.sync import SyncResult

    result = SyncResult("duckdb:///one.duckdb", "findings", "incremental", incremental_requests=1)
    assert ", 1 request (1 incremental, 0 reconcile), " in result.summary()
