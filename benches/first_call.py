"""The first call of a new process: what learning the server's schema costs.

Each contender is a fresh process that builds a client and makes one typed call
(`finding(id)`), timed from just before the client is built to the result (interpreter start and
`import secfindings` excluded; the lazy `import graphql` included). Contenders: the schema off
(no checks, the floor), the live schema with a cold cache (introspection first), and with a warm
disk cache (no introspection). API round trips are the client's own count. The emulator runs in
its own process. Writes `results/first_call.md` (or `--output-dir`).

Usage: python benches/first_call.py [--quick] [--rounds N] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench import Emulator  # noqa: E402

WORKER = r"""
import json, os, time
import secfindings
t = time.perf_counter()
c = secfindings.Client(os.environ["BENCH_API_TOKEN"], base_url=os.environ["BENCH_BASE_URL"],
                       auth_url=os.environ["BENCH_AUTH_URL"], schema=os.environ["BENCH_SCHEMA"])
c.finding(1)
ms = (time.perf_counter() - t) * 1e3
print(json.dumps({"ms": ms, "requests": c.stats()["requests"]}))
"""

CONTENDERS = ["schema off", "live, cold cache", "live, warm disk cache"]


def run(name: str, env: dict[str, str], cache: str) -> dict[str, float]:
    mode = "off" if name == "schema off" else "live"
    if name == "live, cold cache":
        cache = tempfile.mkdtemp(prefix="secfindings-bench-cold-")
    p = subprocess.run(
        [sys.executable, "-c", WORKER],
        env={**env, "BENCH_SCHEMA": mode, "SECFINDINGS_SCHEMA_CACHE": cache},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{name}: {p.stderr[-1500:]}")
    result: dict[str, float] = json.loads(p.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    args, _ = ap.parse_known_args()
    rounds = 2 if args.quick else args.rounds
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    emu = Emulator(1000, timeout=120)
    warm = tempfile.mkdtemp(prefix="secfindings-bench-warm-")
    results: dict[str, list[dict[str, float]]] = {c: [] for c in CONTENDERS}
    try:
        env = {**os.environ, **emu.env}
        run("live, warm disk cache", env, warm)  # fills the warm cache
        for _ in range(rounds):
            for name in CONTENDERS:
                results[name].append(run(name, env, warm))
    finally:
        emu.close()
    lines = [
        f"# first call of a process ({'quick' if args.quick else 'full'}) on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "",
        f"Client built and one `finding(id)` answered, in a fresh process; medians of {rounds} "
        "alternating round(s). Round trips: API requests the client made.",
        "",
        "| schema | first call | API round trips | above schema off |",
        "|---|---:|---:|---:|",
    ]
    base = statistics.median(r["ms"] for r in results["schema off"])
    for name, rs in results.items():
        ms = statistics.median(r["ms"] for r in rs)
        trips = statistics.median(r["requests"] for r in rs)
        lines.append(f"| {name} | {ms:.1f} ms | {trips:.0f} | {ms - base:+.1f} ms |")
    text = "\n".join(lines) + "\n"
    (out / "first_call.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
