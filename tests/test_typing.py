"""The generated methods carry real signatures and return types: mypy sees them as an editor does."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

SNIPPET = """
    from typing import Any
    from typing_extensions import assert_type

    import secfindings
    from secfindings import AsyncPaginator, Paginator, models

    def sync(c: secfindings.Client) -> None:
        assert_type(c.finding(1), models.Finding)
        assert_type(c.findings_view(sort="SCORE_DESC"), Paginator[models.FindingsView])
        assert_type(c.scoring_rules().to_list(), list[models.ScoringRule])
        assert_type(c.add_scoring_rule({"name": "x"}), models.AddScoringRule)
        assert_type(c.trends(time_scale="DAY", aggregate_function="COUNT"), Any)
        f = c.finding(1)
        assert_type(f.finding_score.score, float)
        assert_type(f.tickets.nodes, list[models.Ticket])

    async def asynchronous(c: secfindings.AsyncClient) -> None:
        assert_type(await c.finding(1), models.Finding)
        assert_type(c.sla_groups(), AsyncPaginator[models.SLAGroup])
        assert_type(await c.sla_groups().to_list(), list[models.SLAGroup])

    def mistakes(c: secfindings.Client) -> None:
        c.findings_view(sortt="SCORE_DESC")
        c.activate_scoring_rule("id", active="yes")
        c.add_scoring_rule({"nmae": "x"})
        c.finding(1).titel
"""


def test_mypy_sees_the_typed_methods(tmp_path: Path) -> None:
    path = tmp_path / "usage.py"
    path.write_text(textwrap.dedent(SNIPPET))
    out, _err, status = mypy_api.run(
        [str(path), "--strict", "--no-incremental", "--show-error-codes", "--no-error-summary"]
    )
    assert status == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    lines = {int(line.split(":")[1]) for line in errors}
    mistakes = textwrap.dedent(SNIPPET).splitlines()
    first_mistake = next(i for i, text in enumerate(mistakes, 1) if "def mistakes" in text)
    assert all(n > first_mistake for n in lines), out
    assert len(lines) == 4, out  # one error for each of the four mistakes
    assert "sortt" in out
    assert "nmae" in out
    assert 'has no attribute "titel"' in out
    assert "union-attr" not in out  # object results are not Optional
