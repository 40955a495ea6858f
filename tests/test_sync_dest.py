"""The sync's destination URL, its optional drivers, secrets, the command line and --watch."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.test_sync import assert_equal_to_server, fetch, pg, table_rows  # noqa: F401 (pg: a fixture)

import secfindings
import secfindings.sync
from secfindings import _plan
from secfindings.cli import main
from secfindings.sync import Destination, parse_destination
from secfindings.testing import Emulator


@pytest.mark.parametrize(
    ("given", "scheme", "where"),
    [
        ("findings.duckdb", "duckdb", "findings.duckdb"),
        ("/var/lib/f.db", "duckdb", "/var/lib/f.db"),
        ("duckdb:///rel/f.db", "duckdb", "rel/f.db"),
        ("duckdb:////abs/f.db", "duckdb", "/abs/f.db"),
        ("DuckDB:////abs/f.db", "duckdb", "/abs/f.db"),
        ("sqlite:///f.sqlite", "sqlite", "f.sqlite"),
        ("sqlite:////tmp/a%20b.sqlite", "sqlite", "/tmp/a b.sqlite"),
        (r"C:\data\f.duckdb", "duckdb", r"C:\data\f.duckdb"),
    ],
)
def test_files_parse_as_sqlalchemy_spells_them(given: str, scheme: str, where: str) -> None:
    d = parse_destination(given)
    assert (d.scheme, d.path) == (scheme, where)
    assert parse_destination(Path("x.db")) == Destination("duckdb", path="x.db")


def test_postgres_urls_keep_their_parts_and_never_show_the_password() -> None:
    for given in ("postgresql://me:s3cr%40t@db:5432/sec", "postgres://me:s3cr%40t@db:5432/sec"):
        d = parse_destination(given)
        assert d.scheme == "postgresql"
        assert d.url == "postgresql://me:s3cr%40t@db:5432/sec"
        assert "s3cr" not in str(d)
        assert "s3cr" not in repr(d)
        assert str(d) == "postgresql://me:***@db:5432/sec"
    q = parse_destination("postgresql://me@db/sec?password=hunter2&sslmode=require")
    assert "hunter2" not in str(q)
    assert "sslmode=require" in str(q)


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ("mysql://me@db/sec", "unsupported destination scheme 'mysql'"),
        ("s3://bucket/f.db", "unsupported destination scheme 's3'"),
        ("", "the destination is empty"),
        ("duckdb://", "duckdb:///relative/path"),
        ("postgresql:///sec", "needs a host"),
    ],
)
def test_bad_destinations_say_what_is_accepted(given: str, needle: str) -> None:
    with pytest.raises(secfindings.ConfigurationError) as info:
        parse_destination(given)
    assert needle in str(info.value)
    if "scheme" in needle:
        assert "sqlite:///" in str(info.value)
        assert "postgresql://" in str(info.value)


def test_a_plain_path_meant_for_sqlite_is_refused_with_the_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`secfindings sync f.sqlite` made a DuckDB file of that name, and `sync f.db` over an
    SQLite file had DuckDB fetch its SQLite extension from extensions.duckdb.org (over http)
    and fail offline; both are now one line naming sqlite:/// (and duckdb:/// for DuckDB)."""
    import sqlite3

    monkeypatch.chdir(tmp_path)
    with sqlite3.connect("f.db") as con:
        con.execute("CREATE TABLE t (x)")
    for given, what in (("f.db", "an SQLite database"), ("new.sqlite", "named as an SQLite file")):
        with pytest.raises(secfindings.ConfigurationError) as info:
            parse_destination(given)
        assert str(info.value) == (
            f"{given!r} is {what}, and a plain path is a DuckDB file: give sqlite:///{given} for "
            f"SQLite (or duckdb:///{given} for DuckDB)"
        )
    assert not (tmp_path / "new.sqlite").exists()
    assert parse_destination("sqlite:///f.db").scheme == "sqlite"
    assert parse_destination("duckdb:///new.sqlite").scheme == "duckdb"
    assert parse_destination("plain.db").scheme == "duckdb"  # .db is DuckDB's as well
    result = CliRunner().invoke(main, ["report", "f.db"])
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1


def test_a_bad_destination_type_is_refused() -> None:
    with pytest.raises(secfindings.ConfigurationError, match="must be a str or a path"):
        parse_destination(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("dest", "module", "extra"),
    [
        ("f.duckdb", "duckdb", "duckdb"),
        ("sqlite:///f.sqlite", "adbc_driver_sqlite", "sqlite"),
        ("postgresql://me@127.0.0.1:1/x", "adbc_driver_postgresql", "postgres"),
    ],
)
def test_a_missing_driver_names_the_extra(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dest: str, module: str, extra: str
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)
    monkeypatch.setitem(sys.modules, f"{module}.dbapi", None)
    with pytest.raises(ImportError, match=rf"pip install 'secfindings\[{extra}\]'"):
        emulator.client().sync(dest)


def test_importing_secfindings_imports_no_database_driver() -> None:
    code = (
        "import sys, secfindings, secfindings.sync\n"
        "bad = [m for m in ('duckdb', 'adbc_driver_manager', 'adbc_driver_sqlite', "
        "'adbc_driver_postgresql', 'psycopg') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_failed_postgres_connection_never_shows_the_password(emulator: Emulator) -> None:
    # A closed loopback port: the driver's error may echo the URL. A server that is down is a
    # failure of the run (DatabaseError), not bad usage.
    with pytest.raises(secfindings.sync.DatabaseError) as info:
        emulator.client().sync("postgresql://me:Pa55w0rd-xyz@127.0.0.1:1/nowhere")
    assert "Pa55w0rd" not in str(info.value)
    assert "***" in str(info.value) or "127.0.0.1" in str(info.value)


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"page_size": 0}, "page_size"),
        ({"page_size": 101}, "page_size"),
        ({"lookback": -1}, "lookback"),
        ({"lookback": "15m"}, "lookback"),
        ({"reconcile": "yes"}, "reconcile"),
        ({"fields": ""}, "fields"),
    ],
)
def test_bad_arguments_fail_before_anything_is_sent(
    emulator: Emulator, tmp_path: Path, kwargs: dict[str, Any], needle: str
) -> None:
    emulator.reset_stats()
    with pytest.raises(secfindings.ValidationError, match=needle):
        emulator.client().sync(str(tmp_path / "f.duckdb"), **kwargs)
    assert emulator.stats()["api_requests"] == 0
    assert not (tmp_path / "f.duckdb").exists()


# ------------------------------------------------------------------------------ command line


def _env(emulator: Emulator) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emulator.create_api_token(),
        "SECFINDINGS_BASE_URL": emulator.base_url,
        "SECFINDINGS_AUTH_URL": emulator.auth_url,
    }


def test_the_command_syncs_and_prints_one_line_per_run(profiled_emulator: Emulator, tmp_path: Path) -> None:
    dest = str(tmp_path / "f.duckdb")
    runner = CliRunner()
    first = runner.invoke(main, ["sync", dest, "--no-progress"], env=_env(profiled_emulator))
    assert first.exit_code == 0, first.output
    assert f"first, {profiled_emulator.findings} read, {profiled_emulator.findings} created" in first.stdout
    profiled_emulator.create_finding(severity=5)
    second = runner.invoke(
        main, ["sync", dest, "--no-progress", "--lookback", "2m"], env=_env(profiled_emulator)
    )
    assert second.exit_code == 0, second.output
    assert "incremental," in second.stdout
    assert "1 created" in second.stdout
    assert_equal_to_server(dest, profiled_emulator.client())
    assert fetch(dest, "SELECT lookback_seconds FROM sync_state")[0]["lookback_seconds"] == 120


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sync", "mysql://x@y/z"], "unsupported destination scheme"),
        (["sync", "f.duckdb", "--lookback", "soon"], "is not a duration"),
        (["sync", "f.duckdb", "--page-size", "500"], "500"),
    ],
)
def test_the_command_refuses_bad_usage_with_exit_2(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], needle: str
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, args, env=_env(emulator))
    assert result.exit_code == 2, result.output
    assert needle in result.output


def test_the_command_never_prints_a_postgres_password(emulator: Emulator) -> None:
    result = CliRunner().invoke(
        main, ["sync", "postgresql://me:Sup3rSecret@127.0.0.1:1/db", "--no-progress"], env=_env(emulator)
    )
    assert result.exit_code == 1, result.output
    assert "Sup3rSecret" not in result.output


# ------------------------------------------------------------------------------ watch


def test_watch_merges_the_findings_named_by_events(emulator: Emulator, tmp_path: Path) -> None:
    """A bare status change does not move last_reported_time, and a removed finding is not
    listed: the watch still has both, from the finding_changed events, with one request for the
    findings they name."""
    import threading

    import secfindings.sync as sync

    client = emulator.client()
    dest = str(tmp_path / "f.duckdb")
    feed = sync.watch(client, dest, interval=30.0, settle=0.2, max_runs=2)
    first = next(feed)
    assert first.kind == "first"
    target = next(k for k, r in sorted(table_rows(dest).items()) if r["actual_status_category"] == "OPEN")
    gone = target + 1

    def change() -> None:
        emulator.close_finding(target)
        emulator.remove_finding(gone)

    timer = threading.Timer(0.3, change)
    timer.start()
    try:
        emulator.reset_stats()
        second = next(feed)
    finally:
        timer.cancel()
    assert second.kind == "events"
    assert second.updated == 1
    assert second.removed == 1
    assert second.incremental_requests == 1
    assert table_rows(dest)[target]["actual_status_category"] == "FIXED"
    assert gone not in table_rows(dest)
    assert list(feed) == []


def test_watch_polls_where_there_are_no_subscriptions(profiled_emulator: Emulator, tmp_path: Path) -> None:
    import secfindings.sync as sync

    client = profiled_emulator.client()
    dest = str(tmp_path / "f.duckdb")
    runs = list(sync.watch(client, dest, interval=0.05, subscribe=False, max_runs=3))
    assert [r.kind for r in runs] == ["first", "incremental", "incremental"]


def test_a_second_sync_into_the_same_postgres_stops_at_once(
    emulator: Emulator,
    pg: Any,  # noqa: F811 (the fixture imported above)
) -> None:
    import adbc_driver_postgresql.dbapi as driver

    from secfindings.sync._dest import ADVISORY_LOCK

    url = pg.create_database("busy")
    other = driver.connect(url, autocommit=True)
    try:
        with other.cursor() as cur:
            cur.execute(f"SELECT pg_advisory_lock({ADVISORY_LOCK})")
            cur.fetchall()
        with pytest.raises(secfindings.sync.SyncBusyError, match="another sync is writing"):
            emulator.client().sync(url)
    finally:
        other.close()
    assert emulator.client().sync(url).created == emulator.findings


# ------------------------------------------------------------------------------ plan


def test_the_plan_says_what_the_next_run_does_and_costs_without_writing(
    emulator: Emulator, tmp_path: Path
) -> None:
    import secfindings.sync as sync

    client = emulator.client()
    dest = str(tmp_path / "f.duckdb")
    first = sync.plan(client, dest)
    assert first.kinds == ["first"]
    assert first.reconcile.rows == emulator.findings
    assert not (tmp_path / "f.duckdb").exists()  # a plan writes nothing
    assert first.requests == client.sync(dest).requests
    for _ in range(30):
        emulator.create_finding(severity=3)
    # The probe of a range on the time (once per server, remembered) is not the plan's to count.
    _plan.capable(client, _plan.time_range("last_reported_time"))
    emulator.reset_stats()
    nxt = sync.plan(client, dest)
    assert emulator.stats()["api_requests"] == 1  # the count of the incremental walk
    assert nxt.kinds == ["incremental"]
    assert nxt.reconcile is None
    emulator.reset_stats()
    ran = client.sync(dest)
    assert ran.incremental_requests == nxt.requests == emulator.stats()["api_requests"]
    assert "incremental + reconcile" in str(sync.plan(client, dest, reconcile=True))


def test_the_command_dry_run_prints_the_plan(profiled_emulator: Emulator, tmp_path: Path) -> None:
    dest = str(tmp_path / "f.duckdb")
    result = CliRunner().invoke(main, ["sync", dest, "--dry-run"], env=_env(profiled_emulator))
    assert result.exit_code == 0, result.output
    assert "first" in result.stdout
    assert f"{profiled_emulator.findings:,} findings" in result.stdout
    assert not (tmp_path / "f.duckdb").exists()


def test_the_plan_of_an_incremental_run_counts_in_words(profiled_emulator: Emulator, tmp_path: Path) -> None:
    """'1 requests' was printed, and a facts-only server's '?' was left unexplained (and the
    plan said it had made one request per part, which it had not)."""
    dest = str(tmp_path / "f.duckdb")
    env = _env(profiled_emulator)
    assert CliRunner().invoke(main, ["sync", dest], env=env).exit_code == 0
    shown = CliRunner().invoke(main, ["sync", dest, "--dry-run"], env=env).stdout
    assert "1 requests" not in shown
    assert "made one per part" not in shown
    if profiled_emulator.profile == "known":
        assert "cannot be counted ahead" in shown
    else:
        assert re.search(r"incremental: [\d,]+ findings?, 1 request\b", shown), shown
