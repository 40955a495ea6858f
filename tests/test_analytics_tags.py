"""secfindings.analytics grouped by a list column (a finding's tags, ``datasource_tags_values``):
synced from the emulator with ``fields="analyst datasource_tags_values"`` into DuckDB, SQLite and
PostgreSQL (each stores lists its own way), the answers checked against the same rows counted in
Python (and lifelines for the medians); and a hand-made copy for the edge cases (no tags, a tag
twice, a NULL in a list, a prefix)."""

from __future__ import annotations

import datetime as dt
import json
import math
import sqlite3
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import secfindings.analytics as sa
from secfindings.errors import ValidationError
from secfindings.testing import Emulator

pytest.importorskip("duckdb")
pytest.importorskip("pandas")
lifelines = pytest.importorskip("lifelines")

TEAMS = ["data", "identity", "payments", "platform"]
FIELDS = "analyst datasource_tags_values"
READ = (
    "id_int severity actual_status { category } discovered_time last_reported_time due_date "
    "datasource_tags_values"
)


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    with Emulator(findings=300, seed=7) as emu:
        yield emu


@pytest.fixture(scope="module")
def pg() -> Iterator[Any]:
    from tests.servers.postgres import postgres_server

    with postgres_server() as server:
        yield server


@pytest.fixture(scope="module")
def truth(emulator: Emulator) -> list[dict[str, Any]]:
    """The findings as the server has them, read apart from the sync."""
    with emulator.client() as c:
        rows: list[dict[str, Any]] = c.findings_view(fields=READ).to_arrow().to_pylist()
        return rows


@pytest.fixture(scope="module", params=["duckdb", "sqlite", "postgresql"])
def synced(request: pytest.FixtureRequest, emulator: Emulator, tmp_path_factory: Any) -> str:
    folder = tmp_path_factory.mktemp("tags")
    if request.param == "duckdb":
        dest = str(folder / "t.duckdb")
    elif request.param == "sqlite":
        dest = f"sqlite:///{folder / 't.sqlite'}"
    else:
        dest = request.getfixturevalue("pg").create_database(f"t_{uuid.uuid4().hex[:12]}")
    with emulator.client() as c:
        result = c.sync(dest, fields=FIELDS)
    assert result.created == 300
    assert not result.warnings
    return dest


def _status(r: dict[str, Any]) -> str:
    return str(r["actual_status.category"])


def _time(value: dt.datetime) -> dt.datetime:
    return value


def _as_of(rows: list[dict[str, Any]]) -> dt.datetime:
    return max(_time(r["last_reported_time"]) for r in rows)


def _groups(r: dict[str, Any], keep: list[str] | None = None) -> list[str | None]:
    tags = sorted(
        {t for t in r["datasource_tags_values"] or [] if t is not None and (keep is None or t in keep)}
    )
    return list(tags) or [None]


def test_the_sync_stores_the_tags_beside_the_analyst_fields(synced: str, truth: list[dict[str, Any]]) -> None:
    with sa.Database(synced) as db:
        cols = db.columns("findings") or []
        assert "datasource_tags_values" in cols
        assert "actual_status_category" in cols
        assert "due_date" in cols
        assert db.is_list("datasource_tags_values")
        assert not db.is_list("title")


def test_backlog_by_tag_counts_each_finding_in_each_of_its_tags(
    synced: str, truth: list[dict[str, Any]]
) -> None:
    at = _as_of(truth)
    want = Counter(t for r in truth if _status(r) == "OPEN" for t in _groups(r))
    got = sa.backlog(synced, by="datasource_tags_values", as_of=at)
    assert dict(zip(got["datasource_tags_values"], got["open"], strict=True)) == want
    assert got["open"].sum() > sum(_status(r) == "OPEN" for r in truth)  # three tags each


def test_time_to_remediate_by_team_matches_lifelines(synced: str, truth: list[dict[str, Any]]) -> None:
    at = _as_of(truth)
    got = sa.time_to_remediate(
        synced, by=sa.Tags(values=TEAMS, name="team"), fixed_at="reported", as_of=at, percentiles=(0.1,)
    )
    per: dict[str | None, list[tuple[float, bool]]] = defaultdict(list)
    for r in truth:
        if _status(r) not in ("OPEN", "FIXED"):
            continue
        fixed = _status(r) == "FIXED"
        end = _time(r["last_reported_time"]) if fixed else at
        days = max(0.0, (end - _time(r["discovered_time"])).total_seconds() / 86400)
        for team in _groups(r, TEAMS):
            per[team].append((days, fixed))
    assert [None if isinstance(t, float) else t for t in got["team"]] == [*TEAMS, None]
    for row in got.to_dict("records"):
        team = None if isinstance(row["team"], float) else row["team"]
        spells = per[team]
        assert (row["findings"], row["fixed"], row["open"]) == (
            len(spells),
            sum(f for _, f in spells),
            sum(not f for _, f in spells),
        )
        kmf = lifelines.KaplanMeierFitter().fit([d for d, _ in spells], [f for _, f in spells])
        from lifelines.utils import qth_survival_time

        ref = qth_survival_time(0.9, kmf.survival_function_)
        assert math.isfinite(ref)  # a tenth of each team is fixed within the time seen
        assert abs(row["p10_days"] - ref) <= max(0.03 * ref, 1 / 24 + 1e-9)  # an hour's step


def test_sla_and_escape_by_team(synced: str, truth: list[dict[str, Any]]) -> None:
    at = _as_of(truth)
    sla = sa.sla_adherence(synced, by=sa.Tags(values=TEAMS, name="team"), fixed_at="reported", as_of=at)
    for row in sla.to_dict("records"):
        team = None if isinstance(row["team"], float) else row["team"]
        mine = [r for r in truth if team in _groups(r, TEAMS) and r["due_date"]]
        open_ = [r for r in mine if _status(r) == "OPEN"]
        fixed = [r for r in mine if _status(r) == "FIXED"]
        assert row["open"] == len(open_)
        assert row["overdue"] == sum(_time(r["due_date"]) < at for r in open_)
        assert row["fixed"] == len(fixed)
        in_sla = sum(_time(r["last_reported_time"]) <= _time(r["due_date"]) for r in fixed)
        assert row["fixed_in_sla"] == in_sla
    # fixed_at="auto" (the history's CTEs beside the groups'): one version each, the same answer
    auto = sa.sla_adherence(synced, by=sa.Tags(values=TEAMS, name="team"), as_of=at)
    assert auto.fillna(-1).to_dict("records") == sla.fillna(-1).to_dict("records")
    escape = sa.escape_rate(synced, by=sa.Tags(values=TEAMS, name="team"))
    fixed_per = Counter(t for r in truth if _status(r) == "FIXED" for t in _groups(r, TEAMS))
    got = {
        None if isinstance(k, float) else k: v
        for k, v in zip(escape["team"], escape["fixed_ever"], strict=True)
    }
    assert got == {k: fixed_per[k] for k in got}
    assert set(fixed_per) <= set(got)


def test_weekly_by_tag_counts_arrivals_once_per_tag(synced: str, truth: list[dict[str, Any]]) -> None:
    at = _as_of(truth)
    got = sa.weekly(synced, by=sa.Tags(values=["prod"]), fixed_at="reported", as_of=at)
    prod = got[got["datasource_tags_values"] == "prod"]
    want = sum(
        _status(r) in ("OPEN", "FIXED") and "prod" in (r["datasource_tags_values"] or []) for r in truth
    )
    assert prod["arrived"].sum() == want


# ---------------------------------------------------------------- a hand-made copy: the edges

T0 = dt.datetime(2026, 5, 4, tzinfo=dt.timezone.utc)
AS_OF = T0 + dt.timedelta(days=20)
#: id, status, tags: a finding with two teams, one with none, one with a tag twice, a NULL list,
#: a NULL inside a list, an empty list.
HAND: list[tuple[int, str, list[str | None] | None]] = [
    (1, "OPEN", ["team:a", "team:b", "env:prod"]),
    (2, "OPEN", ["env:prod"]),
    (3, "OPEN", ["team:a", "team:a"]),
    (4, "OPEN", None),
    (5, "FIXED", ["team:b", None]),
    (6, "OPEN", []),
]


def _hand(kind: str, folder: Path, request: pytest.FixtureRequest) -> str:
    rows = [
        {
            "id_int": i, "actual_status_category": status, "discovered_time": T0,
            "last_reported_time": T0 + dt.timedelta(days=2) if status == "FIXED" else AS_OF,
            "due_date": T0 + dt.timedelta(days=10), "datasource_tags_values": tags,
        }
        for i, status, tags in HAND
    ]  # fmt: skip
    import pyarrow as pa

    table = pa.table(
        {
            "id_int": pa.array([r["id_int"] for r in rows], pa.int64()),
            "actual_status_category": pa.array([r["actual_status_category"] for r in rows]),
            **{
                c: pa.array([r[c] for r in rows], pa.timestamp("us", tz="UTC"))
                for c in ("discovered_time", "last_reported_time", "due_date")
            },
            "datasource_tags_values": pa.array(
                [r["datasource_tags_values"] for r in rows], pa.list_(pa.string())
            ),
        }
    )
    if kind == "duckdb":
        import duckdb

        path = folder / "h.duckdb"
        con = duckdb.connect(str(path))
        con.register("t", table)
        con.execute("CREATE TABLE findings AS SELECT * FROM t")
        con.close()
        return str(path)
    if kind == "sqlite":  # as the sync writes it: timestamps as ISO text, lists as JSON text
        path = folder / "h.sqlite"
        sq = sqlite3.connect(str(path))
        names = table.column_names
        sq.execute(f"CREATE TABLE findings ({', '.join(names)})")
        for r in rows:
            values = [
                json.dumps(v) if isinstance(v, list)
                else v.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")
                if isinstance(v, dt.datetime) else v
                for v in (r[n] for n in names)
            ]  # fmt: skip
            sq.execute(f"INSERT INTO findings VALUES ({', '.join('?' for _ in names)})", values)
        sq.commit()
        sq.close()
        return f"sqlite:///{path}"
    import adbc_driver_postgresql.dbapi as pgdb

    url: str = request.getfixturevalue("pg").create_database(f"h_{uuid.uuid4().hex[:12]}")
    with pgdb.connect(url) as con, con.cursor() as cur:
        cur.adbc_ingest("findings", table, mode="create")
        con.commit()
    return url


@pytest.fixture(scope="module", params=["duckdb", "sqlite", "postgresql"])
def hand(request: pytest.FixtureRequest, tmp_path_factory: Any) -> str:
    return _hand(request.param, tmp_path_factory.mktemp("hand"), request)


def _as_dict(frame: Any, name: str, value: str) -> dict[Any, Any]:
    return {
        None if isinstance(k, float) else k: int(v) for k, v in zip(frame[name], frame[value], strict=True)
    }


def test_the_edges_of_a_list_column(hand: str) -> None:
    got = sa.backlog(hand, by="datasource_tags_values", as_of=AS_OF)
    # 1 counts in all three of its tags; 3 once in team:a; 4 (NULL), 6 (empty) in None
    assert _as_dict(got, "datasource_tags_values", "open") == {
        "env:prod": 2,
        "team:a": 2,
        "team:b": 1,
        None: 2,
    }
    assert list(got["datasource_tags_values"])[-1] is None  # the group of none comes last
    teams = sa.backlog(hand, by=sa.Tags(prefix="team:", name="team"), as_of=AS_OF)
    # 2 has no team: it joins 4 and 6 in None
    assert _as_dict(teams, "team", "open") == {"a": 2, "b": 1, None: 3}
    ttr = sa.time_to_remediate(
        hand, by=sa.Tags(prefix="team:", name="team"), as_of=AS_OF, fixed_at="reported"
    )
    assert _as_dict(ttr, "team", "findings") == {"a": 2, "b": 2, None: 3}
    assert _as_dict(ttr, "team", "fixed") == {"a": 0, "b": 1, None: 0}  # 5's NULL tag is skipped


def test_bad_groupings_are_typed_errors(hand: str) -> None:
    with pytest.raises(ValidationError, match="not a list column"):
        sa.backlog(hand, by=sa.Tags("actual_status_category"), as_of=AS_OF)
    with pytest.raises(ValidationError, match="no column 'tags'"):
        sa.backlog(hand, by=sa.Tags("tags"), as_of=AS_OF)
    with pytest.raises(ValidationError, match="twice"):
        sa.backlog(hand, by=["datasource_tags_values", sa.Tags()], as_of=AS_OF)
    with pytest.raises(ValidationError, match="list of values"):
        sa.Tags(values="team:a")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="by= takes"):
        sa.backlog(hand, by=[3], as_of=AS_OF)  # type: ignore[list-item]


def test_the_analyst_preset_and_more_fields(emulator: Emulator, tmp_path: Path) -> None:
    """``fields="analyst <more>"``: the preset as the server trims it, and the fields given after
    it (one the preset has already is not asked twice); a plan counts the same walk."""
    import secfindings.sync as sync
    from secfindings.sync._model import expand_preset

    assert expand_preset("analyst severity tags { a }", "id severity") == "id severity tags { a }"
    assert expand_preset("analyst", "id") == "analyst"
    dest = str(tmp_path / "p.duckdb")
    with emulator.client() as c:
        plan = sync.plan(c, dest, fields="analyst datasource_tags_values severity")
        assert plan.kinds == ["first"]
        assert plan.reconcile is not None
        assert plan.reconcile.rows == 300
        c.sync(dest, fields="analyst datasource_tags_values severity")
        again = c.sync(dest, fields="analyst datasource_tags_values severity")  # the same selection
        assert again.created == 0
    with sa.Database(dest) as db:
        cols = db.columns("findings") or []
    assert cols.count("severity") == 1
    assert cols[-1] == "datasource_tags_values"
