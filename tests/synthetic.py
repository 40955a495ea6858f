"""Synthetic synced destinations with a known answer, for the analytics tests and the report's:
times to fix drawn from an exponential law of a known median, open findings censored at random
(independent censoring of rate 2/3 of the fix rate: 40% of findings are still open), written as
a sync writes them (``findings`` and ``findings_history``, DuckDB or SQLite)."""

from __future__ import annotations

import datetime as dt
import math
import random
import sqlite3
from pathlib import Path
from typing import Any

AS_OF = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
SOURCES = ("Wiz", "Snyk", "Orca")


def findings(n: int, median_days: float = 30.0, seed: int = 1, severity: int = 3) -> list[dict[str, Any]]:
    """``n`` findings: for each, the time it has been followed (censoring time C, from its
    discovery to ``AS_OF``) and its time to fix T; fixed at ``discovered + T`` when T < C, else
    still open. SLA: due 30 days after discovery."""
    rng = random.Random(seed)
    rate = math.log(2) / median_days
    rows = []
    for i in range(n):
        t = rng.expovariate(rate)
        c = rng.expovariate(rate * 2 / 3)
        discovered = AS_OF - dt.timedelta(days=c)
        fixed = t < c
        rows.append(
            {
                "id_int": i + 1,
                "title": f"finding {i + 1}",
                "severity": severity,
                "source": SOURCES[i % len(SOURCES)],
                "actual_status_category": "FIXED" if fixed else "OPEN",
                "discovered_time": discovered,
                "last_reported_time": discovered + dt.timedelta(days=t) if fixed else AS_OF,
                "due_date": discovered + dt.timedelta(days=30),
                "days_to_fix": t if fixed else None,
                "followed_days": min(t, c),
            }
        )
    return rows


COLUMNS = (
    "id_int", "title", "severity", "source", "actual_status_category", "discovered_time",
    "last_reported_time", "due_date",
)  # fmt: skip


def versions(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The history a sync of every change would have: an open version from discovery, and for a
    fixed finding a fixed one from its fix (``last_reported_time``)."""
    out = []
    for r in rows:
        base = {c: r[c] for c in COLUMNS}
        if r["actual_status_category"] == "FIXED":
            out.append({**base, "actual_status_category": "OPEN", "valid_from": r["discovered_time"],
                        "valid_to": r["last_reported_time"]})  # fmt: skip
            out.append({**base, "valid_from": r["last_reported_time"], "valid_to": None})
        else:
            out.append({**base, "valid_from": r["discovered_time"], "valid_to": None})
    return out


def write_duckdb(path: Path, rows: list[dict[str, Any]], history: list[dict[str, Any]] | None = None) -> str:
    import duckdb
    import pandas as pd

    con = duckdb.connect(str(path))
    current = pd.DataFrame([{c: r[c] for c in COLUMNS} for r in rows])
    hist = pd.DataFrame(history if history is not None else versions(rows))
    con.register("cur", current)
    con.register("hist", hist)
    con.execute("CREATE TABLE findings AS SELECT * FROM cur")
    con.execute(
        "CREATE TABLE findings_history AS SELECT * EXCLUDE (valid_to), "
        "CAST(valid_to AS TIMESTAMPTZ) AS valid_to FROM hist"
    )
    con.close()
    return str(path)


def _iso(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(timespec="microseconds")
    return value


def write_sqlite(path: Path, rows: list[dict[str, Any]], history: list[dict[str, Any]] | None = None) -> str:
    """As a sync into SQLite writes: timestamps as ISO 8601 text in UTC."""
    con = sqlite3.connect(str(path))
    cols = ", ".join(COLUMNS)
    marks = ", ".join("?" for _ in COLUMNS)
    con.execute(f"CREATE TABLE findings ({cols})")
    con.execute(f"CREATE TABLE findings_history ({cols}, valid_from, valid_to)")
    con.executemany(f"INSERT INTO findings VALUES ({marks})", [[_iso(r[c]) for c in COLUMNS] for r in rows])
    con.executemany(
        f"INSERT INTO findings_history VALUES ({marks}, ?, ?)",
        [[_iso(v[c]) for c in (*COLUMNS, "valid_from", "valid_to")] for v in (history or versions(rows))],
    )
    con.commit()
    con.close()
    return f"sqlite:///{path}"


def write_postgres(url: str, rows: list[dict[str, Any]], history: list[dict[str, Any]] | None = None) -> str:
    """Into a PostgreSQL database through ADBC (timestamps as TIMESTAMPTZ, as a sync makes them)."""
    import adbc_driver_postgresql.dbapi as pg
    import pyarrow as pa

    def table(items: list[dict[str, Any]], names: tuple[str, ...]) -> Any:
        columns = {}
        for name in names:
            values = [r[name] for r in items]
            if name in ("discovered_time", "last_reported_time", "due_date", "valid_from", "valid_to"):
                columns[name] = pa.array(values, pa.timestamp("us", tz="UTC"))
            else:
                columns[name] = pa.array(values)
        return pa.table(columns)

    with pg.connect(url) as con, con.cursor() as cur:
        cur.adbc_ingest("findings", table(rows, COLUMNS), mode="create")
        hist = history if history is not None else versions(rows)
        cur.adbc_ingest("findings_history", table(hist, (*COLUMNS, "valid_from", "valid_to")), mode="create")
        con.commit()
    return url
