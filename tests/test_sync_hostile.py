"""A sync against servers and destinations that misbehave (issue 31): duplicates, a walk by id
out of order, times in the future, values a database cannot take as they are, files that are
not databases, tables that are not ours, a database that is down. Each for DuckDB, SQLite and
PostgreSQL where it applies. The misbehaving findings server is the tests' own (below); the
rest runs against the emulator."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.servers import http as hostile
from tests.servers.http import HostileServer, Response
from tests.test_sync import (
    DATABASES,
    assert_equal_to_server,
    fetch,
    history,
    make_dest,
    pg,  # noqa: F401 (the session's PostgreSQL server, a fixture)
    state,
    table_rows,
)

import secfindings
import secfindings.sync._dest as dest_module
import secfindings.sync._engine as engine
from secfindings.cli import main
from secfindings.testing import Emulator

T0 = dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc)
FIELDS = "id_int title last_reported_time"


def node(n: int, minute: int | None = None, title: str | None = None) -> dict[str, Any]:
    return {
        "id_int": n,
        "title": title if title is not None else f"finding {n}",
        "last_reported_time": (T0 + dt.timedelta(minutes=n if minute is None else minute)).isoformat(),
    }


def _keep(row: dict[str, Any], tree: dict[str, Any] | None) -> bool:
    if tree is None:
        return True
    if "operator" in tree:
        results = [_keep(row, json.loads(o) if isinstance(o, str) else o) for o in tree["operands"]]
        return all(results) if tree["operator"] == "and" else any(results)
    name, cond, value = tree["field"], tree["condition"], tree["value"]
    have = row["id_int"] if name == "id" else row[name]
    if name == "last_reported_time":
        have, value = dt.datetime.fromisoformat(have), dt.datetime.fromisoformat(value)
    if cond == "gt":
        return bool(have > value)
    if cond == "gte":
        return bool(have >= value)
    if cond == "lte":
        return bool(have <= value)
    if cond == "in":
        return str(have) in [str(v) for v in value]
    raise AssertionError(f"the fake does not know {cond}")


def _ranged(tree: Any) -> bool:
    """Whether a filter tree has a range condition (gt, gte, lt, lte) anywhere."""
    if isinstance(tree, str):
        tree = json.loads(tree)
    if not isinstance(tree, dict):
        return False
    if "operands" in tree:
        return any(_ranged(o) for o in tree["operands"])
    return tree.get("condition") in ("gt", "gte", "lt", "lte")


class FindingsServer:
    """``findings_view`` over a list of rows: filters (id gt/in, last_reported_time gte), the
    sort asked for, first/after as offsets. ``order`` may replace the rows of an ID_ASC walk
    (another order, duplicates); ``fail_at`` makes the n-th page request of an ID_ASC walk
    from its start (and every one after it) answer 500."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.rows = rows
        self.order: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] | None = None
        self.fail_at: int | None = None
        self.id_pages = 0
        #: False: a facts-only server (a range condition is an error); ``ignore_sort``: it
        #: answers in id order whatever sort it is asked for.
        self.ranges = True
        self.ignore_sort = False

    def api(self, req: Any) -> Response:
        body = json.loads(req.body)
        variables = body["variables"]
        if str(body.get("operationName") or "").startswith("probe_"):
            return self.probe(variables, str(body.get("query") or ""))
        config = variables.get("filters_config") or {}
        tree = config.get("filtersjson")
        tree = json.loads(tree) if isinstance(tree, str) else tree
        if not self.ranges and _ranged(tree):
            return Response.of_json({"errors": [{"message": "Unknown filter condition"}]}, status=400)
        sort = variables.get("sort") or ["ID_ASC"]
        sort = sort[0] if isinstance(sort, list) else sort
        if self.ignore_sort:
            sort = "ID_ASC"
        key = "last_reported_time" if sort.startswith("LAST_REPORTED_TIME") else "id_int"
        rows = [r for r in self.rows if _keep(r, tree)]
        if key == "last_reported_time":
            rows.sort(
                key=lambda r: (dt.datetime.fromisoformat(r[key]), r["id_int"]), reverse=sort.endswith("DESC")
            )
        else:
            unique = {r["id_int"]: r for r in rows}
            rows = sorted(unique.values(), key=lambda r: int(r["id_int"]), reverse=sort.endswith("DESC"))
            lookup = tree is not None and tree.get("condition") == "in"  # a request by ids
            if sort == "ID_ASC" and not lookup:
                if self.order is not None:
                    rows = self.order(rows)
                self.id_pages += 1
                if self.fail_at is not None and self.id_pages >= self.fail_at:
                    return Response.of_json({"errors": [{"message": "boom"}]}, status=500)
        start = int(variables.get("after") or 0)
        chunk = rows[start : start + int(variables["first"])]
        edges = [{"cursor": str(start + i + 1), "node": n} for i, n in enumerate(chunk)]
        info = {"hasNextPage": start + len(chunk) < len(rows), "endCursor": str(start + len(chunk))}
        return Response.of_json({"data": {"findings_view": {"edges": edges, "pageInfo": info}}})

    def probe(self, variables: dict[str, Any], query: str) -> Response:
        """The walk plan's probes: aliased ``first: 1`` walks, one per filter, and the one
        without a filter (``any``) that a real server answers too."""
        data = {}
        if " any: findings_view(" in query:
            data["any"] = {"edges": [{"node": {"id_int": r["id_int"]}} for r in list(self.rows)[:1]]}
        for alias, config in variables.items():
            tree = json.loads(config["filtersjson"])
            if not self.ranges and _ranged(tree):
                return Response.of_json({"errors": [{"message": "Unknown filter condition"}]}, status=400)
            rows = [r for r in self.rows if _keep(r, tree)][:1]
            data[alias] = {"edges": [{"node": {"id_int": r["id_int"]}} for r in rows]}
        return Response.of_json({"data": data})


@pytest.fixture
def serve() -> Iterator[Callable[[FindingsServer], secfindings.Client]]:
    """Serves a FindingsServer; gives a client of it (the built-in schema, no retries)."""
    with HostileServer() as server:
        clients: list[secfindings.Client] = []

        def start(store: FindingsServer) -> secfindings.Client:
            server.api = store.api
            c = hostile.client(server, schema="builtin")
            clients.append(c)
            return c

        yield start
        for c in clients:
            c.close()


@pytest.fixture(params=DATABASES)
def dest(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return make_dest(request.param, tmp_path, request)


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every 2 pages a commit (so that a run can fail between two chunks)."""
    monkeypatch.setattr(engine, "CHUNK_PAGES", 2)
    monkeypatch.setattr(dest_module.DuckDB, "chunk_pages", None)


def local_ids(dest: str) -> list[int]:
    return sorted(r["id_int"] for r in fetch(dest, "SELECT id_int FROM findings"))


# ------------------------------------------------------------------------------ duplicates


def test_a_finding_listed_twice_is_one_row_with_one_version(serve: Any, dest: str) -> None:
    """A first page that lists an id twice, and a page that starts with the last id of the one
    before: one row and one open version each (DuckDB had two of each; SQLite and PostgreSQL
    refused the whole load)."""
    rows = [node(n) for n in range(1, 121)]

    def twice(walk: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = [walk[0], *walk]  # id 1 twice on the first page
        return [*out[:50], out[49], *out[50:]]  # page 2 starts with page 1's last id

    store = FindingsServer(rows)
    store.order = twice
    client = serve(store)
    first = client.sync(dest, fields=FIELDS, page_size=50)
    assert first.created == 120
    assert local_ids(dest) == list(range(1, 121))
    versions = history(dest)
    assert sorted(r["id_int"] for r in versions) == list(range(1, 121))
    assert all(r["valid_to"] is None for r in versions)
    # A reconcile over the same listing: nothing changes, nothing doubles.
    again = client.sync(dest, fields=FIELDS, page_size=50, reconcile=True)
    assert (again.created, again.updated, again.removed) == (0, 0, 0)
    assert len(history(dest)) == 120


def test_an_incremental_walk_that_lists_a_finding_twice_writes_one_version(serve: Any, dest: str) -> None:
    rows = [node(n) for n in range(1, 41)]
    store = FindingsServer(rows)
    client = serve(store)
    client.sync(dest, fields=FIELDS, page_size=10)
    # Finding 3 reported again, and listed twice by the time walk.
    rows[2] = node(3, minute=100, title="changed")
    rows.append(node(3, minute=100, title="changed"))
    result = client.sync(dest, fields=FIELDS, page_size=10)
    assert result.kind == "incremental"
    assert (result.created, result.updated) == (0, 1)
    assert local_ids(dest) == list(range(1, 41))
    assert len([r for r in history(dest) if r["id_int"] == 3]) == 2


# ------------------------------------------------------------------------------ order


def test_a_walk_by_id_out_of_order_that_fails_leaves_no_id_behind_the_checkpoint(
    serve: Any, dest: str, small_chunks: None
) -> None:
    """The server answers ID_ASC in another order and fails after the first chunk: the rerun
    (the server in order again) must still bring every finding, not start past the last id of
    that chunk."""
    rows = [node(n) for n in range(1, 101)]
    store = FindingsServer(rows)
    store.order = lambda walk: random.Random(4).sample(walk, len(walk))
    store.fail_at = 3  # pages 1 and 2 (one chunk) are answered, then 500s
    client = serve(store)
    with pytest.raises(secfindings.APIStatusError):
        client.sync(dest, fields=FIELDS, page_size=10)
    assert len(local_ids(dest)) == 20  # the chunk was committed
    assert state(dest)["reconcile_after_id"] is None  # but not a checkpoint past ids unseen
    store.order, store.fail_at = None, None
    again = client.sync(dest, fields=FIELDS, page_size=10)
    assert again.kind == "first"
    assert local_ids(dest) == list(range(1, 101))
    assert len(history(dest)) == 100


def test_a_walk_by_id_out_of_order_still_completes_and_says_so(
    serve: Any, dest: str, small_chunks: None
) -> None:
    rows = [node(n) for n in range(1, 101)]
    store = FindingsServer(rows)
    client = serve(store)
    client.sync(dest, fields=FIELDS, page_size=10)
    del rows[40]  # finding 41 leaves
    store.order = lambda walk: list(reversed(walk))
    result = client.sync(dest, fields=FIELDS, page_size=10, reconcile=True)
    assert result.removed == 1
    assert any("did not answer the walk by id (ID_ASC) in id order" in w for w in result.warnings)
    assert local_ids(dest) == [n for n in range(1, 101) if n != 41]
    assert state(dest)["reconcile_after_id"] is None


# ------------------------------------------------------------------------------ the future


def test_a_finding_far_in_the_future_does_not_move_the_watermark(serve: Any, dest: str) -> None:
    rows = [node(n) for n in range(1, 31)]
    rows[6] = {**node(7), "last_reported_time": "9999-12-31T00:00:00+00:00"}
    store = FindingsServer(rows)
    client = serve(store)
    first = client.sync(dest, fields=FIELDS, page_size=10)
    assert first.watermark == T0 + dt.timedelta(minutes=30)
    assert any("finding 7 " in w and "9999" in w for w in first.warnings)
    # A change after it is still found by the incremental run.
    rows[9] = node(10, minute=200, title="seen again")
    second = client.sync(dest, fields=FIELDS, page_size=10)
    assert second.kind == "incremental"
    assert second.updated == 1
    assert second.watermark == T0 + dt.timedelta(minutes=200)
    assert any("finding 7 " in w for w in second.warnings)
    assert table_rows(dest)[10]["title"] == "seen again"


def test_the_emulator_with_a_finding_in_2100_keeps_the_watermark_at_its_clock(tmp_path: Path) -> None:
    with Emulator(findings=200, seed=3) as emu:
        emu.rereport_finding(5, at="2100-01-01T00:00:00+00:00")
        client = emu.client()
        dest = str(tmp_path / "f.duckdb")
        first = client.sync(dest)
        assert first.watermark is not None
        assert first.watermark <= dt.datetime.now(dt.timezone.utc)
        assert any(w.startswith("finding 5 has last_reported_time 2100-01-01") for w in first.warnings)
        emu.rereport_finding(9)
        second = client.sync(dest)
        assert second.kind == "incremental"
        assert second.updated == 1
        assert_equal_to_server(dest, client)


# ------------------------------------------------------------------------------ values


def test_a_nul_in_a_value_does_not_fail_the_sync(serve: Any, dest: str) -> None:
    """PostgreSQL's text cannot hold NUL: it becomes U+FFFD there; the other two keep it."""
    rows = [{**node(n), "datasource_tags_values": ["a", "b"]} for n in range(1, 11)]
    rows[3] = {**node(4, title="bad\x00title"), "datasource_tags_values": ["ok", "x\x00y", None]}
    client = serve(FindingsServer(rows))
    client.sync(dest, fields=f"{FIELDS} datasource_tags_values")
    row = table_rows(dest)[4]
    on_pg = dest.startswith("postgresql")
    assert row["title"] == ("bad\ufffdtitle" if on_pg else "bad\x00title")
    tags = row["datasource_tags_values"]
    if on_pg:
        assert tags == ["ok", "x\ufffdy", None]
    assert len(table_rows(dest)) == 10
    assert table_rows(dest)[5]["datasource_tags_values"] in (["a", "b"], '["a", "b"]')


def test_a_value_larger_than_duckdbs_memory_limit_syncs(
    serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DuckDB holds a value in one block: a value past the sync's memory limit failed as
    "Current transaction is aborted" (the limit is 128 MB; 16 MB here, with a 20 MB value)."""
    monkeypatch.setattr(dest_module, "DUCKDB_MEMORY_LIMIT", "16MB")
    rows = [node(n) for n in range(1, 6)]
    rows[1] = node(2, title="x" * (20 << 20))
    client = serve(FindingsServer(rows))
    dest = str(tmp_path / "f.duckdb")
    result = client.sync(dest, fields=FIELDS)
    assert result.created == 5
    assert len(table_rows(dest)[2]["title"]) == 20 << 20


# ------------------------------------------------------------------------------ destinations


@pytest.mark.parametrize("scheme", ["duckdb", "sqlite"])
def test_a_fifo_in_place_of_the_file_is_refused_at_once(
    emulator: Emulator, tmp_path: Path, scheme: str
) -> None:
    fifo = tmp_path / "f.db"
    os.mkfifo(fifo)
    target = str(fifo) if scheme == "duckdb" else f"sqlite:///{fifo}"
    got: list[BaseException] = []

    def run() -> None:
        try:
            emulator.client().sync(target)
        except BaseException as exc:
            got.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(60)  # a guard against a hang, not a measure of speed
    if worker.is_alive():  # unblock the driver's open, then fail
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        pytest.fail("the sync blocked on a FIFO")
    assert len(got) == 1
    assert isinstance(got[0], secfindings.ConfigurationError)
    assert "not a regular file" in str(got[0])


@pytest.mark.parametrize(
    "target", ["duckdb:///:memory:", ":memory:", "sqlite:///:memory:", "duckdb:///:memory:x"]
)
def test_an_in_memory_database_is_refused(emulator: Emulator, target: str) -> None:
    emulator.reset_stats()
    with pytest.raises(secfindings.ConfigurationError, match="in-memory database"):
        emulator.client().sync(target)
    assert emulator.stats()["api_requests"] == 0
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    result = CliRunner().invoke(main, ["sync", target, "--no-progress"], env=env)
    assert result.exit_code == 2, result.output
    assert "in-memory database" in result.output


def _execute(dest: str, sql: str) -> None:
    d = secfindings.sync.parse_destination(dest)
    if d.scheme == "duckdb":
        import duckdb

        con = duckdb.connect(d.path)
        con.execute(sql)
        con.close()
        return
    if d.scheme == "sqlite":
        import adbc_driver_sqlite.dbapi as driver
    else:
        import adbc_driver_postgresql.dbapi as driver  # type: ignore[no-redef]
    with driver.connect(d.path if d.scheme == "sqlite" else d.url) as con:
        with con.cursor() as cur:
            cur.execute(sql)
        con.commit()


@pytest.mark.parametrize("table", ["sync_runs", "sync_state"])
def test_a_table_of_someone_elses_under_our_name_is_refused_before_any_row_is_written(
    emulator: Emulator, dest: str, table: str
) -> None:
    _execute(dest, f"CREATE TABLE {table} (id BIGINT, note TEXT)")
    with pytest.raises(secfindings.ConfigurationError, match=f"has a table {table} that a sync did not make"):
        emulator.client().sync(dest)
    assert not _has(dest, "findings")


def _has(dest: str, table: str) -> bool:
    try:
        fetch(dest, f"SELECT 1 FROM {table} LIMIT 1")
    except Exception:
        return False
    return True


# ------------------------------------------------------------------------------ the database fails


def test_a_database_that_is_down_is_a_database_error_and_exit_1(emulator: Emulator) -> None:
    url = "postgresql://me:Pa55w0rd-xyz@127.0.0.1:1/nowhere"
    with pytest.raises(secfindings.sync.DatabaseError) as info:
        emulator.client().sync(url)
    assert "Pa55w0rd" not in str(info.value)
    assert "\n" not in str(info.value)
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    result = CliRunner().invoke(main, ["sync", url, "--no-progress"], env=env)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: DatabaseError: cannot connect to postgresql://me:***@127.0.0.1:1")
    assert result.output.count("\n") == 1
    assert "Pa55w0rd" not in result.output


def test_a_database_error_is_one_line_on_the_command_line(emulator: Emulator, pg: Any) -> None:  # noqa: F811
    url = pg.create_database("readonly")
    _execute(url, "ALTER DATABASE readonly SET default_transaction_read_only = on")
    env = {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }
    result = CliRunner().invoke(main, ["sync", url, "--no-progress"], env=env)
    assert result.exit_code == 1, result.output
    assert result.output.startswith("error: DatabaseError: the database failed:")
    assert "read-only transaction" in result.output
    assert result.output.count("\n") == 1, result.output


@pytest.mark.reliability_hostile
def test_a_server_that_does_not_sort_newest_first_does_not_make_a_run_miss_changes(
    serve: Any, tmp_path: Path
) -> None:
    """On a facts-only server an incremental run reads newest first and stops at the first page
    older than the watermark; a server that answered in id order made it stop on the first page
    and miss a change further on (until the next reconcile). The order is checked."""
    rows = [node(n) for n in range(1, 41)]
    store = FindingsServer(rows)
    store.ranges, store.ignore_sort = False, True
    client = serve(store)
    target = f"duckdb:///{tmp_path / 'f.duckdb'}"
    assert client.sync(target, fields=FIELDS, page_size=10).created == 40
    # The first load's watermark came from a newest-first request the server answered in id
    # order (too old: harmless, the next run reads more); after one incremental run it is right.
    client.sync(target, fields=FIELDS, page_size=10)
    rows[34] = node(35, minute=500, title="changed")  # on the fourth page in id order
    second = client.sync(target, fields=FIELDS, page_size=10)
    assert second.kind == "incremental"
    assert second.updated == 1
    assert table_rows(target)[35]["title"] == "changed"
    rows[24] = node(25, minute=600, title="changed too")  # the third page, after older ones
    third = client.sync(target, fields=FIELDS, page_size=10)
    assert third.kind == "incremental"
    assert third.updated == 1
    assert table_rows(target)[25]["title"] == "changed too"
    assert any("does not answer newest first" in w for w in third.warnings)
