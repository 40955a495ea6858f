"""Several export processes on one API token against the server's token limit: with the shared
request budget (the default) and each process pacing itself alone (``budget=False``), in the
same run.

Each process walks ``findings_view`` page by page (100 findings a page) with
``rate_limit=(R, W)`` for ``--seconds`` seconds, with ``max_retries=0`` so that every 429 is
counted (and the walk goes on from where it stopped). The emulator runs in its own process with
a token limit of L requests per W seconds. Reported per mode: 429 answers, requests the server
accepted, and the share of the limit used: accepted / (L * the windows from the first answer to
the last). A request booked near the end of the run may wait up to a window past it.

The issue's own repro is the default: L = 60 per 10 s, four processes at R = 54 (the measured
313 answers of 429 in 12 s came from this setting without a shared budget). ``--limit 200/60``
runs the acceptance setting (a minute or more per mode).

Writes `results/budget.md` (or `--output-dir`). Figures only: nothing here asserts a time.

Usage: python benches/bench_budget.py [--quick] [--processes N] [--limit L/W] [--rate R] [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SERVER = r"""
import sys
from secfindings.testing import Emulator
n, w = sys.argv[1].split("/")
emu = Emulator(findings=20000, token_limit=(int(n), float(w)))
print(f"{emu.base_url} {emu.auth_url} {emu.create_api_token()}", flush=True)
for line in sys.stdin:
    if line.strip() == "stats":
        print(emu.stats()["api_requests"], emu.stats()["rate_limited"], flush=True)
    elif line.strip() == "reset":
        emu.set_rate_limit("token", (int(n), float(w)))
        emu.reset_stats()
        print("ok", flush=True)
"""

WORKER = r"""
import json, sys, time, secfindings
base, auth, token, rate, seconds, budget = sys.argv[1:7]
n, w = rate.split("/")
c = secfindings.Client(token, base_url=base, auth_url=auth, schema="off", max_retries=0,
                       rate_limit=(int(n), float(w)), max_retry_wait=3600,
                       budget=budget if budget != "off" else False)
deadline = time.monotonic() + float(seconds)
after, pages, refused, done = None, 0, 0, []
while time.monotonic() < deadline:
    try:
        page = c.execute(
            "query($after: String) { findings_view(first: 100, after: $after) "
            "{ edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }",
            {"after": after},
        )["findings_view"]
        pages += 1
        done.append(time.time())
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    except secfindings.RateLimitError:
        refused += 1
print(json.dumps({"pages": pages, "refused": refused, "done": done}))
"""


def run_mode(
    server: subprocess.Popen[str], urls: list[str], args: argparse.Namespace, budget: str
) -> dict[str, float | int | str]:
    assert server.stdin is not None
    assert server.stdout is not None
    server.stdin.write("reset\n")
    server.stdin.flush()
    server.stdout.readline()
    started = time.monotonic()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, *urls, args.rate, str(args.seconds), budget],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(args.processes)
    ]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    elapsed = time.monotonic() - started
    server.stdin.write("stats\n")
    server.stdin.flush()
    requests, refused = map(int, server.stdout.readline().split())
    n, w = (float(x) for x in args.limit.split("/"))
    accepted = requests - refused
    # The share of the limit: the requests accepted against what the limit allows over the
    # time from the first answer to the last (in windows, at least one).
    times = sorted(t for o in outs for t in o["done"])
    span = times[-1] - times[0] if times else 0.0
    windows = max(1.0, span / w)
    return {
        "mode": "shared budget" if budget != "off" else "each process alone",
        "429s": refused,
        "accepted": accepted,
        "pages": sum(o["pages"] for o in outs),
        "elapsed": elapsed,
        "share": accepted / (n * windows),
        "windows": windows,
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--limit", default="60/10")
    ap.add_argument("--rate", default=None, help="each process's rate_limit as R/W (default: 90 %% of L)")
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    n, w = args.limit.split("/")
    if args.rate is None:
        args.rate = f"{int(int(n) * 0.9)}/{w}"
    if args.quick:
        args.seconds = min(args.seconds, 4.0)
    with subprocess.Popen(
        [sys.executable, "-c", SERVER, args.limit], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as server:
        assert server.stdout is not None
        urls = server.stdout.readline().split()
        rows = []
        with tempfile.TemporaryDirectory() as folder:
            for budget in ("off", folder):
                rows.append(run_mode(server, urls, args, budget))
                print(rows[-1], flush=True)
        assert server.stdin is not None
        server.stdin.close()
    lines = [
        f"# {args.processes} processes on one token: token limit {n} per {w} s, each at rate_limit "
        f"{args.rate.replace('/', ' per ')} s, {args.seconds:g} s",
        "",
        f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d')}",
        "",
        f"| mode | 429 answers | requests accepted | windows of {w} s | share of the limit used |",
        "|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        cells = [r["mode"], r["429s"], r["accepted"], f"{r['windows']:.1f}", f"{r['share']:.0%}"]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    text = "\n".join(lines) + "\n"
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "budget.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
