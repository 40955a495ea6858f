"""Aliased page batches (``pages_per_request``): a walk of ``findings_view`` reads several pages in
one request, ``p1: findings_view(first: 100, offset: 0) ... p10: findings_view(first: 100,
offset: 900)``, so a walk under a request-counted limit costs a tenth of the requests.

The batches are the Rust core's (``NativeClient.paginate_batched``): pages read by ``offset`` in
id order (``sort: [ID_ASC]``), each batch after the first starting on the row before it (the last
one handed out), so a finding removed behind the walk is seen and the walk reads again from
earlier, and only rows whose id is above the last one handed out are handed out: every row
present at both ends of the walk once. A document the server refuses for its size is made
smaller, and the size that worked is remembered per server for the process.

This module decides where batches are used (:func:`pages`, called by the live client when a
typed walk of a connection is made): only where it is safe, else the walk reads one page per
request as before:

- ``pages_per_request`` above 1 (the client's :attr:`~secfindings.Client.pages_per_request`,
  default :data:`DEFAULT_PAGES_PER_REQUEST`, or ``$SECFINDINGS_PAGES_PER_REQUEST``);
- every reading of the walk: iteration, ``to_list``, the Arrow stream, ``to_arrow`` /
  ``to_pandas`` / ``to_polars``, the exports, the sync's loads (:func:`whole_walks`) and the
  parts of ``partitions=`` (offset slices from their offset, :func:`starting_at`), a
  partitioned export's too (its resume text holds each part's batched cursor, and an offset
  slice's rows left as its ``limit=``). Each row a batched walk hands out carries the walk's
  own cursor (``sfb1:<offset>:<key>``, the row's offset in id order and its key) on its edge and as
  ``paginator.cursor``, and ``after=`` that cursor resumes a batched walk there
  (:func:`_resumed`; the server never sees it, and the resumed walk's selection needs ``id``),
  the overlap check holding across the pause. :class:`_Chosen` chooses at the first read (both
  native walks are lazy);
- the walk has no resume cursor of the server's (``after=``);
- no ``sort=`` other than ``ID_ASC``; the selection has ``id`` (else one DEBUG line);
- the walk plan's ``offset`` probe (one request per server and connection, remembered; it also
  sends two aliased fields) showed that the server takes ``offset`` and aliases (the async
  client asks it in a thread, so its event loop goes on meanwhile). Every catalog connection
  may be read so (graphene-django's ``DjangoConnectionField`` gives each ``offset``,
  service-facts §5.3): ``findings_view`` with the plan's :data:`~secfindings._plan.OFFSET`
  probe, another (``get_resources_ch``, ``finding_filters``, ...) with its own
  (``offset:NAME``), which also needs ``sort: [ID_ASC]`` (not ``status_rules``: no sort) and
  global ids of integer keys. Only ``findings_view`` has an ``estimate()``;
- the first batch does not fail with a :class:`~secfindings.PaginationError` (a server that does
  not order by id): then the walk starts again with one page per request (one INFO line).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import logging
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from secfindings import _native, _plan, _probes
from secfindings.errors import PaginationError, ValidationError

__all__ = [
    "DEFAULT_PAGES_PER_REQUEST",
    "asked_for",
    "check_pages_per_request",
    "estimated",
    "pages",
    "requests_for",
    "resumed_offset",
    "setting",
    "starting_at",
    "whole_walks",
]

log = logging.getLogger("secfindings.batched")

#: Pages per request when nothing says otherwise (benches/results/batched.md and
#: batched_sweep.md: 10 takes a walk of 100,000 findings from 1,000 requests to 101; more is
#: faster still on the emulator, but the service's limits on a document's cost are unknown:
#: docs/guides/performance.md says why 10).
DEFAULT_PAGES_PER_REQUEST = 10
#: The most pages one request may carry (the core's own bound, src/core/batched.rs: above it
#: the core refuses the walk, which would then read one page per request).
MAX_PAGES_PER_REQUEST = 50
_ENV = "SECFINDINGS_PAGES_PER_REQUEST"
#: The operations that may be read in batches: the catalog's connections (queries), each where
#: its own offset probe holds (``findings_view``'s is the plan's :data:`~secfindings._plan.OFFSET`;
#: another's ``offset:NAME`` also needs ``sort: [ID_ASC]`` and global ids of integer keys).
_OPERATIONS = frozenset(
    op["name"] for op in _native.catalog() if op["returns"] == "connection" and op["kind"] == "query"
)


def check_pages_per_request(value: object) -> int:
    """``value`` as pages per request; a ValidationError for anything but an int 1..100."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PAGES_PER_REQUEST:
        raise ValidationError(
            f"pages_per_request must be an integer from 1 (one page per request) to "
            f"{MAX_PAGES_PER_REQUEST}, not {value!r}"
        )
    return value


def _from_env() -> int:
    text = os.environ.get(_ENV)
    if text is None or not text.strip():
        return DEFAULT_PAGES_PER_REQUEST
    try:
        return check_pages_per_request(int(text.strip()))
    except (ValueError, ValidationError):
        raise ValidationError(
            f"${_ENV} must be an integer from 1 to {MAX_PAGES_PER_REQUEST}, not {text[:40]!r}"
        ) from None


def asked_for(native: Any) -> bool:
    """Whether batches were asked for (the client's setting or the environment's). It no longer
    decides where they apply: every walk that allows them uses them by default."""
    return getattr(native, "pages_per_request", None) is not None or bool(os.environ.get(_ENV, "").strip())


def setting(native: Any) -> int:
    """The pages per request of a client's walks (its own setting, else the environment's,
    else the default)."""
    own = getattr(native, "pages_per_request", None)
    return own if isinstance(own, int) else _from_env()


def requests_for(rows: int, page_size: int, pages_per_request: int, limited: bool = False) -> int:
    """The requests a walk of ``rows`` makes, one page per request or in batches of
    ``pages_per_request`` pages (``per`` rows). Every batch after the first starts on the last row
    handed out (the overlap that shows a shift), so it brings ``per - 1`` new rows: batch ``k``
    ends at row ``k * (per - 1) + per``. A walk that stops at its limit (``limited``: the server
    has at least ``rows``) ends on the batch that hands out its last row; one read to the end
    ends on the first batch that is not full, so rows that fill the last batch exactly take one
    more (a walk of none still asks once)."""
    size = max(1, page_size)
    if pages_per_request <= 1:
        return max(1, math.ceil(rows / size))
    step = size * pages_per_request - 1
    if limited:
        return max(1, -(-(rows - 1) // step))
    return max(1, (rows - 1) // step + 1)


def estimated(
    native: Any,
    walk: Any,
    limit: int | None,
    parts: Sequence[tuple[int, bool]],
    page_size: int,
) -> tuple[int, bool] | None:
    """The requests of a ``findings_view`` walk (``walk``: its native walk, as :func:`pages`
    made it) read in batches, for ``estimate()``, and whether every reading uses them (else only
    a walk read whole does). ``parts``: (rows, whether the part stops at its limit with rows to
    spare), one for a sequential walk, more for ``partitions=``. None where the walk reads one
    page per request: :func:`pages` made it so (``after=``, another sort, a selection without
    ``id``, ``pages_per_request`` 1, a limit of 0: the same checks, the core's own included, as
    it was made), it was read one page per request already, or the offset probe said no."""
    if isinstance(walk, _Resumed):
        # Every batch of a resumed walk starts on the last row handed out (the cursor's row
        # first): each brings one row fewer than it reads; no offset probe.
        step = max(1, max(1, page_size) * _taken(native, walk.pages_per_request) - 1)
        counts = [max(1, -(-rows // step)) if limited else rows // step + 1 for rows, limited in parts]
        return sum(counts), True
    if not isinstance(walk, _Chosen) or (walk._inner is not None and walk._inner is not walk._batched):
        return None
    if len(parts) > 1 and not walk._always:
        # The parts are walks of their own, read as they come (not whole): in batches only
        # where pages() makes every reading use them, as it made this one (a walk made inside
        # whole_walks(False) never).
        return None
    held = _probes.known(native.base_url, native.loaded_schema, _plan.offset_capability("findings_view"))
    if held is False:
        return None
    n = _taken(native, walk.pages_per_request)
    total = sum(requests_for(rows, page_size, n, limited) for rows, limited in parts)
    # The walk's first batch asks the offset probe first where it was not asked yet.
    probe = 1 if held is None and walk._inner is None else 0
    return total + probe, walk._always


def _taken(native: Any, asked: int) -> int:
    """The pages per request a walk will send: as asked, or fewer where the server refused more
    in this process (the core remembers the size that worked, and starts there)."""
    took = _native.batch_pages_for(native.base_url)
    return asked if took is None else max(1, min(asked, took))


def _id_sorted(sort: Any) -> bool:
    if sort is None:
        return True
    values = [sort] if isinstance(sort, str) else list(sort)
    names = [getattr(v, "value", v) for v in values]
    return names in ([], ["ID_ASC"])


def _resumed(
    native: Any,
    name: str,
    args: Mapping[str, Any],
    page_size: Any,
    limit: Any,
    fields: str | None,
    cursor: str,
) -> Any:
    """A walk resumed from a batched walk's own cursor (``sfb1:<offset>:<key>``): only a batched
    walk reads it (the server never sees it), with ``pages_per_request`` pages per request (one,
    if it is 1)."""
    given = {**args, "after": None}
    why = _usable(name, given, 2)
    if why is not None:
        raise ValidationError(
            f"after={cursor!r} is the cursor of a batched walk, which resumes only a batched walk; "
            f"this one cannot be batched ({why})"
        )
    sent = native._prepare(native.schema_sync(), name, given, fields)
    n = max(setting(native), 1)
    return _Resumed(native._n.paginate_batched(sent, page_size, limit, n, 0, cursor), cursor, n)


def resumed_offset(cursor: object) -> int | None:
    """The offset of the row a batched walk's own cursor (``sfb1:<offset>:<key>``) names, the
    last one handed out before it (None: not such a cursor)."""
    if not isinstance(cursor, str) or not _native.is_batch_cursor(cursor):
        return None
    return int(cursor.split(":")[1])


class _Resumed:
    """A batched walk resumed from its own cursor: the native walk, which stands at that cursor
    (``cursor``) until it hands out a row, as a walk of the server's cursor stands at its
    ``after=``."""

    def __init__(self, inner: Any, cursor: str, pages_per_request: int) -> None:
        self._inner = inner
        self._from = cursor
        #: The pages a request of the walk asks for (for estimate()).
        self.pages_per_request = pages_per_request

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def cursor(self) -> str | None:
        got = self._inner.cursor
        return self._from if got is None else got


def _usable(name: str, args: Mapping[str, Any], n: int) -> str | None:
    """Why a walk is not read in batches (None: it may be)."""
    if n <= 1:
        return "pages_per_request is 1"
    if name not in _OPERATIONS:
        return f"{name} is not read in batches"
    if args.get("after") is not None or args.get("before") is not None:
        return "the walk resumes from a cursor (after=)"
    if not _id_sorted(args.get("sort")):
        return "the walk has a sort other than ID_ASC"
    return None


#: One lock per server and connection: the parts of a partitioned walk ask the probe once,
#: while a server slow to answer it holds back no walk of another server.
_PROBING: dict[tuple[str, str], threading.Lock] = {}
_PROBING_GUARD = threading.Lock()


def _probing(base_url: str, capability: str) -> threading.Lock:
    with _PROBING_GUARD:
        return _PROBING.setdefault((base_url, capability), threading.Lock())


def _offset_held(native: Any, name: str) -> bool:
    """The walk plan's offset probe of connection ``name`` (one request per server and
    connection, remembered; two aliased fields; one at a time, so the parts of a partitioned
    walk ask it once). The async client asks it in a thread (:meth:`_Chosen._later`)."""
    try:
        capability = _plan.offset_capability(name)
        with _probing(native.base_url, capability):
            steps = _plan.capability_steps(native.base_url, native.schema_sync(), capability)
            held = _plan.drive(native, steps)
    except Exception as exc:  # a 429, a 5xx, the network: the probe is asked again next time
        log.debug("%s: one page per request (the offset probe failed: %s)", name, type(exc).__name__)
        return False
    if not held:
        log.debug("%s: one page per request (the server does not take offset with aliases)", name)
    return held


class _Chosen:
    """A findings walk whose reading chooses its requests at the first read: in batches where the
    server takes them (the offset probe; ``always``, as :func:`pages` makes every walk now, else
    only when read whole), else one page per request. Both native walks are lazy (no request
    until read). A batched walk whose first batch fails with a PaginationError (a server that
    does not order by id) starts again with one page per request."""

    def __init__(
        self,
        batched: Any,
        plain: Callable[[], Any],
        always: bool,
        held: Callable[[], bool],
        empty: Callable[[], Any],
        pages_per_request: int,
    ) -> None:
        self._batched: Any = batched
        #: The pages a request of the batched walk asks for (for estimate()).
        self.pages_per_request = pages_per_request
        # The typed empty table of the selection (a plain walk of limit 0: no request).
        self._empty = empty
        self._held = held
        self._plain_of: Callable[[], Any] | None = plain
        self._plain: Any = None
        self._inner: Any = None  # chosen at the first read
        self._always = always
        self._started = False

    def _idle(self) -> Any:
        if self._inner is not None:
            return self._inner
        if self._plain is None and self._plain_of is not None:
            self._plain = self._plain_of()
        return self._plain

    def __getattr__(self, name: str) -> Any:
        # cursor, total, waits, redact, freeze: the chosen walk's, or before any read the plain
        # one's (a walk made without after= stands at its start either way).
        return getattr(self._idle(), name)

    def _wants_probe(self, whole: bool) -> bool:
        """Whether choosing now asks the offset probe (a request where it is not known yet)."""
        return self._inner is None and (self._always or whole)

    def _choose(self, whole: bool, held: bool | None = None) -> Any:
        if self._inner is None:
            if (self._always or whole) and (self._held() if held is None else held):
                self._inner = self._batched
            else:
                self._inner = self._idle()
                self._plain_of = None
        return self._inner

    def _swap(self, exc: PaginationError) -> None:
        log.info("batched pages refused by the server (%s): one page per request", str(exc)[:200])
        plain, self._plain_of = self._plain_of, None
        self._inner = self._plain if self._plain is not None else plain() if plain is not None else None

    def _can_swap(self) -> bool:
        return self._inner is self._batched and not self._started and self._plain_of is not None

    def _call(self, name: str, *args: Any) -> Any:
        inner = self._choose(False)
        if not self._can_swap():
            return getattr(inner, name)(*args)
        try:
            got = getattr(inner, name)(*args)
        except PaginationError as exc:
            self._swap(exc)
            got = getattr(self._inner, name)(*args)
        if got is not False:  # try_next_page: False is "not arrived yet"
            self._started = True
        return got

    async def _call_async(self, name: str, *args: Any) -> Any:
        try:
            got = await getattr(self._inner, name)(*args)
        except PaginationError as exc:
            if not self._can_swap():
                raise
            self._swap(exc)
            got = await getattr(self._inner, name)(*args)
        self._started = True
        return got

    async def _later(self, name: str, *args: Any, whole: bool = False) -> Any:
        # The offset probe is a blocking request: asked in a thread, so the event loop (and
        # every other task on it) goes on while the server answers it.
        held = await asyncio.to_thread(self._held) if self._wants_probe(whole) else None
        inner = self._choose(whole, held)
        if not self._can_swap():
            return await getattr(inner, name)(*args)
        return await self._call_async(name, *args)

    def _padded(self, raw: Any) -> Any:
        """A raw page with a cursor (None) for each node: a batched walk's pages carry no
        cursors, and readers zip the two (``partitions=``' id check)."""
        if self._inner is not self._batched or not isinstance(raw, tuple) or len(raw) != 3:
            return raw
        nodes, info, cursors = raw
        if len(cursors) >= len(nodes):
            return raw
        return nodes, info, [*cursors, *([None] * (len(nodes) - len(cursors)))]

    def try_next_page(self) -> Any:
        if self._wants_probe(False):
            # Not chosen yet, and choosing asks the offset probe: "not arrived", so the reader
            # waits with next_page (sync) or next_page_async (the probe off the event loop).
            return False
        return self._padded(self._call("try_next_page"))

    def next_page(self) -> Any:
        return self._padded(self._call("next_page"))

    def next_batch(self, freeze: bool = True) -> Any:
        return self._call("next_batch", freeze)

    def next_jsonl(self) -> Any:
        return self._call("next_jsonl")

    async def _padded_async(self, pending: Any) -> Any:
        return self._padded(await pending)

    def next_page_async(self) -> Any:
        return self._padded_async(self._later("next_page_async"))

    def next_batch_async(self, freeze: bool = True) -> Any:
        return self._later("next_batch_async", freeze)

    def next_jsonl_async(self) -> Any:
        return self._later("next_jsonl_async")

    async def _typed_async(self, pending: Any) -> Any:
        return self._typed(await pending)

    def read_table_async(self) -> Any:
        return self._typed_async(self._later("read_table_async", whole=True))

    def _typed(self, table: Any) -> Any:
        """A batched walk of no rows has no columns: the plain walk's typed empty table (made
        from the selection, no request) instead, as a walk of one page per request gives."""
        if self._inner is not self._batched or self._plain_of is None:
            return table
        try:
            pa = importlib.import_module("pyarrow")
        except ImportError:  # to_polars without pyarrow: as it came
            return table
        table = pa.table(table)
        if table.num_rows or table.num_columns:
            return table
        return self._empty()

    def finish_table(self, batches: Any) -> Any:
        # The table of pages read (a part of partitions=): of none, the selection's columns.
        return self._typed(self._idle().finish_table(batches))

    def read_table(self, on_page: Callable[[int, int], object] | None = None) -> Any:
        inner = self._choose(True)
        if not self._can_swap():
            return self._typed(inner.read_table(on_page))

        def seen(rows: int, pages: int) -> None:
            self._started = True
            if on_page is not None:
                on_page(rows, pages)

        try:
            return self._typed(inner.read_table(seen))
        except PaginationError as exc:
            if self._started:
                raise
            self._swap(exc)
            return self._inner.read_table(on_page)

    def batch_reader(self) -> Any:
        # Read by the consumer as it goes, the cursor moving with it.
        inner = self._choose(False)
        if not self._can_swap():
            self._started = True
            return inner.batch_reader()
        try:
            pa = importlib.import_module("pyarrow")
        except ImportError:  # no reader to join the first page to: no second start
            self._started = True
            return inner.batch_reader()
        # In batches, with a second start still open: the first page is read here, so that a
        # server that does not order by id (the first batch's PaginationError) is walked one
        # page per request before any row reaches the consumer; the rest follows it.
        first = self._call("next_batch", False)
        rest = self._inner.batch_reader()
        if first is None:
            return pa.RecordBatchReader.from_batches(pa.table(self._empty()).schema, [])
        head = pa.record_batch(first[0])

        def batches() -> Iterator[Any]:
            yield head
            yield from pa.RecordBatchReader.from_stream(rest)

        return pa.RecordBatchReader.from_batches(head.schema, batches())


#: True: walks made here read in batches however they are read; False: never (a reader that
#: needs every page's cursor of the server's); None: as the reading chooses.
_WHOLE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("secfindings_whole_walks", default=None)
#: The offset a walk made here starts at, in place of its after= cursor (offset slices).
_START: contextvars.ContextVar[int | None] = contextvars.ContextVar("secfindings_batch_start", default=None)


@contextlib.contextmanager
def whole_walks(batched: bool = True) -> Iterator[None]:
    """The walks made inside read in batches however they are read (for a reader that needs no
    cursor half-way, as the sync's loads, which keep their own place), or with ``False`` never
    (a reader that needs every page's cursor)."""
    token = _WHOLE.set(batched)
    try:
        yield
    finally:
        _WHOLE.reset(token)


@contextlib.contextmanager
def starting_at(offset: int | None) -> Iterator[None]:
    """A walk made inside with ``after=`` the cursor of the row at ``offset - 1`` (an offset
    slice of ``partitions=``) is read in batches from ``offset`` instead, where batches apply;
    one page per request from the cursor otherwise."""
    token = _START.set(offset)
    try:
        yield
    finally:
        _START.reset(token)


def pages(
    native: Any,
    name: str,
    args: Mapping[str, Any],
    prepared: Any,
    page_size: Any,
    limit: Any,
    fields: str | None = None,
) -> Any:
    """The native walk of a typed operation: in batches where that is safe (see the module),
    else one page per request."""

    def plain() -> Any:
        return native._n.paginate_prepared(prepared, page_size, limit)

    after = args.get("after")
    if isinstance(after, str) and _native.is_batch_cursor(after):
        return _resumed(native, name, args, page_size, limit, fields, after)
    if isinstance(after, str) and after.startswith(_native.BATCH_CURSOR_PREFIX):
        raise ValidationError(
            f"after={after[:40]!r} looks like a batched walk's cursor but is not one "
            f"({_native.BATCH_CURSOR_PREFIX}<offset>:<key>); pass paginator.cursor as it was"
        )
    mode = _WHOLE.get()
    if mode is False or limit == 0:
        return plain()
    n = setting(native)
    start = _START.get()
    if start is not None and args.get("after") is None:
        start = None
    given = {**args, "after": None} if start is not None else args
    why = _usable(name, given, n)
    if why is not None:
        if n > 1 and name in _OPERATIONS:
            log.debug("%s: one page per request (%s)", name, why)
        return plain()
    try:
        sent = prepared if start is None else native._prepare(native.schema_sync(), name, given, fields)
        batched = native._n.paginate_batched(sent, page_size, limit, n, start or 0)
    except ValidationError as exc:  # the selection has no id, or another sort
        log.debug("%s: one page per request (%s)", name, str(exc)[:200])
        return plain()
    # Every walk that allows them reads in batches by default (pages_per_request 1 turns them
    # off): each row a batched walk hands out carries the walk's own cursor, sfb1:..., so
    # iteration, the Arrow stream and the exports resume from it.
    always = True
    return _Chosen(
        batched,
        plain,
        always,
        lambda: _offset_held(native, name),
        lambda: native._n.paginate_prepared(prepared, page_size, 0).read_table(),
        n,
    )
