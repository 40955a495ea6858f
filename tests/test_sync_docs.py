"""The sync guide's printed outputs come from runs: its time to remediate, by secfindings.analytics
and by the SQL it shows, prints what the guide shows against the emulator the guide names
(issue 31: the old MTTR query took the first sync's time as the fix time and left open findings
out; issue 36: the Kaplan-Meier estimate, open findings censored, replaced the counts)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import pytest

from secfindings.testing import Emulator

pytest.importorskip("duckdb")
pytest.importorskip("pandas")

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guides" / "sync.md"


def _block_and_output(marker: str) -> tuple[str, str]:
    """The Python block holding ``marker`` and the ``text`` block after it."""
    text = GUIDE.read_text(encoding="utf-8")
    found = re.search(r"```python\n(?P<code>(?:(?!```).)*?" + re.escape(marker) + r".*?)```", text, re.S)
    assert found, f"no Python block with {marker!r} in {GUIDE}"
    printed = re.search(r"```text\n(?P<out>.*?)```", text[found.end() :], re.S)
    assert printed, "no printed output after the block"
    return found.group("code"), printed.group("out")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: Any) -> Path:
    where = tmp_path_factory.mktemp("sync-docs")
    with Emulator(findings=2_000, seed=7) as emu:
        emu.client().sync(str(where / "findings.duckdb"))
    return where


@pytest.mark.parametrize("marker", ["sa.time_to_remediate", "10% fixed"])
def test_the_time_to_remediate_prints_what_the_guide_shows(
    folder: Path, marker: str, monkeypatch: Any
) -> None:
    code, shown = _block_and_output(marker)
    monkeypatch.chdir(folder)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(GUIDE), "exec"), {"__name__": "__docs__"})
    assert [line.rstrip() for line in out.getvalue().splitlines()] == [
        line.rstrip() for line in shown.splitlines()
    ]


def test_the_guides_sql_is_the_analytics_estimate_to_the_day(folder: Path) -> None:
    """The SQL the guide shows gives the same percentiles as secfindings.analytics at a day's
    resolution, and counts every open finding (censored, not dropped)."""
    import duckdb

    import secfindings.analytics as sa

    code, _ = _block_and_output("10% fixed")
    query = re.search(r'con\.sql\("""(?P<sql>.*?)"""\)', code, re.S)
    assert query
    con = duckdb.connect(str(folder / "findings.duckdb"), read_only=True)
    try:
        rows = con.sql(query.group("sql")).fetchall()
    finally:
        con.close()
    ours = sa.time_to_remediate(
        folder / "findings.duckdb", by="source", percentiles=(0.1, 0.25, 0.5), resolution=86_400
    )
    assert len(rows) == len(ours)
    for (source, p10, p25, p50), (_, row) in zip(rows, ours.iterrows(), strict=True):
        assert source == row["source"]
        for sql_value, value in ((p10, row["p10_days"]), (p25, row["p25_days"]), (p50, row["p50_days"])):
            assert (sql_value is None and value != value) or sql_value == value
    assert ours["open"].sum() == 1417  # every open finding in the estimate
