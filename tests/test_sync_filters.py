"""A sync of the findings that match a filter (``filters=``; ``sync --severity/--status/--filter``,
issue 31): the table holds exactly those findings. Full loads and reconciles send the filter to
the server; incremental runs read the changes unfiltered and judge each changed finding (on its
row where the row can tell, else by asking the server), so a finding that leaves the filter
leaves the table, its version closed. A destination synced with another filter (or none) is
refused, one line, exit 2, naming --reconcile, which loads it again under the new one.

Each case runs for DuckDB, SQLite and PostgreSQL and on both emulator profiles (on "known" the
rows have no severity: the changed findings are judged by the server)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from tests.test_sync import (
    DATABASES,
    fetch,
    history,
    make_dest,
    pg,  # noqa: F401 (the session's PostgreSQL server, a fixture)
    state,
    table_rows,
)
from tests.test_sync_hostile import FIELDS, FindingsServer, node, serve  # noqa: F401 (serve: a fixture)

import secfindings
import secfindings.sync as sync_module
from secfindings.cli import main
from secfindings.errors import ConfigurationError
from secfindings.filters import field
from secfindings.sync._dest import connect, parse_destination
from secfindings.sync._engine import FINDINGS, Engine
from secfindings.sync._source import ClientSource
from secfindings.testing import Emulator

OPEN = {
    "field": "actual_status",
    "condition": "",
    "value": {"field": "category", "condition": "in", "value": ["OPEN"]},
}
CRITICAL = {"field": "severity", "condition": "in", "value": ["5"]}


@pytest.fixture
def emu(profile: str) -> Iterator[Emulator]:
    with Emulator(findings=300, seed=7, profile=profile) as e:
        yield e


@pytest.fixture(params=DATABASES)
def dest(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return make_dest(request.param, tmp_path, request)


def matching(client: secfindings.Client, tree: Any) -> set[int]:
    """The ids the server says match (the truth the table must equal)."""
    return {int(r.id_int) for r in client.findings_view(fields="id_int", filters=tree).to_list()}


def env(emu: Emulator) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emu.create_api_token(),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
    }


def open_versions(dest: str, ident: int) -> int:
    return len([r for r in history(dest) if r["id_int"] == ident and r["valid_to"] is None])


def test_a_finding_fixed_between_runs_leaves_a_status_open_table(emu: Emulator, dest: str) -> None:
    client = emu.client()
    first = client.sync(dest, filters=OPEN)
    assert set(table_rows(dest)) == matching(client, OPEN)
    assert 0 < first.created < emu.findings  # the filter went to the server
    reported, bare = sorted(table_rows(dest))[3:5]
    # Fixed and reported again: the incremental run reads it (unfiltered) and sees it left.
    emu.update_finding(reported, status="FIXED")
    emu.rereport_finding(reported)
    quick = client.sync(dest, filters=OPEN)
    assert quick.kind == "incremental"
    assert quick.removed == 1
    assert reported not in table_rows(dest)
    assert open_versions(dest, reported) == 0
    assert len([r for r in history(dest) if r["id_int"] == reported]) == 1  # closed, kept
    # Fixed without a new report: only a reconcile can see it; it asks the server (filtered)
    # and removes what the filter no longer lists.
    emu.update_finding(bare, status="FIXED")
    full = client.sync(dest, filters=OPEN, reconcile=True)
    assert full.removed == 1
    assert set(table_rows(dest)) == matching(client, OPEN)
    assert open_versions(dest, bare) == 0


def test_a_new_critical_enters_a_severity_critical_table(emu: Emulator, dest: str) -> None:
    client = emu.client()
    client.sync(dest, filters=CRITICAL)
    assert set(table_rows(dest)) == matching(client, CRITICAL)
    new_critical, _ = emu.create_finding(severity=5)
    new_low, _ = emu.create_finding(severity=2)
    low = min(set(range(1, emu.findings + 1)) - matching(client, CRITICAL))
    emu.update_finding(low, severity=5)  # raised to critical and reported again: it enters
    emu.rereport_finding(low)
    run = client.sync(dest, filters=CRITICAL)
    assert run.kind == "incremental"
    rows = table_rows(dest)
    assert new_critical in rows
    assert low in rows
    assert new_low not in rows
    assert run.created == 2
    assert set(rows) == matching(client, CRITICAL)
    assert open_versions(dest, low) == 1


@pytest.mark.reliability_input
def test_a_changed_filter_is_refused_with_one_line_naming_reconcile(emu: Emulator, dest: str) -> None:
    client = emu.client()
    client.sync(dest, filters=OPEN)
    assert json.loads(state(dest)["filters"]) == OPEN
    before = table_rows(dest)
    for other in (None, CRITICAL, field("severity").in_(["4"])):
        with pytest.raises(ConfigurationError, match=r"was synced with the filter .*--reconcile"):
            client.sync(dest, filters=other)
    result = CliRunner().invoke(main, ["sync", dest, "--no-progress", "--severity", "critical"], env=env(emu))
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: "), result.output
    assert result.output.count("\n") == 1, result.output
    assert "--reconcile" in result.output
    assert table_rows(dest) == before  # nothing written
    # --reconcile loads it again under the new filter: rows that left are removed, history kept.
    again = CliRunner().invoke(
        main, ["sync", dest, "--no-progress", "--severity", "critical", "--reconcile"], env=env(emu)
    )
    assert again.exit_code == 0, again.output
    assert set(table_rows(dest)) == matching(client, CRITICAL)
    assert json.loads(state(dest)["filters"]) == CRITICAL
    # The same filter again, by its plain words: accepted, nothing changes.
    same = CliRunner().invoke(main, ["sync", dest, "--no-progress", "--severity", "5"], env=env(emu))
    assert same.exit_code == 0, same.output
    assert " 0 created, 0 updated, 0 removed" in same.output


def test_the_same_filter_in_another_order_is_the_same_filter(emu: Emulator, tmp_path: Path) -> None:
    """`sync --status open --severity critical,high`, then the same with `high,critical` (or
    the options swapped, or `4,5`) was refused as another filter (exit 2): the order of an `in`
    list's values or of an `and`'s operands says nothing."""
    dest = str(tmp_path / "open.duckdb")
    runs = [
        ["--status", "open", "--severity", "critical,high"],
        ["--severity", "high,critical", "--status", "open"],
        ["--severity", "4,5", "--status", "OPEN"],
    ]
    for args in runs:
        result = CliRunner().invoke(main, ["sync", dest, "--no-progress", *args], env=env(emu))
        assert result.exit_code == 0, (args, result.output)
    client = emu.client()
    high_or_critical = field("severity").in_(["4", "5"])
    open_ = field("actual_status").where(field("category").in_(["OPEN"]))
    assert client.sync(dest, filters=open_ & high_or_critical).removed == 0
    with pytest.raises(ConfigurationError, match="--reconcile"):  # another filter is still refused
        client.sync(dest, filters=open_ & field("severity").in_(["5"]))


@pytest.mark.reliability_input
def test_a_destination_synced_without_a_filter_refuses_one(emu: Emulator, dest: str) -> None:
    client = emu.client()
    client.sync(dest)
    assert state(dest)["filters"] is None
    result = CliRunner().invoke(main, ["sync", dest, "--no-progress", "--status", "open"], env=env(emu))
    assert result.exit_code == 2, result.output
    assert "was synced with no filter (every finding)" in result.output
    assert result.output.count("\n") == 1


def test_a_sync_state_made_before_filters_gains_the_column(emulator: Emulator, tmp_path: Any) -> None:
    """A destination of an earlier version (sync_state without ``filters``) syncs on: it had
    every finding, so it refuses a filter and takes none."""
    duckdb = pytest.importorskip("duckdb")

    dest = str(tmp_path / "old.duckdb")
    client = emulator.client()
    client.sync(dest)
    con = duckdb.connect(dest)
    con.execute("ALTER TABLE sync_state DROP COLUMN filters")
    con.close()
    assert "filters" not in state(dest)
    assert client.sync(dest).kind == "incremental"
    assert state(dest)["filters"] is None
    with pytest.raises(ConfigurationError, match="no filter"):
        client.sync(dest, filters=OPEN)


def test_an_incremental_run_asks_the_server_only_where_rows_cannot_tell(emu: Emulator, tmp_path: Any) -> None:
    """With the status on the rows the changed findings are judged locally (no request); with a
    selection that lacks the filter's columns the server is asked, one request a page of ids."""
    client = emu.client()
    with_status = str(tmp_path / "a.duckdb")
    without = str(tmp_path / "b.duckdb")
    client.sync(with_status, filters=OPEN)
    client.sync(without, filters=OPEN, fields="id_int title")
    target = sorted(matching(client, OPEN))[0]
    emu.update_finding(target, status="FIXED")
    emu.rereport_finding(target)
    emu.clear_request_log()
    local = client.sync(with_status, filters=OPEN)
    assert local.removed == 1
    assert judgements(emu) == 0
    emu.clear_request_log()
    lean = client.sync(without, filters=OPEN, fields="id_int title")
    assert lean.removed == 1
    assert judgements(emu) == 1
    assert target not in table_rows(without)
    assert target not in table_rows(with_status)


def judgements(emu: Emulator) -> int:
    """Requests that asked the server which ids match the filter (the filter AND id in [...])."""
    n = 0
    for r in emu.request_log():
        config = (r.get("variables") or {}).get("filters_config") or {}
        tree = json.loads(config.get("filtersjson") or "{}")
        operands = [json.loads(o) if isinstance(o, str) else o for o in tree.get("operands", [])]
        if OPEN in operands and any(o.get("field") == "id" and o.get("condition") == "in" for o in operands):
            n += 1
    return n


@pytest.mark.reliability_hostile
def test_a_watch_event_for_a_finding_that_left_the_filter_removes_it(
    emulator: Emulator, tmp_path: Any
) -> None:
    """The watch's answer to events (findings fetched by id) asks within the filter: a finding
    fixed without a new report is removed at once, its version closed."""
    client = emulator.client()
    dest = str(tmp_path / "w.duckdb")
    client.sync(dest, filters=OPEN)
    target = sorted(table_rows(dest))[0]
    emulator.update_finding(target, status="FIXED")
    options = sync_module._options("analyst", 900, None, 86400, 100, None, filters=OPEN)
    backend = connect(parse_destination(dest))
    try:
        result = Engine(backend, ClientSource(client), options, FINDINGS).run_ids([target])
    finally:
        backend.close()
    assert result.removed == 1
    assert target not in table_rows(dest)
    assert open_versions(dest, target) == 0
    assert json.loads(fetch(dest, "SELECT filters FROM sync_state")[0]["filters"]) == OPEN


def test_the_guides_refusal_is_what_the_command_prints(
    emulator: Emulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """printed: sync-filter-refused (docs/guides/sync.md shows this run's output)."""
    guide = (Path(__file__).resolve().parents[1] / "docs" / "guides" / "sync.md").read_text(encoding="utf-8")
    shown = guide.split("<!-- printed: sync-filter-refused -->\n```text\n", 1)[1].split("```", 1)[0]
    lines = shown.splitlines()
    assert lines[:3] == [
        "$ secfindings sync open.duckdb --status open",
        "...",
        "$ secfindings sync open.duckdb",
    ]
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    first = runner.invoke(
        main, ["sync", "open.duckdb", "--status", "open", "--no-progress"], env=env(emulator)
    )
    assert first.exit_code == 0, first.output
    again = runner.invoke(main, ["sync", "open.duckdb", "--no-progress"], env=env(emulator))
    assert again.exit_code == 2
    assert again.output.splitlines() == lines[3:]


@pytest.mark.reliability_input
def test_a_filter_the_server_cannot_match_is_exit_2_and_binds_nothing(emu: Emulator, tmp_path: Path) -> None:
    """A misspelt status or a severity by name is refused in one line before any row is written;
    the destination is not bound to it (the next run, with a good filter, loads)."""
    dest = str(tmp_path / "f.duckdb")
    for bad in (
        ["--status", "opne"],
        ["--filter", '{"field": "severity", "condition": "in", "value": ["critical"]}'],
    ):
        result = CliRunner().invoke(main, ["sync", dest, "--no-progress", *bad], env=env(emu))
        assert result.exit_code == 2, result.output
        assert result.output.splitlines()[-1].startswith("error: filter field")
        assert "Traceback" not in result.output
    assert not Path(dest).exists() or state(dest) == {}  # refused before the file is made
    good = CliRunner().invoke(main, ["sync", dest, "--no-progress", "--status", "open"], env=env(emu))
    assert good.exit_code == 0, good.output
    assert set(table_rows(dest)) == matching(emu.client(), OPEN)


def test_the_async_client_syncs_a_filter_the_same(emu: Emulator, tmp_path: Path) -> None:
    dest = str(tmp_path / "f.duckdb")
    target = sorted(matching(emu.client(), CRITICAL))[0]

    async def run() -> Any:
        async with emu.async_client() as client:
            first = await client.sync(dest, filters=CRITICAL)
            emu.update_finding(target, severity=2)
            emu.rereport_finding(target)
            return first, await client.sync(dest, filters=CRITICAL)

    first, second = asyncio.run(run())
    assert first.created == len(matching(emu.client(), CRITICAL)) + 1
    assert second.removed == 1
    assert set(table_rows(dest)) == matching(emu.client(), CRITICAL)


def _without_title(tree: Any) -> Any:
    """The filter tree with every leaf on ``title`` taken out (what a lying server ignores)."""
    tree = json.loads(tree) if isinstance(tree, str) else tree
    if isinstance(tree, dict) and "operands" in tree:
        kept = [_without_title(o) for o in tree["operands"]]
        kept = [o for o in kept if o is not None]
        return None if not kept else kept[0] if len(kept) == 1 else {**tree, "operands": kept}
    if isinstance(tree, dict) and tree.get("field") == "title":
        return None
    return tree


class IgnoresTitle(FindingsServer):
    """A findings server that ignores filters on ``title`` (answers as if they were not there)."""

    def api(self, req: Any) -> Any:
        body = json.loads(req.body)
        config = body.get("variables", {}).get("filters_config")
        if config and config.get("filtersjson") is not None:
            tree = _without_title(config["filtersjson"])
            if tree is None:
                del body["variables"]["filters_config"]
            else:
                config["filtersjson"] = json.dumps(tree)
        return super().api(dataclasses.replace(req, body=json.dumps(body).encode()))


@pytest.mark.reliability_hostile
def test_a_server_that_ignores_the_filter_does_not_fill_the_table(serve: Any, dest: str) -> None:  # noqa: F811
    """The rows that can be seen not to match are dropped (their column is in the table): 60
    rows of 120, not 120; an incremental run over the same lie keeps it so."""
    rows = [{**node(n), "title": "keep" if n % 2 == 0 else "drop"} for n in range(1, 121)]
    client = serve(IgnoresTitle(rows))
    wanted = {"field": "title", "condition": "in", "value": ["keep"]}
    first = client.sync(dest, fields=FIELDS, filters=wanted)
    assert first.created == 60
    assert sorted(table_rows(dest)) == list(range(2, 121, 2))
    rows.append({**node(121, minute=10_000), "title": "drop"})
    rows.append({**node(122, minute=10_000), "title": "keep"})
    second = client.sync(dest, fields=FIELDS, filters=wanted)
    assert second.created == 1
    assert sorted(table_rows(dest)) == list(range(2, 123, 2))


def test_a_dry_run_counts_the_filter_and_refuses_another(emu: Emulator, tmp_path: Path) -> None:
    dest = str(tmp_path / "f.duckdb")
    count = len(matching(emu.client(), OPEN))
    plan = CliRunner().invoke(main, ["sync", dest, "--status", "open", "--dry-run"], env=env(emu))
    assert plan.exit_code == 0, plan.output
    assert f"  first load: {count} findings," in plan.output
    assert not Path(dest).exists()  # a plan writes nothing
    assert (
        CliRunner().invoke(main, ["sync", dest, "--status", "open", "--no-progress"], env=env(emu)).exit_code
        == 0
    )
    other = CliRunner().invoke(main, ["sync", dest, "--dry-run"], env=env(emu))
    assert other.exit_code == 2
    assert "was synced with the filter" in other.output


def test_a_misspelt_status_is_named_before_the_kept_filter_is_compared(emu: Emulator, tmp_path: Path) -> None:
    """`sync EXISTING --status opn` was refused as another filter, naming --reconcile, which then
    failed on the value: the value is checked against the server's schema first."""
    dest = str(tmp_path / "f.duckdb")
    emu.client().sync(dest, filters=OPEN)
    for extra in ([], ["--reconcile"], ["--dry-run"]):
        result = CliRunner().invoke(
            main, ["sync", dest, "--no-progress", "--status", "opn", *extra], env=env(emu)
        )
        assert result.exit_code == 2, result.output
        assert result.output.count("\n") == 1, result.output
        assert "OPN" in result.output or "opn" in result.output, result.output
        assert "--reconcile" not in result.output, result.output
        assert "OPEN" in result.output, result.output  # the did-you-mean
