"""client.sync() against to_arrow() for the same walk, and PostgreSQL loaders side by side.

    python benches/bench_sync.py                 # 1,000,000 findings
    python benches/bench_sync.py --findings 200000 --skip-executemany

The emulator runs in a process of its own (``secfindings emulator --response-cache``), so the
figures are the client's and the database's; each measurement runs in a fresh child process,
whose peak RSS is its own (``ru_maxrss``). Every walk is ``findings_view(fields="analyst")`` by
id, 100 findings a page, the walk of a first sync; it is walked once before the runs, so the
emulator answers each page from its cache in every measured run.

Measured (printed, not asserted):

- ``to_arrow``: the walk into one pyarrow Table (the reference throughput);
- ``sync duckdb`` / ``sync sqlite`` / ``sync postgres``: the first sync (staging, merge, history,
  state, commits every 100 pages);
- PostgreSQL, from the same pages: ``psycopg executemany`` (a Python tuple per finding, psycopg 3
  pipelines the INSERTs), ``psycopg COPY`` (``copy.write_row`` per finding, the usual hand-rolled
  loader) and ``adbc ingest`` (the Arrow batches as binary COPY, what the sync uses, without the
  sync's merge and history).

``--loaders-only`` times the three PostgreSQL loaders alone, from pages already in memory (each
in its best form: one ADBC stream, one psycopg COPY, one executemany).

Needs duckdb, adbc-driver-postgresql, adbc-driver-sqlite, psycopg[binary] and Debian's
PostgreSQL 15 (tests/servers/postgres.py starts a throwaway server).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIELDS = "analyst"


# ------------------------------------------------------------------------------ children


def _client():
    import secfindings

    env = os.environ
    return secfindings.Client(
        env["BENCH_TOKEN"], base_url=env["BENCH_BASE_URL"], auth_url=env["BENCH_AUTH_URL"], schema="builtin"
    )


def _walk(client):
    return client.findings_view(fields=FIELDS, sort="ID_ASC", page_size=100)


def _pg_table(cur, schema) -> None:
    types = {"int64": "BIGINT", "double": "DOUBLE PRECISION", "string": "TEXT", "bool": "BOOLEAN"}
    cols = []
    for f in schema:
        t = "TIMESTAMPTZ" if str(f.type).startswith("timestamp") else types.get(str(f.type), "TEXT")
        cols.append(f'"{f.name}" {t}')
    cur.execute(f"CREATE TABLE findings_hand ({', '.join(cols)})")


def _loaders(batches: list, mode: str, dest: str) -> int:
    """The three PostgreSQL loaders, each in its best form, from pages already in memory: ADBC
    ingests one stream of every batch; psycopg sends one COPY, or one executemany, of every
    row (a Python tuple per finding)."""
    import pyarrow as pa

    rows = sum(b.num_rows for b in batches)
    if mode == "adbc":
        import adbc_driver_postgresql.dbapi as pg

        with pg.connect(dest) as conn, conn.cursor() as cur:
            cur.adbc_ingest("findings_adbc", pa.RecordBatchReader.from_batches(batches[0].schema, batches))
            conn.commit()
        return rows
    import psycopg

    names = ", ".join(f'"{n}"' for n in batches[0].schema.names)
    with psycopg.connect(dest) as conn, conn.cursor() as cur:
        _pg_table(cur, batches[0].schema)
        values = [row for b in batches for row in zip(*(c.to_pylist() for c in b.columns), strict=True)]
        if mode == "executemany":
            marks = ", ".join(["%s"] * batches[0].num_columns)
            cur.executemany(f"INSERT INTO findings_hand ({names}) VALUES ({marks})", values)
        else:
            with cur.copy(f"COPY findings_hand ({names}) FROM STDIN") as copy:
                for row in values:
                    copy.write_row(row)
        conn.commit()
    return rows


def child(mode: str, dest: str) -> dict[str, float]:
    client = _client()
    rows = 0
    if mode.startswith("load_"):
        # The loader alone: the pages are read first, then only the load is timed.
        batches = list(_walk(client).to_arrow_batches())
        t0 = time.perf_counter()
        rows = _loaders(batches, mode[len("load_") :], dest)
        seconds = time.perf_counter() - t0
        return {"rows": rows, "seconds": seconds, "peak_rss_mb": 0.0}
    t0 = time.perf_counter()
    if mode == "to_arrow":
        rows = _walk(client).to_arrow().num_rows
    elif mode.startswith("sync"):
        result = client.sync(dest)
        rows = result.rows_read
    elif mode in ("pg_executemany", "pg_copy"):
        import psycopg

        with psycopg.connect(dest) as conn, conn.cursor() as cur:
            created = False
            for batch in _walk(client).to_arrow_batches():
                if not created:
                    _pg_table(cur, batch.schema)
                    created = True
                names = ", ".join(f'"{n}"' for n in batch.schema.names)
                values = list(zip(*(c.to_pylist() for c in batch.columns), strict=True))
                if mode == "pg_executemany":
                    marks = ", ".join(["%s"] * batch.num_columns)
                    cur.executemany(f"INSERT INTO findings_hand ({names}) VALUES ({marks})", values)
                else:
                    with cur.copy(f"COPY findings_hand ({names}) FROM STDIN") as copy:
                        for row in values:
                            copy.write_row(row)
                rows += batch.num_rows
            conn.commit()
    elif mode == "adbc_ingest":
        import adbc_driver_postgresql.dbapi as pg

        with pg.connect(dest) as conn, conn.cursor() as cur:
            for batch in _walk(client).to_arrow_batches():
                cur.adbc_ingest("findings_adbc", batch, mode="create_append")
                rows += batch.num_rows
            conn.commit()
    else:
        raise SystemExit(f"unknown mode {mode}")
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"rows": rows, "seconds": seconds, "peak_rss_mb": peak}


# ------------------------------------------------------------------------------ driver


def _start_emulator(findings: int) -> tuple[subprocess.Popen[str], dict[str, str]]:
    command = [sys.executable, "-m", "secfindings", "emulator", "--port", "0", "--response-cache"]
    proc = subprocess.Popen(
        [*command, "--findings", str(findings)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    env: dict[str, str] = {}
    assert proc.stdout is not None
    deadline = time.monotonic() + 300
    while len(env) < 3 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the emulator stopped")
        # export SECFINDINGS_BASE_URL=..., SECFINDINGS_AUTH_URL=..., SECFINDINGS_API_TOKEN=...
        if line.startswith("export SECFINDINGS_"):
            name, _, value = line[len("export SECFINDINGS_") :].strip().partition("=")
            key = {"BASE_URL": "BENCH_BASE_URL", "AUTH_URL": "BENCH_AUTH_URL", "API_TOKEN": "BENCH_TOKEN"}
            if name in key:
                env[key[name]] = value
    if len(env) < 3:
        raise SystemExit(f"could not read the emulator's URLs and token: {env}")
    return proc, env


def run_child(mode: str, dest: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--dest", dest],
        env={**os.environ, **env, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stderr[-3000:]}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--findings", type=int, default=1_000_000)
    parser.add_argument("--child")
    parser.add_argument("--dest", default="")
    parser.add_argument("--skip-executemany", action="store_true", help="the slowest loader")
    parser.add_argument("--repeat", type=int, default=1, help="runs of to_arrow and sync duckdb")
    parser.add_argument("--duckdb-only", action="store_true", help="to_arrow and sync duckdb only")
    parser.add_argument(
        "--loaders-only", action="store_true", help="the PostgreSQL loaders from pages in memory only"
    )
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.dest)))
        return

    sys.path.insert(0, str(ROOT))
    from tests.servers.postgres import PostgresServer

    proc, env = _start_emulator(args.findings)
    server = PostgresServer()
    folder = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    results: list[tuple[str, dict[str, float]]] = []
    try:
        server.start()
        run_child("to_arrow", "", env)  # the emulator caches every page of the walk
        if args.loaders_only:
            for mode in ("adbc", "copy", "executemany"):
                got = run_child(f"load_{mode}", server.create_database(f"l_{mode}"), env)
                results.append((f"load: {mode}", got))
            for name, r in results:
                rate = r["rows"] / r["seconds"]
                print(f"{name:22} {int(r['rows']):>10,} rows {r['seconds']:>8.2f} s {rate:>12,.0f} rows/s")
            return
        for i in range(args.repeat):
            results.append(("to_arrow", run_child("to_arrow", "", env)))
            results.append(("sync duckdb", run_child("sync", str(folder / f"f{i}.duckdb"), env)))
        if args.duckdb_only:
            return _report(args, results)
        results.append(("sync sqlite", run_child("sync", f"sqlite:///{folder}/f.sqlite", env)))
        results.append(("sync postgres", run_child("sync", server.create_database("sync"), env)))
        results.append(("adbc ingest", run_child("adbc_ingest", server.create_database("adbc"), env)))
        results.append(("psycopg COPY", run_child("pg_copy", server.create_database("copy"), env)))
        if not args.skip_executemany:
            results.append(
                ("psycopg executemany", run_child("pg_executemany", server.create_database("em"), env))
            )
    finally:
        server.stop()
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(folder, ignore_errors=True)
    _report(args, results)


def _report(args: argparse.Namespace, results: list[tuple[str, dict[str, float]]]) -> None:
    arrow = max(r["rows"] / r["seconds"] for name, r in results if name == "to_arrow")
    print(f"\n{args.findings:,} findings, fields={FIELDS!r}, 100 a page; {os.cpu_count()} CPUs")
    print(f"{'what':22} {'rows':>10} {'seconds':>8} {'rows/s':>10} {'vs to_arrow':>12} {'peak RSS':>10}")
    for name, r in results:
        rate = r["rows"] / r["seconds"]
        print(
            f"{name:22} {int(r['rows']):>10,} {r['seconds']:>8.2f} {rate:>10,.0f} "
            f"{rate / arrow:>11.0%} {r['peak_rss_mb']:>8.0f} MB"
        )


if __name__ == "__main__":
    main()
