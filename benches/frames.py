"""Findings as data: secfindings' columnar path against the hand-written alternatives.

Workloads (the emulator in its own process, response cache on, the same selection for all):

- pandas: 100,000 findings into a DataFrame. secfindings ``to_pandas()`` against httpx +
  orjson + ``pandas.json_normalize`` and against the library's own ``to_list()``.
- arrow: the same into an Arrow table / polars DataFrame. secfindings ``to_arrow()`` and
  ``to_polars()`` against httpx + orjson + ``pyarrow.Table.from_pylist``.
- parquet: 1,000,000 findings streamed to Parquet by ``write_parquet()``: peak RSS of the
  client's process.

Rounds are interleaved (every contender once per round, each in a fresh process that warms up
with one untimed pass first); the table shows medians and ratios. ``--quick`` is a smoke run with
small counts for CI. Writes ``results/frames.md`` (or ``--output-dir``).

Usage: python benches/frames.py [--quick] [--rounds N] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import Emulator  # noqa: E402

FIELDS = (
    "id id_int title score severity due_date last_reported_time discovered_time cloud_provider "
    "resource_type sla_status source actual_status { category } datasource_tags_values"
)
QUERY = (
    "query Page($first: Int, $after: String) { findings_view(first: $first, after: $after) "
    "{ edges { cursor node { " + FIELDS + " } } pageInfo { hasNextPage endCursor } } }"
)

# Each contender runs in a fresh process: WORKER <name> <count>, prints seconds (and peak RSS).
WORKER = r"""
import json, os, sys, time
name, count = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, os.environ["BENCH_DIR"])
FIELDS, QUERY = os.environ["BENCH_FIELDS"], os.environ["BENCH_QUERY"]

def secfindings_client():
    import secfindings
    return secfindings.Client(os.environ["BENCH_API_TOKEN"], base_url=os.environ["BENCH_BASE_URL"],
                              auth_url=os.environ["BENCH_AUTH_URL"])

def hand_nodes():
    import httpx, orjson
    from _clients import Env, fetch_jwt
    env = Env()
    with httpx.Client(headers={"Authorization": "Bearer " + fetch_jwt(env),
                               "Content-Type": "application/json"}) as h:
        after, out = None, []
        while len(out) < count:
            body = orjson.dumps({"query": QUERY, "variables": {"first": 100, "after": after}})
            doc = orjson.loads(h.post(env.base_url, content=body).content)
            if doc.get("errors"):
                raise RuntimeError(doc["errors"])
            conn = doc["data"]["findings_view"]
            out.extend(e["node"] for e in conn["edges"])
            if not conn["pageInfo"]["hasNextPage"]:
                break
            after = conn["pageInfo"]["endCursor"]
        return out[:count]

def run():
    if name == "secfindings.to_pandas":
        c = secfindings_client(); return c.findings_view(fields=FIELDS, limit=count).to_pandas()
    if name == "secfindings.to_list":
        c = secfindings_client(); return c.findings_view(fields=FIELDS, limit=count).to_list()
    if name == "secfindings.to_arrow":
        c = secfindings_client(); return c.findings_view(fields=FIELDS, limit=count).to_arrow()
    if name == "secfindings.to_polars":
        c = secfindings_client(); return c.findings_view(fields=FIELDS, limit=count).to_polars()
    if name == "httpx+orjson+json_normalize":
        import pandas as pd
        return pd.json_normalize(hand_nodes(), sep=".")
    if name == "httpx+orjson+from_pylist":
        import pyarrow as pa
        return pa.Table.from_pylist(hand_nodes())
    if name == "secfindings.write_parquet":
        c = secfindings_client()
        return c.findings_view(fields=FIELDS, limit=count).write_parquet(os.environ["BENCH_PARQUET"])
    raise SystemExit("unknown contender " + name)

if name != "secfindings.write_parquet":
    run()  # warm-up: imports, connections, the emulator's response cache
t = time.perf_counter()
out = run()
elapsed = time.perf_counter() - t
rows = out.rows if hasattr(out, "pages") else (out.num_rows if hasattr(out, "num_rows") else len(out))
peak = 0
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        peak = int(line.split()[1]) / 1024
print(json.dumps({"seconds": elapsed, "rows": rows, "peak_rss_mb": round(peak, 1)}))
"""


def run_worker(name: str, count: int, env: dict[str, str]) -> dict[str, float]:
    p = subprocess.run(
        [sys.executable, "-c", WORKER, name, str(count)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{name} failed: {p.stderr[-2000:]}")
    result: dict[str, float] = json.loads(p.stdout.strip().splitlines()[-1])
    if result["rows"] != count:
        raise RuntimeError(f"{name} returned {result['rows']} rows, expected {count}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small counts, one round (CI smoke)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    # bench.sh passes its own options through (--budget, --skip-memory): ignored here.
    args, _ = ap.parse_known_args()
    rows = 2_000 if args.quick else 100_000
    parquet_rows = 5_000 if args.quick else 1_000_000
    rounds = 1 if args.quick else args.rounds
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    contenders = [
        "secfindings.to_pandas",
        "secfindings.to_list",
        "httpx+orjson+json_normalize",
        "secfindings.to_arrow",
        "secfindings.to_polars",
        "httpx+orjson+from_pylist",
    ]
    times: dict[str, list[float]] = {c: [] for c in contenders}
    started = time.perf_counter()
    emu = Emulator(max(rows, 1000), timeout=300)
    try:
        env = {
            **os.environ,
            **emu.env,
            "BENCH_DIR": str(HERE),
            "BENCH_FIELDS": FIELDS,
            "BENCH_QUERY": QUERY,
        }
        for r in range(rounds):
            for c in contenders:
                times[c].append(run_worker(c, rows, env)["seconds"])
            print(f"round {r + 1}/{rounds}: " + ", ".join(f"{c} {times[c][-1]:.3f}s" for c in contenders))
    finally:
        emu.close()
    emu = Emulator(parquet_rows, timeout=600)
    try:
        env = {**os.environ, **emu.env, "BENCH_DIR": str(HERE), "BENCH_FIELDS": FIELDS, "BENCH_QUERY": QUERY}
        env["BENCH_PARQUET"] = str(out_dir / "frames-export.parquet")
        parquet = run_worker("secfindings.write_parquet", parquet_rows, env)
        Path(env["BENCH_PARQUET"]).unlink(missing_ok=True)
    finally:
        emu.close()

    med = {c: statistics.median(v) for c, v in times.items()}

    def ratio(a: str, b: str) -> str:
        return f"{med[b] / med[a]:.1f}x"

    def row(label: str, ours: str, theirs: str) -> str:
        alt = theirs.split(".", 1)[-1] if theirs.startswith("secfindings.") else theirs
        return (
            f"| {label} | {ours.split('.', 1)[1]} {med[ours]:.3f} s | {alt} {med[theirs]:.3f} s "
            f"| {ratio(ours, theirs)} |"
        )

    machine = platform.processor() or platform.machine()
    lines = [
        f"# findings as data ({'quick' if args.quick else 'full'}) on {machine}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, load {os.getloadavg()}",
        "",
        f"{rows:,} findings, {len(FIELDS.split())} selection tokens, "
        f"medians of {rounds} interleaved round(s).",
        "",
        "| workload | secfindings | alternative | ratio |",
        "|---|---:|---:|---:|",
        row("into pandas", "secfindings.to_pandas", "httpx+orjson+json_normalize"),
        row("into pandas vs own to_list()", "secfindings.to_pandas", "secfindings.to_list"),
        row("into Arrow", "secfindings.to_arrow", "httpx+orjson+from_pylist"),
        row("into polars", "secfindings.to_polars", "httpx+orjson+from_pylist"),
        f"| {parquet_rows:,} findings to Parquet | peak RSS {parquet['peak_rss_mb']:.0f} MB, "
        f"{parquet['seconds']:.1f} s | | |",
        "",
        f"Run took {time.perf_counter() - started:.0f} s.",
    ]
    text = "\n".join(lines) + "\n"
    (out_dir / "frames.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
