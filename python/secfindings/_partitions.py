"""Parallel walks of findings (``partitions=``): one ``findings_view`` walk split into contiguous
ranges of finding ids, fetched concurrently (threads for :class:`~secfindings.Paginator`, tasks
for :class:`~secfindings.AsyncPaginator`) through the one client, so within its ``rate_limit``.

Against the real service a page costs a network round trip, so a sequential walk is bound by
latency; ``N`` partitions keep ``N`` pages in flight (each partition's walk also fetches its next
page while the page before is decoded).

How the walk is split: one request asks for the lowest and the highest id the filters select
(and the total count where the server has ``total_count``); :func:`id_ranges` cuts that span
into ``N`` contiguous ranges, the first open below and the last open above (a finding created
during the walk past the highest id is still read, as a sequential walk would read it). Each
partition is the caller's walk with the ``id`` filter (``gte`` / ``lte``) ANDed into its filters.

Order: ``to_arrow`` / ``to_pandas`` / ``to_polars`` concatenate the partitions in id-range order,
which is the order of the sequential walk (``sort=`` unset, ``ID_ASC`` or ``ID_DESC``). Streaming
exports write whole pages as they arrive: rows of one partition stay in their walk's order, and
pages of different partitions interleave. Another ``sort=`` is refused: only the id order
survives a split by id.

Resuming: every partition has its own cursor. A partitioned export's
:class:`~secfindings.ExportResult` has ``cursor=None`` and ``resume``: a text holding each
partition's range, the cursor after its last page *in the file* and whether it is done (with a
fingerprint of the walk's filters, sort and fields). Pass it as ``resume=`` to the same export of
the same walk (``append=True`` for CSV and JSON lines, a new file for Parquet): every row is
written exactly once over the two runs.

``secfindings.dask`` splits its walks with the same :func:`id_ranges` and :func:`id_bounds`.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
import math
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from secfindings import _native
from secfindings._export import Export, ExportResult
from secfindings._pages import make_page
from secfindings._progress import Progress, Reporter
from secfindings._shared import need
from secfindings.errors import ValidationError
from secfindings.filters import Filter, Tree, all_of, field, filter_tree

if TYPE_CHECKING:
    from secfindings._native import NativePages

__all__ = [
    "MAX_PARTITIONS",
    "Bounds",
    "Part",
    "Plan",
    "check_partitions",
    "id_bounds",
    "id_bounds_async",
    "id_ranges",
    "range_filter",
    "wanted",
]

#: The most partitions a walk is split into (each is a walk with a page in flight).
MAX_PARTITIONS = 64

#: The sorts a split by id keeps (the value: whether the ranges go in descending order).
_ID_SORTS = {"ID_ASC": False, "ID_DESC": True}

#: The start of a resume text, and its version.
_RESUME = "sfparts1."


# ---------------------------------------------------------------------------------- the split


def id_ranges(low: int, high: int, partitions: int) -> list[tuple[int, int]]:
    """``partitions`` contiguous, disjoint id ranges covering ``low..high`` (inclusive); fewer
    when the span has fewer ids than that."""
    span = high - low + 1
    step = max(1, -(-span // partitions))
    return [(lo, min(lo + step - 1, high)) for lo in range(low, high + 1, step)]


def range_filter(low: int | None, high: int | None, filters: Filter | Mapping[str, Any] | None) -> Filter:
    """The ``id`` range (``gte`` / ``lte``; None: open on that side) ANDed with ``filters``."""
    parts: list[Filter] = []
    if low is not None:
        parts.append(field("id").gte(low))
    if high is not None:
        parts.append(field("id").lte(high))
    if filters is not None:
        parts.append(filters if isinstance(filters, Filter) else Tree(filter_tree(filters)))
    if not parts:
        # No bound and no filter: every finding (an id is never below 0).
        return field("id").gte(0)
    return all_of(*parts) if len(parts) > 1 else parts[0]


@dataclass(frozen=True)
class Bounds:
    """The lowest and highest finding id a walk's filters select, and how many findings they
    select (None where the server has no ``total_count``)."""

    low: int
    high: int
    total: int | None


def _bounds_document(with_total: bool) -> str:
    total = " total_count" if with_total else ""
    return (
        "query findings_bounds($filters_config: FiltersConfigInput) {"
        " low: findings_view(filters_config: $filters_config, sort: [ID_ASC], first: 1)"
        f" {{ edges {{ node {{ id_int }} }}{total} }}"
        " high: findings_view(filters_config: $filters_config, sort: [ID_DESC], first: 1)"
        " { edges { node { id_int } } } }"
    )


def _bounds_variables(
    filters_config: Mapping[str, Any] | None, filters: Filter | Mapping[str, Any] | None
) -> dict[str, Any]:
    """The filters as the typed method sends them (the core serializes ``filtersjson``)."""
    config = dict(filters_config or {})
    if filters is not None:
        if config.get("filtersjson") is not None:
            raise ValidationError("pass either filters= or filters_config['filtersjson'], not both")
        config["filtersjson"] = filter_tree(filters)
    if not config:
        return {}
    built = _native.build_operation("findings_view", {"filters_config": config}, "id_int")
    variables: dict[str, Any] = built["variables"]
    return variables


def _has_total(client: Any) -> bool:
    """Whether the server's findings connection has ``total_count`` (assumed with no schema)."""
    schema = client._native.loaded_schema
    if schema is None:
        return True
    try:
        return "total_count" in schema.fields("FindingConnection")
    except Exception:
        return True


def _bounds_of(data: Mapping[str, Any]) -> Bounds | None:
    ends = []
    for alias in ("low", "high"):
        edges = (data.get(alias) or {}).get("edges") or []
        node = (edges[0] or {}).get("node") if edges else None
        value = (node or {}).get("id_int")
        if value is None:
            return None
        ends.append(int(value))
    total = (data.get("low") or {}).get("total_count")
    return Bounds(ends[0], ends[1], None if total is None else int(total))


def id_bounds(
    client: Any,
    filters: Filter | Mapping[str, Any] | None = None,
    filters_config: Mapping[str, Any] | None = None,
) -> Bounds | None:
    """The id bounds (and count) of what the filters select, in one request; None when they
    select nothing. ``client`` is a :class:`~secfindings.Client`."""
    variables = _bounds_variables(filters_config, filters)
    data = client.execute(_bounds_document(_has_total(client)), variables or None, "findings_bounds")
    return _bounds_of(data)


async def id_bounds_async(
    client: Any,
    filters: Filter | Mapping[str, Any] | None = None,
    filters_config: Mapping[str, Any] | None = None,
) -> Bounds | None:
    """:func:`id_bounds` for an :class:`~secfindings.AsyncClient`."""
    variables = _bounds_variables(filters_config, filters)
    document = _bounds_document(_has_total(client))
    data = await client.execute(document, variables or None, "findings_bounds")
    return _bounds_of(data)


# ---------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Part:
    """One partition: its id range (None: open on that side), the cursor after what of it was
    read (or written), and whether it is done."""

    low: int | None
    high: int | None
    cursor: str | None = None
    done: bool = False


def check_partitions(partitions: object) -> int:
    """``partitions=`` as an int of 1 to :data:`MAX_PARTITIONS`, or a ValidationError."""
    if isinstance(partitions, bool) or not isinstance(partitions, int):
        raise ValidationError(f"partitions must be an int, not {type(partitions).__name__}")
    if not 1 <= partitions <= MAX_PARTITIONS:
        raise ValidationError(f"partitions must be from 1 to {MAX_PARTITIONS}, got {partitions}")
    return partitions


def wanted(partitions: object, resume: object = None) -> bool:
    """Whether a read is partitioned (``partitions=`` other than 1, or a ``resume=``); a
    ValidationError for a ``partitions=`` that is not an int of 1 to :data:`MAX_PARTITIONS`."""
    return check_partitions(partitions) != 1 or resume is not None


def _sort_order(sort: Any) -> bool:
    """Whether the walk's sort is descending by id; a ValidationError for a sort a split by id
    cannot keep."""
    values: Sequence[Any]
    if sort is None:
        return False
    values = [sort] if isinstance(sort, str) else list(sort)
    if not values:
        return False
    if len(values) == 1 and values[0] in _ID_SORTS:
        return _ID_SORTS[values[0]]
    raise ValidationError(
        f"partitions= splits the walk by finding id, so it keeps only an id order: sort={sort!r} "
        "cannot hold across partitions. Leave sort= out (or ID_ASC / ID_DESC), or use partitions=1"
    )


def _fingerprint(args: Mapping[str, Any]) -> str:
    """What a resume text is checked against: the walk's filters, sort and fields."""
    filters = args.get("filters")
    shown = {
        "filters": None if filters is None else filter_tree(filters),
        "filters_config": args.get("filters_config"),
        "sort": args.get("sort"),
        "fields": args.get("fields"),
    }
    text = json.dumps(shown, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_resume(key: str, parts: Sequence[Part]) -> str:
    """The resume text of a partitioned walk (see the module's documentation)."""
    body = {"key": key, "parts": [[p.low, p.high, p.cursor, p.done] for p in parts]}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return _RESUME + base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_resume(text: object, key: str) -> list[Part]:
    """The partitions of a resume text; a ValidationError when it is not one, or is of another
    walk (other filters, sort or fields)."""
    value = getattr(text, "resume", text)  # an ExportResult too
    if not isinstance(value, str) or not value.startswith(_RESUME):
        raise ValidationError(
            "resume= takes the resume text of a partitioned export (ExportResult.resume or "
            "paginator.resume), which starts with " + repr(_RESUME)
        )
    payload = value[len(_RESUME) :]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        body = json.loads(raw)
        parts = [Part(*_part(item)) for item in body["parts"]]
        given = body["key"]
    except (binascii.Error, ValueError, TypeError, KeyError) as exc:
        raise ValidationError(f"resume= is damaged and cannot be read: {exc}") from None
    if given != key:
        raise ValidationError(
            "resume= belongs to another walk (its filters, sort or fields differ): resume with the "
            "walk that was interrupted"
        )
    if not parts or len(parts) > MAX_PARTITIONS:
        raise ValidationError("resume= is damaged: it names no partition, or too many")
    return parts


def _part(item: Any) -> tuple[int | None, int | None, str | None, bool]:
    low, high, cursor, done = item
    for end in (low, high):
        if end is not None and (isinstance(end, bool) or not isinstance(end, int)):
            raise TypeError(f"a partition's bound must be an int or null, not {end!r}")
    if cursor is not None and not isinstance(cursor, str):
        raise TypeError("a partition's cursor must be text or null")
    return low, high, cursor, bool(done)


class Plan:
    """A partitioned read of one paginator, checked before anything is fetched: the typed method
    that made the walk and its arguments, the order, and the partitions of a resume text."""

    def __init__(self, walk: Any, partitions: object, resume: object = None) -> None:
        n = check_partitions(partitions)
        if walk._replay is None:
            raise ValidationError(
                "partitions= splits a walk by finding id: only findings_view(...) paginators can be "
                "split (use partitions=1 for this one)"
            )
        if walk._limit is not None:
            raise ValidationError(
                "partitions= does not combine with limit= (which rows would be the first N of a walk "
                "read in parallel?): leave limit= out, or use partitions=1"
            )
        fresh = walk._pages.cursor is None and not walk._done and walk._pos.page is None
        if not fresh or walk._streamed or walk._stopped is not None:
            raise ValidationError(
                "partitions= needs a paginator that has not started and was made without after=: "
                "a partitioned walk resumes with resume= (ExportResult.resume), not after="
            )
        method, args = walk._replay
        self.method: Callable[..., Any] = method
        self.args: dict[str, Any] = dict(args)
        self.client: Any = getattr(method, "__self__", None)
        self.descending = _sort_order(self.args.get("sort"))
        self.key = _fingerprint(self.args)
        self.partitions = n
        self.parts: list[Part] | None = None
        if resume is not None:
            self.parts = decode_resume(resume, self.key)
            if n != 1 and n != len(self.parts):
                raise ValidationError(
                    f"resume= holds {len(self.parts)} partitions, but partitions={n} was given: leave "
                    "partitions= out to resume as it was split"
                )
            self.partitions = len(self.parts)
        self.total: int | None = None

    def split(self, bounds: Bounds | None) -> list[Part]:
        """The partitions of the walk, the first open below and the last open above."""
        if bounds is None:
            return [Part(None, None)]  # nothing selected now: one walk says so (one request)
        self.total = bounds.total
        ranges = id_ranges(bounds.low, bounds.high, self.partitions)
        last = len(ranges) - 1
        return [Part(None if i == 0 else lo, None if i == last else hi) for i, (lo, hi) in enumerate(ranges)]

    def open(self, part: Part) -> NativePages:
        """The walk of one partition, from its cursor."""
        args = dict(self.args)
        config = dict(args.pop("filters_config", None) or {})
        text = config.pop("filtersjson", None)
        user = args.pop("filters", None)
        mine: list[Filter] = [
            f if isinstance(f, Filter) else Tree(filter_tree(f)) for f in (user, text) if f is not None
        ]
        joined = all_of(*mine) if len(mine) > 1 else (mine[0] if mine else None)
        args["filters"] = range_filter(part.low, part.high, joined)
        args["filters_config"] = config or None
        pager = self.method(**args, after=part.cursor)
        pages: NativePages = pager._pages
        return pages

    def bounds_args(self) -> tuple[Any, Any]:
        return self.args.get("filters"), self.args.get("filters_config")


# ---------------------------------------------------------------------------------- a run


class _Natives:
    """The partitions' walks as one, for progress (``total``, ``waits``) and for a Parquet
    export (``finish_table`` widens over the columns of the first walk that gave a page: a walk
    that has given none has no columns yet; ``freeze`` fixes them all)."""

    def __init__(self, pages: list[NativePages], total: int | None) -> None:
        self._all = pages
        self._total = total
        self.first: NativePages | None = None  # the first walk that gave a page

    @property
    def total(self) -> int | None:
        return self._total

    def waits(self) -> tuple[int, int]:
        # The walks share one client: its counts, not a sum of copies.
        return self._all[0].waits() if self._all else (0, 0)

    def finish_table(self, batches: list[Any]) -> Any:
        return (self.first or self._all[0]).finish_table(batches)

    def freeze(self) -> None:
        for p in self._all:
            p.freeze()


class _Ledger:
    """What of each partition is in the file: pages are numbered as they are given to the
    export, and the export says up to which number everything is written (Parquet buffers a
    row group). A partition's cursor is that of its last page written."""

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts
        self.given: list[tuple[int, str | None]] = []  # page number -> (partition, cursor after)
        self.ended: dict[int, int] = {}  # partition -> the number of its last page given
        self.last: dict[int, int] = {}
        self.written = -1

    def give(self, i: int, cursor: str | None) -> str:
        seq = len(self.given)
        self.given.append((i, cursor))
        self.last[i] = seq
        return str(seq)

    def end(self, i: int) -> None:
        self.ended[i] = self.last.get(i, -1)

    def wrote(self, mark: str | None) -> None:
        if mark is not None:
            self.written = max(self.written, int(mark))

    def state(self) -> list[Part]:
        cursors: dict[int, str | None] = {}
        for i, cursor in self.given[: self.written + 1]:
            cursors[i] = cursor
        out = []
        for i, p in enumerate(self.parts):
            done = p.done or (i in self.ended and self.ended[i] <= self.written)
            out.append(Part(p.low, p.high, cursors.get(i, p.cursor), done))
        return out


Fetch = Callable[["NativePages"], Any]
Handle = Callable[[int, Any], None]


def pump_threads(walks: list[tuple[int, NativePages]], fetch: Fetch, handle: Handle) -> None:
    """Reads the walks in threads (each waits for its pages with the GIL released) and hands
    every page, and None at a walk's end, to ``handle`` under one lock. The first failure stops
    the others after their current page (nothing more is handed over) and is raised; so is a
    KeyboardInterrupt of the waiting thread."""
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(i: int, pages: NativePages) -> None:
        try:
            while True:
                got = fetch(pages)
                with lock:
                    if stop.is_set():
                        return
                    handle(i, got)
                if got is None:
                    return
        except BaseException as exc:
            with lock:
                if not stop.is_set():
                    errors.append(exc)
                stop.set()

    threads = [
        threading.Thread(target=work, args=(i, p), name=f"secfindings-partition-{i}", daemon=True)
        for i, p in walks
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:
        with lock:
            stop.set()
        raise
    if errors:
        raise errors[0]


async def pump_tasks(
    walks: list[tuple[int, NativePages]], fetch: Callable[[NativePages], Awaitable[Any]], handle: Handle
) -> None:
    """:func:`pump_threads` with a task per walk: the first failure (or a cancellation of the
    caller) cancels the others, whose page in flight is dropped and not handed over."""

    async def one(i: int, pages: NativePages) -> None:
        while True:
            got = await fetch(pages)
            handle(i, got)
            if got is None:
                return

    if not walks:
        return
    tasks = [asyncio.ensure_future(one(i, p)) for i, p in walks]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]


class Run:
    """One partitioned read of a paginator, shared by the sync and async paginators: the plan,
    its partitions' walks, and what was read or written of each."""

    def __init__(self, plan: Plan, parts: list[Part]) -> None:
        self.plan = plan
        self.parts = parts
        self.walks = [(i, plan.open(p)) for i, p in enumerate(parts) if not p.done]
        self.natives = _Natives([p for _, p in self.walks], plan.total)
        self.ledger = _Ledger(parts)

    def reported(self) -> NativePages:
        """The walks as one for a :class:`Reporter` (it reads ``total`` and ``waits()``)."""
        return cast("NativePages", self.natives)

    # -------------------------------------------------------------------------- exports

    def exporter(self, out: Export, report: Reporter) -> Handle:
        ledger, natives, walks = self.ledger, self.natives, dict(self.walks)

        def handle(i: int, got: Any) -> None:
            if got is None:
                ledger.end(i)
                return
            if natives.first is None:
                natives.first = walks[i]
            data, cursor = got
            report.page(out.page(data, ledger.give(i, cursor)))
            ledger.wrote(out.cursor)

        return handle

    def result(self, out: Export) -> ExportResult:
        self.ledger.wrote(out.cursor)
        resume = encode_resume(self.plan.key, self.ledger.state())
        return ExportResult(out.path, out.rows, out.pages, None, resume=resume)

    # -------------------------------------------------------------------------- columns

    def collector(self, report: Reporter) -> tuple[dict[int, list[Any]], Handle]:
        batches: dict[int, list[Any]] = {i: [] for i, _ in self.walks}

        def handle(i: int, got: Any) -> None:
            if got is not None:
                batches[i].append(got[0])
                report.page(got[0].num_rows)

        return batches, handle

    def tables(self, batches: dict[int, list[Any]]) -> list[Any]:
        """Each partition's table, in the order of the sequential walk (by id range)."""
        tables: list[tuple[int, Any]] = []
        for i, pages in self.walks:
            if batches[i] or not tables:
                tables.append((i, pages.finish_table(batches[i])))
        tables.sort(key=lambda t: t[0], reverse=self.plan.descending)
        nonempty = [t for i, t in tables if batches[i]]
        return nonempty or [tables[0][1]]


def concat_arrow(tables: list[Any]) -> Any:
    """Partition tables as one ``pyarrow.Table`` (schemas unified; columns null in one part get
    the type of another)."""
    pa = need("pyarrow", "arrow", "to_arrow()")
    parts = [pa.table(t) for t in tables]
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts, promote_options="default")


def concat_polars(tables: list[Any]) -> Any:
    pl = need("polars", "polars", "to_polars()")
    frames = [pl.DataFrame(t) for t in tables]
    return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical_relaxed")


def requests_for(rows: int, page_size: int, partitions: int = 1) -> int:
    """The pages a walk of ``rows`` rows takes (a walk of none still asks once); split into
    ``partitions`` even parts, each ends on a page of its own."""
    if partitions <= 1:
        return max(1, math.ceil(rows / page_size))
    per = math.ceil(rows / partitions)
    return partitions * max(1, math.ceil(per / page_size))


# ---------------------------------------------------------------------------------- the reads


def _cached_bounds(walk: Any) -> tuple[bool, Bounds | None]:
    """Bounds an ``estimate(partitions=N)`` of this paginator already asked for."""
    if hasattr(walk, "_split_bounds"):
        return True, walk._split_bounds
    return False, None


def _parts(walk: Any, plan: Plan) -> list[Part]:
    if plan.parts is not None:
        return plan.parts
    known, bounds = _cached_bounds(walk)
    if not known:
        bounds = id_bounds(plan.client, *plan.bounds_args())
    return plan.split(bounds)


async def _parts_async(walk: Any, plan: Plan) -> list[Part]:
    if plan.parts is not None:
        return plan.parts
    known, bounds = _cached_bounds(walk)
    if not known:
        bounds = await id_bounds_async(plan.client, *plan.bounds_args())
    return plan.split(bounds)


#: The formats a partitioned export writes.
FORMATS = ("jsonl", "csv", "parquet")


def _plan_export(walk: Any, fmt: str, partitions: object, resume: object) -> Plan:
    plan = Plan(walk, partitions, resume)
    if fmt not in FORMATS:
        raise ValidationError(f"partitions= writes {', '.join(FORMATS)}, not {fmt}")
    return plan


@contextlib.contextmanager
def _exporting(
    walk: Any,
    run: Run,
    path: str | os.PathLike[str],
    fmt: str,
    append: bool,
    progress: Progress,
    escape: bool,
) -> Iterator[tuple[Export, Reporter]]:
    """Around a partitioned export, as ``_Walk._exporting`` around a sequential one: what was
    read before a failure is written too, and the paginator's ``resume`` (``ExportResult.resume``
    of ``_written``) says where each partition stands in the file."""
    out = Export(path, fmt, append, run.natives, escape)
    report = Reporter(progress, run.reported(), f"write_{fmt}")
    ok = False
    try:
        yield out, report
        ok = True
    except BaseException as exc:
        walk._stop(exc)
        raise
    finally:
        try:
            out.flush(run.natives)
        finally:
            try:
                out.close(ok)
            finally:
                report.close(ok)
                walk._written = run.result(out)
                walk._done = ok  # after a failure, _stopped refuses to go on


def _fetch(fmt: str) -> Fetch:
    if fmt == "jsonl":
        return lambda pages: pages.next_jsonl()
    return lambda pages: pages.next_batch(False)


def write(
    walk: Any,
    path: str | os.PathLike[str],
    fmt: str,
    append: bool,
    progress: Progress,
    escape: bool,
    partitions: object,
    resume: object,
) -> ExportResult:
    """A partitioned export of a :class:`~secfindings.Paginator` (threads)."""
    plan = _plan_export(walk, fmt, partitions, resume)
    walk._as_columns()
    run = Run(plan, _parts(walk, plan))
    with _exporting(walk, run, path, fmt, append, progress, escape) as (out, report):
        pump_threads(run.walks, _fetch(fmt), run.exporter(out, report))
    result: ExportResult = walk._written
    return result


async def write_async(
    walk: Any,
    path: str | os.PathLike[str],
    fmt: str,
    append: bool,
    progress: Progress,
    escape: bool,
    partitions: object,
    resume: object,
) -> ExportResult:
    """A partitioned export of an :class:`~secfindings.AsyncPaginator` (tasks)."""
    plan = _plan_export(walk, fmt, partitions, resume)
    walk._as_columns()
    run = Run(plan, await _parts_async(walk, plan))

    def fetch(pages: NativePages) -> Awaitable[Any]:
        if fmt == "jsonl":
            return pages.next_jsonl_async()  # type: ignore[no-any-return]
        return pages.next_batch_async(False)  # type: ignore[no-any-return]

    with _exporting(walk, run, path, fmt, append, progress, escape) as (out, report):
        await pump_tasks(run.walks, fetch, run.exporter(out, report))
    result: ExportResult = walk._written
    return result


@contextlib.contextmanager
def _reading(walk: Any, run: Run, progress: Progress) -> Iterator[Reporter]:
    report = Reporter(progress, run.reported(), "columns")
    ok = False
    try:
        yield report
        ok = True
    except BaseException as exc:
        walk._stop(exc)
        raise
    finally:
        report.close(ok)
        walk._done = ok


def tables(walk: Any, progress: Progress, partitions: object) -> list[Any]:
    """The walk of a :class:`~secfindings.Paginator` read in partitions (threads), as one table
    per partition in the order of the sequential walk."""
    plan = Plan(walk, partitions)
    walk._as_columns()
    run = Run(plan, _parts(walk, plan))
    with _reading(walk, run, progress) as report:
        batches, handle = run.collector(report)
        pump_threads(run.walks, lambda pages: pages.next_batch(False), handle)
        return run.tables(batches)


async def tables_async(walk: Any, progress: Progress, partitions: object) -> list[Any]:
    """:func:`tables` for an :class:`~secfindings.AsyncPaginator` (tasks)."""
    plan = Plan(walk, partitions)
    walk._as_columns()
    run = Run(plan, await _parts_async(walk, plan))
    with _reading(walk, run, progress) as report:
        batches, handle = run.collector(report)
        await pump_tasks(run.walks, lambda pages: pages.next_batch_async(False), handle)
        return run.tables(batches)


def _gather(run: Run, report: Reporter) -> tuple[dict[int, list[Any]], Handle]:
    pages: dict[int, list[Any]] = {i: [] for i, _ in run.walks}

    def handle(i: int, got: Any) -> None:
        if got is not None:
            pages[i].append(got)
            report.page(len(got[0]))

    return pages, handle


def _in_order(walk: Any, run: Run, pages: dict[int, list[Any]]) -> list[Any]:
    """The items of every partition's pages, in the order of the sequential walk."""
    order = sorted(pages, reverse=run.plan.descending)
    return [item for i in order for raw in pages[i] for item in make_page(raw, walk._wrap, walk._types).items]


def items(walk: Any, progress: Progress, partitions: object) -> list[Any]:
    """``to_list(partitions=N)`` of a :class:`~secfindings.Paginator` (threads): the items of
    the sequential walk, in its order."""
    plan = Plan(walk, partitions)
    run = Run(plan, _parts(walk, plan))
    with _reading(walk, run, progress) as report:
        pages, handle = _gather(run, report)
        pump_threads(run.walks, lambda p: p.next_page(), handle)
        return _in_order(walk, run, pages)


async def items_async(walk: Any, progress: Progress, partitions: object) -> list[Any]:
    """``await to_list(partitions=N)`` of an :class:`~secfindings.AsyncPaginator` (tasks)."""
    plan = Plan(walk, partitions)
    run = Run(plan, await _parts_async(walk, plan))
    with _reading(walk, run, progress) as report:
        pages, handle = _gather(run, report)
        await pump_tasks(run.walks, lambda p: p.next_page_async(), handle)
        return _in_order(walk, run, pages)
