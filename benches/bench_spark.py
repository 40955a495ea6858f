"""Rows per second through the Spark data source (secfindings.spark) against the client's own
``findings_view(...).to_arrow()``, in the same run, on the same emulator.

The emulator runs in its own process (``python -m secfindings.emulator``, optionally with
``--latency-ms``: every API request then waits that long, as a round trip to the service would).
One local SparkSession (``local[2]``, the machine's two cores) reads the findings with the
``secfindings`` format in ``--partitions`` partitions. Each round runs, in an order that
alternates between rounds:

- ``to_arrow``: ``client.findings_view(fields=FIELDS).to_arrow()`` in this process (one walk, in
  aliased page batches);
- ``spark count``: ``load().count()``: every row read by Spark's tasks, none sent to the driver;
- ``spark toArrow``: ``load().toArrow()``: every row read and collected into a ``pyarrow.Table``
  in the driver, the same result as ``to_arrow``.

Every contender runs once untimed first (the JVM, Spark's Python workers and the schema caches
warm up). Each Spark read is checked: the rows it counted or collected are all the findings, each
id once. Prints the medians, rows per second and the ratio against ``to_arrow``; writes
``results/spark.md`` (``results/spark_50ms.md`` with ``--latency-ms 50``). No figure is
asserted: a benchmark reports, it does not fail on a slow machine.

Usage: python benches/bench_spark.py [--findings 100000] [--rounds 3] [--partitions 4]
       [--latency-ms 0] [--quick] [--output-dir DIR]
``--quick`` is a smoke run (5,000 findings, one round, under a minute with Spark's start).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import secfindings

HERE = Path(__file__).resolve().parent
FIELDS = "id id_int title severity score cloud_provider resource_type"


class Server:
    """``python -m secfindings.emulator`` in a process of its own."""

    def __init__(self, findings: int, latency_ms: int) -> None:
        command = [
            sys.executable,
            "-u",
            "-m",
            "secfindings.emulator",
            "--port",
            "0",
            "--findings",
            str(findings),
        ]
        if latency_ms:
            command += ["--latency-ms", str(latency_ms)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
        self.base_url, self.auth_url, self.api_token = (
            fields["base_url"],
            fields["auth_url"],
            fields["api_token"],
        )

    def options(self) -> dict[str, str]:
        return {"api_token": self.api_token, "base_url": self.base_url, "auth_url": self.auth_url}

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def session() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import secfindings.spark

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    secfindings.spark.register(spark)
    return spark


def contenders(server: Server, spark: Any, partitions: int, findings: int) -> dict[str, Callable[[], None]]:
    options = {**server.options(), "select": FIELDS, "partitions": str(partitions)}

    def to_arrow() -> None:
        with secfindings.Client(server.api_token, base_url=server.base_url, auth_url=server.auth_url) as c:
            table = c.findings_view(fields=FIELDS).to_arrow()
        check(table.column("id_int").to_pylist(), findings)

    def spark_count() -> None:
        frame = spark.read.format("secfindings").options(**options).load()
        counted = frame.count()
        if counted != findings:
            raise AssertionError(f"spark counted {counted} rows of {findings}")

    def spark_to_arrow() -> None:
        table = spark.read.format("secfindings").options(**options).load().toArrow()
        check(table.column("id_int").to_pylist(), findings)

    return {"to_arrow": to_arrow, "spark count": spark_count, "spark toArrow": spark_to_arrow}


def check(ids: list[Any], findings: int) -> None:
    if len(ids) != findings or len(set(ids)) != findings:
        raise AssertionError(f"{len(ids)} rows, {len(set(ids))} distinct ids, of {findings}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--findings", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="smoke run: 5,000 findings, one round")
    ap.add_argument("--output-dir", default=str(HERE / "results"))
    args = ap.parse_args()
    if args.quick:
        args.findings, args.rounds = 5_000, 1
    server = Server(args.findings, args.latency_ms)
    try:
        spark = session()
        try:
            runs = contenders(server, spark, args.partitions, args.findings)
            for run in runs.values():  # warm-up, untimed
                run()
            times: dict[str, list[float]] = {name: [] for name in runs}
            names = list(runs)
            for r in range(args.rounds):
                order = names if r % 2 == 0 else names[::-1]
                for name in order:
                    started = time.perf_counter()
                    runs[name]()
                    times[name].append(time.perf_counter() - started)
                    print(f"round {r + 1}: {name:14} {times[name][-1]:7.2f} s", flush=True)
        finally:
            spark.stop()
    finally:
        server.close()
    report = render(args, times)
    print(report)
    if not args.quick:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        name = "spark.md" if not args.latency_ms else f"spark_{args.latency_ms}ms.md"
        (out / name).write_text(report, encoding="utf-8")
    return 0


def render(args: Any, times: dict[str, list[float]]) -> str:
    base = statistics.median(times["to_arrow"])
    lines = [
        "# Spark data source against to_arrow()",
        "",
        f"{args.findings:,} findings, fields `{FIELDS}`, {args.partitions} partitions, "
        f"local[2], emulator latency {args.latency_ms} ms, {args.rounds} round(s) (medians; "
        f"one untimed warm-up each). Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.",
        "",
        "| read | seconds | rows per second | against to_arrow |",
        "|---|---:|---:|---:|",
    ]
    for name, seconds in times.items():
        median = statistics.median(seconds)
        lines.append(f"| {name} | {median:.2f} | {args.findings / median:,.0f} | {base / median:.2f} x |")
    if args.quick:
        lines += ["", "QUICK MODE: a smoke run; the figures are not measurements."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
