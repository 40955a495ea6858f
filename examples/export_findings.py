"""Export findings to Parquet, CSV or JSON lines, streamed, and resume an export that stopped.

    python examples/export_findings.py --out findings.parquet
    python examples/export_findings.py --out severe.csv --severity 4,5 --limit 1000
    python examples/export_findings.py --out severe-2.csv --severity 4,5 --after <cursor printed above>

Pages go from the server into the file one at a time (memory stays at about a page), so this
works for any number of findings. When the export stops (an error, a rate limit, Ctrl-C, or
--limit), the file holds every page read and the script prints the cursor after them; run it again
with --after CURSOR and the same filter to write the rest, with nothing lost or repeated
(Parquet: into a new file; CSV and JSON lines: the same file with --append, or a new one).

Runs against the real API when SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set, and only
reads there; otherwise against the embedded emulator (same seed, same data, so a cursor from one
run is good for the next).
"""

from __future__ import annotations

import argparse
import csv
import os
import sys
import time
from collections.abc import Generator
from contextlib import contextmanager
from typing import Any

import secfindings
from secfindings import field

FORMATS = ("parquet", "csv", "jsonl")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="the file to write")
    parser.add_argument(
        "--format", choices=FORMATS, help="parquet, csv or jsonl (default: from the --out suffix)"
    )
    parser.add_argument("--after", metavar="CURSOR", help="resume after this cursor (printed by a run)")
    parser.add_argument(
        "--append", action="store_true", help="append to --out (CSV and JSON lines; no second header)"
    )
    parser.add_argument(
        "--severity", metavar="LIST", help="only these severities, comma-separated (e.g. 4,5); default all"
    )
    parser.add_argument("--limit", type=int, help="stop after this many findings (resume with --after)")
    parser.add_argument("--page-size", type=int, default=100, help="findings per request (<= 100)")
    parser.add_argument(
        "--max-retry-wait",
        type=float,
        help="give up at once when the server asks to wait longer than this (seconds; default 120)",
    )
    emulator = parser.add_argument_group("emulator only (ignored against the real API)")
    emulator.add_argument("--findings", type=int, default=5_000, help="findings to seed (default 5000)")
    emulator.add_argument(
        "--emulator-rate-limit",
        type=int,
        metavar="N",
        help="allow only N API requests a minute, to see an export cut short and resumed",
    )
    args = parser.parse_args(argv)
    if args.format is None:
        suffix = os.path.splitext(args.out)[1].lstrip(".").lower()
        if suffix not in FORMATS:
            parser.error(f"cannot tell the format from {args.out!r}: pass --format {'|'.join(FORMATS)}")
        args.format = suffix
    if args.append and args.format == "parquet":
        # A Parquet file cannot be appended to: resume into a second file and read both.
        parser.error("--append works for csv and jsonl; resume a Parquet export into a new file")
    return args


def rows_in(path: str, fmt: str) -> int:
    """How many rows the file holds now (to report what an interrupted export left behind)."""
    if not os.path.exists(path):
        return 0
    if fmt == "parquet":
        import pyarrow.parquet as pq

        parquet: Any = pq.ParquetFile(path)  # pyarrow has no type information
        return int(parquet.metadata.num_rows)
    with open(path, newline="", encoding="utf-8") as f:
        if fmt == "jsonl":
            return sum(1 for line in f if line.strip())
        # csv.reader, not a line count: a quoted title may hold a newline.
        return max(0, sum(1 for _ in csv.reader(f)) - 1)


def export(client: secfindings.Client, args: argparse.Namespace) -> int:
    filters = None
    if args.severity:
        # Severities go in the filter language as strings, like the API's own filters.
        filters = field("severity").in_([s.strip() for s in args.severity.split(",") if s.strip()])
    # No explicit sort: the server's default order is the one its cursors are positions in.
    pager = client.findings_view(
        filters=filters, after=args.after, page_size=args.page_size, limit=args.limit
    )
    started = time.perf_counter()
    try:
        if args.format == "parquet":
            result = pager.write_parquet(args.out)
        elif args.format == "csv":
            result = pager.write_csv(args.out, append=args.append)
        else:
            result = pager.write_jsonl(args.out, append=args.append)
    except (Exception, KeyboardInterrupt) as exc:
        # The export wrote every page it read before the failure, and the paginator's cursor
        # stands right after them: that is where the next run starts.
        cursor = pager.cursor
        print(f"export stopped: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"{args.out} holds {rows_in(args.out, args.format)} rows", file=sys.stderr)
        if cursor is None:
            print("nothing was written; run again without --after", file=sys.stderr)
        else:
            print(f"resume cursor: {cursor}", file=sys.stderr)
            again = "--append" if args.format != "parquet" else "--out <a new file>"
            print(f"resume with: --after {cursor} {again}", file=sys.stderr)
        return 1
    elapsed = time.perf_counter() - started
    print(
        f"wrote {result.rows} rows in {result.pages} pages to {result.path} ({args.format}) in {elapsed:.2f}s"
    )
    print(f"resume cursor: {result.cursor}")
    if args.limit is not None and result.rows >= args.limit:
        print(f"stopped at --limit {args.limit}; the rest: --after {result.cursor}")
    return 0


@contextmanager
def open_client(args: argparse.Namespace) -> Generator[secfindings.Client, None, None]:
    settings: dict[str, Any] = {}
    if args.max_retry_wait is not None:
        settings["max_retry_wait"] = args.max_retry_wait
    if os.environ.get("SECFINDINGS_API_TOKEN") and os.environ.get("SECFINDINGS_BASE_URL"):
        with secfindings.Client(**settings) as client:
            print(f"Using the API at {client.base_url} (read-only)")
            yield client
        return
    from secfindings.testing import Emulator

    with Emulator(findings=args.findings, seed=7) as emu, emu.client(**settings) as client:
        print(f"Using the embedded emulator at {emu.base_url} ({args.findings} findings)")
        if args.emulator_rate_limit:
            # A token over its budget gets 429 with a Retry-After of about a minute; unless
            # --max-retry-wait allows that long, the client raises RateLimitError at once.
            emu.set_rate_limit("token", (args.emulator_rate_limit, 60.0))
        yield client


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with open_client(args) as client:
        return export(client, args)


if __name__ == "__main__":
    sys.exit(main())
