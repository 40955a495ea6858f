"""Exports of a walk into files, a page at a time: JSON lines (each node as the server sent it),
CSV (with spreadsheet formulas escaped) and Parquet (zstd, in row groups), with what was written
(:class:`ExportResult`) and where to resume."""

from __future__ import annotations

import base64
import binascii
import contextlib
import csv
import datetime as dt
import io
import json
import os
import stat
from dataclasses import dataclass
from typing import Any

from secfindings._shared import need
from secfindings.errors import ValidationError

__all__ = ["Export", "ExportResult", "relay_index"]


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote: rows and pages, and the cursor after the last page written (pass it
    as ``after=`` to continue an export that was interrupted, into a new file or appending).

    A partitioned export (``partitions=N``) has no single cursor (``cursor`` is None): ``resume``
    holds every partition's ids and the cursor after its last page in the file; pass it as
    ``resume=`` to the same export of the same walk to continue it."""

    path: str
    rows: int
    pages: int
    cursor: str | None
    resume: str | None = None


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


def relay_index(cursor: str | None) -> int | None:
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


class Export:
    """One streaming export: opens the file, writes page after page, records the cursor after
    the last page in the file (``cursor``: an interrupted export resumes from it with nothing
    lost or repeated).

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
        #: The cursor after the last page in the file (None: none yet).
        self.cursor: str | None = None
        self._read: str | None = None  # the cursor after the last page given
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
            self._pq = need("pyarrow.parquet", "arrow", "write_parquet()")
            self._pa = need("pyarrow", "arrow", "write_parquet()")
            return
        if fmt == "csv":
            self._pa = need("pyarrow", "arrow", "write_csv()")
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

    def page(self, data: Any, cursor: str | None) -> int:
        """Writes the page read up to ``cursor`` (see :meth:`write`); returns how many rows it
        added. A page interrupted part-way is taken out again, and the error raised."""
        self._read = cursor
        before = self.rows + self._pending_rows
        try:
            if self.write(data):
                self.cursor = cursor
        except BaseException as exc:
            self.rollback(exc)
            raise
        return self.rows + self._pending_rows - before

    def write(self, data: Any) -> bool:
        """Writes a page; True when everything given so far is in the file (Parquet buffers up
        to a row group). A page of CSV or JSON lines goes in with one write, and an interruption
        part-way through it takes it out again (see :meth:`rollback`), so a resumed export
        neither repeats nor skips rows."""
        if self._file is not None:
            self._begin()
            # A pipe or a terminal cannot be rewound: nothing to take out there.
            self._mark = self._file.seek(0, os.SEEK_END) if self._seekable else None
        if self.fmt not in ("parquet", "csv"):  # JSON lines, or a format made of them
            out, rows = self.encode(data)
            self._write_all(out)
            self.rows += rows
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

    def encode(self, data: bytes) -> tuple[bytes, int]:
        """A page of JSON lines as the bytes to write and the rows they hold: the nodes as the
        server sent them. The formats of :mod:`secfindings.formats` (OCSF, SARIF) change them."""
        return data, data.count(b"\n")

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
        self.cursor = self._read
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
