"""Two builds side by side: ``benches/bench_otel.py``'s worker (``client.finding(1)`` against the
in-process emulator with its response cache) run by two interpreters in turn, each with the
package of its own checkout, not instrumented (``off``) and instrumented with the SDK (``sdk``).
Rounds alternate which build goes first. Prints microseconds per call (median of rounds) for
each build and mode; no figure is asserted.

Usage: python benches/bench_otel_pair.py BEFORE_PYTHON AFTER_PYTHON [--calls 2000] [--rounds 5]
(for example the ``.venv/bin/python`` of a clone at the commit before a change, and this one's).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_otel


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    builds = [("before", args.before), ("after", args.after)]
    times: dict[tuple[str, str], list[float]] = {}
    for r in range(args.rounds):
        for mode in ("off", "sdk"):
            for name, python in builds if r % 2 == 0 else builds[::-1]:
                out = subprocess.run(
                    [python, "-c", bench_otel.WORKER, mode, str(args.calls)],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=True,
                )
                times.setdefault((name, mode), []).append(
                    json.loads(out.stdout.strip().splitlines()[-1])["us"]
                )
    print("| mode | before (us per call) | after (us per call) | after / before |")
    print("|---|---:|---:|---:|")
    for mode in ("off", "sdk"):
        b, a = statistics.median(times[("before", mode)]), statistics.median(times[("after", mode)])
        print(f"| {mode} | {b:.1f} | {a:.1f} | {a / b:.2f}x |")


if __name__ == "__main__":
    main()
