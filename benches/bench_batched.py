"""Aliased page batches (issue 37): requests and wall clock of findings walks read with
``pages_per_request=10`` against one page per request, side by side in one run, against the
in-process emulator.

1. 100,000 findings, ``to_arrow()`` of ``fields="id id_int title"``: requests, on the default and
   the ``known`` profile.
2. 20,000 findings under a token limit of 60 requests per 60 s and 50 ms latency, the client
   paced by ``rate_limit=(60, 60)``: wall clock and 429s. The single-page walk is measured on a
   smaller walk (``--single-findings``, under the limit) and extrapolated: its 201 requests take
   at least three more windows of 60 s (said so in the report).
3. The emulator's alias limit at 4, 100,000 findings: requests, every row once.
4. 50,000 findings, iterated in batches, 200 findings removed (behind and ahead of the walk) and
   200 added between batches: every row present at both ends once, none twice.

No figure is asserted; writes ``results/batched.md``.

``--sweep`` runs only the choice of the default instead: 1, 5, 10, 20 and 50 pages per request
on the same walk at 50 ms latency (``results/batched_sweep.md``).

Usage: python benches/bench_batched.py [--findings 100000] [--sweep] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from secfindings.testing import Emulator

HERE = Path(__file__).resolve().parent
FIELDS = "id id_int title"


def walk_requests(emu: Emulator) -> list[dict[str, Any]]:
    return [r for r in emu.request_log() if str(r["operation_name"]).startswith("findings_view")]


def requests_of(n: int, profile: str, per: int) -> tuple[int, int, bool]:
    with Emulator(findings=n, profile=profile) as emu, emu.client() as client:
        client.pages_per_request = per
        client.schema()
        emu.clear_request_log()
        ids = client.findings_view(fields=FIELDS).to_arrow().column("id_int").to_pylist()
        return len(walk_requests(emu)), len(emu.request_log()), len(ids) == len(set(ids)) == n


def paced(n: int, per: int) -> tuple[float, int, int]:
    with (
        Emulator(findings=n, token_limit=(60, 60.0), latency_ms=50) as emu,
        emu.client(rate_limit=(60, 60.0)) as client,
    ):
        client.pages_per_request = per
        client.schema()
        started = time.perf_counter()
        rows = client.findings_view(fields=FIELDS).to_arrow().num_rows
        took = time.perf_counter() - started
        statuses = Counter(r["status"] for r in emu.request_log())
        assert rows == n
        return took, statuses.get(429, 0), len(walk_requests(emu))


def alias_limit(n: int) -> tuple[int, bool, int]:
    with Emulator(findings=n) as emu, emu.client() as client:
        emu.set_document_limits(max_aliases=4)
        ids = client.findings_view(fields=FIELDS).to_arrow().column("id_int").to_pylist()
        refused = sum(1 for r in walk_requests(emu) if r["status"] != 200)
        return len(walk_requests(emu)), ids == sorted(set(ids)) and len(ids) == n, refused


def churn(n: int, changes: int) -> dict[str, Any]:
    with Emulator(findings=n) as emu, emu.client() as client:
        client.pages_per_request = 10
        before = set(client.findings_view(fields="id id_int").to_arrow().column("id_int").to_pylist())
        emu.clear_request_log()
        seen: list[int] = []
        removed: set[int] = set()
        added: set[int] = set()
        for page in client.findings_view(fields="id id_int").pages():
            seen.extend(f.id_int for f in page.items)
            if len(removed) < changes and seen:
                last = seen[-1]
                victim = last - 5 if len(removed) % 2 else last + 50  # behind, then ahead
                if victim in before and victim not in removed:
                    emu.remove_finding(victim)
                    removed.add(victim)
                added.add(emu.create_finding(3)[0])
        requests = len(walk_requests(emu))
        after = set(client.findings_view(fields="id id_int").to_arrow().column("id_int").to_pylist())
        counts = Counter(seen)
        both = before & after
        return {
            "removed": len(removed),
            "added": len(added),
            "twice": sum(1 for c in counts.values() if c > 1),
            "missed": len(both - set(seen)),
            "both": len(both),
            "requests": requests,
        }


def sweep(n: int, output_dir: Path) -> None:
    """``--sweep``: pages per request 5, 10, 20 and 50 on ``n`` findings at 50 ms latency (the
    choice of the default); writes ``results/batched_sweep.md``."""
    out = [f"# Pages per request: {n:,} findings, `to_arrow()`, 50 ms latency\n"]
    out.append(
        f"{platform.platform()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, one run.\n"
    )
    out.append("| pages per request | walk requests | wall clock |")
    out.append("|---:|---:|---:|")
    with Emulator(findings=n, latency_ms=50) as emu, emu.client() as client:
        client.schema()
        client.findings_view(fields="id", limit=10).to_arrow()  # the offset probe, once
        for per in (1, 5, 10, 20, 50):
            client.pages_per_request = per
            emu.clear_request_log()
            started = time.perf_counter()
            rows = client.findings_view(fields=FIELDS).to_arrow().num_rows
            took = time.perf_counter() - started
            assert rows == n
            out.append(f"| {per} | {len(walk_requests(emu)):,} | {took:.1f} s |")
            print(out[-1], flush=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "batched_sweep.md").write_text("\n".join(out) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--findings", type=int, default=100_000)
    ap.add_argument("--paced-findings", type=int, default=20_000)
    ap.add_argument("--single-findings", type=int, default=5_000)
    ap.add_argument("--churn-findings", type=int, default=50_000)
    ap.add_argument("--output-dir", type=Path, default=HERE / "results")
    ap.add_argument("--sweep", action="store_true", help="only the pages-per-request sweep")
    a = ap.parse_args()
    if a.sweep:
        sweep(a.findings, a.output_dir)
        return
    n = a.findings
    out: list[str] = []
    out.append(f"# Aliased page batches (issue 37): {n:,} findings\n")
    load = os.getloadavg()[0]
    out.append(
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores, load "
        f"average {load:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; in-process "
        "emulator, one run.\n"
    )
    out.append("## Requests of a walk read whole (`to_arrow()`)\n")
    out.append("| profile | pages per request | walk requests | all requests¹ | every row once |")
    out.append("|---|---:|---:|---:|---|")
    for profile in ("default", "known"):
        for per in (10, 1):
            walk, every, ok = requests_of(n, profile, per)
            out.append(f"| {profile} | {per} | {walk:,} | {every:,} | {'yes' if ok else 'NO'} |")
            print(out[-1], flush=True)
    out.append("\n¹ with the offset probe (once per server) of the batched walk.\n")

    pn = a.paced_findings
    out.append(f"## {pn:,} findings at a token limit of 60 per 60 s and 50 ms latency\n")
    took_b, r429_b, req_b = paced(pn, 10)
    took_s, r429_s, req_s = paced(a.single_findings, 1)
    single_requests = math.ceil(pn / 100)  # a walk ends on a page that says it is the last
    # Paced at 60 per 60 s: the first 60 go at once, every further 60 wait for the window.
    floor = (math.ceil(single_requests / 60) - 1) * 60.0 + single_requests * (took_s / max(1, req_s))
    out.append("| walk | findings | requests | 429s | wall clock |")
    out.append("|---|---:|---:|---:|---:|")
    out.append(f"| 10 pages per request | {pn:,} | {req_b:,} | {r429_b} | {took_b:.1f} s (measured) |")
    out.append(
        f"| 1 page per request | {a.single_findings:,} | {req_s:,} | {r429_s} | {took_s:.1f} s (measured) |"
    )
    out.append(
        f"| 1 page per request | {pn:,} | {single_requests:,} | - | at least {floor:.0f} s (extrapolated²) |"
    )
    out.append(
        f"\n² Not run: {single_requests} requests at 60 per 60 s wait for "
        f"{math.ceil(single_requests / 60) - 1} further windows of 60 s, plus each request's round "
        f"trip as measured on the smaller walk ({took_s / max(1, req_s) * 1e3:.0f} ms). Batched: "
        f"**{floor / took_b:.0f}x** faster.\n"
    )
    print(out[-2:], flush=True)

    out.append(f"## Alias limit 4, {n:,} findings\n")
    req, ok, refused = alias_limit(n)
    out.append(
        f"{req:,} requests ({refused} refused for their aliases while the size was halved), every "
        f"row once: {'yes' if ok else 'NO'}.\n"
    )
    print(out[-1], flush=True)

    cn = a.churn_findings
    c = churn(cn, 200)
    out.append(f"## {cn:,} findings, {c['removed']} removed and {c['added']} added between batches\n")
    out.append(
        f"{c['requests']:,} requests; rows present at both ends: {c['both']:,}, missed: {c['missed']}; "
        f"rows handed out twice: {c['twice']}.\n"
    )
    print(out[-1], flush=True)
    a.output_dir.mkdir(parents=True, exist_ok=True)
    (a.output_dir / "batched.md").write_text("\n".join(out))


if __name__ == "__main__":
    sys.exit(main())
