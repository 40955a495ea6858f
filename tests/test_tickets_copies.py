"""``tickets pull`` and ``tickets drift DEST`` on a copy synced with a filter (the sync guide's
"open criticals"), as a new user runs them from the remediation guide: the pull keeps the tickets
of the copy's findings (it kept every finding's), and drift does not call a ticket of a finding
outside the filter an orphan (it did: that finding exists, the copy just does not hold it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from tests.servers.tickets import Issue, TicketServer

from secfindings.cli import main
from secfindings.filters import field
from secfindings.testing import Emulator
from secfindings.tickets import Jira, drift, from_client

pytest.importorskip("duckdb")
SECRET = "s3cret-token"


@pytest.fixture(scope="module")
def emu() -> Iterator[Emulator]:
    with Emulator(findings=300, seed=7) as e:
        yield e


def _env(emu: Emulator) -> dict[str, str]:
    return {
        "SECFINDINGS_API_TOKEN": emu.create_api_token("copies"),
        "SECFINDINGS_BASE_URL": emu.base_url,
        "SECFINDINGS_AUTH_URL": emu.auth_url,
    }


def test_a_filtered_copy_keeps_its_findings_tickets_and_judges_no_outsider(
    emu: Emulator, tmp_path: Path
) -> None:
    import duckdb

    dest = str(tmp_path / "open-critical.duckdb")
    with emu.client() as client:
        client.sync(dest, filters=field("severity").in_(["5"]))
        every = from_client(client)
    con = duckdb.connect(dest, read_only=True)
    held = {int(r[0]) for r in con.execute("SELECT id_int FROM findings").fetchall()}
    con.close()
    assert 0 < len(held) < len(every)
    got = CliRunner().invoke(main, ["tickets", "pull", dest], env=_env(emu))
    assert got.exit_code == 0, got.output
    mine = [f for f in every if f.id_int in held]
    want = sum(len(f.tickets) for f in mine)
    assert got.output == f"kept {want} tickets of {len(mine)} findings in {dest}\n"
    con = duckdb.connect(dest, read_only=True)
    kept = {int(r[0]) for r in con.execute("SELECT DISTINCT id_int FROM finding_tickets").fetchall()}
    con.close()
    assert kept <= held
    # an open ticket of a finding the copy does not hold (it exists), and one of a finding gone
    outsider = next(f.id_int for f in every if f.id_int not in held)
    issues = [
        Issue("SEC-9001", True, ["secfindings", f"finding-{outsider}"]),
        Issue("SEC-9002", True, ["secfindings", "finding-999999"]),
    ]
    with TicketServer("jira", issues, secret=SECRET) as s:
        jira = Jira(s.url, project="SEC", email="me@acme.test", token=SECRET)
        from_copy = drift(dest, jira)
        with emu.client() as client:
            live = drift(client, jira)
    assert from_copy.orphans == []
    assert "2 open tickets name findings outside this copy's filter" in from_copy.text()
    assert live.orphans == [(999999, "SEC-9002")]  # the live API judges them


def test_an_unfiltered_copy_still_reports_orphans(emu: Emulator, tmp_path: Path) -> None:
    dest = str(tmp_path / "all.duckdb")
    with emu.client() as client:
        client.sync(dest)
    # drift before the pull: the error says what to run (it said only: compare live instead)
    env = {**_env(emu), "JIRA_EMAIL": "me@acme.test", "JIRA_API_TOKEN": SECRET}
    early = CliRunner().invoke(main, ["tickets", "drift", dest, "--jira", "http://127.0.0.1:9"], env=env)
    assert early.exit_code == 2
    assert f"secfindings tickets pull {dest}" in early.output
    got = CliRunner().invoke(main, ["tickets", "pull", dest], env=_env(emu))
    assert got.exit_code == 0, got.output
    with TicketServer(
        "jira", [Issue("SEC-9002", True, ["secfindings", "finding-999999"])], secret=SECRET
    ) as s:
        report = drift(dest, Jira(s.url, project="SEC", email="me@acme.test", token=SECRET))
    assert report.orphans == [(999999, "SEC-9002")]
    assert report.notes == []
