"""Paginators: lazy, one-pass walks over a Relay connection.

The Rust core fetches page N+1 while the caller works on page N; these classes only turn pages
into items (and items into typed models, when the operation has one).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import csv
import datetime as dt
import html
import importlib
import io
import json
import os
import stat
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from secfindings.errors import PaginationError, ValidationError

if TYPE_CHECKING:
    from secfindings._native import NativePages

__all__ = ["AsyncPaginator", "AsyncWatch", "ExportResult", "Page", "PageInfo", "Paginator", "Watch"]

T = TypeVar("T")


@dataclass(frozen=True)
class PageInfo:
    """The Relay ``pageInfo`` of one page."""

    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a connection: its items and its ``pageInfo``."""

    items: list[T]
    page_info: PageInfo
    #: Each item's edge cursor when the query selected it (the typed methods do); else empty.
    cursors: list[str | None] = field(default_factory=list, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.items)

    def _repr_html_(self) -> str:
        info = self.page_info
        return (
            f"<p><b>Page</b> of {len(self.items)} items, has_next_page={info.has_next_page}</p>"
            + _html_rows(self.items, 20)
        )


def _page(
    raw: tuple[list[Any], dict[str, Any], list[str | None]], wrap: Callable[[Any], T] | None
) -> Page[T]:
    items, info, cursors = raw
    if wrap is not None:
        # A null node stays None (a server may null one out with a resolver error).
        items = [wrap(i) if i is not None else i for i in items]
    return Page(items=items, page_info=PageInfo(**info), cursors=cursors)


class _Position:
    """Where a walk stands, for ``cursor``: the page being handed out and its list iterator.

    Items are handed out with ``yield from`` over the list (no Python code runs per item), and
    the cursor is worked out only when asked for, from how far the iterator has got.
    """

    __slots__ = ("base", "it", "page")

    def __init__(self, base: str | None) -> None:
        self.base = base  # the cursor before the current page
        self.page: Page[Any] | None = None
        self.it: Iterator[Any] | None = None

    def cursor(self) -> str | None:
        page, it = self.page, self.it
        if page is None or it is None:
            return self.base
        items = page.items
        if not items:
            return page.page_info.end_cursor or self.base
        used = len(items) - it.__length_hint__()  # type: ignore[attr-defined]
        cursors, last, end = page.cursors, len(items) - 1, page.page_info.end_cursor
        for j in range(used - 1, -1, -1):
            if cursors and cursors[j] is not None:
                return cursors[j]
            if j == last and end:
                return end
        return self.base

    def start(self, page: Page[T]) -> Iterator[T]:
        """Begins handing out ``page``; returns the iterator to hand it out with."""
        self.base = self.cursor()
        it = iter(page.items)
        self.page, self.it = page, it
        return it

    def whole(self, page: Page[Any]) -> None:
        """A page handed out as a whole (``pages()``)."""
        self.base = self.cursor()
        self.page = self.it = None
        self.base = page.page_info.end_cursor or self.base

    def columns(self) -> None:
        """Before the rest of the walk goes out as columns: refuses if part of a page was handed
        out as items (its rest would be skipped), else forgets the page."""
        it = self.it
        if it is not None and it.__length_hint__():  # type: ignore[attr-defined]
            raise ValidationError(
                "part of a page was handed out as items, and the rest of the walk as columns would "
                f"skip the rest of that page; start a new paginator with after={self.cursor()!r}"
            )
        self.base = self.cursor()
        self.page = self.it = None

    def moved(self, cursor: str | None) -> None:
        """A page went out as a batch (or was written): the walk stands after it."""
        self.base = cursor or self.base


def _repr_html(owner: Paginator[Any] | AsyncPaginator[Any]) -> str:
    """The paginator's state and the items of the page it is on (nothing is fetched)."""
    page = owner._pos.page
    text = html.escape(_repr(owner))
    if page is None or not page.items:
        return f"<p><code>{text}</code></p>"
    return f"<p><code>{text}</code>, current page:</p>" + _html_rows(page.items, 10)


def _repr(owner: Paginator[Any] | AsyncPaginator[Any]) -> str:
    kind = getattr(owner._wrap, "__name__", "dict")
    state = "exhausted" if owner._done else "lazy"
    cursor = owner.cursor
    shown = None if cursor is None else owner._pages.redact(cursor)
    return f"<{type(owner).__name__}[{kind}] {state}, cursor={shown!r}>"


def _need(module: str, extra: str, what: str) -> Any:
    """An optional dependency, or an ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(f"{what} needs {top}: pip install 'secfindings[{extra}]'") from exc


#: ``progress=``: True (a tqdm.auto bar where tqdm is installed and stderr is a terminal or a
#: notebook; else a plain line on stderr every few seconds, for logs), or a callable given
#: ``{"items", "pages", "waits", "total"}`` after each page; ``total`` is the connection's count
#: when the query selects it (``totalCount`` / ``total_count``), else None.
Progress = bool | Callable[[dict[str, Any]], object] | None

#: The clock of the plain progress lines (a test replaces it).
_clock = time.monotonic


def _interactive() -> bool:
    """Whether stderr shows a live bar: a terminal, or a notebook (tqdm.auto draws a widget)."""
    # A running kernel, not a module that was merely imported (a test suite or a tool may import
    # ipykernel without being a notebook).
    ipython = sys.modules.get("IPython")
    get_shell = getattr(ipython, "get_ipython", None)
    shell = get_shell() if callable(get_shell) else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class _Progress:
    """Reports a walk page by page; ``waits`` counts rate-limit holds and 429s so far."""

    #: Seconds between plain progress lines (stderr not a terminal, or no tqdm): a log gets a
    #: line now and then, never a bar redrawn with carriage returns.
    EVERY = 5.0

    def __init__(self, progress: Progress, pages: NativePages, what: str) -> None:
        self._pages = pages
        self.items = self.pages = 0
        self._bar: Any = None
        self._cb: Callable[[dict[str, Any]], object] | None = None
        self._last: float | None = None
        if progress is None or progress is False:
            return
        if progress is not True:
            self._cb = progress
            return
        if not _interactive():
            self._cb = self._plain
            return
        try:
            from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]
        except ImportError:
            self._cb = self._plain
        else:
            self._bar = tqdm(desc=what, unit=" items", file=sys.stderr, dynamic_ncols=True)

    @property
    def active(self) -> bool:
        return self._bar is not None or self._cb is not None

    def page(self, rows: int) -> None:
        self.items += rows
        self.pages += 1
        total = self._pages.total
        if self._bar is not None:
            if total is not None and self._bar.total != total:
                self._bar.total = total
            self._bar.update(rows)
            waits = sum(self._pages.waits())
            if waits:
                self._bar.set_postfix(pages=self.pages, waits=waits, refresh=False)
        elif self._cb is not None:
            waits = sum(self._pages.waits())
            self._cb({"items": self.items, "pages": self.pages, "waits": waits, "total": total})

    def _plain(self, info: dict[str, Any]) -> None:
        now = _clock()
        if self._last is None or now - self._last >= self.EVERY:
            self._last = now
            of = f" of {info['total']}" if info["total"] is not None else ""
            _say(f"{info['items']}{of} items, {info['pages']} pages, {info['waits']} waits")

    def close(self, ok: bool = True) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._cb == self._plain and self.pages:
            _say(f"{self.items} items, {self.pages} pages: {'done' if ok else 'stopped'}")


def _say(line: str) -> None:
    """A progress line on stderr (none where there is no stderr, as under pythonw)."""
    if sys.stderr is not None:
        print(line, file=sys.stderr, flush=True)


def _cell(v: Any, width: int = 60) -> str:
    if isinstance(v, (dict, list)):
        text = json.dumps(v, default=str, ensure_ascii=False, separators=(",", ":"))
    elif hasattr(v, "to_dict"):
        text = json.dumps(v.to_dict(), default=str, ensure_ascii=False)
    else:
        text = "" if v is None else str(v)
    if len(text) > width:
        text = text[: width - 1] + "\u2026"
    return html.escape(text)


def _raw(item: Any) -> dict[str, Any]:
    data = getattr(item, "_data", item)
    return data if isinstance(data, dict) else {"value": data}


def _html_rows(items: list[Any], limit: int = 10) -> str:
    """A compact HTML table of items (models or dicts), nested objects flattened one level."""
    rows: list[dict[str, Any]] = []
    for item in items[:limit]:
        row: dict[str, Any] = {}
        for k, v in _raw(item).items():
            if isinstance(v, dict) and "edges" not in v:
                for k2, v2 in v.items():
                    row[f"{k}.{k2}"] = v2
            else:
                row[k] = v
        rows.append(row)
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows)
    more = f"<p>... and {len(items) - limit} more</p>" if len(items) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"


def _pandas(table: Any) -> Any:
    """An Arrow table as a DataFrame with nullable ints and bools (no float for a missing int)."""
    pd = _need("pandas", "pandas", "to_pandas()")
    pa = _need("pyarrow", "pandas", "to_pandas()")
    mapping = {pa.int64(): pd.Int64Dtype(), pa.bool_(): pd.BooleanDtype()}
    return table.to_pandas(types_mapper=mapping.get)


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: rows and pages, and the cursor after the last page written (pass it
    as ``after=`` to continue an export that was interrupted, into a new file or appending)."""

    path: str
    rows: int
    pages: int
    cursor: str | None


#: What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection"): a text cell that
#: starts with one of these is written with a single quote in front.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def _csv_cell(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, (list, dict)):
        # Compact, as the JSON-text columns (nested objects) already are.
        return json.dumps(v, default=str, separators=(",", ":"))
    if isinstance(v, dt.datetime):
        return v.isoformat()
    return v


def _no_formula(cell: Any) -> Any:
    """A CSV cell a spreadsheet shows rather than runs: text that starts like a formula gets a
    single quote in front. Only text: a number (a negative one too) stays a number."""
    if isinstance(cell, str) and cell.startswith(_FORMULA_STARTS):
        return "'" + cell
    return cell


def _relay_index(cursor: str | None) -> int | None:
    """The index in a graphql-relay array cursor (base64 of ``arrayconnection:N``, the cursors
    of graphene and of the emulator); None for any other cursor (a server may make its own)."""
    if not cursor:
        return None
    try:
        text = base64.b64decode(cursor.strip(), validate=True).decode("ascii")
    except (binascii.Error, ValueError):
        return None
    kind, sep, index = text.partition(":")
    if kind != "arrayconnection" or not sep:
        return None
    try:
        return int(index)
    except ValueError:
        return None


class _Export:
    """One streaming export: opens the file, writes page after page, records the cursor after
    each page written (so an interrupted export resumes with nothing lost or repeated).

    A file that is replaced (not appended to) is emptied only when the first page is written, so
    an export that fails before it (a refused cursor, the network) leaves the file as it was; a
    file the export created and left empty that way is removed."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        append: bool,
        native: Any = None,
        escape_formulas: bool = True,
    ) -> None:
        self.native = native
        self.path = os.fspath(path)
        self.fmt = fmt
        self.rows = 0
        self.pages = 0
        self._writer: Any = None
        self._csv_header = False
        self._escape = escape_formulas
        self._pending: list[Any] = []
        self._pending_rows = 0
        self._mark: int | None = None
        self._header: list[str] | None = None
        self._append = append
        self._started = False
        self._created = False
        self._file: Any = None
        if fmt == "parquet":
            self._pq = _need("pyarrow.parquet", "arrow", "write_parquet()")
            self._pa = _need("pyarrow", "arrow", "write_parquet()")
            return
        if fmt == "csv":
            self._pa = _need("pyarrow", "arrow", "write_csv()")
            exists = append and os.path.exists(self.path) and os.path.getsize(self.path) > 0
            self._csv_header = not exists
        # Unbuffered bytes: a page goes in with one write and comes out with one truncate, with
        # no buffer in between that a failed write could leave half flushed. Opened here (an
        # unwritable path fails before anything is fetched), emptied at the first page.
        try:
            self._file = open(self.path, "xb", buffering=0)  # noqa: SIM115
            self._created = True
        except FileExistsError:
            self._file = open(self.path, "ab", buffering=0)  # noqa: SIM115
        self._seekable = self._file.seekable()

    def _begin(self) -> None:
        """Before the first bytes (or at a successful end): empties a file being replaced."""
        if self._started or self._file is None:
            return
        self._started = True
        if self._append:
            return
        st = os.fstat(self._file.fileno())
        if stat.S_ISREG(st.st_mode) and st.st_size:
            os.ftruncate(self._file.fileno(), 0)

    #: Parquet row groups of about this many rows: one per page would make thousands of tiny
    #: groups whose metadata the writer keeps until the file is closed.
    ROW_GROUP = 50_000

    def write(self, data: Any) -> bool:
        """Writes a page; True when everything given so far is in the file (Parquet buffers up
        to a row group). A page of CSV or JSON lines goes in with one write, and an interruption
        part-way through it takes it out again (see :meth:`rollback`), so a resumed export
        neither repeats nor skips rows."""
        if self._file is not None:
            self._begin()
            # A pipe or a terminal cannot be rewound: nothing to take out there.
            self._mark = self._file.seek(0, os.SEEK_END) if self._seekable else None
        if self.fmt == "jsonl":
            self._write_all(data)
            self.rows += data.count(b"\n")
        elif self.fmt == "parquet":
            # Kept as the native batches: finish_table widens them into one schema.
            self._pending.append(data)
            self._pending_rows += data.num_rows
            self.pages += 1
            return self._pending_rows >= self.ROW_GROUP and self.flush(self.native)
        else:
            batch = self._pa.record_batch(data)
            text = io.StringIO()
            writer = csv.writer(text)
            if self._header is None:
                self._header = batch.schema.names
                if self._csv_header:
                    writer.writerow([_no_formula(n) if self._escape else n for n in self._header])
            elif batch.schema.names != self._header:
                raise ValidationError(
                    f"the columns changed after the CSV header was written ({self._header} -> "
                    f"{batch.schema.names}); select the fields explicitly, or write Parquet"
                )
            names = batch.schema.names
            for row in batch.to_pylist():
                cells = [_csv_cell(row[n]) for n in names]
                writer.writerow([_no_formula(c) for c in cells] if self._escape else cells)
            self._write_all(text.getvalue().encode("utf-8"))
            self.rows += batch.num_rows
        self.pages += 1
        return True

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = self._file.write(view)
            view = view[n:]

    def rollback(self, cause: BaseException) -> None:
        """Takes out a page whose write was interrupted (CSV, JSON lines). ``cause`` (what
        interrupted it) stays the error to report: when the page cannot be taken out too (a
        device such as /dev/full cannot be truncated), that is only added to it as a note."""
        if self._file is None or self._mark is None:
            return
        mark, self._mark = self._mark, None
        try:
            os.ftruncate(self._file.fileno(), mark)
            self._file.seek(mark)
        except OSError as exc:
            if hasattr(cause, "add_note"):  # Python 3.11+
                cause.add_note(f"the partly written page could not be taken out of {self.path}: {exc}")

    def flush(self, pages: Any = None) -> bool:
        """Writes the buffered pages (Parquet): True when there were any. The first row group
        fixes the file's schema, widened over every page buffered so far (`pages.finish_table`):
        a column null on the first page and filled later still gets its type."""
        if self.fmt != "parquet" or not self._pending:
            return False
        if self._writer is None and pages is not None:
            table = self._pa.table(pages.finish_table(self._pending))
            pages.freeze()
        else:
            table = self._pa.Table.from_batches([self._pa.record_batch(b) for b in self._pending])
        if self._writer is None:
            self._writer = self._pq.ParquetWriter(self.path, table.schema, compression="zstd")
        self._writer.write_table(table)
        self.rows += self._pending_rows
        self._pending, self._pending_rows = [], 0
        return True

    def close(self, ok: bool = True) -> None:
        """Closes the file. After a success a replaced file holds only this export (none of
        its old content, even with no rows); after a failure before the first page, a file
        this export created is removed and any other is left as it was."""
        if self.fmt == "parquet" and self._writer is not None:
            self._writer.close()
        if self._file is None:
            return
        try:
            if ok:
                self._begin()
        finally:
            self._file.close()
            if not ok and self._created and not self._started:
                with contextlib.suppress(OSError):
                    if os.path.getsize(self.path) == 0:
                        os.unlink(self.path)


_FORMATS = {"parquet", "csv", "jsonl"}


class Paginator(Generic[T]):
    """Iterates the items of a connection, fetching pages as needed (never all at once).

    A paginator is a single pass: iterating again continues where the last iteration stopped.
    ``cursor`` is the end cursor of the last page fetched; pass it as ``after=`` to resume later.
    """

    def __init__(
        self,
        pages: NativePages,
        wrap: Callable[[Any], T] | None = None,
        replay: tuple[Callable[..., Paginator[T]], dict[str, Any]] | None = None,
    ) -> None:
        self._pages = pages
        self._wrap = wrap
        self._replay = replay
        self._done = False
        self._interrupted = False
        self._streamed = False
        self._pos = _Position(pages.cursor)

    @property
    def cursor(self) -> str | None:
        """Where to resume (``after=paginator.cursor``): the cursor of the last item handed out,
        mid-page too, when the query selects the edges' cursors (the typed methods do); otherwise
        the end cursor of the last page fully consumed. Nothing is skipped on resume."""
        if self._streamed:
            return self._pages.cursor
        return self._pos.cursor()

    def _check_usable(self) -> None:
        if self._interrupted:
            shown = None if self.cursor is None else self._pages.redact(self.cursor)
            raise PaginationError(
                "this paginator was interrupted while it read pages into columns or a file, so going "
                f"on could skip rows; start a new one with after={shown!r} (paginator.cursor)",
                cursor=self.cursor,
            )

    def _next_raw(self) -> Any:
        self._check_usable()
        # The page fetched ahead, when it has arrived; otherwise wait for it on the I/O thread.
        raw = self._pages.try_next_page()
        return self._pages.next_page() if raw is False else raw

    def pages(self) -> Iterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            raw = self._next_raw()
            if raw is None:
                self._done = True
                return
            page = _page(raw, self._wrap)
            self._pos.whole(page)
            yield page

    def __iter__(self) -> Iterator[T]:
        while not self._done:
            raw = self._next_raw()
            if raw is None:
                self._done = True
                return
            yield from self._pos.start(_page(raw, self._wrap))

    def __repr__(self) -> str:
        return _repr(self)

    def _repr_html_(self) -> str:
        return _repr_html(self)

    def to_list(self, *, progress: Progress = None) -> list[T]:
        """All remaining items, in a list. ``progress=True`` shows a bar (see :data:`Progress`)."""
        report = _Progress(progress, self._pages, "to_list")
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

    # Columns. Pages are decoded from the response bytes into Arrow columns in Rust (the next
    # page is fetched meanwhile) and handed over through the Arrow PyCapsule interface: pyarrow,
    # pandas, polars and DuckDB take them without copies. Typed methods have typed columns
    # (DateTime -> timestamp[us, UTC], Int -> int64, nested objects as dotted columns, lists of
    # scalars as list columns, JSONString and lists of objects as JSON text); paginate() infers
    # the columns from the data, widening them page by page.

    def _table(self, progress: Progress) -> Any:
        self._check_usable()
        self._pos.columns()
        report = _Progress(progress, self._pages, "columns")
        try:
            if report.active:
                seen = [0]

                def on_page(rows: int, pages: int) -> None:
                    report.page(rows - seen[0])
                    seen[0] = rows

                table = self._pages.read_table(on_page)
            else:
                table = self._pages.read_table()
        except BaseException:
            # The pages read so far are gone with the call; the cursor still stands before them.
            self._interrupted = True
            raise
        finally:
            report.close()
        self._done = True
        self._pos.moved(self._pages.cursor)
        return table

    def to_arrow(self, *, progress: Progress = None) -> Any:
        """The rest of the walk as a ``pyarrow.Table`` (needs ``secfindings[arrow]``)."""
        pa = _need("pyarrow", "arrow", "to_arrow()")
        return pa.table(self._table(progress))

    def to_pandas(self, *, progress: Progress = None) -> Any:
        """The rest of the walk as a pandas DataFrame with real types: tz-aware UTC timestamps,
        nullable ints and bools, nested fields as dotted columns (needs ``secfindings[pandas]``)."""
        _need("pandas", "pandas", "to_pandas()")
        return _pandas(self.to_arrow(progress=progress))

    def to_polars(self, *, progress: Progress = None) -> Any:
        """The rest of the walk as a polars DataFrame (needs ``secfindings[polars]``; not pyarrow)."""
        pl = _need("polars", "polars", "to_polars()")
        return pl.DataFrame(self._table(progress))

    def to_arrow_batches(self) -> Iterator[Any]:
        """The rest of the walk as ``pyarrow.RecordBatch`` es, one per page, as they arrive:
        memory stays at about a page however long the walk. ``cursor`` moves with each batch.
        The schema is fixed by the first page (typed methods: by the selection)."""
        pa = _need("pyarrow", "arrow", "to_arrow_batches()")
        self._check_usable()
        self._pos.columns()
        while not self._done:
            got = self._pages.next_batch()
            if got is None:
                self._done = True
                return
            batch, cursor = got
            self._pos.moved(cursor)
            yield pa.record_batch(batch)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The rest of the walk for any Arrow consumer (``polars.DataFrame(p)``,
        ``pyarrow.table(p)``, ``duckdb.sql("select * from p")``), one batch per page, pulled as read."""
        self._check_usable()
        self._pos.columns()
        self._done = True
        # The consumer pulls pages as it reads: the cursor is the walk's own from here on.
        self._streamed = True
        return self._pages.batch_reader().__arrow_c_stream__(requested_schema)

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
        if self._replay is None:
            raise ValidationError("watch() needs a findings_view(...) paginator")
        method, args = self._replay
        by = by or _watch_key(method)
        return Watch(method, args, interval=interval, watermark=watermark, by=by, max_polls=max_polls)

    def _export(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        append: bool,
        progress: Progress,
        escape_formulas: bool = True,
    ) -> ExportResult:
        self._check_usable()
        self._pos.columns()
        out = _Export(path, fmt, append, self._pages, escape_formulas)
        report = _Progress(progress, self._pages, f"write_{fmt}")
        pending: str | None = None
        ok = False
        try:
            while not self._done:
                # Parquet fixes its schema at its first row group (widened over the pages
                # buffered until then); CSV keeps its header's columns (types may widen).
                got = self._pages.next_jsonl() if fmt == "jsonl" else self._pages.next_batch(False)
                if got is None:
                    self._done = True
                    break
                data, cursor = got
                pending = cursor
                before = out.rows + out._pending_rows
                try:
                    written = out.write(data)
                except BaseException as exc:
                    out.rollback(exc)
                    raise
                if written:
                    self._pos.moved(cursor)
                report.page(out.rows + out._pending_rows - before)
            ok = True
        except BaseException:
            # The walk has moved past what was written: this paginator cannot go on, only a
            # new one from `cursor`.
            self._interrupted = True
            raise
        finally:
            # What was read before a failure is written too; the cursor stands after it.
            try:
                if out.flush(self._pages):
                    self._pos.moved(pending)
            finally:
                try:
                    out.close(ok)
                finally:
                    report.close(ok)
                    # What is in the file, for the command line's resume hint.
                    self._written = ExportResult(out.path, out.rows, out.pages, self._pos.cursor())
        return self._written

    def write_parquet(self, path: str | os.PathLike[str], *, progress: Progress = None) -> ExportResult:
        """Streams the rest of the walk into a Parquet file (zstd), a page at a time: memory stays
        at about a page. After a failure the file holds the pages written (it is closed
        properly) and ``cursor`` is after the last of them: continue into a new file with
        ``after=paginator.cursor``. Needs ``secfindings[arrow]``."""
        return self._export(path, "parquet", False, progress)

    def write_csv(
        self,
        path: str | os.PathLike[str],
        *,
        append: bool = False,
        progress: Progress = None,
        escape_formulas: bool = True,
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
        export that fails before that leaves it as it was)."""
        return self._export(path, "csv", append, progress, escape_formulas)

    def write_jsonl(
        self, path: str | os.PathLike[str], *, append: bool = False, progress: Progress = None
    ) -> ExportResult:
        """Streams the rest of the walk into a JSON-lines file, each node exactly as the server
        sent it (no dependency). Resume with ``after=paginator.cursor`` and ``append=True``."""
        return self._export(path, "jsonl", append, progress)


class AsyncPaginator(Generic[T]):
    """The asyncio twin of :class:`Paginator`: ``async for``, ``pages()``, ``await to_list()``."""

    def __init__(
        self,
        pages: NativePages,
        wrap: Callable[[Any], T] | None = None,
        replay: tuple[Callable[..., AsyncPaginator[T]], dict[str, Any]] | None = None,
    ) -> None:
        self._pages = pages
        self._wrap = wrap
        self._replay = replay
        self._done = False
        self._interrupted = False
        self._pos = _Position(pages.cursor)

    @property
    def cursor(self) -> str | None:
        """Where to resume (``after=paginator.cursor``); see :attr:`Paginator.cursor`."""
        return self._pos.cursor()

    async def _next_raw(self) -> Any:
        if self._interrupted:
            shown = None if self.cursor is None else self._pages.redact(self.cursor)
            raise PaginationError(
                "this paginator was cancelled while a page was on its way, so iterating on could "
                f"skip that page; start a new one with after={shown!r} (paginator.cursor)",
                cursor=self.cursor,
            )
        raw = self._pages.try_next_page()
        if raw is False:
            try:
                raw = await self._pages.next_page_async()
            except BaseException as exc:
                import asyncio  # already loaded: this runs in an event loop

                if isinstance(exc, asyncio.CancelledError):
                    # The page may have left the walk already; it must not be skipped silently.
                    self._interrupted = True
                raise
        return raw

    async def pages(self) -> AsyncIterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            raw = await self._next_raw()
            if raw is None:
                self._done = True
                return
            page = _page(raw, self._wrap)
            self._pos.whole(page)
            yield page

    async def __aiter__(self) -> AsyncIterator[T]:
        while not self._done:
            raw = await self._next_raw()
            if raw is None:
                self._done = True
                return
            for item in self._pos.start(_page(raw, self._wrap)):
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

    def __repr__(self) -> str:
        return _repr(self)

    def _repr_html_(self) -> str:
        return _repr_html(self)

    async def to_list(self, *, progress: Progress = None) -> list[T]:
        """All remaining items, in a list (``progress``: see :meth:`Paginator.to_list`)."""
        report = _Progress(progress, self._pages, "to_list")
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
        if self._interrupted:
            await self._next_raw()  # raises the PaginationError that says where to resume
        self._pos.columns()
        report = _Progress(progress, self._pages, "columns")
        try:
            if report.active:
                batches = []
                while (got := await self._pages.next_batch_async(False)) is not None:
                    batches.append(got[0])
                    report.page(got[0].num_rows)
                table = self._pages.finish_table(batches)
            else:
                table = await self._pages.read_table_async()
        except BaseException:
            self._interrupted = True
            raise
        finally:
            report.close()
        self._done = True
        self._pos.moved(self._pages.cursor)
        return table

    async def to_arrow(self, *, progress: Progress = None) -> Any:
        """The rest of the walk as a ``pyarrow.Table`` (see :meth:`Paginator.to_arrow`)."""
        pa = _need("pyarrow", "arrow", "to_arrow()")
        return pa.table(await self._table(progress))

    async def to_pandas(self, *, progress: Progress = None) -> Any:
        """The rest of the walk as a pandas DataFrame (see :meth:`Paginator.to_pandas`)."""
        _need("pandas", "pandas", "to_pandas()")
        return _pandas(await self.to_arrow(progress=progress))

    async def to_polars(self, *, progress: Progress = None) -> Any:
        """The rest of the walk as a polars DataFrame (see :meth:`Paginator.to_polars`)."""
        pl = _need("polars", "polars", "to_polars()")
        return pl.DataFrame(await self._table(progress))

    def watch(
        self,
        *,
        interval: float = 60.0,
        watermark: str | int | None = None,
        by: str | None = None,
        max_polls: int | None = None,
    ) -> AsyncWatch[T]:
        """The asyncio twin of :meth:`Paginator.watch`: ``async for f in pager.watch(...)``."""
        if self._replay is None:
            raise ValidationError("watch() needs a findings_view(...) paginator")
        method, args = self._replay
        by = by or _watch_key(method)
        return AsyncWatch(method, args, interval=interval, watermark=watermark, by=by, max_polls=max_polls)

    async def to_arrow_batches(self) -> AsyncIterator[Any]:
        """The rest of the walk as ``pyarrow.RecordBatch`` es, one per page, as they arrive."""
        pa = _need("pyarrow", "arrow", "to_arrow_batches()")
        if self._interrupted:
            await self._next_raw()  # raises the PaginationError that says where to resume
        self._pos.columns()
        while not self._done:
            try:
                got = await self._pages.next_batch_async()
            except BaseException as exc:
                import asyncio

                if isinstance(exc, asyncio.CancelledError):
                    # The page may have left the walk already; it must not be skipped silently.
                    self._interrupted = True
                raise
            if got is None:
                self._done = True
                return
            batch, cursor = got
            self._pos.moved(cursor)
            yield pa.record_batch(batch)


# -- watch(): a live feed by polling --------------------------------------------------------

_WATCH_KEYS = {"last_reported_time": "LAST_REPORTED_TIME_ASC", "id": "ID_ASC"}


def _watch_key(method: Callable[..., Any]) -> str:
    """``last_reported_time`` when the server's schema can sort and filter by it (or when the
    schema is not known), else ``id``."""
    live = getattr(getattr(method, "__self__", None), "_live", None)
    schema = live.schema_sync() if live is not None else None
    if schema is None:
        return "last_reported_time"
    import graphql

    sort = schema.graphql_schema.get_type("FindingsViewSortEnum")
    sortable = isinstance(sort, graphql.GraphQLEnumType) and "LAST_REPORTED_TIME_ASC" in sort.values
    has = "last_reported_time" in schema.fields("FindingsView")
    return "last_reported_time" if sortable and has else "id"


class _WatchState:
    """The watermark of a watch: the highest key seen (a finding's ``last_reported_time`` or its
    integer id) and which findings were already yielded at exactly that key."""

    def __init__(self, by: str, watermark: str | int | None) -> None:
        if by not in _WATCH_KEYS:
            raise ValidationError(f"by must be one of {sorted(_WATCH_KEYS)}, got {by!r}")
        self.by = by
        self.key: Any = None
        self.ids: set[Any] = set()
        if watermark is not None:
            self.key = self._parse(watermark)

    def _parse(self, value: Any) -> Any:
        if self.by == "id":
            if isinstance(value, str) and value.strip().isdigit():
                return int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError(f"a watermark by id is an int, got {value!r}")
            return value
        if isinstance(value, dt.datetime):
            parsed = value
        else:
            try:
                parsed = dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
            except ValueError:
                raise ValidationError(f"the watermark is not an ISO 8601 datetime: {value!r}") from None
        if parsed.tzinfo is None:
            raise ValidationError("the watermark needs a timezone (e.g. 2026-01-01T00:00:00+00:00)")
        return parsed

    @property
    def value(self) -> str | int | None:
        """The watermark to keep across restarts (pass it back as ``watermark=``)."""
        if self.key is None:
            return None
        if self.by == "id":
            return int(self.key)
        return str(self.key.isoformat())

    def of(self, item: Any) -> Any:
        return item.id_int if self.by == "id" else item.last_reported_time

    def begin(self, item: Any) -> bool:
        """Takes one item of the newest-first walk that starts a watch from now: the newest key
        and every finding at it count as seen. False when the walk has passed them."""
        key = self.of(item)
        if key is None:
            return True  # no key: not watchable, and not where "now" is
        if self.key is None or key == self.key:
            self.key = key
            self.ids.add(getattr(item, "id", None))
            return True
        return False

    def seen(self, item: Any) -> bool:
        """Whether the item is behind the watermark or was yielded already at it (or has no key,
        which a watch cannot place); else it moves the watermark and counts as yielded."""
        key = self.of(item)
        if key is None:
            return True
        ident = getattr(item, "id", None)
        if self.key is not None and key < self.key:
            return True
        if self.key is not None and key == self.key:
            if ident in self.ids:
                return True
            self.ids.add(ident)
            return False
        self.key, self.ids = key, {ident}
        return False

    def arguments(self, base: dict[str, Any], newest_first: bool = False) -> dict[str, Any]:
        """The walk's arguments with the watermark ANDed into its filters, ordered by the key."""
        from secfindings.filters import Filter, Tree, all_of, field, filter_tree

        args = dict(base)
        parts: list[Any] = []
        user = args.pop("filters", None)
        config = dict(args.get("filters_config") or {})
        text = config.pop("filtersjson", None)
        for part in (user, text):
            if part is None:
                continue
            parts.append(part if isinstance(part, Filter) else Tree(filter_tree(part)))
        if self.key is not None:
            # Ids are unique: past the watermark exactly. Times tie: from it, and the ids seen
            # at it are skipped.
            if self.by == "id":
                parts.append(field("id").gt(self.value))
            else:
                parts.append(field("last_reported_time").gte(self.value))
        args["filters"] = all_of(*parts) if len(parts) > 1 else (parts[0] if parts else None)
        args["filters_config"] = config or None
        order = _WATCH_KEYS[self.by]
        args["sort"] = order.replace("_ASC", "_DESC") if newest_first else order
        # The fields the key needs, and no more: a server may lack last_reported_time.
        needed = "id id_int" if self.by == "id" else "id id_int last_reported_time"
        fields = args.get("fields")
        if fields is not None:
            text_fields = fields if isinstance(fields, str) else " ".join(fields)
            if text_fields.strip() not in ("*", "analyst"):
                args["fields"] = f"{text_fields} {needed}"
        elif self.by != "id":
            from secfindings._native import catalog

            default = next(op["selection"] for op in catalog() if op["name"] == "findings_view")
            args["fields"] = f"{default} {needed}"
        return args


#: The shortest wait after a 429 that gives no Retry-After (or 0), doubling per failure.
_MIN_BACKOFF = 0.5


def _backoff(exc: BaseException, failures: int, interval: float) -> float:
    """How long a watch waits after a 429: what the server asks, never less than the polling
    interval or a backoff that doubles with each failure in a row (so it cannot spin)."""
    retry_after = getattr(exc, "retry_after", None)
    asked = float(retry_after) if isinstance(retry_after, (int, float)) and retry_after > 0 else 0.0
    grown = min(60.0, _MIN_BACKOFF * 2.0 ** max(0, failures - 1))
    return max(asked, interval, grown)


_WATCH_DOC = """A live feed of findings by polling (for servers without subscriptions).

    Every ``interval`` seconds it walks the findings past the watermark (their
    ``last_reported_time``, or their id with ``by="id"``), oldest first, and yields each finding
    once per key: with ``last_reported_time``, new findings and findings reported again (a
    scanner saw them again; a status change alone does not move it); with ``by="id"``, new
    findings only. Within a poll it goes on from the moved watermark rather than from a page
    cursor, so findings that move while it walks are not skipped. ``watermark`` is where it
    stands: keep it and pass it back as ``watermark=`` after a restart to go on from there
    (by time, findings reported at exactly that instant come again once; by id, exactly).
    Without one it starts, at the first iteration, from the newest finding then. Findings
    without the key are not watched. A 429 makes it wait as the server asks (at least
    ``interval``, and longer with each 429 in a row); other errors are raised. ``max_polls``
    bounds the polls (tests, batch jobs).
    """


class _WatchBase:
    """What the sync and async watches share: their settings and state."""

    def __init__(
        self,
        method: Callable[..., Any],
        args: dict[str, Any],
        *,
        interval: float,
        watermark: str | int | None,
        by: str,
        max_polls: int | None,
    ) -> None:
        if not (interval >= 0):
            raise ValidationError(f"interval must be >= 0 seconds, got {interval!r}")
        self._method, self._args = method, args
        self._state = _WatchState(by, watermark)
        self._interval = float(interval)
        self._max_polls = max_polls
        self.polls = 0
        self._started = watermark is not None

    @property
    def watermark(self) -> str | int | None:
        return self._state.value

    def _more(self) -> bool:
        return self._max_polls is None or self.polls < self._max_polls


class Watch(_WatchBase, Generic[T]):
    __doc__ = _WATCH_DOC

    def _poll(self) -> Iterator[T]:
        while True:
            restart = False
            for page in self._method(**self._state.arguments(self._args)).pages():
                moved = False
                for item in page.items:
                    if not self._state.seen(item):
                        moved = True
                        yield item
                if moved and page.page_info.has_next_page:
                    restart = True  # on from the moved watermark, not from a page cursor
                    break
            if not restart:
                return

    def __iter__(self) -> Iterator[T]:
        from secfindings.errors import RateLimitError

        failures = 0
        while self._more():
            try:
                if not self._started:
                    for item in self._method(**self._state.arguments(self._args, newest_first=True)):
                        if not self._state.begin(item):
                            break
                    self._started = True
                yield from self._poll()
                failures = 0
            except RateLimitError as exc:
                failures += 1
                self.polls += 1
                time.sleep(_backoff(exc, failures, self._interval))
                continue
            self.polls += 1
            if self._more():
                time.sleep(self._interval)


class AsyncWatch(_WatchBase, Generic[T]):
    __doc__ = "The asyncio twin of :class:`Watch` (``async for``).\n\n    " + _WATCH_DOC

    async def _poll(self) -> AsyncIterator[T]:
        while True:
            restart = False
            async for page in self._method(**self._state.arguments(self._args)).pages():
                moved = False
                for item in page.items:
                    if not self._state.seen(item):
                        moved = True
                        yield item
                if moved and page.page_info.has_next_page:
                    restart = True
                    break
            if not restart:
                return

    async def __aiter__(self) -> AsyncIterator[T]:
        import asyncio

        from secfindings.errors import RateLimitError

        failures = 0
        while self._more():
            try:
                if not self._started:
                    async for item in self._method(**self._state.arguments(self._args, newest_first=True)):
                        if not self._state.begin(item):
                            break
                    self._started = True
                async for item in self._poll():
                    yield item
                failures = 0
            except RateLimitError as exc:
                failures += 1
                self.polls += 1
                await asyncio.sleep(_backoff(exc, failures, self._interval))
                continue
            self.polls += 1
            if self._more():
                await asyncio.sleep(self._interval)
