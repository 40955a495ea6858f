"""Two builds side by side on the hot paths: per call (``finding(id)``), per page (a
``findings_view`` walk of 100-row pages), ``to_arrow()`` of a walk, and the events of a
subscription draining a backlog. Each build is a ``python/`` folder holding the package with its
compiled ``_native`` (a checkout at the commit before a change, built, and this one); the worker
runs in a fresh interpreter with that folder first on ``sys.path``, against an in-process
emulator. Rounds alternate which build goes first. Prints medians over rounds and the ratio
after / before; no figure is asserted.

Usage: python benches/bench_pair.py BEFORE_DIR AFTER_DIR [--rounds 5] [--findings 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r"""
import json, sys, time
import secfindings
from secfindings.testing import Emulator

n_findings = int(sys.argv[1])
emu = Emulator(findings=n_findings)
client = emu.client()
out = {"package": secfindings.__file__}

ids = [secfindings.to_global_id("Finding", i) for i in range(1, 501)]
for gid in ids[:50]:
    client.finding(gid, fields="id title")
t = time.perf_counter()
for gid in ids:
    client.finding(gid, fields="id title")
out["call_us"] = (time.perf_counter() - t) / len(ids) * 1e6

fields = "id id_int title score cloud_provider"
client.findings_view(fields=fields, page_size=100, limit=1000).to_list()
t = time.perf_counter()
pages = 0
for _page in client.findings_view(fields=fields, page_size=100).pages():
    pages += 1
out["page_us"] = (time.perf_counter() - t) / pages * 1e6

t = time.perf_counter()
table = client.findings_view(fields=fields, page_size=100).to_arrow()
out["to_arrow_ms"] = (time.perf_counter() - t) * 1e3
assert table.num_rows == n_findings, table.num_rows

DOC = (
    "subscription S($after: String) { finding_created(after: $after) { cursor kind finding { id id_int } } }"
)
before = emu.create_finding(5)[1]
burst = 2000
for _ in range(burst):
    emu.create_finding(5)
t = time.perf_counter()
sub = client.subscribe(DOC, {"after": before})
for _ in range(burst):
    next(sub)
out["events_per_s"] = burst / (time.perf_counter() - t)
sub.close()
print(json.dumps(out))
"""

ROWS = [
    ("per call (finding, us)", "call_us", "{:.0f}"),
    ("per page (100 rows, us)", "page_us", "{:.0f}"),
    ("to_arrow (ms)", "to_arrow_ms", "{:.0f}"),
    ("events drained (per s)", "events_per_s", "{:,.0f}"),
]


def run(folder: str, findings: int) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=folder)
    done = subprocess.run(
        [sys.executable, "-c", WORKER, str(findings)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    if not str(result.pop("package")).startswith(os.path.abspath(folder)):
        raise SystemExit(f"{folder}: the worker imported another copy of the package")
    return result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--findings", type=int, default=20_000)
    args = ap.parse_args()
    builds = [("before", args.before), ("after", args.after)]
    seen: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for name, folder in builds if r % 2 == 0 else builds[::-1]:
            for key, value in run(folder, args.findings).items():
                seen.setdefault((name, key), []).append(value)
    load = os.getloadavg()[0]
    print(f"{args.rounds} rounds, {args.findings:,} findings, load average {load:.1f}")
    print("| path | before | after | after / before |")
    print("|---|---:|---:|---:|")
    for label, key, fmt in ROWS:
        b = statistics.median(seen[("before", key)])
        a = statistics.median(seen[("after", key)])
        print(f"| {label} | {fmt.format(b)} | {fmt.format(a)} | {a / b:.2f}x |")


if __name__ == "__main__":
    main()
