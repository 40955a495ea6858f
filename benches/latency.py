"""Sequential latency on an idle and on a loaded machine: one `finding(id)` after another, the
sync client against httpx + orjson, with the client's waiting spin on (default, 150 us) and off
(`SECFINDINGS_SPIN_US=0`).

The emulator runs in its own process with its response cache on. "Loaded" adds one process that
keeps a core busy for the length of the run. Rounds alternate the contenders (a fresh process
each) and the table shows medians. Writes `results/latency.md` (or `--output-dir`).

Usage: python benches/latency.py [--quick] [--rounds N] [--output-dir DIR]
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
sys.path.insert(0, str(HERE))

from bench import Emulator  # noqa: E402

WORKER = r"""
import json, os, sys, time
sys.path.insert(0, os.environ["BENCH_DIR"])
name, calls = sys.argv[1], int(sys.argv[2])
Q = "query Q($id: ID!) { finding(id: $id) { id id_int title } }"
if name == "httpx":
    import httpx, orjson
    from _clients import Env, fetch_jwt
    env = Env()
    headers = {"Authorization": "Bearer " + fetch_jwt(env), "Content-Type": "application/json"}
    h = httpx.Client(headers=headers)
    def call(i):
        orjson.loads(h.post(env.base_url, content=orjson.dumps({"query": Q, "variables": {"id": i}})).content)
else:
    import secfindings
    c = secfindings.Client(os.environ["BENCH_API_TOKEN"], base_url=os.environ["BENCH_BASE_URL"],
                           auth_url=os.environ["BENCH_AUTH_URL"])
    def call(i):
        c.execute(Q, {"id": i})
for i in range(300):
    call(i % 500 + 1)
t = time.perf_counter()
for i in range(calls):
    call(i % 500 + 1)
print(json.dumps({"us": (time.perf_counter() - t) / calls * 1e6}))
"""

BURNER = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass\n"

CONTENDERS = {
    "secfindings": {},
    "secfindings, spin off": {"SECFINDINGS_SPIN_US": "0"},
    "httpx + orjson": {},
}


def run(name: str, env: dict[str, str], calls: int) -> float:
    worker = "httpx" if name.startswith("httpx") else "secfindings"
    p = subprocess.run(
        [sys.executable, "-c", WORKER, worker, str(calls)],
        env={**env, **CONTENDERS[name]},
        capture_output=True,
        text=True,
        timeout=600,
    )
    if p.returncode != 0:
        raise RuntimeError(f"{name}: {p.stderr[-1500:]}")
    return float(json.loads(p.stdout.strip().splitlines()[-1])["us"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    args, _ = ap.parse_known_args()
    calls = 300 if args.quick else 2000
    rounds = 1 if args.quick else args.rounds
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    emu = Emulator(1000, timeout=120)
    results: dict[str, dict[str, list[float]]] = {"idle": {}, "loaded": {}}
    try:
        env = {**os.environ, **emu.env, "BENCH_DIR": str(HERE)}
        for state in ("idle", "loaded"):
            for _ in range(rounds):
                burner = None
                if state == "loaded":
                    burner = subprocess.Popen([sys.executable, "-c", BURNER, "600"])
                try:
                    for name in CONTENDERS:
                        results[state].setdefault(name, []).append(run(name, env, calls))
                finally:
                    if burner is not None:
                        burner.kill()
                        burner.wait()
    finally:
        emu.close()
    lines = [
        f"# sequential latency ({'quick' if args.quick else 'full'}) on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}",
        "",
        f"{calls} sequential `finding(id)` calls per run, medians of {rounds} alternating round(s); "
        "loaded: one extra process keeps a core busy.",
        "",
        "| machine | secfindings | spin off | httpx + orjson | ratio (httpx / secfindings) |",
        "|---|---:|---:|---:|---:|",
    ]
    for state, by in results.items():
        med = {k: statistics.median(v) for k, v in by.items()}
        lines.append(
            f"| {state} | {med['secfindings']:.0f} us | {med['secfindings, spin off']:.0f} us | "
            f"{med['httpx + orjson']:.0f} us | {med['httpx + orjson'] / med['secfindings']:.1f}x |"
        )
    text = "\n".join(lines) + "\n"
    (out / "latency.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
