"""Remediation analytics over a synced destination (``client.sync(dest)``): time to remediate as
a survival curve, SLA adherence, backlog and aging, arrivals and burn-down per week, and the
escape rate. Every measure is computed by SQL in the database (DuckDB, SQLite or PostgreSQL);
only aggregated rows (counts per group and time) come back to Python, as pandas DataFrames.

    import secfindings.analytics as sa

    sa.time_to_remediate("findings.duckdb", by="severity")
    sa.survival_curve("findings.duckdb", by="source")

Each function takes ``db``: a destination (``findings.duckdb``, ``sqlite:///f.sqlite``,
``postgresql://...``) or an open :class:`Database` (``with sa.Database(dest) as db:``, to run
several measures over one connection). Common terms:

- **fixed**: ``actual_status_category`` (``status_category`` in a sync of ``Finding``) is
  ``FIXED``. **open**: it is ``OPEN``. Ignored findings are left out of every measure.
- **fix time** (``fixed_at=``): ``"auto"`` (the default) is the time the copy's history saw the
  finding become fixed, where the history holds an earlier version that was not fixed, else the
  server's ``last_reported_time`` (the last scan that reported it; the fix came after it);
  ``"reported"`` is always ``last_reported_time``; ``"history"`` only the history's time
  (fixed findings without such a transition are then left out).
- **as of** (``as_of=``): the time open findings are counted up to. Default: the newest
  ``last_reported_time`` in the copy (the server's clock when the copy was made, not this
  machine's), else now.
- **time to remediate**: from ``discovered_time`` to the fix time. An open finding has not been
  fixed in ``as_of - discovered_time``: it is *censored* there, not dropped, and not counted as
  fixed. A mean over fixed findings alone leaves out the slowest (the ones still open) and is
  biased short; the Kaplan-Meier estimate is not.
- **groups** (``by=``): a column of ``findings``, a :class:`Tags`, or a list of them. A list
  column (a finding's tags, ``datasource_tags_values``, synced with
  ``fields="analyst datasource_tags_values"``) is unnested in the database: a finding counts
  once in the group of each of its values (a finding with two teams counts in both, so the
  groups' counts add up to more than the findings), and a finding with none is in the group
  ``None``. ``Tags(values=..., prefix=...)`` keeps only some values (the teams).
  The service has no scope column on findings (a scope is a filter, ``scopesid``): to measure
  one scope, sync its findings with ``filters=`` into a destination of their own.

Requires ``pip install 'secfindings[analytics]'`` (pandas; the charts of
:mod:`secfindings.report` also take plotly) and the destination's driver extra.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Sequence
from typing import Any

from secfindings._shared import need
from secfindings.analytics._db import Database, open_database
from secfindings.analytics._groups import By, Grouping, Tags, grouping, names_of
from secfindings.analytics._km import kaplan_meier, quantile
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.sync._dest import Destination

__all__ = [
    "AGE_BUCKETS",
    "Database",
    "Tags",
    "as_of",
    "backlog",
    "escape_rate",
    "overdue",
    "sla_adherence",
    "survival_curve",
    "time_to_remediate",
    "weekly",
]

DB = str | os.PathLike[str] | Destination | Database

DAY = 86_400.0
#: 1970-01-05 00:00 UTC, a Monday: weeks start on Mondays (UTC).
_MONDAY = 4 * DAY
AGE_BUCKETS = (7, 30, 90, 180, 365)
"""The upper ends (days) of the age buckets of :func:`backlog`."""
_FIXED_AT = ("auto", "reported", "history")


def _select(names: list[str], prefix: str = "f.") -> str:
    return "".join(f"{prefix}{_q(n)} AS {_q(n)}, " for n in names)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _floor(db: Database, expr: str) -> str:
    # PostgreSQL's CAST rounds; SQLite has floor() only with its math functions compiled in.
    if db.scheme == "sqlite":
        return f"CAST({expr} AS INTEGER) - (CAST({expr} AS INTEGER) > ({expr}))"
    return f"CAST(floor({expr}) AS BIGINT)"


def as_of(db: DB) -> dt.datetime:
    """The default ``as_of``: the newest ``last_reported_time`` in the copy, else now (UTC)."""
    con, close = open_database(db)
    try:
        return _as_of(con, None)
    finally:
        if close:
            con.close()


def _as_of(db: Database, given: dt.datetime | None) -> dt.datetime:
    if given is not None:
        if given.tzinfo is None:
            raise ValidationError("as_of must be an aware datetime (with a time zone)")
        return given
    if db.has("last_reported_time"):
        got = db.rows(f"SELECT max({db.seconds('last_reported_time')}) FROM findings")
        if got and got[0][0] is not None:
            return dt.datetime.fromtimestamp(float(got[0][0]), dt.timezone.utc)
    return dt.datetime.now(dt.timezone.utc)


def _fix_seconds(db: Database, fixed_at: str) -> tuple[str, str]:
    """A ``WITH`` part (or ``""``) and the expression of a finding's fix time in seconds
    (``f`` the findings, ``tr`` the history's transitions into FIXED)."""
    if fixed_at not in _FIXED_AT:
        raise ValidationError(f"fixed_at must be one of {', '.join(_FIXED_AT)}, got {fixed_at!r}")
    reported = db.seconds("f.last_reported_time") if db.has("last_reported_time") else "NULL"
    if fixed_at == "reported":
        if reported == "NULL":
            raise ConfigurationError(f"findings of {db} have no last_reported_time: use fixed_at='history'")
        return "", reported
    history = db.columns("findings_history")
    if history is None or db.status not in history:
        if fixed_at == "history":
            raise ConfigurationError(f"{db} has no findings_history with {db.status}")
        return "", reported
    st = _q(db.status)
    with_ = (
        "versions AS (SELECT id_int, valid_from, "
        f"{st} AS cat, LAG({st}) OVER (PARTITION BY id_int ORDER BY valid_from) AS prev "
        "FROM findings_history), "
        f"tr AS (SELECT id_int, max({db.seconds('valid_from')}) AS fixed_s FROM versions "
        "WHERE cat = 'FIXED' AND prev IS NOT NULL AND prev <> 'FIXED' GROUP BY id_int), "
    )
    expr = "tr.fixed_s" if fixed_at == "history" else f"coalesce(tr.fixed_s, {reported})"
    return with_, expr


def _spells(db: Database, groups: Grouping, fixed_at: str, at: dt.datetime) -> str:
    """``WITH ...`` up to ``spells``: per open or fixed finding (and per group of a list
    column) its group columns, ``start_s``, ``end_s`` (the fix time, or ``as_of`` for an open
    one) and ``event`` (1 fixed, 0 open)."""
    with_, fix = _fix_seconds(db, fixed_at)
    join = "LEFT JOIN tr ON tr.id_int = f.id_int " if with_ else ""
    st = f"f.{_q(db.status)}"
    now = db.time_literal(at)
    return (
        f"WITH {with_}{groups.with_}spells AS (SELECT {groups.select()}"
        f"{db.seconds('f.discovered_time')} AS start_s, "
        f"CASE WHEN {st} = 'FIXED' THEN {fix} ELSE {now} END AS end_s, "
        f"CASE WHEN {st} = 'FIXED' THEN 1 ELSE 0 END AS event "
        f"FROM findings f {join}{groups.join}"
        f"WHERE f.discovered_time IS NOT NULL AND ({st} = 'OPEN' OR ({st} = 'FIXED' AND {fix} IS NOT NULL)))"
    )


def _counts(db: Database, groups: Grouping, fixed_at: str, at: dt.datetime, resolution: float) -> Any:
    """Per group and time step: findings fixed (``fixed``) and still open (``censored``)."""
    if not resolution > 0:
        raise ValidationError("resolution must be a positive number of seconds")
    names = groups.names
    dur = "CASE WHEN end_s > start_s THEN end_s - start_s ELSE 0 END"
    step = _floor(db, f"({dur}) / {float(resolution)!r}")
    group = "".join(f"{_q(n)}, " for n in names)
    sql = (
        f"{_spells(db, groups, fixed_at, at)} "
        f"SELECT {group}{step} AS step, SUM(event) AS fixed, SUM(1 - event) AS censored "
        f"FROM spells GROUP BY {group}step ORDER BY {group}step"
    )
    return db.frame(sql)


def _groups(frame: Any, names: list[str]) -> list[tuple[tuple[Any, ...], Any]]:
    if not names:
        return [((), frame)]
    return [
        (key if isinstance(key, tuple) else (key,), part)
        for key, part in frame.groupby(names, sort=True, dropna=False)
    ]


def survival_curve(
    db: DB,
    by: By = None,
    *,
    fixed_at: str = "auto",
    as_of: dt.datetime | None = None,
    alpha: float = 0.05,
    resolution: float = 3600.0,
) -> Any:
    """The Kaplan-Meier curve of time to remediate, per group of ``by`` (a column of
    ``findings``, a :class:`Tags`, or a list of them; None for one curve). A list column (the
    tags) gives a curve per value, a finding in each of its values' curves (see *groups* in the
    module's docstring); every measure's ``by=`` takes the same.

    Columns: the ``by`` columns; ``days`` (time since discovery, in steps of ``resolution``
    seconds, a step's upper end); ``at_risk`` (findings neither fixed nor censored before that
    time); ``fixed`` (fixed in that step); ``censored`` (open findings whose time so far ends
    in that step); ``survival`` (the estimated share of findings not yet fixed at ``days``: the
    product of ``1 - fixed / at_risk`` over the steps so far); ``ci_low``, ``ci_high`` (its
    ``1 - alpha`` interval: Greenwood's variance on the log(-log) scale, as lifelines). Each
    group starts with a row at 0 days and survival 1.
    """
    pd_ = _pd()
    con, close = open_database(db)
    try:
        groups = grouping(con, by)
        names = groups.names
        at = _as_of(con, as_of)
        counts = _counts(con, groups, fixed_at, at, resolution)
    finally:
        if close:
            con.close()
    rows: list[dict[str, Any]] = []
    for key, part in _groups(counts, names):
        times = [(float(s) + 1) * resolution / DAY for s in part["step"]]
        curve = kaplan_meier(times, list(part["fixed"]), list(part["censored"]), alpha)
        base = dict(zip(names, key, strict=True))
        total = int(part["fixed"].sum() + part["censored"].sum())
        rows.append({**base, "days": 0.0, "at_risk": total, "fixed": 0, "censored": 0,
                     "survival": 1.0, "ci_low": 1.0, "ci_high": 1.0})  # fmt: skip
        for i, t in enumerate(curve.times):
            rows.append({**base, "days": t, "at_risk": curve.at_risk[i], "fixed": curve.fixed[i],
                         "censored": curve.censored[i], "survival": curve.survival[i],
                         "ci_low": curve.low[i], "ci_high": curve.high[i]})  # fmt: skip
    columns = [*names, "days", "at_risk", "fixed", "censored", "survival", "ci_low", "ci_high"]
    return pd_.DataFrame(rows, columns=columns)


def time_to_remediate(
    db: DB,
    by: By = None,
    *,
    percentiles: Sequence[float] = (0.5, 0.75, 0.9),
    fixed_at: str = "auto",
    as_of: dt.datetime | None = None,
    alpha: float = 0.05,
    resolution: float = 3600.0,
) -> Any:
    """Time to remediate per group of ``by``, from the Kaplan-Meier curve (open findings
    censored, see :func:`survival_curve`).

    Columns: the ``by`` columns; ``findings`` (open and fixed), ``fixed``, ``open``; for each
    ``p`` of ``percentiles`` (0.5 is the median) ``p50_days`` (the time by which that share of
    findings is estimated to be fixed: the first time the survival is at or below ``1 - p``),
    ``p50_low`` and ``p50_high`` (its ``1 - alpha`` interval: where the curve's interval
    crosses ``1 - p``). A value is missing (NaN) where the curve does not get that far: more
    than ``1 - p`` of the findings are still open at the longest time seen. Days, to the
    ``resolution`` (seconds, one hour by default).
    """
    for p in percentiles:
        if not 0 < p < 1:
            raise ValidationError(f"percentiles are shares between 0 and 1 (0.5 the median), got {p!r}")
    curve = survival_curve(db, by, fixed_at=fixed_at, as_of=as_of, alpha=alpha, resolution=resolution)
    names = names_of(by)
    rows = []
    for key, part in _groups(curve, names):
        times, surv = list(part["days"]), list(part["survival"])
        row: dict[str, Any] = dict(zip(names, key, strict=True))
        row["findings"] = int(part["at_risk"].iloc[0])
        row["fixed"] = int(part["fixed"].sum())
        row["open"] = int(part["censored"].sum())
        for p in percentiles:
            label = f"p{round(p * 100):g}"
            row[f"{label}_days"] = _none(quantile(times, surv, p))
            row[f"{label}_low"] = _none(quantile(times, list(part["ci_low"]), p))
            row[f"{label}_high"] = _none(quantile(times, list(part["ci_high"]), p))
        rows.append(row)
    labels = [f"p{round(p * 100):g}" for p in percentiles]
    columns = [
        *names,
        "findings",
        "fixed",
        "open",
        *(f"{x}_{k}" for x in labels for k in ("days", "low", "high")),
    ]
    return _pd().DataFrame(rows, columns=columns)


def _none(value: float | None) -> float:
    return float("nan") if value is None else value


def _pd() -> Any:
    return need("pandas", "analytics", "secfindings.analytics")


def sla_adherence(
    db: DB, by: By = "severity", *, fixed_at: str = "auto", as_of: dt.datetime | None = None
) -> Any:
    """SLA adherence per group of ``by`` (``due_date`` is the SLA's due date of a finding).

    Columns: the ``by`` columns; ``fixed`` (fixed findings with a due date),
    ``fixed_in_sla`` (of those, fixed at or before the due date), ``fixed_in_sla_share``
    (``fixed_in_sla / fixed``); ``open`` (open findings with a due date), ``overdue`` (of those,
    due before ``as_of``), ``overdue_share`` (``overdue / open``). Findings without a due date
    (no SLA) are left out. A share is NaN where its count is 0.
    """
    con, close = open_database(db)
    try:
        groups = grouping(con, by)
        names = groups.names
        con.column("due_date")
        at = _as_of(con, as_of)
        due = con.seconds("f.due_date")
        with_, fix = _fix_seconds(con, fixed_at)
        join = ("LEFT JOIN tr ON tr.id_int = f.id_int " if with_ else "") + groups.join
        with_ += groups.with_
        st = f"f.{_q(con.status)}"
        sql = (
            f"{'WITH ' + with_.rstrip(', ') if with_ else ''} SELECT {groups.select()}"
            f"SUM(CASE WHEN {st} = 'FIXED' AND {fix} IS NOT NULL THEN 1 ELSE 0 END) AS fixed, "
            f"SUM(CASE WHEN {st} = 'FIXED' AND {fix} <= {due} THEN 1 ELSE 0 END) AS fixed_in_sla, "
            f"SUM(CASE WHEN {st} = 'OPEN' THEN 1 ELSE 0 END) AS open, "
            f"SUM(CASE WHEN {st} = 'OPEN' AND {due} < {con.time_literal(at)} THEN 1 ELSE 0 END) AS overdue "
            f"FROM findings f {join}WHERE f.due_date IS NOT NULL {groups.group_by()}"
        )
        frame = con.frame(sql)
    finally:
        if close:
            con.close()
    for col in ("fixed", "fixed_in_sla", "open", "overdue"):
        frame[col] = frame[col].fillna(0).astype("int64")
    frame.insert(
        len(names) + 2, "fixed_in_sla_share", frame["fixed_in_sla"] / frame["fixed"].where(frame["fixed"] > 0)
    )
    frame["overdue_share"] = frame["overdue"] / frame["open"].where(frame["open"] > 0)
    return frame


def backlog(db: DB, by: By = "severity", *, as_of: dt.datetime | None = None) -> Any:
    """The open findings and how long they have been open, per group of ``by``.

    Columns: the ``by`` columns; ``open`` (open findings); ``mean_age_days`` and
    ``max_age_days`` (``as_of - discovered_time``, in days); one column per age bucket
    (``0-7d``, ``8-30d``, ``31-90d``, ``91-180d``, ``181-365d``, ``>365d``: open findings whose
    age in whole days falls in it).
    """
    con, close = open_database(db)
    try:
        groups = grouping(con, by)
        names = groups.names
        at = _as_of(con, as_of)
        age = f"(({con.time_literal(at)} - {con.seconds('f.discovered_time')}) / {DAY!r})"
        days = _floor(con, age)
        buckets = []
        for lo, hi in zip((0, *AGE_BUCKETS[:-1]), AGE_BUCKETS, strict=True):
            label = f"{lo + 1 if lo else 0}-{hi}d"
            buckets.append(
                f"SUM(CASE WHEN {days} > {lo if lo else -(10**9)} AND {days} <= {hi} THEN 1 ELSE 0 END) "
                f"AS {_q(label)}"
            )
        buckets.append(
            f"SUM(CASE WHEN {days} > {AGE_BUCKETS[-1]} THEN 1 ELSE 0 END) AS {_q(f'>{AGE_BUCKETS[-1]}d')}"
        )
        st = f"f.{_q(con.status)}"
        sql = (
            f"{'WITH ' + groups.with_.rstrip(', ') if groups.with_ else ''} "
            f"SELECT {groups.select()}COUNT(*) AS open, AVG({age}) AS mean_age_days, "
            f"MAX({age}) AS max_age_days, {', '.join(buckets)} FROM findings f {groups.join}"
            f"WHERE {st} = 'OPEN' AND f.discovered_time IS NOT NULL {groups.group_by()}"
        )
        frame = con.frame(sql)
    finally:
        if close:
            con.close()
    for col in frame.columns[len(names) :]:
        if col not in ("mean_age_days", "max_age_days"):
            frame[col] = frame[col].fillna(0).astype("int64")
    return frame


def weekly(
    db: DB,
    by: By = None,
    *,
    fixed_at: str = "auto",
    as_of: dt.datetime | None = None,
    weeks: int | None = None,
) -> Any:
    """Arrivals and burn-down per week (weeks start on Monday, UTC), per group of ``by``.

    Columns: the ``by`` columns; ``week`` (its Monday, a date); ``arrived`` (open or fixed
    findings discovered that week); ``fixed`` (findings whose fix time is in that week);
    ``open_at_end`` (the backlog at the week's end: arrived so far minus fixed so far, of the
    findings that are open or fixed now; ignored ones are left out). ``weeks=`` keeps the last
    so many weeks up to ``as_of`` (the backlog still counts everything before them).
    """
    pd_ = _pd()
    con, close = open_database(db)
    try:
        groups = grouping(con, by)
        names = groups.names
        at = _as_of(con, as_of)
        spells = _spells(con, groups, fixed_at, at)
        group = "".join(f"{_q(n)}, " for n in names)

        def wk(e: str) -> str:
            return _floor(con, f"(({e}) - {_MONDAY!r}) / {7 * DAY!r}")

        sql = (
            f"{spells}, ev AS (SELECT {group}{wk('start_s')} AS wk, 1 AS arrived, 0 AS fixed FROM spells "
            f"UNION ALL SELECT {group}{wk('end_s')} AS wk, 0 AS arrived, 1 AS fixed "
            "FROM spells WHERE event = 1) "
            f"SELECT {group}wk, SUM(arrived) AS arrived, SUM(fixed) AS fixed FROM ev "
            f"GROUP BY {group}wk ORDER BY {group}wk"
        )
        frame = con.frame(sql)
    finally:
        if close:
            con.close()
    last = int((at.timestamp() - _MONDAY) // (7 * DAY))
    out = []
    for key, part in _groups(frame, names):
        counts = {
            int(w): (int(a), int(f))
            for w, a, f in zip(part["wk"], part["arrived"], part["fixed"], strict=True)
        }
        first = min(counts) if counts else last
        backlog_ = 0
        for w in range(first, max(last, max(counts, default=last)) + 1):
            a, f = counts.get(w, (0, 0))
            backlog_ += a - f
            row = dict(zip(names, key, strict=True))
            monday = dt.datetime.fromtimestamp(_MONDAY + w * 7 * DAY, dt.timezone.utc).date()
            row.update(week=monday, arrived=a, fixed=f, open_at_end=backlog_)
            out.append((w, row))
    rows = [r for w, r in out if weeks is None or w > last - weeks]
    return pd_.DataFrame(rows, columns=[*names, "week", "arrived", "fixed", "open_at_end"])


def escape_rate(db: DB, by: By = None) -> Any:
    """Findings that came back after being fixed, per group of ``by`` (from the copy's
    ``findings_history``: only what the copy saw change).

    Columns: the ``by`` columns; ``fixed_ever`` (findings with a version that is fixed),
    ``reopened`` (of those, findings with an open version right after a fixed one),
    ``escape_rate`` (``reopened / fixed_ever``; NaN where none was ever fixed). Findings no
    longer in ``findings`` (removed) are left out.
    """
    con, close = open_database(db)
    try:
        groups = grouping(con, by)
        history = con.columns("findings_history")
        if history is None or con.status not in history:
            raise ConfigurationError(f"{con} has no findings_history with {con.status}: sync into it first")
        st = _q(con.status)
        sql = (
            f"WITH {groups.with_}v AS (SELECT id_int, {st} AS cat, "
            f"LAG({st}) OVER (PARTITION BY id_int ORDER BY valid_from) AS prev "
            "FROM findings_history), "
            "per AS (SELECT id_int, MAX(CASE WHEN cat = 'FIXED' THEN 1 ELSE 0 END) AS fixed_ever, "
            "MAX(CASE WHEN cat = 'OPEN' AND prev = 'FIXED' THEN 1 ELSE 0 END) AS reopened "
            "FROM v GROUP BY id_int) "
            f"SELECT {groups.select()}SUM(per.fixed_ever) AS fixed_ever, SUM(per.reopened) AS reopened "
            f"FROM per JOIN findings f ON f.id_int = per.id_int {groups.join}{groups.group_by()}"
        )
        frame = con.frame(sql)
    finally:
        if close:
            con.close()
    for col in ("fixed_ever", "reopened"):
        frame[col] = frame[col].fillna(0).astype("int64")
    frame["escape_rate"] = frame["reopened"] / frame["fixed_ever"].where(frame["fixed_ever"] > 0)
    return frame


def overdue(db: DB, *, limit: int = 20, as_of: dt.datetime | None = None) -> Any:
    """The open findings most overdue: ``due_date`` before ``as_of``, the longest overdue first.

    Columns: ``id_int``, and where the copy has them ``title``, ``severity``, ``source``,
    ``resource_name``; ``due_date`` (as stored); ``days_overdue`` (``as_of - due_date`` in days).
    """
    if limit < 1:
        raise ValidationError("limit must be at least 1")
    con, close = open_database(db)
    try:
        con.column("due_date")
        at = _as_of(con, as_of)
        extra = [c for c in ("title", "severity", "source", "resource_name") if con.has(c)]
        now = con.time_literal(at)
        days = f"(({now} - {con.seconds('f.due_date')}) / {DAY!r})"
        sql = (
            f"SELECT f.id_int AS id_int, {_select(extra)}f.due_date AS due_date, {days} AS days_overdue "
            f"FROM findings f WHERE f.{_q(con.status)} = 'OPEN' AND f.due_date IS NOT NULL "
            f"AND {con.seconds('f.due_date')} < {now} ORDER BY days_overdue DESC, f.id_int LIMIT {int(limit)}"
        )
        return con.frame(sql)
    finally:
        if close:
            con.close()
