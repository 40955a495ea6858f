"""The sync guide's printed outputs come from runs: the remediation query (issue 31: the old
MTTR query took the first sync's time as the fix time and left open findings out) prints what
the guide shows, against the emulator the guide names."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from secfindings.testing import Emulator

pytest.importorskip("duckdb")

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "sync.md"


def _block_and_output(marker: str) -> tuple[str, str]:
    """The Python block holding ``marker`` and the ``text`` block after it."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"```python\n(?P<code>(?:(?!```).)*?" + re.escape(marker) + r".*?)```", text, re.S)
    assert found, f"no Python block with {marker!r} in {GUIDE}"
    printed = re.search(r"```text\n(?P<out>.*?)```", text[found.end() :], re.S)
    assert printed, "no printed output after the block"
    return found.group("code"), printed.group("out")


def test_the_remediation_query_prints_what_the_guide_shows(tmp_path: Path, monkeypatch: Any) -> None:
    code, shown = _block_and_output("fixed_in_30")
    monkeypatch.chdir(tmp_path)
    with Emulator(findings=2_000, seed=7) as emu:
        emu.client().sync("findings.duckdb")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "__docs__"})
    assert out.getvalue() == shown


def test_the_remediation_query_counts_open_findings_and_not_the_first_syncs_time(tmp_path: Path) -> None:
    """What the old query got wrong: a finding already fixed at the first sync has that sync's
    time in the history; the query must take the server's times (so the result does not move
    with the day of the first sync), and an open finding is in the counts."""
    import duckdb

    code, _ = _block_and_output("fixed_in_30")
    query = re.search(r'con\.sql\("""(?P<sql>.*?)"""\)', code, re.S)
    assert query
    dest = tmp_path / "f.duckdb"
    with Emulator(findings=300, seed=7) as emu:
        emu.client().sync(str(dest))
    con = duckdb.connect(str(dest), read_only=True)
    try:
        rows = con.sql(query.group("sql")).fetchall()
        opened = con.sql("SELECT count(*) FROM findings WHERE actual_status_category = 'OPEN'").fetchall()
        times = con.sql(
            "SELECT count(*) FROM findings WHERE actual_status_category = 'FIXED' "
            "AND last_reported_time - discovered_time <= INTERVAL '30 days'"
        ).fetchall()
    finally:
        con.close()
    assert sum(r[5] for r in rows) == opened[0][0]  # every open finding is counted
    assert sum(r[2] for r in rows) <= times[0][0]  # fixes by the server's times, none by the sync's
    assert all(r[2] <= r[1] and r[4] <= r[3] for r in rows)
