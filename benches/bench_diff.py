"""Snapshot diffs at scale: ``secfindings.diff(base, head)`` on two Parquet exports of N findings
each (default 1,000,000), with each of its engines (Arrow compute, the fallback; DuckDB, where
installed), against the same diff written in DuckDB SQL alone, and the OCSF / SARIF writers'
memory on a long export.

The snapshots are made here (no server): ids 1..N with the columns an export has (title, severity,
score, status key and category, SLA status, due date), and HEAD = BASE with known edits: 1% gone,
1% new, 1% severity changes, 0.5% closed, 0.2% reopened, 1% SLA changes. Each diff runs in a fresh
process that reads both files and diffs them; the figures are wall time (reading included) and
the process's peak RSS, medians of ``--rounds`` interleaved rounds. The counts of every run are
checked against the edits made.

``--formats N`` also streams N emulator findings through ``write_ocsf`` and ``write_sarif``
(emulator in its own process) and prints the writer process's peak RSS: memory stays at about a
page.

Usage: python benches/bench_diff.py [--rows N] [--rounds R] [--formats N] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def make(rows: int, folder: Path) -> dict[str, int]:
    """BASE and HEAD Parquet files with known edits; returns the expected counts."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(7)
    ids = np.arange(1, rows + 1, dtype=np.int64)
    severity = rng.integers(1, 6, rows)
    score = np.round(rng.random(rows) * 10, 2)
    key = rng.choice(
        np.array(["10", "11", "12", "20", "21", "30", "31"]), rows, p=[0.4, 0.1, 0.2, 0.1, 0.1, 0.05, 0.05]
    )
    cat_of = {
        "10": "OPEN",
        "11": "OPEN",
        "12": "OPEN",
        "20": "FIXED",
        "21": "FIXED",
        "30": "IGNORED",
        "31": "IGNORED",
    }
    category = np.vectorize(cat_of.get)(key)
    sla = rng.choice(np.array(["ON_TRACK", "AT_RISK", "OVERDUE", "NO_SLA"]), rows)
    due = (1_700_000_000 + rng.integers(0, 30_000_000, rows)) * 1_000_000
    titles = np.array([f"CVE-2024-{n:05d} - a vulnerability in package {n % 977}" for n in range(1000)])
    title = titles[rng.integers(0, 1000, rows)]

    def table(i, sev, sc, k, cat, s, d, t):
        return pa.table(
            {
                "id_int": i,
                "title": t,
                "severity": sev,
                "score": sc,
                "actual_status.key": k,
                "actual_status.category": cat,
                "sla_status": s,
                "due_date": pa.array(d, pa.timestamp("us", "UTC")),
            }
        )

    pq.write_table(table(ids, severity, score, key, category, sla, due, title), folder / "base.parquet")
    n = rows // 100
    pick = rng.permutation(rows)
    gone = pick[:n]
    sev_changed = pick[n : 2 * n]
    open_idx = np.flatnonzero(category == "OPEN")
    closed_idx = np.flatnonzero(category != "OPEN")
    rest = np.setdiff1d(np.arange(rows), pick[: 2 * n])
    close = np.intersect1d(rest, open_idx)[: rows // 200]
    reopen = np.intersect1d(rest, closed_idx)[: rows // 500]
    sla_changed = np.setdiff1d(rest, np.concatenate([close, reopen]))[:n]
    h_sev, h_key, h_cat, h_sla = severity.copy(), key.copy(), category.copy(), sla.copy()
    h_sev[sev_changed] = h_sev[sev_changed] % 5 + 1
    h_key[close], h_cat[close] = "20", "FIXED"
    h_key[reopen], h_cat[reopen] = "10", "OPEN"
    h_sla[sla_changed] = np.where(h_sla[sla_changed] == "OVERDUE", "ON_TRACK", "OVERDUE")
    keep = np.ones(rows, bool)
    keep[gone] = False
    new_ids = np.arange(rows + 1, rows + n + 1, dtype=np.int64)
    cat_new = np.full(n, "OPEN")

    def cat(a, b):
        return np.concatenate([a[keep], b])

    head = table(
        cat(ids, new_ids),
        cat(h_sev, rng.integers(1, 6, n)),
        cat(score, np.round(rng.random(n) * 10, 2)),
        cat(h_key, np.full(n, "10")),
        cat(h_cat, cat_new),
        cat(h_sla, np.full(n, "ON_TRACK")),
        cat(due, due[:n]),
        cat(title, title[:n]),
    )
    pq.write_table(head, folder / "head.parquet")
    return {
        "new": n,
        "resolved": int((category[gone] == "OPEN").sum()) + len(close),
        "reopened": len(reopen),
        "changed": len(sev_changed)
        + len(sla_changed)
        - int(np.isin(sev_changed, np.concatenate([close, reopen])).sum()),
    }


DUCKDB_SQL = """
with b as (select id_int, severity, score, "actual_status.key" as k,
                  "actual_status.category" = 'OPEN' as o, sla_status as s, due_date as d
           from read_parquet('{base}')),
     h as (select id_int, severity, score, "actual_status.key" as k,
                  "actual_status.category" = 'OPEN' as o, sla_status as s, due_date as d
           from read_parquet('{head}')),
     j as (select coalesce(b.id_int, h.id_int) as id_int,
                  b.id_int is not null as ib, h.id_int is not null as ih,
                  coalesce(b.o, false) as ob, coalesce(h.o, false) as oh,
                  b.severity is distinct from h.severity as c_sev,
                  b.score is distinct from h.score as c_score,
                  b.k is distinct from h.k as c_status,
                  b.s is distinct from h.s as c_sla,
                  b.d is distinct from h.d as c_due
           from b full outer join h on b.id_int = h.id_int),
     k as (select *, case when ih and not ib then 'new'
                          when (ib and not ih and ob) or (ib and ih and ob and not oh) then 'resolved'
                          when ib and ih and not ob and oh then 'reopened'
                          when ib and ih and (c_sev or c_score or c_status or c_sla or c_due) then 'changed'
                     end as change
           from j)
select id_int, change, c_sev, c_score, c_status, c_sla, c_due
from k where change is not null order by change, id_int
"""


NAMES = {
    "pyarrow": "secfindings.diff, Arrow compute (the fallback)",
    "duckdb": "secfindings.diff, DuckDB (where installed)",
    "sql": "the diff alone in DuckDB SQL over the files (reference)",
}


def peak_rss_mb() -> float:
    """This process's peak RSS (VmHWM: ru_maxrss would carry the parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_one(engine: str, base: str, head: str) -> None:
    """One timed diff in this (fresh) process, after its imports (pyarrow, and duckdb for the
    engines that use it): prints JSON with seconds, peak RSS and counts."""
    import pyarrow.compute
    import pyarrow.parquet  # noqa: F401 - every engine's imports before the clock starts

    if engine != "pyarrow":
        import duckdb
    if engine in ("pyarrow", "duckdb"):
        import secfindings.diff  # noqa: F401

        module = sys.modules["secfindings.diff"]
        start = time.perf_counter()
        result = module._diff(base, head, engine=engine)
        counts = {k: result.counts[k] for k in ("new", "resolved", "reopened", "changed")}
    else:
        import duckdb

        start = time.perf_counter()
        con = duckdb.connect()
        con.execute("set threads to 2")
        table = con.sql(DUCKDB_SQL.format(base=base, head=head)).arrow()
        if not hasattr(table, "column"):  # a RecordBatchReader in newer DuckDB
            table = table.read_all()
        kinds = table.column("change").to_pylist()
        counts = {k: kinds.count(k) for k in ("new", "resolved", "reopened", "changed")}
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb(), "counts": counts}))


def measure(engine: str, base: Path, head: Path) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, __file__, "--run", engine, str(base), str(head)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


WRITER = r"""
import json, os, resource, sys, tempfile, time
import secfindings
from secfindings.formats import FIELDS
fmt = sys.argv[1]
c = secfindings.Client(os.environ["BENCH_API_TOKEN"], base_url=os.environ["BENCH_BASE_URL"],
                       auth_url=os.environ["BENCH_AUTH_URL"])
path = os.path.join(tempfile.mkdtemp(), "out")
t = time.perf_counter()
r = getattr(c.findings_view(fields=FIELDS), "write_" + fmt)(path)
print(json.dumps({"rows": r.rows, "seconds": time.perf_counter() - t, "bytes": os.path.getsize(path),
                  "rss_mb": next(int(x.split()[1]) / 1024 for x in open("/proc/self/status")
                                 if x.startswith("VmHWM:"))}))
os.unlink(path)
"""


def formats(n: int) -> list[str]:
    """write_ocsf, write_sarif (and write_jsonl to compare) of n findings from an emulator in its
    own process, each writer in a fresh process: rows, time, file size and peak RSS."""
    import re

    emu = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-m",
            "secfindings.emulator",
            "--port",
            "0",
            "--findings",
            str(n),
            "--response-cache",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    env = dict(os.environ)
    rows = []
    try:
        assert emu.stdout is not None
        for line in emu.stdout:
            m = re.match(r"(base_url|auth_url|api_token):\s+(\S+)", line)
            if m:
                env["BENCH_" + m.group(1).upper()] = m.group(2)
            if line.startswith("serving"):
                break
        for fmt in ("jsonl", "ocsf", "sarif"):
            out = subprocess.run([sys.executable, "-c", WRITER, fmt], capture_output=True, text=True, env=env)
            if out.returncode:
                raise SystemExit(out.stderr[-2000:])
            got = json.loads(out.stdout.strip().splitlines()[-1])
            print(f"write_{fmt}: {got}", flush=True)
            rows.append(
                f"| `write_{fmt}` | {got['rows']:,} | {got['seconds']:.1f} s "
                f"| {got['bytes'] / 1e6:,.0f} MB | {got['rss_mb']:.0f} MB |"
            )
    finally:
        emu.terminate()
        emu.wait()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--formats", type=int, default=0, help="also stream N findings to OCSF and SARIF")
    parser.add_argument("--output-dir", type=Path, default=HERE / "results")
    parser.add_argument("--run", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        run_one(*args.run)
        return
    engines = ["pyarrow"]
    try:
        import duckdb  # noqa: F401

        engines += ["duckdb", "sql"]
    except ImportError:
        pass
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = time.perf_counter()
        expected = make(args.rows, folder)
        print(
            f"made 2 x {args.rows:,} rows in {time.perf_counter() - t:.1f} s; expected {expected}", flush=True
        )
        runs: dict[str, list[dict[str, object]]] = {e: [] for e in engines}
        for r in range(args.rounds):
            for e in engines:
                got = measure(e, folder / "base.parquet", folder / "head.parquet")
                if got["counts"] != expected:
                    raise SystemExit(f"{e} counted {got['counts']}, expected {expected}")
                runs[e].append(got)
                print(f"round {r + 1} {e}: {got['seconds']:.2f} s, {got['rss_mb']:.0f} MB", flush=True)
    lines = [
        f"# Snapshot diff, {args.rows:,} x {args.rows:,} findings",
        "",
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d')}; medians of {args.rounds} interleaved rounds, each a fresh process "
        "reading both Parquet files and diffing them (reading included). Load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after (other work on the machine slows "
        "every figure).",
        "",
        "| engine | time | peak RSS | target |",
        "|---|---:|---:|---|",
    ]
    for e in engines:
        sec = statistics.median(float(x["seconds"]) for x in runs[e])  # type: ignore[arg-type]
        rss = statistics.median(float(x["rss_mb"]) for x in runs[e])  # type: ignore[arg-type]
        ok = "met" if sec < 5 and rss < 500 else "**missed**"
        name = NAMES[e]
        lines.append(f"| {name} | {sec:.2f} s | {rss:.0f} MB | < 5 s, < 500 MB: {ok} |")
    lines.append(f"\nEdits found exactly in every run: {expected}.")
    if args.formats:
        lines += ["", f"## OCSF and SARIF, {args.formats:,} findings streamed", ""]
        lines += ["| writer | rows | time | file | peak RSS |", "|---|---:|---:|---:|---:|"]
        lines += formats(args.formats)
    text = "\n".join(lines) + "\n"
    print(text)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "diff.md").write_text(text)


if __name__ == "__main__":
    main()
