"""Many findings by id at once with the AsyncClient, then the whole list as a DataFrame.

    python examples/async_bulk.py --count 200 --concurrency 16

Takes the ids of the first --count findings, fetches each one in full with `client.finding(id)`
concurrently (asyncio.gather, at most --concurrency requests in flight), and summarises the list
with `await client.findings_view(...).to_pandas()`. Needs pandas and pyarrow
(`pip install 'secfindings[pandas]'`).

Runs against the real API when SECFINDINGS_API_TOKEN and SECFINDINGS_BASE_URL are set, and only
reads there; otherwise against the embedded emulator.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import Counter

# Imported up front, though only to_pandas() uses it: a missing pandas fails at the start, not
# after the fetching, and its import (a quarter of a second) stays out of the timings below.
import pandas  # noqa: F401  # pyright: ignore[reportUnusedImport]

import secfindings

FRAME_FIELDS = (
    "id_int title severity score cloud_provider datasource_friendly_name actual_status { category }"
)


class InFlight:
    """Counts requests in flight, to show that the semaphore really bounds them."""

    def __init__(self) -> None:
        self.now = 0
        self.peak = 0

    def __enter__(self) -> None:
        self.now += 1
        self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        self.now -= 1


async def fetch_all(
    client: secfindings.AsyncClient, ids: list[str], concurrency: int
) -> tuple[list[secfindings.Finding], Counter[str], int]:
    # Without a bound, 10,000 ids would be 10,000 requests at once: the server's rate limit
    # (429s, retried after Retry-After) would slow everything down instead of speeding it up.
    gate = asyncio.Semaphore(concurrency)
    inflight = InFlight()

    async def one(finding_id: str) -> secfindings.Finding:
        async with gate:
            with inflight:
                return await client.finding(finding_id)

    # return_exceptions: one finding that fails (deleted meanwhile, a 5xx after the retries)
    # should not throw away the other 199.
    results = await asyncio.gather(*(one(i) for i in ids), return_exceptions=True)
    found = [r for r in results if isinstance(r, secfindings.Finding)]
    failed = Counter(type(r).__name__ for r in results if isinstance(r, BaseException))
    return found, failed, inflight.peak


async def run(client: secfindings.AsyncClient, count: int, concurrency: int) -> None:
    started = time.perf_counter()
    ids = [v.id for v in await client.findings_view(limit=count, fields="id").to_list()]
    print(f"{len(ids)} ids listed in {time.perf_counter() - started:.3f}s")

    started = time.perf_counter()
    found, failed, peak = await fetch_all(client, ids, concurrency)
    elapsed = time.perf_counter() - started
    rate = len(ids) / elapsed if elapsed > 0 else float("inf")
    print(
        f"fetched {len(found)} of {len(ids)} findings by id in {elapsed:.3f}s "
        f"({rate:,.0f}/s, at most {peak} in flight, limit {concurrency})"
    )
    for name, n in failed.most_common():
        print(f"  failed: {n} x {name}")
    if found:
        # Finding models are typed: finding_score.score is a float, discovered_time an aware datetime.
        top = max(found, key=lambda f: f.finding_score.score or 0.0)
        oldest = min(found, key=lambda f: f.discovered_time)
        print(f"  highest score: {top.finding_score.score} #{top.id_int} {top.title[:60]}")
        print(f"  oldest: discovered {oldest.discovered_time:%Y-%m-%d} #{oldest.id_int} {oldest.title[:60]}")

    started = time.perf_counter()
    df = await client.findings_view(fields=FRAME_FIELDS).to_pandas()
    elapsed = time.perf_counter() - started
    print(f"\nfindings_view: {len(df)} findings into a DataFrame in {elapsed:.3f}s")
    by_severity = df.groupby("severity").agg(findings=("id_int", "size"), mean_score=("score", "mean"))
    print("by severity:")
    print(by_severity.round(2).to_string())
    print("open findings by cloud provider:")
    open_ = df[df["actual_status.category"] == "OPEN"]
    print(open_["cloud_provider"].value_counts(dropna=False).to_string())


async def main_async(args: argparse.Namespace) -> None:
    if os.environ.get("SECFINDINGS_API_TOKEN") and os.environ.get("SECFINDINGS_BASE_URL"):
        async with secfindings.AsyncClient() as client:
            print(f"Using the API at {client.base_url} (read-only)")
            await run(client, args.count, args.concurrency)
        return
    from secfindings.testing import Emulator

    # The emulator serves from its own threads, so it can run in this process next to the loop.
    with Emulator(findings=args.findings, seed=7) as emu:
        print(f"Using the embedded emulator at {emu.base_url} ({args.findings} findings)")
        async with emu.async_client() as client:
            await run(client, args.count, args.concurrency)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=200, help="findings to fetch by id (default 200)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight at most (default 16)")
    parser.add_argument("--findings", type=int, default=5_000, help="emulator only: findings to seed")
    args = parser.parse_args(argv)
    if args.count < 1 or args.concurrency < 1:
        parser.error("--count and --concurrency must be at least 1")
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
