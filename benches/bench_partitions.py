"""Parallel walks over a network-like latency: findings to Parquet, ``partitions=8`` against the
sequential walk, in the same run.

The emulator runs in its own process with ``--latency-ms 50`` (every API request waits 50 ms
before it is answered, as a round trip to the real service would). Each round exports the same
walk (all findings, ``fields="id id_int title severity score"``, 100 per page) once sequentially
and once with ``partitions=8``, alternating which goes first; every export is then read back and
checked: every id exactly once (the same ids as the sequential export). Before each export,
``estimate()`` predicts the requests; the report sets them beside the requests the client made.

Prints the medians and the ratio (sequential / partitioned); writes ``results/partitions.md``.
No figure is asserted: a benchmark reports, it does not fail on a slow machine.

``--estimates`` runs the estimate's table instead (results/estimates.md): 20,000 findings,
sequential and ``partitions=8``, without a rate limit and at ``rate_limit=(100, 10.0)``, each
export right after ``estimate()`` of the same paginator; requests and time, estimated and taken.

Usage: python benches/bench_partitions.py [--findings 100000] [--latency-ms 50] [--rounds 2]
       [--partitions 8] [--quick] [--estimates] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

import secfindings

HERE = Path(__file__).resolve().parent
FIELDS = "id id_int title severity score"


class Server:
    """``python -m secfindings.emulator`` with a latency, in a process of its own."""

    def __init__(self, findings: int, latency_ms: int) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-u",
                "-m",
                "secfindings.emulator",
                "--port",
                "0",
                "--findings",
                str(findings),
                "--latency-ms",
                str(latency_ms),  # whole milliseconds
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        fields: dict[str, str] = {}
        assert self.proc.stdout is not None
        deadline = time.monotonic() + 120
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
        self.base_url = fields["base_url"]
        self.auth_url = fields["auth_url"]
        self.api_token = fields["api_token"]

    def client(self) -> secfindings.Client:
        return secfindings.Client(self.api_token, base_url=self.base_url, auth_url=self.auth_url)

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def export(server: Server, path: Path, partitions: int) -> dict[str, Any]:
    """One export, timed from the paginator to the closed file (the estimate is not timed)."""
    with server.client() as client:
        client.schema()  # the live schema is loaded before the clock starts, for both
        estimate = client.findings_view(fields=FIELDS, page_size=100).estimate(partitions=partitions)
        before = client.stats()["requests"]
        started = time.perf_counter()
        pager = client.findings_view(fields=FIELDS, page_size=100)
        result = pager.write_parquet(path, partitions=partitions)
        seconds = time.perf_counter() - started
        made = client.stats()["requests"] - before
    ids = pq.read_table(path, columns=["id_int"]).column("id_int").to_pylist()
    return {
        "seconds": seconds,
        "rows": result.rows,
        "ids": ids,
        "requests": made,
        "estimated": estimate.requests,
        "estimate": estimate,
    }


def estimates(server: Server, partitions: int, output_dir: str) -> int:
    """The estimate against the walk, with and without a budget (see the module's doc)."""
    lines = [
        "| partitions | rate limit | requests estimated | requests made | time estimated | time taken |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    with tempfile.TemporaryDirectory(prefix="bench-estimates-") as tmp:
        for rate in (None, (100, 10.0)):
            for n in (1, partitions):
                client = secfindings.Client(
                    server.api_token, base_url=server.base_url, auth_url=server.auth_url, rate_limit=rate
                )
                with client:
                    client.schema()
                    pager = client.findings_view(fields=FIELDS, page_size=100)
                    est = pager.estimate(partitions=n)
                    before = client.stats()["requests"]
                    started = time.perf_counter()
                    pager.write_parquet(Path(tmp) / f"{n}-{rate}.parquet", partitions=n)
                    taken = time.perf_counter() - started
                    made = client.stats()["requests"] - before
                limit = "none" if rate is None else f"{rate[0]} per {rate[1]:g} s"
                guess = f"{est.seconds or 0:.1f} s"
                line = f"| {n} | {limit} | {est.requests:,} | {made:,} | {guess} | {taken:.1f} s |"
                print(line, flush=True)
                lines.append(line)
    text = "\n".join(lines) + "\n"
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "estimates.md").write_text(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--findings", type=int, default=100_000)
    ap.add_argument("--latency-ms", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="10,000 findings, one round")
    ap.add_argument("--estimates", action="store_true", help="the estimate's table (20,000 findings)")
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.quick:
        args.findings, args.rounds = 10_000, 1
    if args.estimates:
        server = Server(20_000, args.latency_ms)
        try:
            return estimates(server, args.partitions, args.output_dir)
        finally:
            server.close()
    server = Server(args.findings, args.latency_ms)
    runs: dict[int, list[dict[str, Any]]] = {1: [], args.partitions: []}
    try:
        with tempfile.TemporaryDirectory(prefix="bench-partitions-") as tmp:
            for r in range(args.rounds):
                order = [1, args.partitions] if r % 2 == 0 else [args.partitions, 1]
                for n in order:
                    got = export(server, Path(tmp) / f"r{r}-p{n}.parquet", n)
                    runs[n].append(got)
                    print(
                        f"round {r + 1}: partitions={n}: {got['seconds']:.1f} s, {got['rows']:,} rows, "
                        f"{got['requests']} requests (estimated {got['estimated']})",
                        flush=True,
                    )
    finally:
        server.close()

    # Every export holds each of the emulator's ids 1..N exactly once.
    reference = list(range(1, args.findings + 1))
    exact = all(sorted(run["ids"]) == reference for n in runs for run in runs[n])
    seq = statistics.median(run["seconds"] for run in runs[1])
    par = statistics.median(run["seconds"] for run in runs[args.partitions])
    ratio = seq / par
    est = runs[args.partitions][-1]["estimate"]
    lines = [
        f"# Parallel walks: {args.findings:,} findings to Parquet over an emulated "
        f"{args.latency_ms:g} ms network",
        "",
        f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
        f"medians of {args.rounds} interleaved rounds.",
        "",
        "| walk | seconds | rows/s | requests made¹ | requests estimated | every row exactly once |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for n in runs:
        secs = statistics.median(run["seconds"] for run in runs[n])
        made = runs[n][-1]["requests"]
        estimated = runs[n][-1]["estimated"]
        once = all(sorted(run["ids"]) == reference for run in runs[n])
        name = "sequential" if n == 1 else f"partitions={n}"
        lines.append(
            f"| {name} | {secs:.1f} | {args.findings / secs:,.0f} | {made:,} | {estimated:,} | "
            f"{'yes' if once else 'NO'} |"
        )
    lines += [
        "",
        "¹ The estimate was made on another paginator, so the partitioned walk asks for its split's "
        "bounds itself: one request more than estimated (a walk after its own `estimate()` reuses them).",
        "",
        f"partitions={args.partitions} is **{ratio:.1f}x** faster than the sequential walk.",
        "",
        f"`estimate(partitions={args.partitions})` of the last round:",
        "",
        "| | |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in est.rows_table()],
    ]
    text = "\n".join(lines) + "\n"
    print()
    print(text)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "partitions.md").write_text(text)
    if not exact:
        print("ROWS DIFFER between exports: a row was lost or repeated", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
