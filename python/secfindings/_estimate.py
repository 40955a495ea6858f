"""``paginator.estimate()``: how many requests a walk will make, and how long it will take at the
current budget, before it is made (``secfindings export --dry-run`` prints it).

The count comes from the connection's ``total_count`` in one request, which also asks for the
lowest and highest id the filters select (the split of ``partitions=``, kept for the walk that
follows, so a partitioned walk after its estimate does not ask again). That request is timed:
its round trip is the latency the time is worked out with. The time follows the walk step by
step (:func:`schedule`): each partition sends its next page when the one before is answered, and
a send waits for room in the budget, a sliding window of ``limit`` requests per ``window``
seconds (``client.budget()`` says what is booked in it already; with only ``rate_limit=`` known,
it is taken as empty), after any wait a server's ``Retry-After`` imposed.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from secfindings import _partitions
from secfindings._export import relay_index
from secfindings.errors import ValidationError

__all__ = ["Estimate"]


@dataclass(frozen=True)
class Estimate:
    """What a walk will cost, worked out before it is made.

    Attributes:
        rows: the rows the walk will hand out (the connection's ``total_count``, within
            ``limit=`` and after ``after=``); None where the server has no ``total_count``.
        requests: the API requests the walk will make (its pages; a walk of no rows still asks
            once); None when ``rows`` is unknown.
        page_size: rows per page.
        partitions: how many id ranges the walk is read in at once.
        cost: requests this estimate made itself (1: the count and the split's bounds).
        limit: the budget the time is worked out at, as ``(requests, seconds)``, or None.
        remaining: requests the budget has left now (None: unknown, or no budget).
        latency: seconds of the estimate's own request (a round trip), or None.
        seconds: the time the walk will take at the budget and the latency (None: unknown).
        note: why a figure is missing, when one is.
    """

    rows: int | None
    requests: int | None
    page_size: int
    partitions: int
    cost: int
    limit: tuple[int, float] | None
    remaining: int | None
    latency: float | None
    seconds: float | None
    note: str | None = None

    def rows_table(self) -> list[tuple[str, str]]:
        """The estimate as (name, value) lines, for a table or a terminal."""

        def num(v: int | None) -> str:
            return "unknown" if v is None else f"{v:,}"

        lines = [("rows", num(self.rows)), ("requests", num(self.requests))]
        lines.append(("page size", str(self.page_size)))
        lines.append(("partitions", str(self.partitions)))
        if self.limit is None:
            lines.append(("budget", "no rate limit set"))
        else:
            left = "" if self.remaining is None else f", {self.remaining:,} remaining now"
            lines.append(("budget", f"{self.limit[0]:,} per {self.limit[1]:g} s{left}"))
        lines.append(("latency", "unknown" if self.latency is None else f"{self.latency * 1e3:.1f} ms"))
        lines.append(("time", "unknown" if self.seconds is None else _duration(self.seconds)))
        lines.append(("cost of this estimate", f"{self.cost} request" + ("" if self.cost == 1 else "s")))
        if self.note:
            lines.append(("note", self.note))
        return lines

    def __str__(self) -> str:
        lines = self.rows_table()
        width = max(len(k) for k, _ in lines)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in lines)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1e3:.0f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class _Budget:
    limit: tuple[int, float] | None
    remaining: int | None
    resets_in: float | None  # seconds until the oldest booked request leaves the window
    blocked: float  # seconds a server's Retry-After still holds every client of the token


def _budget(client: Any) -> _Budget:
    """The budget the time is worked out at: ``client.budget()`` where the client has it, else
    its ``rate_limit=`` (with nothing known of what was used)."""
    reader: Callable[[], Any] | None = getattr(client, "budget", None)
    if callable(reader):
        try:
            b = reader()
        except Exception:  # a budget that cannot be read leaves the settings
            b = None
        if b is not None and getattr(b, "limit", None) is not None and getattr(b, "window", None):
            now = dt.datetime.now(dt.timezone.utc)
            blocked, resets = getattr(b, "blocked_until", None), getattr(b, "resets_at", None)
            return _Budget(
                (int(b.limit), float(b.window)),
                b.remaining,
                (resets - now).total_seconds() if isinstance(resets, dt.datetime) else None,
                max(0.0, (blocked - now).total_seconds()) if isinstance(blocked, dt.datetime) else 0.0,
            )
    setting = client._native.pickle_state().get("rate_limit")
    if setting:
        return _Budget((int(setting[0]), float(setting[1])), None, None, 0.0)
    return _Budget(None, None, None, 0.0)


#: Past this many requests the schedule is worked out in closed form instead of step by step.
_SIMULATED = 1_000_000


def schedule(requests: int, partitions: int, latency: float, budget: _Budget) -> float:
    """Seconds until the last of ``requests`` is answered: ``partitions`` walks each send a
    request when the one before is answered (``latency`` later), and a send waits for room in
    the budget, a sliding window of ``limit`` requests per ``window`` seconds (the requests
    already booked in it are taken as sent evenly from its oldest, which leaves it at
    ``resets_in``, to now)."""
    start = budget.blocked
    if budget.limit is None or requests > _SIMULATED:
        by_latency = requests * latency / max(1, partitions)
        if budget.limit is None:
            return start + by_latency
        limit, window = budget.limit
        free = limit if budget.remaining is None else budget.remaining
        return start + max(by_latency, -(-max(0, requests - free) // limit) * window)
    limit, window = budget.limit
    booked = 0 if budget.remaining is None else max(0, limit - budget.remaining)
    leaves = window if budget.resets_in is None else max(0.0, budget.resets_in)
    # What is booked is taken as sent evenly from the oldest entry (leaving at resets_in) to now.
    booked = min(booked, limit)
    oldest = min(0.0, leaves - window)
    step = -oldest / (booked - 1) if booked > 1 else 0.0
    log: deque[float] = deque(oldest + k * step for k in range(booked))
    free_at = [start] * max(1, partitions)  # when each walk may send its next request
    heapq.heapify(free_at)
    end = start
    for _ in range(requests):
        t = heapq.heappop(free_at)
        if len(log) >= limit:
            t = max(t, log.popleft() + window)
        log.append(t)
        end = max(end, t + latency)
        heapq.heappush(free_at, t + latency)
    return end


def _check(walk: Any, partitions: object) -> tuple[Any, dict[str, Any], int]:
    n = _partitions.check_partitions(partitions)
    if walk._replay is None:
        raise ValidationError(
            "estimate() counts a findings_view(...) walk (its total_count); this paginator has no "
            "count to ask for"
        )
    if n != 1:
        _partitions.Plan(walk, n)  # the same refusals as the partitioned walk
    method, args = walk._replay
    return getattr(method, "__self__", None), dict(args), n


def _work_out(
    walk: Any,
    client: Any,
    args: dict[str, Any],
    partitions: int,
    bounds: _partitions.Bounds | None,
    latency: float | None,
) -> Estimate:
    page_size = int(args.get("page_size") or 100)
    note = None
    rows: int | None
    rows = 0 if bounds is None else bounds.total  # no bounds: the filters select nothing
    if rows is None:
        note = "the server gives no total_count for findings, so the rows are not known"
    else:
        cursor = walk._pages.cursor
        if cursor is not None:
            index = relay_index(cursor)
            if index is None:
                note = "after= is a cursor of the server's own: counted from the start"
            else:
                rows = max(0, rows - index - 1)
        if walk._limit is not None:
            rows = min(rows, int(walk._limit))
    requests = None
    if rows is not None:
        if walk._limit is not None and rows == 0:
            requests = 0
        else:
            parts = 1 if bounds is None else len(_partitions.id_ranges(bounds.low, bounds.high, partitions))
            requests = _partitions.requests_for(rows, page_size, parts)
    budget = _budget(client)
    seconds = None
    if requests is not None and (latency is not None or budget.limit is not None):
        seconds = schedule(requests, partitions, latency or 0.0, budget)
    return Estimate(
        rows, requests, page_size, partitions, 1, budget.limit, budget.remaining, latency, seconds, note
    )


def estimate(walk: Any, partitions: object = 1) -> Estimate:
    """:meth:`secfindings.Paginator.estimate`."""
    client, args, n = _check(walk, partitions)
    client._native.current_jwt()  # a token exchange is not part of the round trip timed
    started = time.perf_counter()
    bounds = _partitions.id_bounds(client, args.get("filters"), args.get("filters_config"))
    latency = time.perf_counter() - started
    walk._split_bounds = bounds
    return _work_out(walk, client, args, n, bounds, latency)


async def estimate_async(walk: Any, partitions: object = 1) -> Estimate:
    """:meth:`secfindings.AsyncPaginator.estimate`."""
    client, args, n = _check(walk, partitions)
    await asyncio.to_thread(client._native.current_jwt)  # not part of the round trip timed
    started = time.perf_counter()
    bounds = await _partitions.id_bounds_async(client, args.get("filters"), args.get("filters_config"))
    latency = time.perf_counter() - started
    walk._split_bounds = bounds
    return _work_out(walk, client, args, n, bounds, latency)
