"""What OpenTelemetry costs a call: ``client.finding(1)`` against the in-process emulator (its
response cache on, so the server's part is small), in fresh processes, rounds interleaved:

- ``not instrumented``: ``secfindings.otel`` never imported (the process checks that no
  ``opentelemetry`` module is loaded at the end): the cost of the extra when it is unused;
- ``instrumented, API only``: ``instrument()`` with OpenTelemetry's default (no-op) providers;
- ``instrumented, SDK``: ``instrument()`` with the SDK's tracer and meter providers, spans to a
  batch processor with an exporter that drops them (the cost of making and recording them).

Prints microseconds per call (median of rounds) and the ratio to the uninstrumented call;
writes ``results/otel.md``. No figure is asserted.

Usage: python benches/bench_otel.py [--calls 3000] [--rounds 5] [--output-dir DIR]
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

WORKER = r"""
import json, sys, time
mode, calls = sys.argv[1], int(sys.argv[2])
if mode != "off":
    import secfindings.otel
    if mode == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
        from opentelemetry.sdk.metrics import MeterProvider

        class Drop(SpanExporter):
            def export(self, spans):
                return SpanExportResult.SUCCESS

        tp = TracerProvider()
        tp.add_span_processor(BatchSpanProcessor(Drop()))
        secfindings.otel.instrument(tracer_provider=tp, meter_provider=MeterProvider())
    else:
        secfindings.otel.instrument()
from secfindings.testing import Emulator
with Emulator(findings=100, response_cache=True) as emu, emu.client() as client:
    for _ in range(300):
        client.finding(1)
    t = time.perf_counter()
    for _ in range(calls):
        client.finding(1)
    us = (time.perf_counter() - t) / calls * 1e6
loaded = sorted(m for m in sys.modules if m.startswith("opentelemetry"))
print(json.dumps({"us": us, "otel_modules": len(loaded)}))
"""

MODES = {"off": "not instrumented", "api": "instrumented, API only", "sdk": "instrumented, SDK"}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    args = ap.parse_args()
    got: dict[str, list[float]] = {m: [] for m in MODES}
    modules: dict[str, int] = {}
    for r in range(args.rounds):
        order = list(MODES) if r % 2 == 0 else list(reversed(MODES))
        for mode in order:
            out = subprocess.run(
                [sys.executable, "-c", WORKER, mode, str(args.calls)],
                capture_output=True,
                text=True,
                check=True,
            )
            result = json.loads(out.stdout.strip().splitlines()[-1])
            got[mode].append(result["us"])
            modules[mode] = result["otel_modules"]
            print(f"round {r + 1}: {MODES[mode]}: {result['us']:.1f} us per call", flush=True)
    base = statistics.median(got["off"])
    lines = [
        "# OpenTelemetry: the cost of a call",
        "",
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"`client.finding(1)` x {args.calls} per process, in-process emulator with its response cache, "
        f"medians of {args.rounds} interleaved rounds.",
        "",
        "| | us per call | vs not instrumented | opentelemetry modules loaded |",
        "|---|---:|---:|---:|",
    ]
    for mode, name in MODES.items():
        us = statistics.median(got[mode])
        lines.append(f"| {name} | {us:.1f} | {us / base:.2f}x | {modules[mode]} |")
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    out_dir = Path(args.output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "otel.md").write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
