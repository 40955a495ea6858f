"""Paginators: lazy, one-pass walks over a Relay connection, as items, pages, columns or files.

The Rust core fetches page N+1 while the caller works on page N; these classes only turn pages
into items (and items into typed models, when the operation has one). What a walk does is
written once, in :class:`_Walk`; :class:`Paginator` and :class:`AsyncPaginator` only wait for
the pages, one blocking and one awaiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from secfindings import _estimate, _partitions
from secfindings._export import Export, ExportResult
from secfindings._pages import Page, Position, Wrap, html_rows, make_page
from secfindings._progress import Progress, Reporter
from secfindings._shared import need, poll_briefly
from secfindings._watch import AsyncWatch, Watch, watch_key
from secfindings.errors import PaginationError, ValidationError
from secfindings.formats import FIELDS, selection
from secfindings.formats.ocsf import OcsfExport
from secfindings.formats.sarif import SarifExport

if TYPE_CHECKING:
    from secfindings._native import NativePages
    from secfindings._schema import Schema

__all__ = ["AsyncPaginator", "Paginator"]

T = TypeVar("T")

#: Why a paginator cannot go on (see ``_Walk._stop``).
_INTERRUPTED = "was interrupted while it read pages into columns or a file"
_CANCELLED = "was cancelled while a page was on its way"

#: The exports written from the walk's JSON lines (the nodes as the server sent them).
_LINES = ("jsonl", "ocsf", "sarif")


def _format(fmt: str) -> type[Export]:
    """The writer of an export format: OCSF and SARIF live in :mod:`secfindings.formats`."""
    if fmt == "ocsf":
        return OcsfExport
    if fmt == "sarif":
        return SarifExport
    return Export


#: ``replay=``: the typed method that made the walk and its arguments (``watch()`` walks again).
Replay = tuple[Callable[..., Any], dict[str, Any]]


def _pandas(table: Any) -> Any:
    """An Arrow table as a DataFrame with nullable ints and bools (no float for a missing int)."""
    pd = need("pandas", "pandas", "to_pandas()")
    pa = need("pyarrow", "pandas", "to_pandas()")
    mapping = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return table.to_pandas(types_mapper=mapping.get)


class _Walk(Generic[T]):
    """What the sync and async paginators share: where the walk stands, what it hands out, and
    every step of reading it into columns or a file between two waits for a page."""

    def __init__(
        self,
        pages: NativePages,
        wrap: Wrap[T] | None = None,
        replay: Replay | None = None,
        *,
        schema: Schema | None = None,
        limit: int | None = None,
    ) -> None:
        self._pages = pages
        # The walk's limit= (None: to the end), for partitions= and estimate().
        self._limit = limit
        self._wrap = wrap
        self._replay = replay
        # The live schema of the client that made the walk: it types the fields of its models
        # that their class does not declare, and chooses the key of watch().
        self._schema = schema
        self._types = schema.field_type if schema is not None else None
        self._done = False
        self._stopped: str | None = None  # why the walk cannot go on (see _stop)
        self._streamed = False
        self._written: ExportResult | None = None
        self._pos = Position(pages.cursor)

    @property
    def cursor(self) -> str | None:
        """Where to resume (``after=paginator.cursor``): the cursor of the last item handed out,
        mid-page too, when the query selects the edges' cursors (the typed methods do); otherwise
        the end cursor of the last page fully consumed. Nothing is skipped on resume."""
        if self._streamed:
            return self._pages.cursor
        return self._pos.cursor()

    @property
    def resume(self) -> str | None:
        """After a partitioned export (``partitions=N``), finished or interrupted: every
        partition's ids and the cursor after its last page in the file. Pass it as
        ``resume=`` to the same export of the same walk to continue it; None otherwise."""
        return self._written.resume if self._written is not None else None

    # ------------------------------------------------------------------------------ state

    def _check_usable(self) -> None:
        if self._stopped is not None:
            if self.resume is not None:  # a partitioned export: a cursor per partition
                raise PaginationError(
                    f"this paginator {self._stopped}, so going on could skip rows; continue the "
                    "export on a new paginator of the same walk with resume=paginator.resume"
                )
            shown = None if self.cursor is None else self._pages.redact(self.cursor)
            raise PaginationError(
                f"this paginator {self._stopped}, so going on could skip rows; start a new one "
                f"with after={shown!r} (paginator.cursor)",
                cursor=self.cursor,
            )

    def _stop(self, exc: BaseException) -> None:
        """The walk may have moved past what was handed out (``exc`` came while pages were read
        into columns or a file, or a task was cancelled while a page was on its way): from here
        only a new paginator from ``cursor`` goes on, with nothing skipped."""
        asyncio = sys.modules.get("asyncio")
        cancelled = asyncio is not None and isinstance(exc, asyncio.CancelledError)
        self._stopped = _CANCELLED if cancelled else _INTERRUPTED

    def _arrived(self, raw: Any) -> Page[T] | None:
        """The page of the native walk's answer; None at the end (the walk is then done)."""
        if raw is None:
            self._done = True
            return None
        return make_page(raw, self._wrap, self._types)

    def _batch(self, got: tuple[Any, str | None] | None) -> Any:
        """The batch of a page read as columns (the walk stands after it); None at the end."""
        if got is None:
            self._done = True
            return None
        batch, cursor = got
        self._pos.moved(cursor)
        return batch

    def __repr__(self) -> str:
        kind = getattr(self._wrap, "__name__", "dict")
        state = "exhausted" if self._done else "lazy"
        cursor = self.cursor
        shown = None if cursor is None else self._pages.redact(cursor)
        return f"<{type(self).__name__}[{kind}] {state}, cursor={shown!r}>"

    def _repr_html_(self) -> str:
        """The paginator's state and the items of the page it is on (nothing is fetched)."""
        page = self._pos.page
        text = html.escape(repr(self))
        if page is None or not page.items:
            return f"<p><code>{text}</code></p>"
        return f"<p><code>{text}</code>, current page:</p>" + html_rows(page.items, 10)

    # ------------------------------------------------------------------------------ columns
    # Pages are decoded from the response bytes into Arrow columns in Rust (the next page is
    # fetched meanwhile) and handed over through the Arrow PyCapsule interface: pyarrow,
    # pandas, polars and DuckDB take them without copies. Typed methods have typed columns
    # (DateTime -> timestamp[us, UTC], Int -> int64, nested objects as dotted columns, lists of
    # scalars as list columns, JSONString and lists of objects as JSON text); paginate() infers
    # the columns from the data, widening them page by page.

    def _as_columns(self) -> None:
        """Before the rest of the walk goes out as columns (see ``Position.columns``)."""
        self._check_usable()
        self._pos.columns()

    @contextlib.contextmanager
    def _reading(self, progress: Progress) -> Iterator[Reporter]:
        """Around reading the rest of the walk into one table: the pages read so far go with a
        failed read, so the paginator cannot go on after one (the cursor stands before them)."""
        self._as_columns()
        report = Reporter(progress, self._pages, "columns")
        ok = False
        try:
            yield report
            ok = True
        except BaseException as exc:
            self._stop(exc)
            raise
        finally:
            report.close(ok)
        self._done = True
        self._pos.moved(self._pages.cursor)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The rest of the walk for any Arrow consumer (``polars.DataFrame(p)``,
        ``pyarrow.table(p)``, ``duckdb.sql("select * from p")``), one batch per page, pulled as
        read. The consumer reads synchronously: its thread waits for each page (for the async
        paginator in a running event loop, the loop waits; see :class:`AsyncPaginator`)."""
        self._as_columns()
        self._done = True
        # The consumer pulls pages as it reads: the cursor is the walk's own from here on.
        self._streamed = True
        return self._pages.batch_reader().__arrow_c_stream__(requested_schema)

    # ------------------------------------------------------------------------------ files

    @contextlib.contextmanager
    def _exporting(
        self, path: str | os.PathLike[str], fmt: str, append: bool, progress: Progress, escape: bool
    ) -> Iterator[tuple[Export, Reporter]]:
        """Around an export: what was read before a failure is written too and the cursor stands
        after it, but the walk has moved past it, so this paginator cannot go on (only a new
        one from ``cursor``). ``_written`` says what is in the file (the command's resume hint)."""
        self._as_columns()
        out = _format(fmt)(path, fmt, append, self._pages, escape)
        report = Reporter(progress, self._pages, f"write_{fmt}")
        ok = False
        try:
            yield out, report
            ok = True
        except BaseException as exc:
            self._stop(exc)
            raise
        finally:
            try:
                out.flush(self._pages)
                self._pos.moved(out.cursor)
            finally:
                try:
                    out.close(ok)
                finally:
                    report.close(ok)
                    self._written = ExportResult(out.path, out.rows, out.pages, self._pos.cursor())

    def _export_page(self, out: Export, report: Reporter, got: tuple[Any, str | None] | None) -> None:
        """Writes one page (Parquet fixes its schema at its first row group, widened over the
        pages buffered until then; CSV keeps its header's columns, types may widen)."""
        if got is None:
            self._done = True
            return
        report.page(out.page(*got))
        self._pos.moved(out.cursor)

    # ------------------------------------------------------------------------------ watch

    def _replayed(self, by: str | None) -> tuple[Callable[..., Any], dict[str, Any], str]:
        if self._replay is None:
            raise ValidationError("watch() needs a findings_view(...) paginator")
        method, args = self._replay
        return method, args, by or watch_key(self._schema)

    def _with_format_fields(self, fmt: str) -> Any:
        """For ``write_ocsf`` / ``write_sarif``: a ``findings_view`` walk made without ``fields=``
        and not started is read again with the formats' own selection (the one ``secfindings
        export --format`` asks for, less what the server lacks), so the two give the same
        records. None when the walk chose its fields, or has begun."""
        if self._replay is None or self._replay[1].get("fields") is not None:
            return None
        if self._pos.page is not None or self._done or self._streamed or self._stopped is not None:
            return None
        method, args = self._replay
        fields = selection(getattr(method, "__self__", None), FIELDS, f"write_{fmt}")
        return method(**{**args, "fields": fields}, after=self._pages.cursor, limit=self._limit)


class Paginator(_Walk[T]):
    """Iterates the items of a connection, fetching pages as needed (never all at once).

    A paginator is a single pass: iterating again continues where the last iteration stopped.
    ``cursor`` is the end cursor of the last page fetched; pass it as ``after=`` to resume later.
    """

    def _next_raw(self) -> Any:
        self._check_usable()
        # The page fetched ahead, when it has arrived; otherwise wait for it on the I/O thread.
        raw = self._pages.try_next_page()
        return self._pages.next_page() if raw is False else raw

    def pages(self) -> Iterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            page = self._arrived(self._next_raw())
            if page is None:
                return
            self._pos.whole(page)
            yield page

    def __iter__(self) -> Iterator[T]:
        while not self._done:
            page = self._arrived(self._next_raw())
            if page is None:
                return
            yield from self._pos.start(page)

    def to_list(self, *, progress: Progress = None, partitions: int = 1) -> list[T]:
        """All remaining items, in a list. ``progress=True`` shows a bar (see :data:`Progress`).
        ``partitions=N`` (``findings_view`` only) reads N parts at once, in threads: the
        items and order of the sequential walk (see :meth:`to_arrow`)."""
        if _partitions.wanted(partitions):
            found: list[T] = _partitions.items(self, progress, partitions)
            return found
        report = Reporter(progress, self._pages, "to_list")
        if not report.active:
            return list(self)
        items: list[T] = []
        try:
            for page in self.pages():
                items.extend(page.items)
                report.page(len(page.items))
        finally:
            report.close()
        return items

    def _table(self, progress: Progress) -> Any:
        with self._reading(progress) as report:
            if not report.active:
                return self._pages.read_table()
            seen = [0]

            def on_page(rows: int, pages: int) -> None:
                report.page(rows - seen[0])
                seen[0] = rows

            return self._pages.read_table(on_page)

    def to_arrow(self, *, progress: Progress = None, partitions: int = 1) -> Any:
        """The rest of the walk as a ``pyarrow.Table`` (needs ``secfindings[arrow]``).

        ``partitions=N`` (``findings_view`` only) reads the walk as N parts at once, in
        threads, and concatenates them in id order: the rows and order of the sequential walk.
        The parts are id ranges where the server takes range filters, else slices by offset,
        else one walk (see :mod:`secfindings._partitions`)."""
        pa = need("pyarrow", "arrow", "to_arrow()")
        if _partitions.wanted(partitions):
            return _partitions.concat_arrow(_partitions.tables(self, progress, partitions))
        return pa.table(self._table(progress))

    def to_pandas(self, *, progress: Progress = None, partitions: int = 1) -> Any:
        """The rest of the walk as a pandas DataFrame with real types: tz-aware UTC timestamps,
        nullable ints and bools, nested fields as dotted columns (needs ``secfindings[pandas]``).
        ``partitions=``: see :meth:`to_arrow`."""
        need("pandas", "pandas", "to_pandas()")
        return _pandas(self.to_arrow(progress=progress, partitions=partitions))

    def to_polars(self, *, progress: Progress = None, partitions: int = 1) -> Any:
        """The rest of the walk as a polars DataFrame (needs ``secfindings[polars]``; not pyarrow).
        ``partitions=``: see :meth:`to_arrow`."""
        pl = need("polars", "polars", "to_polars()")
        if _partitions.wanted(partitions):
            return _partitions.concat_polars(_partitions.tables(self, progress, partitions))
        return pl.DataFrame(self._table(progress))

    def to_arrow_batches(self) -> Iterator[Any]:
        """The rest of the walk as ``pyarrow.RecordBatch`` es, one per page, as they arrive:
        memory stays at about a page however long the walk. ``cursor`` moves with each batch.
        The schema is fixed by the first page (typed methods: by the selection)."""
        pa = need("pyarrow", "arrow", "to_arrow_batches()")
        self._as_columns()
        while not self._done:
            batch = self._batch(self._pages.next_batch())
            if batch is not None:
                yield pa.record_batch(batch)

    def watch(
        self,
        *,
        interval: float = 60.0,
        watermark: str | int | None = None,
        by: str | None = None,
        max_polls: int | None = None,
    ) -> Watch[T]:
        """New and changed findings, as they come: polls this walk's query every ``interval``
        seconds for findings past a watermark and yields each once (see :class:`Watch`)."""
        method, args, by = self._replayed(by)
        return Watch(method, args, interval=interval, watermark=watermark, by=by, max_polls=max_polls)

    def estimate(self, *, partitions: int = 1) -> _estimate.Estimate:
        """How many requests this walk will make and how long it will take at the client's
        budget, read as ``partitions`` parts at once (``findings_view`` only). Costs one
        request where the server has ``total_count``: the count and the split's id bounds (kept
        for a partitioned walk of this paginator, which then does not ask again), timed for the
        latency; without it, ``first: 1`` probes by offset count the rows (``estimate.probes``).
        ``print(estimate)`` shows it as a table; see :class:`Estimate`."""
        return _estimate.estimate(self, partitions)

    def _export(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        append: bool,
        progress: Progress,
        escape_formulas: bool = True,
        partitions: int = 1,
        resume: object = None,
    ) -> ExportResult:
        if _partitions.wanted(partitions, resume):
            return _partitions.write(self, path, fmt, append, progress, escape_formulas, partitions, resume)
        with self._exporting(path, fmt, append, progress, escape_formulas) as (out, report):
            while not self._done:
                got = self._pages.next_jsonl() if fmt in _LINES else self._pages.next_batch(False)
                self._export_page(out, report, got)
        assert self._written is not None
        return self._written

    def write_parquet(
        self,
        path: str | os.PathLike[str],
        *,
        progress: Progress = None,
        partitions: int = 1,
        resume: str | ExportResult | None = None,
    ) -> ExportResult:
        """Streams the rest of the walk into a Parquet file (zstd), a page at a time: memory stays
        at about a page. After a failure the file holds the pages written (it is closed
        properly) and ``cursor`` is after the last of them: continue into a new file with
        ``after=paginator.cursor``. Needs ``secfindings[arrow]``.

        ``partitions=N`` (``findings_view`` only): the walk is split into N parts read at
        once (threads; see :meth:`to_arrow`), whole pages written as they arrive, so rows of
        different parts interleave. There is no single cursor then: ``ExportResult.resume`` (and
        ``paginator.resume`` after a failure) continues it, passed as ``resume=`` to the same
        export of a new paginator of the same walk (into a new file for Parquet)."""
        return self._export(path, "parquet", False, progress, True, partitions, resume)

    def write_csv(
        self,
        path: str | os.PathLike[str],
        *,
        append: bool = False,
        progress: Progress = None,
        escape_formulas: bool = True,
        partitions: int = 1,
        resume: str | ExportResult | None = None,
    ) -> ExportResult:
        """Streams the rest of the walk into a CSV file (a header unless appending to a non-empty
        file; lists and objects as JSON text). Resume an interrupted export with
        ``after=paginator.cursor`` and ``append=True``. Needs ``secfindings[arrow]``.

        Spreadsheet formula injection: a text cell that starts with ``=``, ``+``, ``-``, ``@``, a
        tab or a carriage return (what Excel, LibreOffice and Google Sheets may run as a
        formula) is written with a single quote in front, as OWASP advises: ``'=HYPERLINK(...)``.
        Numbers are never changed (``-5`` in an Int column stays ``-5``). Pass
        ``escape_formulas=False`` for the text exactly as the server sent it, for a program
        rather than a spreadsheet to read.

        The file is replaced unless ``append=True`` (emptied when the first page is written: an
        export that fails before that leaves it as it was).

        ``partitions=`` and ``resume=``: see :meth:`write_parquet` (resume with ``append=True``)."""
        return self._export(path, "csv", append, progress, escape_formulas, partitions, resume)

    def write_jsonl(
        self,
        path: str | os.PathLike[str],
        *,
        append: bool = False,
        progress: Progress = None,
        partitions: int = 1,
        resume: str | ExportResult | None = None,
    ) -> ExportResult:
        """Streams the rest of the walk into a JSON-lines file, each node exactly as the server
        sent it (no dependency). Resume with ``after=paginator.cursor`` and ``append=True``.
        ``partitions=`` and ``resume=``: see :meth:`write_parquet` (resume with ``append=True``)."""
        return self._export(path, "jsonl", append, progress, True, partitions, resume)

    def write_ocsf(
        self, path: str | os.PathLike[str], *, append: bool = False, progress: Progress = None
    ) -> ExportResult:
        """Streams the rest of the walk into OCSF JSON lines: a Vulnerability Finding (2002) or a
        Compliance Finding (2003) per finding, mapped as :mod:`secfindings.formats.ocsf` says (no
        dependency). A ``findings_view`` walk made without ``fields=`` is read with
        ``secfindings.formats.FIELDS``, less what the server lacks, as ``secfindings export
        --format ocsf`` reads it: the two write the same records.
        Memory stays at about a page; resume with ``after=paginator.cursor`` and ``append=True``."""
        return self._format_export(path, "ocsf", append, progress)

    def write_sarif(
        self, path: str | os.PathLike[str], *, append: bool = False, progress: Progress = None
    ) -> ExportResult:
        """Streams the rest of the walk into a SARIF 2.1.0 log: a result per finding, a rule per
        kind of finding, as :mod:`secfindings.formats.sarif` says (no dependency; without
        ``fields=`` the walk selects as :meth:`write_ocsf` does). The log is
        ended properly also after a failure; resume with ``after=paginator.cursor`` and
        ``append=True`` (the same run goes on)."""
        return self._format_export(path, "sarif", append, progress)

    def _format_export(
        self, path: str | os.PathLike[str], fmt: str, append: bool, progress: Progress
    ) -> ExportResult:
        again = self._with_format_fields(fmt)
        if again is None:
            return self._export(path, fmt, append, progress)
        try:
            return again._export(path, fmt, append, progress)  # type: ignore[no-any-return]
        finally:
            self._written, self._done = again._written, True
            self._pos.base = again.cursor


class AsyncPaginator(_Walk[T]):
    """The asyncio twin of :class:`Paginator`: ``async for``, ``pages()``, ``await to_list()``,
    ``await to_arrow()`` and the other columns, ``await write_parquet(...)`` and the other
    exports (the pages are awaited; each is written to the file on the event loop's thread).

    ``polars.DataFrame(p)``, ``pyarrow.table(p)`` and DuckDB read it through the Arrow C stream
    (``__arrow_c_stream__``) as they read :class:`Paginator`: synchronously, so in a running event
    loop the loop waits for every page of the walk. There, prefer ``await p.to_arrow()``, or give
    the paginator to the consumer in a thread: ``await asyncio.to_thread(polars.DataFrame, p)``.
    """

    async def _wait(self, pending: Any) -> Any:
        """Awaits a page from the I/O thread. A task cancelled meanwhile stops the walk: the page
        may have left it already, and must not be skipped silently."""
        try:
            return await pending
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError):
                self._stop(exc)
            raise

    async def _next_raw(self) -> Any:
        self._check_usable()
        raw = self._pages.try_next_page()
        if raw is False:
            # A few turns of the loop first: a page on its way is taken as it lands.
            raw = await poll_briefly(self._pages.try_next_page, False)
        return await self._wait(self._pages.next_page_async()) if raw is False else raw

    async def pages(self) -> AsyncIterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            page = self._arrived(await self._next_raw())
            if page is None:
                return
            self._pos.whole(page)
            yield page

    async def __aiter__(self) -> AsyncIterator[T]:
        while not self._done:
            page = self._arrived(await self._next_raw())
            if page is None:
                return
            for item in self._pos.start(page):
                yield item

    if not TYPE_CHECKING:
        # A plain `for` or `with` gets a message that says what to use (type checkers report it).
        def __iter__(self) -> Any:
            raise TypeError(
                "AsyncPaginator is asynchronous: use `async for` (or `await paginator.to_list()`)"
            )

        def __enter__(self) -> Any:
            raise TypeError("AsyncPaginator is not a context manager: use `async for` over it")

        def __exit__(self, *exc: object) -> None:
            return None

    async def to_list(self, *, progress: Progress = None, partitions: int = 1) -> list[T]:
        """All remaining items, in a list (``progress``, ``partitions``: see
        :meth:`Paginator.to_list`; the partitions are read as tasks)."""
        if _partitions.wanted(partitions):
            found: list[T] = await _partitions.items_async(self, progress, partitions)
            return found
        report = Reporter(progress, self._pages, "to_list")
        if not report.active:
            return [item async for item in self]
        items: list[T] = []
        try:
            async for page in self.pages():
                items.extend(page.items)
                report.page(len(page.items))
        finally:
            report.close()
        return items

    async def _table(self, progress: Progress) -> Any:
        with self._reading(progress) as report:
            if not report.active:
                return await self._pages.read_table_async()
            batches = []
            while (got := await self._pages.next_batch_async(False)) is not None:
                batches.append(got[0])
                report.page(got[0].num_rows)
            return self._pages.finish_table(batches)

    async def to_arrow(self, *, progress: Progress = None, partitions: int = 1) -> Any:
        """The rest of the walk as a ``pyarrow.Table`` (see :meth:`Paginator.to_arrow`;
        ``partitions=N`` reads N parts at once, as tasks)."""
        pa = need("pyarrow", "arrow", "to_arrow()")
        if _partitions.wanted(partitions):
            return _partitions.concat_arrow(await _partitions.tables_async(self, progress, partitions))
        return pa.table(await self._table(progress))

    async def to_pandas(self, *, progress: Progress = None, partitions: int = 1) -> Any:
        """The rest of the walk as a pandas DataFrame (see :meth:`Paginator.to_pandas`)."""
        need("pandas", "pandas", "to_pandas()")
        return _pandas(await self.to_arrow(progress=progress, partitions=partitions))

    async def to_polars(self, *, progress: Progress = None, partitions: int = 1) -> Any:
        """The rest of the walk as a polars DataFrame (see :meth:`Paginator.to_polars`)."""
        pl = need("polars", "polars", "to_polars()")
        if _partitions.wanted(partitions):
            return _partitions.concat_polars(await _partitions.tables_async(self, progress, partitions))
        return pl.DataFrame(await self._table(progress))

    async def to_arrow_batches(self) -> AsyncIterator[Any]:
        """The rest of the walk as ``pyarrow.RecordBatch`` es, one per page, as they arrive."""
        pa = need("pyarrow", "arrow", "to_arrow_batches()")
        self._as_columns()
        while not self._done:
            batch = self._batch(await self._wait(self._pages.next_batch_async()))
            if batch is not None:
                yield pa.record_batch(batch)

    def watch(
        self,
        *,
        interval: float = 60.0,
        watermark: str | int | None = None,
        by: str | None = None,
        max_polls: int | None = None,
    ) -> AsyncWatch[T]:
        """The asyncio twin of :meth:`Paginator.watch`: ``async for f in pager.watch(...)``."""
        method, args, by = self._replayed(by)
        return AsyncWatch(method, args, interval=interval, watermark=watermark, by=by, max_polls=max_polls)

    async def estimate(self, *, partitions: int = 1) -> _estimate.Estimate:
        """How many requests this walk will make and how long it will take (see
        :meth:`Paginator.estimate`)."""
        return await _estimate.estimate_async(self, partitions)

    async def _export(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        append: bool,
        progress: Progress,
        escape_formulas: bool = True,
        partitions: int = 1,
        resume: object = None,
    ) -> ExportResult:
        if _partitions.wanted(partitions, resume):
            return await _partitions.write_async(
                self, path, fmt, append, progress, escape_formulas, partitions, resume
            )
        with self._exporting(path, fmt, append, progress, escape_formulas) as (out, report):
            while not self._done:
                if fmt in _LINES:
                    got = await self._pages.next_jsonl_async()
                else:
                    got = await self._pages.next_batch_async(False)
                self._export_page(out, report, got)
        assert self._written is not None
        return self._written

    async def write_parquet(
        self,
        path: str | os.PathLike[str],
        *,
        progress: Progress = None,
        partitions: int = 1,
        resume: str | ExportResult | None = None,
    ) -> ExportResult:
        """Streams the rest of the walk into a Parquet file (see :meth:`Paginator.write_parquet`;
        ``partitions=N`` reads N parts at once, as tasks)."""
        return await self._export(path, "parquet", False, progress, True, partitions, resume)

    async def write_csv(
        self,
        path: str | os.PathLike[str],
        *,
        append: bool = False,
        progress: Progress = None,
        escape_formulas: bool = True,
        partitions: int = 1,
        resume: str | ExportResult | None = None,
    ) -> ExportResult:
        """Streams the rest of the walk into a CSV file, spreadsheet formulas escaped unless
        ``escape_formulas=False`` (see :meth:`Paginator.write_csv`)."""
        return await self._export(path, "csv", append, progress, escape_formulas, partitions, resume)

    async def write_jsonl(
        self,
        path: str | os.PathLike[str],
        *,
        append: bool = False,
        progress: Progress = None,
        partitions: int = 1,
        resume: str | ExportResult | None = None,
    ) -> ExportResult:
        """Streams the rest of the walk into a JSON-lines file, each node as the server sent it
        (see :meth:`Paginator.write_jsonl`)."""
        return await self._export(path, "jsonl", append, progress, True, partitions, resume)

    async def write_ocsf(
        self, path: str | os.PathLike[str], *, append: bool = False, progress: Progress = None
    ) -> ExportResult:
        """Streams the rest of the walk into OCSF JSON lines (see :meth:`Paginator.write_ocsf`)."""
        return await self._format_export(path, "ocsf", append, progress)

    async def write_sarif(
        self, path: str | os.PathLike[str], *, append: bool = False, progress: Progress = None
    ) -> ExportResult:
        """Streams the rest of the walk into a SARIF 2.1.0 log (see :meth:`Paginator.write_sarif`)."""
        return await self._format_export(path, "sarif", append, progress)

    async def _format_export(
        self, path: str | os.PathLike[str], fmt: str, append: bool, progress: Progress
    ) -> ExportResult:
        again = self._with_format_fields(fmt)
        if again is None:
            return await self._export(path, fmt, append, progress)
        try:
            return await again._export(path, fmt, append, progress)  # type: ignore[no-any-return]
        finally:
            self._written, self._done = again._written, True
            self._pos.base = again.cursor
