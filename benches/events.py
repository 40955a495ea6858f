"""Live events: how soon a subscriber hears of a new finding, and how many events per second it
can take, secfindings (`AsyncClient.subscribe`, `Client.subscribe`) against gql's aiohttp
WebSocket transport speaking the same protocol (graphql-transport-ws) to the same server.

Each contender runs in a fresh process with its own in-process emulator (its Rust threads do not
hold the GIL). Latency: one finding is created (the emulator's test hook, the server side of a
mutation) and the clock stops when its event reaches the consumer; one at a time, medians and
p99 over the events. Throughput: a burst of findings is created first, then a new subscription replays
them (`after` the cursor before the burst); events per second from subscribing to the last
event, so the figure is the client's, not the producer's. Rounds alternate
the contenders; the table shows medians over rounds. Writes `results/events.md` (or
`--output-dir`).

Usage: python benches/events.py [--quick] [--rounds N] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

WORKER = r"""
import asyncio, json, statistics, sys, time
from secfindings.testing import Emulator

name, n_latency, n_burst = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
DOC = ("subscription S($after: String) { finding_created(after: $after) { cursor kind occurred_at "
       "finding { id id_int title finding_score { score severity } } } }")
emu = Emulator(findings=1000)

def ready(n):
    while emu.subscription_stats()["active"] < n:
        time.sleep(0.001)

def burst():
    # The burst is on the server before the clock starts: the drain measures the client alone.
    before = emu.create_finding(5)[1]
    for _ in range(n_burst):
        emu.create_finding(5)
    return before

async def latency_async(next_event):
    for _ in range(20):  # warm-up
        emu.create_finding(5); await next_event()
    lat = []
    for _ in range(n_latency):
        t = time.perf_counter(); emu.create_finding(5); await next_event()
        lat.append(time.perf_counter() - t)
    return lat

if name == "secfindings-async":
    async def main():
        async with emu.async_client() as c:
            sub = c.subscribe(DOC)
            ready(1)
            lat = await latency_async(sub.__anext__)
            after = burst()
            t0 = time.perf_counter()
            drain = c.subscribe(DOC, {"after": after})
            for _ in range(n_burst):
                await drain.__anext__()
            return lat, time.perf_counter() - t0
    lat, dt = asyncio.run(main())
elif name == "gql-aiohttp":
    from gql import Client, gql
    from gql.transport.aiohttp_websockets import AIOHTTPWebsocketsTransport
    def transport():
        return AIOHTTPWebsocketsTransport(
            url=emu.base_url.replace("http://", "ws://"), subprotocols=["graphql-transport-ws"],
            init_payload={"Authorization": "Bearer " + emu.issue_jwt()})
    async def main():
        doc = gql(DOC)
        async with Client(transport=transport()) as session:
            agen = session.subscribe(doc).__aiter__()
            task = asyncio.ensure_future(agen.__anext__())
            await asyncio.get_running_loop().run_in_executor(None, ready, 1)
            first = [task]
            async def next_event():
                if first:
                    return await first.pop()
                return await agen.__anext__()
            lat = await latency_async(next_event)
        after = burst()
        t0 = time.perf_counter()
        async with Client(transport=transport()) as session:
            n = 0
            async for _ in session.subscribe(doc, variable_values={"after": after}):
                n += 1
                if n == n_burst:
                    break
        return lat, time.perf_counter() - t0
    lat, dt = asyncio.run(main())
else:  # secfindings-sync
    c = emu.client()
    sub = c.subscribe(DOC)
    ready(1)
    for _ in range(20):
        emu.create_finding(5); next(sub)
    lat = []
    for _ in range(n_latency):
        t = time.perf_counter(); emu.create_finding(5); next(sub)
        lat.append(time.perf_counter() - t)
    after = burst()
    t0 = time.perf_counter()
    drain = c.subscribe(DOC, {"after": after})
    for _ in range(n_burst):
        next(drain)
    dt = time.perf_counter() - t0
lat.sort()
print(json.dumps({"p50_us": statistics.median(lat) * 1e6, "p99_us": lat[int(len(lat) * 0.99) - 1] * 1e6,
                  "events_per_s": n_burst / dt}))
"""

CONTENDERS = ["secfindings-async", "gql-aiohttp", "secfindings-sync"]


def run(name: str, n_latency: int, n_burst: int) -> dict[str, float] | None:
    out = subprocess.run(
        [sys.executable, "-c", WORKER, name, str(n_latency), str(n_burst)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        print(f"{name} failed: {out.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int)
    ap.add_argument("--output-dir", type=Path, default=HERE / "results")
    ap.add_argument("--budget", type=float)  # accepted for bench.sh; the run is short anyway
    ap.add_argument("--skip-memory", action="store_true")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    n_latency, n_burst = (100, 1000) if args.quick else (500, 10000)
    results: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
    for _ in range(rounds):
        for name in CONTENDERS:
            r = run(name, n_latency, n_burst)
            if r is not None:
                results[name].append(r)

    def med(name: str, key: str) -> float | None:
        values = [r[key] for r in results[name]]
        return statistics.median(values) if values else None

    lines = [
        "# Live events (subscriptions over WebSocket)",
        "",
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.2f}; {rounds} round(s), {n_latency} events one at a time, "
        f"a burst of {n_burst}; medians over rounds.",
        "",
        "| client | event latency p50 | p99 | events/s |",
        "|---|---:|---:|---:|",
    ]
    for name in CONTENDERS:
        p50, p99, eps = med(name, "p50_us"), med(name, "p99_us"), med(name, "events_per_s")
        if p50 is None or p99 is None or eps is None:
            lines.append(f"| {name} | failed | | |")
            continue
        lines.append(f"| {name} | {p50:.0f} us | {p99:.0f} us | {eps:,.0f} |")
    a, g = med("secfindings-async", "p50_us"), med("gql-aiohttp", "p50_us")
    ea, eg = med("secfindings-async", "events_per_s"), med("gql-aiohttp", "events_per_s")
    lines.append("")
    if a and g and ea and eg:
        lines.append(
            f"secfindings (async) against gql + aiohttp: p50 latency {a / g:.2f}x gql's "
            f"(below 1 is faster), {ea / eg:.2f}x its events per second."
        )
    text = "\n".join(lines) + "\n"
    print(text)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    (args.output_dir / "events.md").write_text(text)
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
