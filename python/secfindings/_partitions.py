"""Parallel walks of findings (``partitions=``): one ``findings_view`` walk split into parts read
concurrently (threads for :class:`~secfindings.Paginator`, tasks for
:class:`~secfindings.AsyncPaginator`) through the one client, so within its ``rate_limit``.

Against the real service a page costs a network round trip, so a sequential walk is bound by
latency; ``N`` partitions keep ``N`` pages in flight (each partition's walk also fetches its next
page while the page before is decoded).

How the walk is split is the walk plan's choice (:mod:`secfindings._plan`), from what the server
offers: **id ranges** where a probe showed that ``gte`` / ``lte`` on ``id`` work (one request
asks for the lowest and highest id the filters select; the first range is open below, the last
open above, so a finding created during the walk past the highest id is still read); else
**offset slices** where ``offset`` works (the rows are counted, by ``total_count`` or by
``first: 1`` probes, and each slice reads a fixed number of rows after the cursor of the row
before it, found by one probe at that offset); else **one sequential walk**, with one WARNING
line. Every partition knows the ids its rows must lie in, and rows outside them are dropped: a
server that ignores a filter or strays past a range cannot make a row appear twice. (Offset
slices hold the findings as they stand when the walk starts, as offset cursors do: a finding
removed during the walk shifts the rows after it, and a walk that reads fewer rows than it
counted says so in one WARNING line.)

Order: ``to_arrow`` / ``to_pandas`` / ``to_polars`` concatenate the partitions in the order of the
sequential walk (``sort=`` unset, ``ID_ASC`` or ``ID_DESC``). Streaming exports write whole pages
as they arrive: rows of one partition stay in their walk's order, and pages of different
partitions interleave. Another ``sort=`` is refused: only the id order survives a split.

Resuming: every partition has its own cursor. A partitioned export's
:class:`~secfindings.ExportResult` has ``cursor=None`` and ``resume``: a text holding each
partition's ids, the cursor after its last page *in the file*, the rows it has left to read and
whether it is done (with a fingerprint of the walk's filters, sort and fields); a part read in
aliased batches (:mod:`secfindings._batched`) holds its batched walk's own cursor. Pass it as
``resume=`` to the same export of the same walk (``append=True`` for CSV and JSON lines, a new
file for Parquet): every row is written exactly once over the two runs.

``secfindings.dask`` splits its walks with the same plan.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import logging
import math
import os
import re
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from secfindings import _batched, _plan
from secfindings._export import Export, ExportResult
from secfindings._pages import make_page
from secfindings._plan import Bounds, Walk, id_ranges
from secfindings._progress import Progress, Reporter
from secfindings._pump import Fetch, Handle, pump_tasks, pump_threads
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

log = logging.getLogger("secfindings.partitions")

#: The most partitions a walk is split into (each is a walk with a page in flight).
MAX_PARTITIONS = 64

#: The sorts a split keeps (the value: whether the walk goes in descending order of id).
_ID_SORTS = {"ID_ASC": False, "ID_DESC": True}

#: The start of a resume text, and its version.
_RESUME = "sfparts1."


# ---------------------------------------------------------------------------------- the split


def range_filter(
    low: int | None, high: int | None, filters: Filter | Mapping[str, Any] | None
) -> Filter | None:
    """The ``id`` range (``gte`` / ``lte``; None: open on that side) ANDed with ``filters``
    (None: neither a bound nor a filter)."""
    parts: list[Filter] = []
    if low is not None:
        parts.append(field("id").gte(low))
    if high is not None:
        parts.append(field("id").lte(high))
    if filters is not None:
        parts.append(filters if isinstance(filters, Filter) else Tree(filter_tree(filters)))
    if not parts:
        return None
    return all_of(*parts) if len(parts) > 1 else parts[0]


def _walk_of(client: Any, filters: Any, filters_config: Any) -> Walk:
    return Walk(client, "findings_view", {"filters": filters, "filters_config": filters_config})


def id_bounds(
    client: Any,
    filters: Filter | Mapping[str, Any] | None = None,
    filters_config: Mapping[str, Any] | None = None,
) -> Bounds | None:
    """The id bounds (and count, where the server gives ``total_count``) of what the filters
    select, in one request; None when they select nothing. ``client`` is a
    :class:`~secfindings.Client`."""
    walk, schema = _walk_of(client, filters, filters_config), client.schema()

    def steps() -> _plan.Steps[Bounds | None]:
        total = yield from _plan.capability_steps(client.base_url, schema, _plan.TOTAL_COUNT)
        return (yield from _plan.bounds_steps(walk, schema, total))

    return _plan.drive(client, steps())


async def id_bounds_async(
    client: Any,
    filters: Filter | Mapping[str, Any] | None = None,
    filters_config: Mapping[str, Any] | None = None,
) -> Bounds | None:
    """:func:`id_bounds` for an :class:`~secfindings.AsyncClient`."""
    walk, schema = _walk_of(client, filters, filters_config), await client.schema()

    def steps() -> _plan.Steps[Bounds | None]:
        total = yield from _plan.capability_steps(client.base_url, schema, _plan.TOTAL_COUNT)
        return (yield from _plan.bounds_steps(walk, schema, total))

    return await _plan.drive_async(client, steps())


# ---------------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class Part:
    """One partition: the ids its rows lie in (None: open on that side), the cursor after what
    of it was read (or written), whether it is done, the rows it has left to read from that
    cursor (None: to the end) and whether its id range is sent as a filter."""

    low: int | None
    high: int | None
    cursor: str | None = None
    done: bool = False
    limit: int | None = None
    filtered: bool = True
    #: Where the plan's offset slice starts (kept in a resume text while nothing of the slice is
    #: written; a slice written in part resumes from its batched walk's own cursor, sfb1:...).
    offset: int | None = None

    def holds(self, value: Any) -> bool:
        """Whether a row of id ``value`` belongs to this partition."""
        if isinstance(value, bool) or not isinstance(value, int):
            return False
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    @property
    def checked(self) -> bool:
        return self.low is not None or self.high is not None


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
    """The resume text of a partitioned walk (see the module's documentation). An offset slice
    of which nothing was written keeps its offset (a seventh value), so that it is read in
    batches from there when resumed, as it would have been."""
    body = {"key": key, "parts": [_items(p) for p in parts]}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return _RESUME + base64.urlsafe_b64encode(raw).decode().rstrip("=")


#: The most characters of a resume text read (64 partitions of cursors fit in far less).
_MAX_RESUME = 1 << 20


def decode_resume(text: object, key: str) -> list[Part]:
    """The partitions of a resume text; a ValidationError when it is not one, or is of another
    walk (other filters, sort or fields)."""
    value = getattr(text, "resume", text)  # an ExportResult too
    if not isinstance(value, str) or not value.startswith(_RESUME):
        raise ValidationError(
            "resume= takes the resume text of a partitioned export (ExportResult.resume or "
            "paginator.resume), which starts with " + repr(_RESUME)
        )
    if len(value) > _MAX_RESUME:
        raise ValidationError("resume= is damaged: it is far longer than a resume text")
    payload = value[len(_RESUME) :]
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
        body = json.loads(raw)
        parts = [_part(item) for item in body["parts"]]
        given = body["key"]
    except (binascii.Error, ValueError, TypeError, KeyError, RecursionError) as exc:
        raise ValidationError(f"resume= is damaged and cannot be read: {str(exc)[:200]}") from None
    if given != key:
        raise ValidationError(
            "resume= belongs to another walk (its filters, sort or fields differ): resume with the "
            "walk that was interrupted"
        )
    if not parts or len(parts) > MAX_PARTITIONS:
        raise ValidationError("resume= is damaged: it names no partition, or too many")
    return parts


def _int_or_none(value: object, what: str) -> int | None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"a partition's {what} must be an int or null, not {str(value)[:40]!r}")
    return value


def _items(p: Part) -> list[Any]:
    items = [p.low, p.high, p.cursor, p.done, p.limit, p.filtered]
    return items if p.offset is None or p.filtered else [*items, p.offset]


def _part(item: Any) -> Part:
    if not isinstance(item, list) or len(item) not in (4, 6, 7):
        raise TypeError("a partition is a list of 4, 6 or 7 values")
    low, high, cursor, done = item[:4]
    limit, filtered = item[4:6] if len(item) >= 6 else (None, True)
    low, high = _int_or_none(low, "bound"), _int_or_none(high, "bound")
    limit = _int_or_none(limit, "row count")
    offset = _int_or_none(item[6], "offset") if len(item) == 7 else None
    if low is not None and high is not None and low > high:
        raise ValueError(f"a partition's bounds are reversed ({low} > {high})")
    if (limit is not None and limit < 0) or (offset is not None and offset < 0):
        raise ValueError("a partition's row count or offset is negative")
    if offset is not None and filtered:
        raise ValueError("a partition filtered by id has no offset")
    if cursor is not None and not isinstance(cursor, str):
        raise TypeError("a partition's cursor must be text or null")
    return Part(low, high, cursor, bool(done), limit, bool(filtered), offset)


def _top_level(selection: str) -> set[str]:
    """The top-level field names of a selection text (what is inside braces left out)."""
    depth, out = 0, []
    for ch in selection:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(ch)
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "".join(out)))


def _with_id(fields: Any) -> tuple[Any, bool]:
    """The selection with ``id_int`` in it (for the partitions' check), and whether it was
    added (then it is taken out of what the walk hands out)."""
    if fields is None:
        return None, False  # the default selection has id_int on every schema of the service
    text = fields if isinstance(fields, str) else " ".join(str(f) for f in fields)
    if text.strip() in ("*", "analyst") or "id_int" in _top_level(text):
        return fields, False
    return f"{text} id_int", True


class Plan:
    """A partitioned read of one paginator, checked before anything is fetched: the walk, the
    order, and the partitions of a resume text."""

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
        self.walk = Walk.of(walk)
        self.args: dict[str, Any] = dict(self.walk.args)
        self.client: Any = self.walk.client
        self.descending = _sort_order(self.args.get("sort"))
        self.key = _fingerprint(self.args)
        self.partitions = n
        self.parts: list[Part] | None = None
        self.strategy = "resumed"
        #: The sort of the partitions not filtered by id (see ``_sort``), set with the schema.
        self.sort: Any = None
        if resume is not None:
            self.parts = decode_resume(resume, self.key)
            if n != 1 and n != len(self.parts):
                raise ValidationError(
                    f"resume= holds {len(self.parts)} partitions, but partitions={n} was given: leave "
                    "partitions= out to resume as it was split"
                )
            self.partitions = len(self.parts)
        self.total: int | None = None
        self.fields, self.strip_id = _with_id(self.args.get("fields"))
        self.dropped = 0

    def steps(self, schema: Any, bounds: Bounds | None, known: bool) -> _plan.Steps[list[Part]]:
        """The requests that split the walk, and its partitions."""
        split = yield from _plan.split_steps(
            self.walk, schema, self.partitions, self.descending, bounds, known
        )
        return self.adopt(split)

    def adopt(self, split: _plan.Split) -> list[Part]:
        """The partitions of a split the plan made (now, or for an estimate of this walk)."""
        self.strategy = split.strategy
        self.total = None if split.bounds is None else split.bounds.total
        return [Part(s.low, s.high, s.cursor, False, s.limit, s.filtered, s.offset) for s in split.slices]

    def _sort(self, schema: Any) -> Any:
        """The sort a walk that is not filtered by id is made with: the id order the offsets
        were probed in (the caller's, or ID_ASC where the schema has it)."""
        given = self.args.get("sort")
        return given if given else _plan.id_sort(schema)

    def open(self, part: Part) -> NativePages:
        """The walk of one partition, from its cursor."""
        extra = range_filter(part.low, part.high, None) if part.filtered else None
        sort = "unchanged" if part.filtered else self.sort
        with _batched.starting_at(part.offset):
            pager = self.walk.paginator(
                extra=extra, sort=sort, after=part.cursor, limit=part.limit, fields=self.fields
            )
        pages: NativePages = pager._pages
        return pages

    # -------------------------------------------------------------------------- the check

    def _note(self, dropped: int) -> None:
        if dropped and not self.dropped:
            log.warning(
                "the server answered rows outside the partition asked for (it ignored a filter or "
                "strayed past a range): they are dropped, each row is kept once"
            )
        self.dropped += dropped

    def keep_batch(self, part: Part, batch: Any) -> Any:
        """A page of columns with only the rows of ``part`` (and without an ``id_int`` the walk
        added). A page wholly inside the partition, the usual case, is handed on as it came."""
        if not part.checked and not self.strip_id:
            return batch
        pa = need("pyarrow", "arrow", "partitions=")
        pc = need("pyarrow.compute", "arrow", "partitions=")
        rb = pa.record_batch(batch)
        if part.checked:
            ids = rb.column(rb.schema.get_field_index("id_int"))
            ends = pc.min_max(ids)
            low, high = ends["min"].as_py(), ends["max"].as_py()
            inside = ids.null_count == 0 and (
                low is None
                or ((part.low is None or low >= part.low) and (part.high is None or high <= part.high))
            )
            if not inside:
                mask = pc.is_valid(ids)
                if part.low is not None:
                    mask = pc.and_(mask, pc.fill_null(pc.greater_equal(ids, part.low), False))
                if part.high is not None:
                    mask = pc.and_(mask, pc.fill_null(pc.less_equal(ids, part.high), False))
                self._note(len(rb) - pc.sum(mask).as_py())
                rb = rb.filter(mask)
            elif not self.strip_id:
                return batch
        if self.strip_id:
            keep = [i for i, name in enumerate(rb.schema.names) if name != "id_int"]
            rb = pa.RecordBatch.from_arrays(
                [rb.column(i) for i in keep], schema=pa.schema([rb.schema.field(i) for i in keep])
            )
        return rb

    def keep_lines(self, part: Part, data: bytes) -> bytes:
        """A page of JSON lines with only the rows of ``part``."""
        if not part.checked and not self.strip_id:
            return data
        out: list[bytes] = []
        dropped = 0
        for line in data.splitlines():
            if not line.strip():
                continue
            node = json.loads(line)
            if part.checked and not part.holds(node.get("id_int") if isinstance(node, dict) else None):
                dropped += 1
                continue
            if self.strip_id and isinstance(node, dict):
                node.pop("id_int", None)
                line = json.dumps(node, separators=(",", ":"), ensure_ascii=False).encode()
            out.append(line)
        self._note(dropped)
        return b"".join(line + b"\n" for line in out)

    def keep_nodes(self, part: Part, raw: Any) -> Any:
        """A raw page (nodes, page info, cursors) with only the rows of ``part``."""
        if not part.checked:
            return raw
        nodes, info, cursors = raw
        kept = [(n, c) for n, c in zip(nodes, cursors, strict=False) if part.holds((n or {}).get("id_int"))]
        self._note(len(nodes) - len(kept))
        return [n for n, _ in kept], info, [c for _, c in kept]


def rows_of(got: Any) -> int:
    """The rows a page held as the server sent it (before the check)."""
    data = got[0]
    if isinstance(data, (bytes, bytearray)):
        return data.count(b"\n")
    if isinstance(data, list):
        return len(data)
    return int(data.num_rows)


# ---------------------------------------------------------------------------------- a run


class _Natives:
    """The partitions' walks as one, for progress (``total``, ``waits``) and for a Parquet
    export (``finish_table`` widens over the columns of the first walk that gave a page: a walk
    that has given none has no columns yet; ``freeze`` fixes them all)."""

    def __init__(self, pages: list[NativePages], total: int | None, strip_id: bool = False) -> None:
        self._all = pages
        self._total = total
        self._strip_id = strip_id
        self.first: NativePages | None = None  # the first walk that gave a page

    @property
    def total(self) -> int | None:
        return self._total

    def waits(self) -> tuple[int, int]:
        # The walks share one client: its counts, not a sum of copies.
        return self._all[0].waits() if self._all else (0, 0)

    def finish_table(self, batches: list[Any]) -> Any:
        table = (self.first or self._all[0]).finish_table(batches)
        return _without_id(table) if self._strip_id else table

    def freeze(self) -> None:
        for p in self._all:
            p.freeze()


def _without_id(table: Any) -> Any:
    """A partition's table without the ``id_int`` column the walk added for its check (the
    native walk widens its pages to the columns it asked for, that one included)."""
    pa = need("pyarrow", "arrow", "partitions=")
    found = pa.table(table)
    return found.drop_columns(["id_int"]) if "id_int" in found.column_names else found


class _Ledger:
    """What of each partition is in the file: pages are numbered as they are given to the
    export, and the export says up to which number everything is written (Parquet buffers a
    row group). A partition's cursor is that of its last page written."""

    def __init__(self, parts: list[Part]) -> None:
        self.parts = parts
        # page number -> (partition, cursor after, rows the server sent in it)
        self.given: list[tuple[int, str | None, int]] = []
        self.ended: dict[int, int] = {}  # partition -> the number of its last page given
        self.last: dict[int, int] = {}
        self.written = -1

    def give(self, i: int, cursor: str | None, rows: int = 0) -> str:
        seq = len(self.given)
        self.given.append((i, cursor, rows))
        self.last[i] = seq
        return str(seq)

    def end(self, i: int) -> None:
        self.ended[i] = self.last.get(i, -1)

    def wrote(self, mark: str | None) -> None:
        if mark is not None:
            self.written = max(self.written, int(mark))

    def state(self) -> list[Part]:
        cursors: dict[int, str | None] = {}
        read: dict[int, int] = {}
        for i, cursor, rows in self.given[: self.written + 1]:
            cursors[i] = cursor
            read[i] = read.get(i, 0) + rows
        out = []
        for i, p in enumerate(self.parts):
            limit = None if p.limit is None else max(0, p.limit - read.get(i, 0))
            done = p.done or (i in self.ended and self.ended[i] <= self.written) or limit == 0
            # A part's cursor in the file: its batched walk's own (sfb1:..., which resumes a
            # batched walk, offsets absolute, limit= the rows left), or the server's.
            offset = None if i in cursors else p.offset
            out.append(Part(p.low, p.high, cursors.get(i, p.cursor), done, limit, p.filtered, offset))
        return out


class Run:
    """One partitioned read of a paginator, shared by the sync and async paginators: the plan,
    its partitions' walks, and what was read or written of each."""

    def __init__(self, plan: Plan, parts: list[Part]) -> None:
        self.plan = plan
        self.parts = parts
        self.walks = [(i, plan.open(p)) for i, p in enumerate(parts) if not p.done]
        self.natives = _Natives([p for _, p in self.walks], plan.total, plan.strip_id)
        self.ledger = _Ledger(parts)

    def reported(self) -> NativePages:
        """The walks as one for a :class:`Reporter` (it reads ``total`` and ``waits()``)."""
        return cast("NativePages", self.natives)

    # -------------------------------------------------------------------------- exports

    def exporter(self, out: Export, report: Reporter) -> Handle:
        ledger, natives, walks, plan = self.ledger, self.natives, dict(self.walks), self.plan

        def handle(i: int, got: Any) -> None:
            if got is None:
                ledger.end(i)
                return
            if natives.first is None:
                natives.first = walks[i]
            data, cursor = got
            part = self.parts[i]
            kept = plan.keep_lines(part, data) if isinstance(data, bytes) else plan.keep_batch(part, data)
            report.page(out.page(kept, ledger.give(i, cursor, rows_of(got))))
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
                kept = self.plan.keep_batch(self.parts[i], got[0])
                batches[i].append(kept)
                report.page(kept.num_rows)

        return batches, handle

    def counted(self, rows: int) -> None:
        """One WARNING line when offset slices read fewer rows than were counted as the walk
        began: findings removed meanwhile shift the rows after them, so one may have been missed
        (or the server's offsets do not hold still)."""
        total = self.plan.total
        if self.plan.strategy == "offset_slices" and total is not None and rows < total:
            log.warning(
                "the partitions read %d rows of the %d counted as the walk began: findings were "
                "removed meanwhile, or the server's offsets shifted, and a row after a removed one "
                "may have been missed (id ranges, where a server takes them, do not have this limit)",
                rows,
                total,
            )

    def tables(self, batches: dict[int, list[Any]]) -> list[Any]:
        """Each partition's table, in the order of the sequential walk (by id range)."""
        self.counted(sum(b.num_rows for pages in batches.values() for b in pages))
        tables: list[tuple[int, Any]] = []
        for i, pages in self.walks:
            if batches[i] or not tables:
                table = pages.finish_table(batches[i])
                tables.append((i, _without_id(table) if self.plan.strip_id else table))
        tables.sort(key=lambda t: t[0], reverse=self.reversed)
        nonempty = [t for i, t in tables if batches[i]]
        return nonempty or [tables[0][1]]

    @property
    def reversed(self) -> bool:
        """Whether the partitions run against the walk's order (id ranges of a descending
        walk; offset slices are cut in the walk's own order)."""
        return (
            self.plan.descending
            and self.plan.strategy in ("id_ranges", "resumed")
            and all(p.filtered for p in self.parts)
        )


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
    """Bounds (and count) an ``estimate()`` of this paginator already found."""
    if hasattr(walk, "_split_bounds"):
        return True, walk._split_bounds
    return False, None


def _cached_split(walk: Any, plan: Plan) -> list[Part] | None:
    """The split an ``estimate(partitions=N)`` of this paginator made, for the same N."""
    kept = getattr(walk, "_split_plan", None)
    if kept is None or kept[0] != plan.partitions:
        return None
    return plan.adopt(kept[1])


def _parts(walk: Any, plan: Plan) -> list[Part]:
    schema = plan.client.schema()
    plan.sort = plan._sort(schema)  # a resumed slice is read in the order it was cut in
    if plan.parts is not None:
        return plan.parts
    cached = _cached_split(walk, plan)
    if cached is not None:
        return cached
    known, bounds = _cached_bounds(walk)
    return _plan.drive(plan.client, plan.steps(schema, bounds, known))


async def _parts_async(walk: Any, plan: Plan) -> list[Part]:
    schema = await plan.client.schema()
    plan.sort = plan._sort(schema)
    if plan.parts is not None:
        return plan.parts
    cached = _cached_split(walk, plan)
    if cached is not None:
        return cached
    known, bounds = _cached_bounds(walk)
    return await _plan.drive_async(plan.client, plan.steps(schema, bounds, known))


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
                if ok:
                    run.counted(out.rows)
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
            kept = run.plan.keep_nodes(run.parts[i], got)
            pages[i].append(kept)
            report.page(len(kept[0]))

    return pages, handle


def _in_order(walk: Any, run: Run, pages: dict[int, list[Any]]) -> list[Any]:
    """The items of every partition's pages, in the order of the sequential walk."""
    order = sorted(pages, reverse=run.reversed)
    found = [
        item for i in order for raw in pages[i] for item in make_page(raw, walk._wrap, walk._types).items
    ]
    run.counted(len(found))
    return found


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
