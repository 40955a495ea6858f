"""1,000 findings by id: batched lookups (`client.findings(ids)`, and 1,000 `await
client.finding(i)` gathered on the AsyncClient, which coalesces them) against 1,000 `finding()`
calls of this library and against httpx one request per id, in the same run.

Three settings, each against an emulator in its own process (no response cache: the server
resolves every finding each time):

- loopback: no added latency, so the server's own work dominates;
- network: every request waits ``--latency-ms`` (default 50 ms) before it is answered, as a
  round trip to a real service would (tens to hundreds of milliseconds); the one-by-one
  contenders run ``--network-sample`` ids there and are scaled to 1,000 (their time is linear
  in the calls), the batched ones run all 1,000;
- rate limited: the emulator's token limit at 50 requests per 10 s. The batched lookup is timed
  whole; the one-by-one loop would take minutes, so it runs for a sample (``--sample`` calls)
  and is extrapolated: the first 50 calls of a fresh token pass at once, then each 50 more wait
  one window, so t(1000) = t(sample) / floor((sample - 1) / 50) * floor(999 / 50).

Rounds alternate the contenders, each in a fresh process that makes an untimed warm-up pass
first (not in the rate-limited setting, where every request counts); tables show medians.
"requests" is what the client sent (secfindings' own ``stats()["requests"]``, every attempt).
Writes `results/lookup.md` (or `--output-dir`). Ratios only: nothing here asserts a time.

Usage: python benches/bench_lookup.py [--quick] [--rounds N] [--latency-ms MS] [--sample N]
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

# The emulator: a process of its own that prints its URLs, then a new API token per line read
# on stdin (the token limit is per token: each contender starts with a full window).
SERVER = r"""
import sys
from secfindings.testing import Emulator
findings, latency_ms, limit = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
token_limit = tuple(map(float, limit.split("/"))) if limit != "-" else None
if token_limit:
    token_limit = (int(token_limit[0]), token_limit[1])
emu = Emulator(findings=findings, latency_ms=latency_ms, token_limit=token_limit)
print(f"base_url: {emu.base_url}\nauth_url: {emu.auth_url}", flush=True)
for line in sys.stdin:
    print(f"api_token: {emu.create_api_token(name='bench')}", flush=True)
emu.close()
"""

WORKER = r"""
import asyncio, json, os, sys, time
name, n, warm = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "warm"
base_url, auth_url, token = os.environ["B_BASE_URL"], os.environ["B_AUTH_URL"], os.environ["B_TOKEN"]
ids = list(range(1, n + 1))

if name == "httpx":
    import httpx
    try:
        import orjson
        dumps, loads = orjson.dumps, orjson.loads
    except ImportError:
        dumps, loads = (lambda o: json.dumps(o).encode()), json.loads
    sys.path.insert(0, os.environ["BENCH_DIR"])
    from _clients import Env, fetch_jwt
    from secfindings import _native
    selection = next(op["selection"] for op in _native.catalog() if op["name"] == "finding")
    query = "query finding($id: ID!) { finding(id: $id) { " + selection + " } }"
    os.environ.update(BENCH_BASE_URL=base_url, BENCH_AUTH_URL=auth_url, BENCH_API_TOKEN=token)
    h = httpx.Client(headers={"Authorization": "Bearer " + fetch_jwt(Env()),
                              "Content-Type": "application/json"}, timeout=60)
    sent = [0]
    def run():
        for i in ids:
            doc = loads(h.post(base_url, content=dumps({"query": query, "variables": {"id": i}})).content)
            assert doc["data"]["finding"]["id_int"] == i
            sent[0] += 1
    requests = lambda: sent[0]
else:
    import secfindings
    kw = dict(base_url=base_url, auth_url=auth_url, schema="builtin")
    if name == "gather":
        client = secfindings.AsyncClient(token, **kw)
        async def gathered():
            return await asyncio.gather(*(client.finding(i) for i in ids))
        def run():
            assert [f.id_int for f in asyncio.run(gathered())] == ids
    else:
        client = secfindings.Client(token, **kw)
        if name == "findings":
            def run():
                assert [f.id_int for f in client.findings(ids)] == ids
        else:
            def run():
                for i in ids:
                    assert client.finding(i).id_int == i
    requests = lambda: client.stats()["requests"]

if warm:
    run()
before = requests()
t = time.perf_counter()
run()
print(json.dumps({"seconds": time.perf_counter() - t, "requests": requests() - before}))
"""

CONTENDERS = {
    "findings": "`client.findings(ids)`",
    "gather": "1,000 `await client.finding(i)` gathered (AsyncClient)",
    "loop": "1,000 `client.finding(i)`",
    "httpx": "httpx, one request per id",
}


class Server:
    def __init__(self, findings: int, latency_ms: float, token_limit: str = "-") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-u", "-c", SERVER, str(findings), str(latency_ms), token_limit],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.urls = dict(self._line().split(": ", 1) for _ in range(2))

    def _line(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            raise RuntimeError("the emulator process stopped")
        return line

    def token(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return self._line().split(": ", 1)[1]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def run(server: Server, name: str, n: int, warm: bool) -> dict[str, float]:
    env = {
        **os.environ,
        "B_BASE_URL": server.urls["base_url"],
        "B_AUTH_URL": server.urls["auth_url"],
        "B_TOKEN": server.token(),
        "BENCH_DIR": str(HERE),
    }
    p = subprocess.run(
        [sys.executable, "-c", WORKER, name, str(n), "warm" if warm else "cold"],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{name}: {p.stderr[-1500:]}")
    result: dict[str, float] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


ONE_BY_ONE = ("loop", "httpx")


def rounds_of(server: Server, n: int, rounds: int, sample: int) -> dict[str, dict[str, float]]:
    """Medians per contender; the one-by-one contenders run ``sample`` ids (when fewer than
    ``n``) and are scaled to ``n``: over a network their time is linear in the calls."""
    seen: dict[str, list[dict[str, float]]] = {}
    for _ in range(rounds):
        for name in CONTENDERS:
            ids = min(sample, n) if name in ONE_BY_ONE else n
            r = run(server, name, ids, warm=True)
            seen.setdefault(name, []).append({k: v * n / ids for k, v in r.items()} | {"ids": ids})
    return {
        name: {key: statistics.median(r[key] for r in runs) for key in ("seconds", "requests", "ids")}
        for name, runs in seen.items()
    }


def table(results: dict[str, dict[str, float]], n: int) -> list[str]:
    best = results["findings"]["seconds"]
    lines = ["| contender | requests | wall clock | time / `findings()` time |", "|---|---:|---:|---:|"]
    for name, label in CONTENDERS.items():
        r = results[name]
        note = f" ({r['ids']:.0f} measured, scaled to {n:,})" if r["ids"] < n else ""
        lines.append(
            f"| {label}{note} | {r['requests']:.0f} | {r['seconds'] * 1000:,.0f} ms | "
            f"{r['seconds'] / best:.1f}x |"
        )
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round, a short rate-limited sample")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--latency-ms", type=float, default=50.0)
    ap.add_argument(
        "--network-sample", type=int, default=200, help="ids the one-by-one contenders run over the network"
    )
    ap.add_argument("--sample", type=int, default=151, help="calls of the rate-limited loop (> 50)")
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    args = ap.parse_args()
    rounds = 1 if args.quick else args.rounds
    sample = 101 if args.quick else max(args.sample, 51)
    n = 1000
    started = time.time()

    out: list[str] = [
        f"# 1,000 findings by id ({'quick' if args.quick else 'full'}) on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "",
        f"Emulator in its own process (5,000 findings, no response cache); medians of {rounds} "
        "alternating round(s), each contender in a fresh process after an untimed warm-up pass. "
        "`findings()` sends up to 100 aliased lookups per request.",
    ]
    settings = (
        ("loopback (no added latency)", 0.0, n),
        (f"network: {args.latency_ms:g} ms per request", args.latency_ms, args.network_sample),
    )
    for title, latency, one_by_one in settings:
        server = Server(5000, latency)
        try:
            results = rounds_of(server, n, rounds, one_by_one)
        finally:
            server.close()
        out += ["", f"## {title}", "", *table(results, n)]
        print("\n".join(out[-(len(CONTENDERS) + 4) :]), flush=True)

    server = Server(5000, 0.0, "50/10")
    try:
        batched = run(server, "findings", n, warm=False)
        looped = run(server, "loop", sample, warm=False)
    finally:
        server.close()
    windows = (sample - 1) // 50
    extrapolated = looped["seconds"] / windows * (999 // 50)
    out += [
        "",
        "## rate limited: the emulator's token limit at 50 requests per 10 s",
        "",
        "| contender | requests | wall clock | time / `findings()` time |",
        "|---|---:|---:|---:|",
        f"| `client.findings(ids)`, 1,000 ids | {batched['requests']:.0f} | "
        f"{batched['seconds'] * 1000:,.0f} ms | 1.0x |",
        f"| 1,000 `client.finding(i)` ({sample} measured: {looped['requests']:.0f} requests, "
        f"{looped['seconds']:.1f} s; extrapolated) | ~1,000 | ~{extrapolated:.0f} s | "
        f"~{extrapolated / batched['seconds']:,.0f}x |",
        "",
        f"Run took {time.time() - started:.0f} s; load average {os.getloadavg()[0]:.2f}.",
    ]
    text = "\n".join(out) + "\n"
    dest = Path(args.output_dir)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "lookup.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
