"""``paginator.estimate()``: how many requests a walk will make, and how long it will take at the
current budget, before it is made (``secfindings export --dry-run`` prints it).

The count comes from the connection's ``total_count`` in one request, which also asks for the
lowest and highest id the filters select (the split of ``partitions=``, kept for the walk that
follows, so a partitioned walk after its estimate does not ask again). Where the server gives no
``total_count`` (its schema says so), the rows are counted with ``first: 1`` probes by offset,
where the connection takes ``offset`` (a ladder of offsets, then a search 16 ways a request, the
offsets of a request as aliased fields: about 7 requests for 100,000 rows); their number and time
are on the estimate (``probes``, ``probe_seconds``). With ``partitions=N`` the estimate makes the
split as the walk would (:mod:`secfindings._plan`: ``strategy``; a probe the first time a server
is asked, and for offset slices one request for the cursors that start them) and hands it to the
walk of the same paginator. The count's request is timed: its round trip is the latency the time
is worked out with. The time follows the walk step by step (:func:`schedule`): each partition
sends its next page when the one before is answered, and a send waits for room in the budget, a
sliding window of ``limit`` requests per ``window`` seconds (``client.budget()`` says what is
booked in it already; with only ``rate_limit=`` known, it is taken as empty), after any wait a
server's ``Retry-After`` imposed.

Where the walk would read in aliased page batches (:mod:`secfindings._batched`; the estimate
asks the walk's own native walk, as it was made), the requests in batches are counted too,
request for request (the offset probe included where the walk would still ask it), and their
time worked out the same way (``batched_requests``, ``batched_seconds``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from secfindings import _batched, _partitions, _plan
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
        cost: requests this estimate made itself (the count and the split's bounds, and any
            probes).
        limit: the budget the time is worked out at, as ``(requests, seconds)``, or None.
        remaining: requests the budget has left now (None: unknown, or no budget).
        latency: seconds of the estimate's own request (a round trip), or None.
        seconds: the time the walk will take at the budget and the latency (None: unknown).
        note: why a figure is missing, when one is.
        counted_by: where ``rows`` comes from: ``"total_count"``, ``"offset probes"`` (``first:
            1`` probes by offset, on a server without ``total_count``), or None (unknown).
        probes: requests of ``cost`` that were probes (counting rows, or finding out what the
            server offers for the split; a server's capabilities are probed once and remembered).
        probe_seconds: the time those probes took, summed.
        strategy: how the walk will be read (``"sequential"``, ``"id_ranges"``,
            ``"offset_slices"``; see :mod:`secfindings._partitions`).
        batched_requests: the requests of the walk read in aliased batches of
            ``pages_per_request`` pages (every walk that allows them, by default; see
            :mod:`secfindings._batched`), the offset probe included where the walk would still
            ask it; None where the walk would read one page per request (then ``requests`` is
            what it spends). A partitioned export reads its parts in batches too (``export
            --dry-run --partitions N`` shows both figures).
        pages_per_request: the client's pages per request.
        batched_seconds: ``seconds`` for ``batched_requests`` (None: no batches, or unknown).
        batched_everywhere: whether every reading of the walk uses the batches (printed
            ``every walk``); else only the walks read whole do (``read whole``), and
            ``requests`` / ``seconds`` are those of iteration and the exports.
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
    counted_by: str | None = None
    probes: int = 0
    probe_seconds: float = 0.0
    strategy: str = "sequential"
    batched_requests: int | None = None
    pages_per_request: int = 1
    batched_seconds: float | None = None
    batched_everywhere: bool = False

    def rows_table(self) -> list[tuple[str, str]]:
        """The estimate as (name, value) lines, for a table or a terminal."""

        def num(v: int | None) -> str:
            return "unknown" if v is None else f"{v:,}"

        lines = [("rows", num(self.rows)), ("requests", num(self.requests))]
        if self.batched_requests is not None:
            per = self.pages_per_request
            reads = "every walk" if self.batched_everywhere else "read whole"
            shown = f"{num(self.batched_requests)} ({per} pages per request, {reads})"
            lines.append(("requests in batches", shown))
        lines.append(("page size", str(self.page_size)))
        lines.append(("partitions", f"{self.partitions} ({self.strategy.replace('_', ' ')})"))
        if self.counted_by is not None:
            lines.append(("counted by", self.counted_by))
        if self.limit is None:
            lines.append(("budget", "no rate limit set"))
        else:
            left = "" if self.remaining is None else f", {self.remaining:,} remaining now"
            lines.append(("budget", f"{self.limit[0]:,} per {self.limit[1]:g} s{left}"))
        lines.append(("latency", "unknown" if self.latency is None else f"{self.latency * 1e3:.1f} ms"))
        lines.append(("time", "unknown" if self.seconds is None else _duration(self.seconds)))
        if self.batched_requests is not None:
            shown = "unknown" if self.batched_seconds is None else _duration(self.batched_seconds)
            lines.append(("time in batches", shown))
        lines.append(("cost of this estimate", f"{self.cost} request" + ("" if self.cost == 1 else "s")))
        if self.probes:
            shown = f"{self.probes} request" + ("" if self.probes == 1 else "s")
            lines.append(("of which probes", f"{shown}, {_duration(self.probe_seconds)}"))
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


@dataclass(frozen=True)
class _Found:
    """What the estimate's requests found: the bounds (their ``total`` counted by probes where
    the server has no ``total_count``), how, and the split the walk will be read in (None: one
    walk)."""

    bounds: _partitions.Bounds | None
    counted_by: str | None
    split: _plan.Split | None

    @property
    def strategy(self) -> str:
        return "sequential" if self.split is None else self.split.strategy

    @property
    def parts(self) -> int:
        return 1 if self.split is None else len(self.split.slices)


def _steps(walk: Any, client: Any, schema: Any, partitions: int) -> _plan.Steps[_Found]:
    """The estimate's requests: the bounds and count (a probe first where the client has no
    schema to say whether there is a ``total_count``), the count by offset probes where there is
    none, and for ``partitions`` > 1 the split itself, made as the partitioned walk would make it
    (and kept for it)."""
    plan = _plan.Walk.of(walk)
    base_url = client.base_url
    with_total = yield from _plan.capability_steps(base_url, schema, _plan.TOTAL_COUNT)
    bounds = yield from _plan.bounds_steps(plan, schema, with_total)
    counted_by = None if bounds is None or bounds.total is None else "total_count"
    if bounds is None:
        return _Found(None, "total_count" if with_total else None, None)
    if partitions > 1:
        descending = _partitions._sort_order(plan.args.get("sort"))
        split = yield from _plan.split_steps(plan, schema, partitions, descending, bounds, True)
        if split.bounds is not None and split.bounds.total is not None and counted_by is None:
            counted_by = "offset probes"
        return _Found(split.bounds, counted_by, split)
    if bounds.total is None and (yield from _plan.capability_steps(base_url, schema, _plan.OFFSET)):
        counted = yield from _plan.count_steps(plan, schema)
        return _Found(_partitions.Bounds(bounds.low, bounds.high, counted.rows), "offset probes", None)
    return _Found(bounds, counted_by, None)


def _pages(found: _Found, rows: int, page_size: int) -> int:
    """The page requests of the walk: offset slices read a set number of rows each (the last
    the rest); id ranges are taken as even."""
    split = found.split
    if split is None or split.strategy != "offset_slices":
        return _partitions.requests_for(rows, page_size, found.parts)
    limits = [s.limit for s in split.slices[:-1]]
    last = max(0, rows - sum(x or 0 for x in limits))
    return sum(max(1, math.ceil(n / page_size)) for n in [*(x or 0 for x in limits), last])


def _parts_rows(found: _Found, rows: int, limited: bool) -> list[tuple[int, bool]]:
    """The rows of each part of the walk and whether it stops at a limit (offset slices read a
    set number of rows each, the last the rest; id ranges are taken as even)."""
    split = found.split
    if split is None or split.strategy == "sequential":
        return [(rows, limited)]
    if split.strategy != "offset_slices":
        k = len(split.slices)
        return [(rows // k + (1 if i < rows % k else 0), False) for i in range(k)]
    limits = [s.limit or 0 for s in split.slices[:-1]]
    return [*((x, True) for x in limits), (max(0, rows - sum(limits)), False)]


def _work_out(
    walk: Any,
    client: Any,
    args: dict[str, Any],
    partitions: int,
    found: _Found,
    cost: _plan.Cost,
) -> Estimate:
    page_size = int(args.get("page_size") or 100)
    note = None
    bounds = found.bounds
    rows: int | None
    rows = 0 if bounds is None else bounds.total  # no bounds: the filters select nothing
    if rows is None:
        note = "the server gives neither a total_count nor offset paging, so the rows are not known"
    else:
        cursor = walk._pages.cursor
        if cursor is not None:
            index = relay_index(cursor)
            if index is None:
                index = _batched.resumed_offset(cursor)  # a batched walk's own: its row's offset
            if index is None:
                note = "after= is a cursor of the server's own: counted from the start"
            else:
                rows = max(0, rows - index - 1)
        if walk._limit is not None:
            rows = min(rows, int(walk._limit))
    requests = None
    if rows is not None:
        # Only a walk of limit 0 asks nothing: one of no rows still asks once.
        requests = 0 if walk._limit == 0 else _pages(found, rows, page_size)
    counts, took = cost.of("findings_bounds")
    probe_seconds = cost.seconds - took
    latency = took if counts else None
    budget = _budget(client)
    seconds = None
    if requests is not None and (latency is not None or budget.limit is not None):
        seconds = schedule(requests, found.parts, latency or 0.0, budget)
    batched = batched_seconds = None
    everywhere = False
    if rows is not None:
        # A walk stops at its limit only where the server has that many rows to hand out.
        limited = walk._limit is not None and rows >= int(walk._limit)
        parts = _parts_rows(found, rows, limited)
        counted = _batched.estimated(client._native, walk._pages, walk._limit, parts, page_size)
        if counted is not None:
            batched, everywhere = counted
    if batched is not None and (latency is not None or budget.limit is not None):
        batched_seconds = schedule(batched, found.parts, latency or 0.0, budget)
    return Estimate(
        rows,
        requests,
        page_size,
        partitions,
        cost.requests,
        budget.limit,
        budget.remaining,
        latency,
        seconds,
        note,
        found.counted_by,
        cost.requests - counts,
        probe_seconds,
        found.strategy,
        batched,
        walk._pages.pages_per_request if batched is not None else _batched.setting(client._native),
        batched_seconds,
        everywhere,
    )


def estimate(walk: Any, partitions: object = 1) -> Estimate:
    """:meth:`secfindings.Paginator.estimate`."""
    client, args, n = _check(walk, partitions)
    schema = client.schema()
    client._native.current_jwt()  # a token exchange is not part of the round trips timed
    cost = _plan.Cost()
    found = _plan.drive(client, _steps(walk, client, schema, n), cost)
    _keep(walk, found, n)
    return _work_out(walk, client, args, n, found, cost)


async def estimate_async(walk: Any, partitions: object = 1) -> Estimate:
    """:meth:`secfindings.AsyncPaginator.estimate`."""
    client, args, n = _check(walk, partitions)
    schema = await client.schema()
    await asyncio.to_thread(client._native.current_jwt)  # not part of the round trips timed
    cost = _plan.Cost()
    found = await _plan.drive_async(client, _steps(walk, client, schema, n), cost)
    _keep(walk, found, n)
    return _work_out(walk, client, args, n, found, cost)


def _keep(walk: Any, found: _Found, partitions: int) -> None:
    """What the estimate found, for the walk of this paginator that follows (it asks again for
    none of it): the bounds and count, and the split for the same ``partitions``."""
    walk._split_bounds = found.bounds
    if found.split is not None:
        walk._split_plan = (partitions, found.split)
