"""Throughput and latency of the emulator itself (not of any client).

    .venv/bin/python benches/emulator_throughput.py [--findings 100000] [--duration 5] [--quick]

Starts ``secfindings.testing.Emulator(findings=N)`` in this process (the server runs on its own
Rust threads and never takes the GIL), takes a JWT from ``emu.issue_jwt()`` and drives it with the
raw-socket load generator in ``benches/_loadgen.py``: one Python thread, ``--connections``
keep-alive HTTP/1.1 connections with ``--depth`` pipelined requests in flight on each, request
bytes built in advance, responses framed by Content-Length and checked for status 200 and no
``"errors"``. Workloads:

- ``finding(id)``: one finding per request, ids spread over the whole data set;
- ``findings_view`` pages of 100 nodes at offsets spread over the data set (no cursor chain, so
  many pages can be in flight at once);
- ``{ __typename }``: the cost of the HTTP + JWT + GraphQL envelope with no data access.

Also the emulator's startup time with N findings (constructor, and until the first findings
query answers). Prints a table and writes ``benches/results/emulator.json``. The machine has two
cores shared by server and generator, so these figures are a lower bound on the server's capacity.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _loadgen import request_bytes, run_load

RESULTS = Path(__file__).resolve().parent / "results"

FINDING_QUERY = (
    "query GetFinding($id: ID!) { finding(id: $id) { id id_int title cloud_provider cloud_account "
    "age finding_score { score severity } } }"
)
PAGE_QUERY = (
    "query Page($first: Int, $offset: Int, $after: String) { findings_view(first: $first, offset: $offset,"
    " after: $after) { edges { cursor node { id id_int title score cloud_provider cloud_account"
    " resource_name age } } pageInfo { hasNextPage endCursor } } }"
)
TYPENAME_QUERY = "{ __typename }"


def machine_info() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "loadavg_at_start": [round(x, 2) for x in load],
    }


def probe(base_url: str, jwt: str, query: str, variables: dict[str, Any]) -> str | None:
    """None if the query answers 200 without errors, else a short reason."""
    res = run_load(
        base_url,
        lambda _i: request_bytes(base_url, jwt, query, variables),
        total=1,
        duration=10,
        connections=1,
        depth=1,
    )
    if res.errors or res.requests != 1:
        return (res.first_error or "no answer").split("\r\n\r\n", 1)[-1][:200]
    return None


def measure(
    base_url: str,
    name: str,
    requests: list[bytes],
    *,
    total: int,
    duration: float,
    connections: int,
    depth: int,
) -> list[dict[str, Any]]:
    """Two runs: saturating (``connections`` x ``depth`` in flight) for throughput and latency under
    load, then one connection with one request at a time for the latency of an idle server."""
    n = len(requests)
    rows = []
    for label, conns, dep, dur in (
        ("saturated", connections, depth, duration),
        ("sequential", 1, 1, max(0.5, duration / 2)),
    ):
        # a short warm-up (connections, server caches), then the measured run
        run_load(
            base_url,
            lambda i: requests[i % n],
            total=min(total, 300),
            duration=0.5,
            connections=conns,
            depth=dep,
        )
        res = run_load(
            base_url, lambda i: requests[i % n], total=total, duration=dur, connections=conns, depth=dep
        )
        rows.append({"workload": name, "mode": label, "connections": conns, "depth": dep, **res.summary()})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--findings", type=int, default=100_000)
    ap.add_argument("--duration", type=float, default=5.0, help="seconds per workload (upper bound)")
    ap.add_argument("--max-requests", type=int, default=500_000, help="requests per workload (upper bound)")
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--depth", type=int, default=16, help="pipelined requests in flight per connection")
    ap.add_argument("--quick", action="store_true", help="2k findings, 1 s per workload")
    ap.add_argument("--output", type=Path, default=RESULTS / "emulator.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.findings, args.duration = min(args.findings, 2_000), 1.0

    from secfindings.testing import Emulator

    t0 = time.perf_counter()
    emu = Emulator(findings=args.findings)
    t_construct = time.perf_counter() - t0
    try:
        base_url = emu.base_url
        jwt = emu.issue_jwt()
        first_page = request_bytes(base_url, jwt, PAGE_QUERY, {"first": 1})
        run_load(base_url, lambda _i: first_page, total=1, duration=30, connections=1, depth=1)
        t_ready = time.perf_counter() - t0

        n = args.findings
        ids = [1 + (i * 7919) % n for i in range(4096)] if n else [1]
        finding_reqs = [request_bytes(base_url, jwt, FINDING_QUERY, {"id": i}) for i in ids]
        pages = max(1, n // 100)
        page_reqs = [
            request_bytes(base_url, jwt, PAGE_QUERY, {"first": 100, "offset": ((i * 131) % pages) * 100})
            for i in range(min(pages, 1024))
        ]
        typename_req = [request_bytes(base_url, jwt, TYPENAME_QUERY)]

        rows: list[dict[str, Any]] = []
        plan = [
            ("finding(id)", FINDING_QUERY, {"id": ids[0]}, finding_reqs),
            ("findings_view page of 100", PAGE_QUERY, {"first": 100, "offset": 0}, page_reqs),
            ("{ __typename }", TYPENAME_QUERY, {}, typename_req),
        ]
        for name, query, variables, reqs in plan:
            why = probe(base_url, jwt, query, variables)
            if why is not None:
                rows.append({"workload": name, "skipped": f"the emulator rejects the query: {why}"})
                continue
            rows.extend(
                measure(
                    base_url,
                    name,
                    reqs,
                    total=args.max_requests,
                    duration=args.duration,
                    connections=args.connections,
                    depth=args.depth,
                )
            )
    finally:
        emu.close()

    report = {
        "machine": machine_info(),
        "findings": args.findings,
        "load_generator": (
            f"benches/_loadgen.py: one Python thread, {args.connections} raw keep-alive HTTP/1.1 sockets "
            f"x {args.depth} pipelined requests (selectors loop; prebuilt request bytes)"
        ),
        "startup": {"constructor_s": round(t_construct, 4), "until_first_page_s": round(t_ready, 4)},
        "workloads": rows,
    }
    print(
        f"emulator with {args.findings:,} findings; startup {t_construct * 1e3:.1f} ms "
        f"(first findings_view answered after {t_ready * 1e3:.1f} ms)"
    )
    print(f"load generator: {report['load_generator']}")
    print(
        f"{'workload':<28} {'mode':<11} {'req/s':>10} {'p50 ms':>9} {'p99 ms':>9} "
        f"{'requests':>9} {'errors':>7} {'gen CPU':>8}"
    )
    for r in rows:
        if "skipped" in r:
            print(f"{r['workload']:<28} skipped: {r['skipped']}")
        else:
            print(
                f"{r['workload']:<28} {r['mode']:<11} {r['rps']:>10,.0f} "
                f"{r['p50_ms']:>9.3f} {r['p99_ms']:>9.3f} "
                f"{r['requests']:>9} {r['errors']:>7} {r['generator_cpu_share']:>8.0%}"
            )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
