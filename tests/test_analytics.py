"""secfindings.analytics against synthetic histories with a known answer (tests/synthetic.py:
exponential times to fix of median 30 days, 40% still open), lifelines as the reference, in
DuckDB and SQLite; and small hand-made copies whose SLA, backlog, weekly and escape numbers can
be counted by hand."""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests import synthetic as syn

import secfindings.analytics as sa
from secfindings.errors import ValidationError

pytest.importorskip("duckdb")
pytest.importorskip("pandas")
lifelines = pytest.importorskip("lifelines")

N = 3000
MEDIAN = 30.0


@pytest.fixture(scope="module")
def rows() -> list[dict[str, Any]]:
    return syn.findings(N, MEDIAN, seed=11)


@pytest.fixture(scope="module")
def pg() -> Iterator[Any]:
    """One PostgreSQL server for the module (a database per copy)."""
    from tests.servers.postgres import postgres_server

    with postgres_server() as server:
        yield server


def _copy(kind: str, request: pytest.FixtureRequest, folder: Path, rows: list[dict[str, Any]],
          history: list[dict[str, Any]] | None = None) -> str:  # fmt: skip
    if kind == "duckdb":
        return syn.write_duckdb(folder / "s.duckdb", rows, history)
    if kind == "sqlite":
        return syn.write_sqlite(folder / "s.sqlite", rows, history)
    server = request.getfixturevalue("pg")
    return syn.write_postgres(server.create_database(f"a_{uuid.uuid4().hex[:12]}"), rows, history)


@pytest.fixture(scope="module", params=["duckdb", "sqlite", "postgresql"])
def dest(request: pytest.FixtureRequest, rows: list[dict[str, Any]], tmp_path_factory: Any) -> str:
    return _copy(request.param, request, tmp_path_factory.mktemp("analytics"), rows)


def _fitter(rows: list[dict[str, Any]]) -> Any:
    kmf = lifelines.KaplanMeierFitter()
    return kmf.fit([r["followed_days"] for r in rows], [r["days_to_fix"] is not None for r in rows])


def test_the_data_is_what_it_claims(rows: list[dict[str, Any]]) -> None:
    share_open = sum(r["actual_status_category"] == "OPEN" for r in rows) / len(rows)
    assert 0.37 < share_open < 0.43


def test_median_and_its_interval_match_lifelines(dest: str, rows: list[dict[str, Any]]) -> None:
    from lifelines.utils import median_survival_times, qth_survival_time

    got = sa.time_to_remediate(dest, as_of=syn.AS_OF).iloc[0]
    kmf = _fitter(rows)
    ci = median_survival_times(kmf.confidence_interval_)
    assert got["findings"] == N
    assert got["open"] == sum(r["days_to_fix"] is None for r in rows)
    assert abs(got["p50_days"] - kmf.median_survival_time_) / kmf.median_survival_time_ < 0.03
    assert abs(got["p50_low"] - ci.iloc[0, 0]) / ci.iloc[0, 0] < 0.03
    assert abs(got["p50_high"] - ci.iloc[0, 1]) / ci.iloc[0, 1] < 0.03
    # and near the law's own median (sampling error of 3,000 findings)
    assert abs(got["p50_days"] - MEDIAN) / MEDIAN < 0.1
    for p in (0.75, 0.9):
        ref = qth_survival_time(1 - p, kmf.survival_function_)
        assert abs(got[f"p{round(p * 100)}_days"] - ref) / ref < 0.03


def test_the_curve_matches_lifelines(dest: str, rows: list[dict[str, Any]]) -> None:
    curve = sa.survival_curve(dest, as_of=syn.AS_OF)
    kmf = _fitter(rows)
    for days in (5.0, 30.0, 90.0):
        ours = curve[curve["days"] <= days]["survival"].iloc[-1]
        ref = float(kmf.survival_function_at_times(days).iloc[0])
        assert abs(ours - ref) < 0.01
    assert curve["survival"].is_monotonic_decreasing
    assert (curve["ci_low"] <= curve["survival"] + 1e-12).all()
    assert (curve["survival"] <= curve["ci_high"] + 1e-12).all()


def test_the_naive_mean_over_fixed_findings_is_biased(dest: str, rows: list[dict[str, Any]]) -> None:
    """The number the old guide computed: the mean time to fix of the fixed findings alone,
    here by SQL on the same copy. The law's mean is median / ln 2 (43 days); the naive one is
    far shorter, because the slowest findings are the ones still open."""
    true_mean = MEDIAN / math.log(2)
    with sa.Database(dest) as db:  # the naive number, by SQL in the copy itself
        naive = db.rows(
            f"SELECT avg({db.seconds('last_reported_time')} - {db.seconds('discovered_time')}) / 86400 "
            "FROM findings WHERE actual_status_category = 'FIXED'"
        )[0][0]
    assert (true_mean - naive) / true_mean > 0.10
    # the survival curve's restricted view agrees with the law instead: S(mean) = e^-1
    curve = sa.survival_curve(dest, as_of=syn.AS_OF)
    at_mean = curve[curve["days"] <= true_mean]["survival"].iloc[-1]
    assert abs(at_mean - math.exp(-1)) < 0.03


def test_groups_have_their_own_curves(tmp_path: Path) -> None:
    fast = syn.findings(1500, 10.0, seed=2, severity=5)
    slow = [{**r, "id_int": r["id_int"] + 10_000} for r in syn.findings(1500, 60.0, seed=3, severity=2)]
    dest = syn.write_duckdb(tmp_path / "g.duckdb", fast + slow)
    got = sa.time_to_remediate(dest, by="severity", as_of=syn.AS_OF).set_index("severity")
    assert list(got.index) == [2, 5]
    for sev, part, median in ((5, fast, 10.0), (2, slow, 60.0)):
        ref = _fitter(part).median_survival_time_
        assert abs(got.loc[sev, "p50_days"] - ref) / ref < 0.03
        assert abs(got.loc[sev, "p50_days"] - median) / median < 0.15
    two = sa.time_to_remediate(dest, by=["severity", "source"], as_of=syn.AS_OF)
    assert len(two) == 6
    assert two["findings"].sum() == 3000


def test_a_copy_with_no_finding_gives_empty_frames_with_their_columns(tmp_path: Path) -> None:
    dest = syn.write_duckdb(tmp_path / "one.duckdb", syn.findings(1, seed=5))
    import duckdb

    con = duckdb.connect(dest)
    con.execute("DELETE FROM findings")
    con.close()
    got = sa.time_to_remediate(dest, by="severity", as_of=syn.AS_OF)
    assert len(got) == 0
    assert list(got.columns)[:4] == ["severity", "findings", "fixed", "open"]
    assert "p50_days" in got.columns


def test_a_copy_without_the_needed_columns_names_them(tmp_path: Path) -> None:
    """A copy synced from a server whose FindingsView has no discovered_time (the emulator's
    known profile): the error listed all three columns and told to sync with fields='analyst',
    which such a server cannot give; now it names the missing one and says so."""
    duckdb = pytest.importorskip("duckdb")
    from click.testing import CliRunner

    from secfindings.cli import main
    from secfindings.errors import ConfigurationError

    path = tmp_path / "known.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE findings (id_int BIGINT, actual_status_category VARCHAR)")
    with pytest.raises(ConfigurationError) as info:
        sa.time_to_remediate(str(path))
    assert str(info.value) == (
        f"the findings of duckdb:///{path} have no discovered_time, which remediation needs: sync's "
        "fields='analyst' (its default) takes them where the server's FindingsView has them, and a "
        "server without them cannot give these measures"
    )
    result = CliRunner().invoke(main, ["report", str(path), "--format", "markdown"])
    assert result.exit_code == 2
    assert result.output == f"error: {info.value}\n"


def test_a_column_that_is_not_there_is_a_typed_error(dest: str) -> None:
    with pytest.raises(ValidationError, match="no column 'team; DROP'"):
        sa.time_to_remediate(dest, by="team; DROP")
    with pytest.raises(ValidationError, match="fixed_at"):
        sa.time_to_remediate(dest, fixed_at="soon")
    with pytest.raises(ValidationError, match="percentiles"):
        sa.time_to_remediate(dest, percentiles=(50,))


# ---------------------------------------------------------------- counted by hand

T0 = dt.datetime(2026, 5, 4, tzinfo=dt.timezone.utc)  # a Monday
AS_OF = T0 + dt.timedelta(days=21)


def _f(
    i: int, status: str, disc: float, fixed: float | None, due: float | None, sev: int = 3
) -> dict[str, Any]:
    d = T0 + dt.timedelta(days=disc)
    return {
        "id_int": i, "title": f"f{i}", "severity": sev, "source": "Wiz", "actual_status_category": status,
        "discovered_time": d,
        "last_reported_time": T0 + dt.timedelta(days=fixed) if fixed is not None else AS_OF,
        "due_date": None if due is None else T0 + dt.timedelta(days=due),
        "days_to_fix": None, "followed_days": 0,
    }  # fmt: skip


HAND = [
    _f(1, "FIXED", 0, 3, 10),  # fixed in SLA, week 0
    _f(2, "FIXED", 1, 12, 10),  # fixed late, week 1
    _f(3, "OPEN", 2, None, 9),  # open, overdue (due day 9 < day 21)
    _f(4, "OPEN", 8, None, 30),  # open, on track
    _f(5, "OPEN", 15, None, None, sev=5),  # open, no SLA
    _f(6, "IGNORED", 1, None, 5),  # left out everywhere
]


def _hand_history() -> list[dict[str, Any]]:
    out = syn.versions([r for r in HAND if r["id_int"] != 4])
    # finding 4 was fixed on day 10 and came back (reopened) on day 13
    base = {c: HAND[3][c] for c in syn.COLUMNS}
    at = lambda d: T0 + dt.timedelta(days=d)  # noqa: E731
    out += [
        {**base, "actual_status_category": "OPEN", "valid_from": at(8), "valid_to": at(10)},
        {**base, "actual_status_category": "FIXED", "valid_from": at(10), "valid_to": at(13)},
        {**base, "actual_status_category": "OPEN", "valid_from": at(13), "valid_to": None},
    ]
    return out


@pytest.fixture(scope="module", params=["duckdb", "sqlite", "postgresql"])
def hand(request: pytest.FixtureRequest, tmp_path_factory: Any) -> str:
    return _copy(request.param, request, tmp_path_factory.mktemp("hand"), HAND, _hand_history())


def test_sla_adherence_by_hand(hand: str) -> None:
    got = sa.sla_adherence(hand, by="severity", as_of=AS_OF)
    row = got.set_index("severity").loc[3]
    assert (row["fixed"], row["fixed_in_sla"], row["open"], row["overdue"]) == (2, 1, 2, 1)
    assert row["fixed_in_sla_share"] == 0.5
    assert row["overdue_share"] == 0.5
    assert 5 not in set(got["severity"])  # no due date: no SLA


def test_backlog_by_hand(hand: str) -> None:
    got = sa.backlog(hand, by=None, as_of=AS_OF).iloc[0]
    assert got["open"] == 3
    assert (got["0-7d"], got["8-30d"], got["31-90d"]) == (1, 2, 0)  # ages 6, 13, 19 days
    assert got["max_age_days"] == pytest.approx(19.0)
    assert got["mean_age_days"] == pytest.approx((19 + 13 + 6) / 3)


def test_weekly_by_hand(hand: str) -> None:
    got = sa.weekly(hand, as_of=AS_OF)
    assert [str(w) for w in got["week"]] == ["2026-05-04", "2026-05-11", "2026-05-18", "2026-05-25"]
    assert list(got["arrived"]) == [3, 1, 1, 0]  # discovered on days 0, 1, 2 | 8 | 15
    assert list(got["fixed"]) == [1, 1, 0, 0]
    assert list(got["open_at_end"]) == [2, 2, 3, 3]
    assert len(sa.weekly(hand, as_of=AS_OF, weeks=2)) == 2


def test_escape_rate_by_hand(hand: str) -> None:
    got = sa.escape_rate(hand).iloc[0]
    assert (got["fixed_ever"], got["reopened"]) == (3, 1)
    assert got["escape_rate"] == pytest.approx(1 / 3)


def test_the_history_gives_the_fix_time(hand: str) -> None:
    """fixed_at="history" takes the version's time: finding 2 became fixed on day 12 in both
    (the synthetic history follows last_reported_time), and a finding without a transition
    in the history is left out."""
    got = sa.time_to_remediate(hand, fixed_at="history", as_of=AS_OF, percentiles=(0.2,))
    assert got.iloc[0]["fixed"] == 2


def test_overdue_lists_the_worst_first(hand: str) -> None:
    got = sa.overdue(hand, as_of=AS_OF)
    assert list(got["id_int"]) == [3]
    assert got.iloc[0]["days_overdue"] == pytest.approx(12.0)


# ---------------------------------------------------------------- the guide's printed numbers


def bias_text(rows: list[dict[str, Any]], dest: str) -> str:
    import statistics

    got = sa.time_to_remediate(dest, as_of=syn.AS_OF, percentiles=(0.5,)).iloc[0]
    kmf = _fitter(rows)
    fixed = [r["days_to_fix"] for r in rows if r["days_to_fix"] is not None]
    mean = statistics.fmean(fixed)
    law = MEDIAN / math.log(2)
    return "\n".join(
        [
            f"{len(rows)} findings, {int(got['open'])} still open; days to fix drawn with a median of 30 "
            f"(mean {law:.1f})",
            f"Kaplan-Meier median, secfindings.analytics: {got['p50_days']:.1f} days "
            f"(95%: {got['p50_low']:.1f} to {got['p50_high']:.1f})",
            f"Kaplan-Meier median, lifelines:             {kmf.median_survival_time_:.1f} days",
            f"median over the fixed findings only:        {statistics.median(fixed):.1f} days",
            f"mean over the fixed findings only:          {mean:.1f} days "
            f"({(law - mean) / law:.0%} short of {law:.1f})",
        ]
    )


def test_the_guide_shows_the_bias_this_data_gives(rows: list[dict[str, Any]], tmp_path: Path) -> None:
    """<!-- printed: remediation-bias --> in docs/guides/remediation.md: what this prints."""
    import re

    guide = Path(__file__).resolve().parents[1] / "docs" / "guides" / "remediation.md"
    found = re.search(
        r"<!-- printed: remediation-bias -->\n```text\n(?P<out>.*?)```", guide.read_text("utf-8"), re.S
    )
    assert found
    dest = syn.write_duckdb(tmp_path / "b.duckdb", rows)
    text = bias_text(rows, dest)
    print(text)
    assert found.group("out").rstrip("\n") == text
