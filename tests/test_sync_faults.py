"""A sync that is killed or meets a failing server: nothing half-written is visible, the
watermark never moves for a run that did not finish, and the next run converges. For each of
DuckDB, SQLite and PostgreSQL."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from typing import Any

import pytest
from tests.test_sync import (
    DATABASES,
    assert_equal_to_server,
    fetch,
    make_dest,
    pg,  # noqa: F401 (the session's PostgreSQL server, a fixture)
    state,
    table_rows,
)

import secfindings
from secfindings.testing import Emulator

FINDINGS = 3_000

#: Runs one sync in a process of its own and kills it with SIGKILL when the walk reaches a page.
KILLED = """
import os, signal, sys
import secfindings
import secfindings.sync._dest as dest
import secfindings.sync._engine as engine

# Commit every 10 pages, so a kill can fall between two chunks.
engine.CHUNK_PAGES = 10
dest.DuckDB.chunk_pages = None
token, base_url, auth_url, dest, kill_at, reconcile = sys.argv[1:7]
client = secfindings.Client(token, base_url=base_url, auth_url=auth_url, schema="builtin")

def progress(info):
    if info["pages"] >= int(kill_at):
        os.kill(os.getpid(), signal.SIGKILL)

client.sync(dest, progress=progress, page_size=50, reconcile={"1": True, "0": None}[reconcile])
print("not killed")
"""


@pytest.fixture(params=DATABASES)
def dest(request: pytest.FixtureRequest, tmp_path: Any) -> str:
    return make_dest(request.param, tmp_path, request)


@pytest.fixture
def emu() -> Any:
    with Emulator(findings=FINDINGS, seed=5) as e:
        yield e


def run_killed(emu: Emulator, dest: str, kill_at: int, reconcile: bool = False) -> None:
    token = emu.create_api_token()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            KILLED,
            token,
            emu.base_url,
            emu.auth_url,
            dest,
            str(kill_at),
            "1" if reconcile else "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:] + done.stdout


def test_a_first_sync_killed_at_a_random_page_resumes_with_every_finding_once(
    emu: Emulator, dest: str
) -> None:
    pages = FINDINGS // 50
    kill_at = random.Random(os.getpid()).randint(2, pages - 1)
    run_killed(emu, dest, kill_at)
    # The killed run committed whole chunks at most, and no watermark (it never finished).
    before = state(dest)
    assert before.get("watermark") is None
    assert before.get("last_full_reconcile") is None
    # Whole chunks of 10 pages, the reconcile's progress with them (the table comes with the
    # first chunk).
    if before.get("reconcile_after_id") is None:
        assert kill_at <= 10
    else:
        partial = table_rows(dest)
        # Whole pages: every id up to the last committed, none after (a page of a batch after
        # the first holds 49 new rows: it starts on the row before it, issue 37).
        assert sorted(partial) == list(range(1, len(partial) + 1))
        assert len(partial) <= kill_at * 50
        assert before["reconcile_after_id"] == max(partial)
    client = emu.client()
    result = client.sync(dest, page_size=50)
    assert result.kind == "first"
    assert result.reconciled
    assert_equal_to_server(dest, client)
    assert len(fetch(dest, "SELECT * FROM findings_history")) == FINDINGS


def test_an_incremental_run_killed_mid_walk_leaves_rows_and_watermark_as_they_were(
    emu: Emulator, dest: str
) -> None:
    client = emu.client()
    client.sync(dest, page_size=50)
    for _ in range(120):
        emu.create_finding(severity=3)
    before_rows, before_state = table_rows(dest), state(dest)
    run_killed(emu, dest, kill_at=2)  # 120 re-reported: 3 pages of 50
    assert table_rows(dest) == before_rows
    assert state(dest) == before_state
    result = client.sync(dest, page_size=50)
    assert result.created == 120
    assert_equal_to_server(dest, client)
    assert state(dest)["watermark"] > before_state["watermark"]


@pytest.mark.parametrize(
    ("kind", "extra"),
    [
        ("status", {"status": 503}),
        ("reset", {}),
        ("rate_limit", {"retry_after": 3600}),
    ],
)
def test_a_server_failing_mid_run_fails_the_run_and_writes_nothing(
    emu: Emulator, dest: str, kind: str, extra: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """5xx past the retries, a dropped socket past the retries, and a 429 whose Retry-After is
    longer than max_retry_wait: the run fails at once (no wait here) with the client's error;
    the table and the watermark are as before; the failure is in the run log; the next run
    converges."""
    # budget=False: the Retry-After of an hour is not written to the token's shared budget.
    client = emu.client(max_retries=1, max_retry_wait=5.0, budget=False)
    client.sync(dest, page_size=50)
    for _ in range(300):
        emu.create_finding(severity=2)
    before_rows, before_state = table_rows(dest), state(dest)

    from secfindings.sync._source import ClientSource

    walk = ClientSource.batches

    def failing(self: ClientSource, **arguments: Any) -> Any:
        # As the first page arrives (the sync reads ahead in a thread, so the consumer's
        # progress would come too late): the next requests fail, and their retries.
        for n, batch in enumerate(walk(self, **arguments)):
            if n == 0:
                emu.inject(kind, 4, **extra)
            yield batch

    monkeypatch.setattr(ClientSource, "batches", failing)
    with pytest.raises(secfindings.SecFindingsError):
        client.sync(dest, page_size=50)
    monkeypatch.undo()
    emu.clear_faults()
    assert table_rows(dest) == before_rows
    assert state(dest) == before_state
    runs = fetch(dest, "SELECT kind, status, error FROM sync_runs ORDER BY started_at")
    assert runs[-1]["status"] == "failed"
    assert runs[-1]["error"]
    # A new client: the one that met the 429 waits out its Retry-After.
    again = emu.client(budget=False).sync(dest, page_size=50)
    assert again.created == 300
    assert_equal_to_server(dest, client)
