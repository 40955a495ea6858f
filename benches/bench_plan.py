"""The walk plan's strategies side by side, on both profiles of the emulator: what each way of
reading a partitioned walk costs in requests and time, per 100,000 findings.

The emulator runs in its own process with ``--latency-ms`` (every API request waits that long
before it is answered, as a round trip to the real service would), once with ``--profile
default`` (range filters and ``total_count``: the plan picks id ranges) and once with
``--profile known`` (only what the public facts show: no range condition, no count; the plan
picks offset slices, counting the rows with ``first: 1`` probes). On each, every strategy the
server allows is run by making the plan believe the others are refused (its probe memory, as a
refused probe would leave it): ``id_ranges`` (default only), ``offset_slices`` and
``sequential`` (what a server with neither gets). Each run is ``estimate(partitions=N)`` and
then ``to_arrow(partitions=N)`` of the same paginator (``fields="id id_int title score"``, 100
per page), with the requests counted by the client; every id is checked to come exactly once.

Prints one table (and writes ``results/plan.md``): the estimate's own requests and probes (with
``partitions=N`` it makes the split, offset slices' cursor probes included, and the walk takes it
over), the walk's requests and seconds, and the two together scaled to 100,000 findings. No
figure is asserted.

Usage: python benches/bench_plan.py [--findings 100000] [--latency-ms 50] [--partitions 8]
       [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import secfindings
from secfindings import _plan

HERE = Path(__file__).resolve().parent
FIELDS = "id id_int title score"
#: What the plan is told was refused, per strategy forced.
FORCED = {
    "id_ranges": {},
    "offset_slices": {_plan.ID_RANGE: False},
    "sequential": {_plan.ID_RANGE: False, _plan.OFFSET: False},
}
STRATEGIES = {
    "default": ["id_ranges", "offset_slices", "sequential"],
    "known": ["offset_slices", "sequential"],
}


class Server:
    """``python -m secfindings.emulator`` with a latency and a profile, in a process of its own."""

    def __init__(self, findings: int, latency_ms: int, profile: str) -> None:
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-u", "-m", "secfindings.emulator", "--port", "0"),
                *("--findings", str(findings), "--latency-ms", str(latency_ms), "--profile", profile),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        fields: dict[str, str] = {}
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and len(fields) < 3:
            line = self.proc.stdout.readline()
            if not line:
                break
            m = re.match(r"(base_url|auth_url|api_token):\s+(\S+)", line)
            if m:
                fields[m.group(1)] = m.group(2)
        if len(fields) != 3:
            self.close()
            raise RuntimeError("the emulator did not start")
        self.base_url, self.auth_url, self.api_token = (
            fields["base_url"],
            fields["auth_url"],
            fields["api_token"],
        )

    def client(self) -> secfindings.Client:
        return secfindings.Client(self.api_token, base_url=self.base_url, auth_url=self.auth_url)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def run(server: Server, strategy: str, partitions: int) -> dict[str, Any]:
    """One estimate and one walk with the plan held to ``strategy``."""
    _plan.forget(server.base_url)
    with server.client() as client:
        schema = client.schema()  # loaded before the clocks start
        for name, held in FORCED[strategy].items():
            _plan.remember(server.base_url, schema, name, held)
        pager = client.findings_view(fields=FIELDS, page_size=100)
        before = client.stats()["requests"]
        started = time.perf_counter()
        estimate = pager.estimate(partitions=partitions)
        estimate_seconds = time.perf_counter() - started
        middle = client.stats()["requests"]
        started = time.perf_counter()
        table = pager.to_arrow(partitions=partitions)
        seconds = time.perf_counter() - started
        made = client.stats()["requests"] - middle
    ids = table.column("id_int").to_pylist()
    return {
        "estimate": estimate,
        "estimate_requests": middle - before,
        "estimate_seconds": estimate_seconds,
        "requests": made,
        "seconds": seconds,
        "rows": len(ids),
        "once": len(ids) == len(set(ids)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--findings", type=int, default=100_000)
    parser.add_argument("--latency-ms", type=int, default=50)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--output-dir", default=str(HERE / "results"))
    args = parser.parse_args()
    os.environ.setdefault("SECFINDINGS_SCHEMA_CACHE", tempfile.mkdtemp(prefix="bench-plan-"))
    scale = 100_000 / args.findings
    head = [
        f"{args.findings:,} findings, {args.latency_ms} ms per request, partitions={args.partitions}, "
        f"100 per page; {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        "",
        "| profile | strategy | estimate: its requests (probes) | estimate: its time | requests estimated "
        "| walk: requests | walk: time | per 100k, estimate and walk: requests | per 100k: time "
        "| rows | each once |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    print("\n".join(head), flush=True)
    lines = list(head)
    for profile in ("default", "known"):
        server = Server(args.findings, args.latency_ms, profile)
        try:
            for strategy in STRATEGIES[profile]:
                got = run(server, strategy, args.partitions)
                est = got["estimate"]
                assert est.strategy == strategy, (est.strategy, strategy)
                line = (
                    f"| {profile} | {strategy.replace('_', ' ')} "
                    f"| {got['estimate_requests']:,} ({est.probes}) "
                    f"| {got['estimate_seconds']:.2f} s "
                    f"| {'unknown' if est.requests is None else format(est.requests, ',')} "
                    f"| {got['requests']:,} | {got['seconds']:.1f} s "
                    f"| {(got['requests'] + got['estimate_requests']) * scale:,.0f} "
                    f"| {(got['seconds'] + got['estimate_seconds']) * scale:.1f} s | {got['rows']:,} "
                    f"| {'yes' if got['once'] and got['rows'] == args.findings else 'NO'} |"
                )
                print(line, flush=True)
                lines.append(line)
        finally:
            server.close()
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
