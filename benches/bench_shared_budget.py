"""Four processes standing for four machines on one API token (issue 34): the token's request
budget kept in Redis, in PostgreSQL, and the control without a shared store.

Each process has its own budget folder and ``XDG_CACHE_HOME`` (so only the store is shared, as
between machines), and the last one runs with its wall clock 30 s ahead (Debian's ``faketime``;
the times it reports have the skew taken out, so that all are on one clock). The emulator runs
with a token limit of L requests per W seconds (default 200 per 60 s).

Two measures per mode:

- **Pacing**: every process walks ``findings_view`` page by page for ``--seconds`` with
  ``rate_limit=(90 % of L, W)`` and ``max_retries=0`` (so every 429 is counted; a booking that
  waits, waits). Reported: the emulator's 429 answers, the requests answered within the run, and
  the share of the limit used: those / (L x the windows of W the run touches, ceil(S / W)), as
  the limit allows a burst of L in each. Requests booked before the end that waited into the next
  window are answered after it: counted apart.
- **A server's Retry-After**: the four send small queries as fast as they can (no
  ``rate_limit``), ``max_retry_wait=1`` so a long wait is raised at once instead of slept; the
  emulator answers one request 429 with ``Retry-After: 30``. Reported: how long after the 429
  reached its process every other process was held back (the processes' wall clocks, the skew
  taken out), and how many requests of the others were answered after that (those
  already booked or in flight).

Figures only: nothing here asserts a time. Writes ``results/shared_budget.md`` (or
``--output-dir``). ``--quick`` is the smoke run (a 20 per 4 s limit, a few seconds a mode).
Needs Debian's redis-server and PostgreSQL 15 (tests/servers/ start throwaway ones) and, for the
skewed clock, ``faketime`` (without it, the fourth process runs on the true clock, and the report
says so).

Usage: python benches/bench_shared_budget.py [--quick] [--limit L/W] [--seconds S] [--skew S]
       [--rounds N] [--modes redis,postgresql,control]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

PACE = r"""
import json, sys, time, secfindings
base, auth, token, budget, rate, start, seconds, offset = sys.argv[1:9]
clock = lambda: time.time() - float(offset)  # the true time: the skew taken out
budget = True if budget == "-" else budget  # "-": this machine's own file budget
n, w = rate.split("/")
c = secfindings.Client(token, base_url=base, auth_url=auth, schema="off", max_retries=0,
                       rate_limit=(int(n), float(w)), max_retry_wait=3600, budget=budget)
while clock() < float(start):
    time.sleep(0.001)
deadline = float(start) + float(seconds)
after, done, refused = None, [], 0
query = ("query($after: String) { findings_view(first: 100, after: $after) "
         "{ edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }")
while clock() < deadline:
    try:
        page = c.execute(query, {"after": after})["findings_view"]
        done.append(clock())
        after = page["pageInfo"]["endCursor"] if page["pageInfo"]["hasNextPage"] else None
    except secfindings.RateLimitError:
        refused += 1
b = c.budget()
print(json.dumps({"done": done, "refused": refused, "store": getattr(b, "store", None),
                  "rate_limited": c.stats()["rate_limited"]}))
"""

RETRY_AFTER = r"""
import json, sys, time, secfindings
base, auth, token, budget, start, seconds, offset = sys.argv[1:8]
clock = lambda: time.time() - float(offset)  # the true time: the skew taken out
budget = True if budget == "-" else budget
c = secfindings.Client(token, base_url=base, auth_url=auth, schema="off", max_retries=0,
                       max_retry_wait=1.0, budget=budget)
while clock() < float(start):
    time.sleep(0.001)
deadline = float(start) + float(seconds)
sent, held, why = [], None, ""
while clock() < deadline:
    try:
        c.execute("{ finding(id: 1) { id } }")
        sent.append(clock())
    except secfindings.RateLimitError as e:
        held, why = clock(), str(e)[:200]
        break
b = c.budget()
until = b.blocked_until.timestamp() - time.time() if b.blocked_until is not None else None
print(json.dumps({"sent": sent, "held": held, "why": why, "got_429": c.stats()["rate_limited"],
                  "blocked_for": until}))
"""


def _env(folder: Path, skew: float) -> tuple[list[str], dict[str, str], float]:
    """The command prefix and environment of one "machine": its own cache and budget folder,
    and its clock ``skew`` seconds ahead (faketime) when asked and installed; and the skew
    given (the worker takes it out of its own figures, so all of them are on the true clock)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    env |= {"XDG_CACHE_HOME": str(folder / "cache"), "SECFINDINGS_BUDGET_DIR": str(folder / "budget")}
    env["PYTHONPATH"] = str(ROOT / "python")
    prefix: list[str] = []
    if skew and shutil.which("faketime"):
        # The monotonic clock is faked too (libfaketime's sleeps fail without it): what is
        # compared across processes is the wall clock, less the skew.
        prefix = ["faketime", "-f", f"{skew:+g}s"]
        return prefix, env, skew
    return prefix, env, 0.0


def _spawn(script: str, args: list[str], folders: list[Path], skew: float) -> list[dict[str, Any]]:
    procs = []
    for i, folder in enumerate(folders):
        prefix, env, offset = _env(folder, skew if i == len(folders) - 1 else 0.0)
        command = [*prefix, sys.executable, "-c", script, *args, str(offset)]
        # A session of its own: faketime runs the worker as its child, and both go at the end.
        procs.append(
            subprocess.Popen(command, stdout=subprocess.PIPE, env=env, text=True, start_new_session=True)
        )
    outs = []
    try:
        for p in procs:
            out, _ = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"a worker failed ({p.returncode})")
            outs.append(json.loads(out))
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    return outs


def pace(emu: Any, budget: str, args: argparse.Namespace, folders: list[Path]) -> dict[str, Any]:
    n, w = (float(x) for x in args.limit.split("/"))
    emu.set_rate_limit("token", (int(n), w))
    emu.reset_stats()
    token = emu.create_api_token("bench", f"pace-{budget[:5]}-{time.monotonic_ns()}")
    start = time.time() + args.startup
    urls = [emu.base_url, emu.auth_url, token]
    outs = _spawn(PACE, [*urls, budget, args.rate, str(start), str(args.seconds)], folders, args.skew)
    stats = emu.stats()
    # The share of the limit: the requests answered within the run against what the limit allows
    # in it (a burst of L at the start of each window it touches: L x ceil(S / W)). A request
    # booked before the end that waited into the next window is answered late: counted apart.
    end = start + args.seconds
    accepted = sum(1 for o in outs for t in o["done"] if t <= end)
    late = sum(1 for o in outs for t in o["done"] if t > end)
    windows = max(1, math.ceil(args.seconds / w))
    return {
        "429s": stats["rate_limited"],
        "accepted": accepted,
        "late": late,
        "windows": windows,
        "share": accepted / (n * windows),
        "stores": sorted({str(o["store"]) for o in outs}),
    }


def retry_after(emu: Any, budget: str, args: argparse.Namespace, folders: list[Path]) -> dict[str, Any]:
    emu.set_rate_limit("token", None)
    token = emu.create_api_token("bench", f"retry-{budget[:5]}-{time.monotonic_ns()}")
    start = time.time() + args.startup
    # The 429 is answered once all four are sending: half a second after they start.
    seconds = 2.5
    urls = [emu.base_url, emu.auth_url, token]
    procs_args = [*urls, budget, str(start), str(seconds)]

    def inject() -> None:
        time.sleep(max(0.0, start + 0.5 - time.time()))
        emu.inject("rate_limit", retry_after=args.retry_after)

    t = threading.Thread(target=inject)
    t.start()
    outs = _spawn(RETRY_AFTER, procs_args, folders, args.skew)
    t.join()
    hit = [o for o in outs if o["got_429"]]
    others = [o for o in outs if not o["got_429"]]
    held = [o for o in others if o["held"] is not None]
    t0 = hit[0]["held"] if hit else None
    reach = (
        max(o["held"] - t0 for o in held) if (t0 is not None and held and len(held) == len(others)) else None
    )
    # Requests per second per process while they all send, before the 429: a booking's cost.
    rates = sorted(sum(1 for t in o["sent"] if start + 0.1 <= t < start + 0.5) / 0.4 for o in outs)
    waits = [o["blocked_for"] for o in outs if o["blocked_for"] is not None]
    return {
        "rate": rates[len(rates) // 2],
        "waits": f"{len(waits)} of {len(outs)}: {min(waits):.1f} to {max(waits):.1f} s" if waits else "none",
        "processes hit by the 429": len(hit),
        "others held back": f"{len(held)} of {len(others)}",
        "reach_ms": None if reach is None else reach * 1000,
        "requests after the 429": sum(1 for o in others for t in o["sent"] if t0 is not None and t > t0),
        "blocked_for": [None if o["blocked_for"] is None else round(o["blocked_for"], 1) for o in outs],
        "why": sorted({o["why"].split(":")[0][:80] for o in outs if o["why"]}),
    }


def _over_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds of the Retry-After measure in one row: medians, and the worst round."""
    reaches = [r["reach_ms"] for r in rounds]
    rates = sorted(r["rate"] for r in rounds)
    return {
        "rounds": len(rounds),
        "rate": rates[len(rates) // 2],
        "others held back": " / ".join(sorted({r["others held back"] for r in rounds})),
        "reach_ms": None if None in reaches else sorted(reaches)[len(reaches) // 2],
        "worst_ms": None if None in reaches else max(reaches),
        "requests after the 429": max(r["requests after the 429"] for r in rounds),
        "waits": " / ".join(sorted({r["waits"] for r in rounds})),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="the smoke run: a 20 per 4 s limit, seconds a mode")
    ap.add_argument("--processes", type=int, default=4)
    ap.add_argument("--limit", default="200/60")
    ap.add_argument("--rate", default=None, help="each process's rate_limit as R/W (default: 90 %% of L)")
    ap.add_argument("--seconds", type=float, default=130.0)
    ap.add_argument("--skew", type=float, default=30.0, help="the last process's clock, seconds ahead")
    ap.add_argument("--retry-after", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of the Retry-After measure per store")
    ap.add_argument("--startup", type=float, default=3.0, help="seconds the workers get to start")
    ap.add_argument("--modes", default="redis,postgresql,control")
    ap.add_argument("--output-dir", type=Path, default=HERE / "results")
    args = ap.parse_args()
    # A TERM (a CI's timeout) stops the servers and workers too: the finally blocks run.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.quick:
        args.limit, args.seconds, args.rounds = "20/4", 6.0, 1
    n, w = args.limit.split("/")
    if args.rate is None:
        args.rate = f"{int(int(n) * 0.9)}/{w}"
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]

    sys.path.insert(0, str(ROOT))
    from tests.servers.postgres import PostgresServer
    from tests.servers.redis import RedisServer

    from secfindings.testing import Emulator

    redis = RedisServer() if "redis" in modes else None
    pg = PostgresServer() if "postgresql" in modes else None
    top = Path(tempfile.mkdtemp(prefix="bench-shared-budget-"))
    rows: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    try:
        # The control: "-", each machine's own file budget (its folder), nothing shared.
        urls = {"control": "-", "redis": "", "postgresql": ""}
        if redis is not None:
            redis.start()
            urls["redis"] = redis.url
        if pg is not None:
            pg.start()
            urls["postgresql"] = pg.create_database("budget")
        with Emulator(findings=20_000) as emu:
            for mode in modes:
                base = top / mode
                folders = [base / f"machine{i}" for i in range(args.processes)]
                for f in folders:
                    (f / "budget").mkdir(parents=True, mode=0o700)
                paced = pace(emu, urls[mode], args, folders)
                print(mode, paced, flush=True)
                rounds = []
                for _ in range(args.rounds):
                    rounds.append(retry_after(emu, urls[mode], args, folders))
                    print(mode, rounds[-1], flush=True)
                held = _over_rounds(rounds)
                rows.append((mode, paced, held))
    finally:
        if redis is not None:
            redis.stop()
        if pg is not None:
            pg.stop()
        shutil.rmtree(top, ignore_errors=True)
    text = report(args, rows)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "shared_budget.md").write_text(text)
    print(text)
    return 0


def report(args: argparse.Namespace, rows: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    n, w = args.limit.split("/")
    skewed = bool(shutil.which("faketime")) and args.skew
    lines = [
        f"# {args.processes} processes as {args.processes} machines on one token: token limit {n} per {w} s, "
        f"each at rate_limit {args.rate.replace('/', ' per ')} s, {args.seconds:g} s",
        "",
        f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}, "
        f"{os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M')}; each process its own budget folder and "
        f"XDG_CACHE_HOME; "
        + (
            f"the last one's clock {args.skew:+g} s (faketime)"
            if skewed
            else "no clock skewed (faketime missing)"
        ),
        "",
        f"| store | 429 answers | requests answered in the run | windows of {w} s | share of the limit used "
        "| answered after the run |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode, p, _ in rows:
        cells = [_name(mode), p["429s"], p["accepted"], p["windows"], f"{p['share']:.0%}", p["late"]]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += [
        "",
        f"A `Retry-After: {args.retry_after}` answered to one process, the four sending as fast as they can "
        "(times from the moment the 429 reached that process; the skewed clock's skew taken out):",
        "",
        f"| store | requests/s per process before it | others held back | all held back within (median of "
        f"{args.rounds}) | worst round | requests of the others answered after it (worst) "
        "| budget().blocked_until, from now |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for mode, _, r in rows:
        reach = "never" if r["reach_ms"] is None else f"{r['reach_ms']:.1f} ms"
        worst = "never" if r["worst_ms"] is None else f"{r['worst_ms']:.1f} ms"
        cells = [_name(mode), f"{r['rate']:,.0f}", r["others held back"], reach, worst]
        cells += [r["requests after the 429"], r["waits"]]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines) + "\n"


def _name(mode: str) -> str:
    return {"control": "none (each machine's file budget)", "redis": "Redis", "postgresql": "PostgreSQL"}[
        mode
    ]


if __name__ == "__main__":
    raise SystemExit(main())
