"""Where a sync writes: the destination URL, and one small adapter per database.

Each adapter runs SQL, reads a few rows of state, and loads Arrow record batches into a
temporary staging table inside the open transaction, without Python rows:

- DuckDB reads the batches itself (a registered Arrow table, scanned by DuckDB's own reader).
- PostgreSQL takes them through ADBC (adbc-driver-postgresql), which sends them as
  ``COPY ... FROM STDIN (FORMAT binary)`` straight from the Arrow buffers. ``benches/bench_sync.py``
  measured it beside psycopg's ``executemany`` and a psycopg ``COPY`` of the same pages (see
  docs/guides/sync.md): ADBC is as fast as the hand-rolled binary COPY (it is one), much faster
  than executemany, and needs no Python row per finding. Hence ADBC.
- SQLite takes them through ADBC too (adbc-driver-sqlite): one prepared INSERT bound to the
  Arrow columns in C. SQLite has no COPY.

The drivers are optional extras; a missing one raises an ImportError naming the extra.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import stat
import urllib.parse
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from secfindings._shared import need, parse_datetime
from secfindings.errors import ConfigurationError, SecFindingsError

__all__ = [
    "Backend",
    "DatabaseError",
    "Destination",
    "SyncBusyError",
    "connect",
    "one_line",
    "parse_destination",
    "quote",
    "secret_free",
]


class DatabaseError(SecFindingsError):
    """The destination database failed (its driver's message, without a password)."""


class SyncBusyError(DatabaseError):
    """Another sync is writing into the same database."""


#: The key of the PostgreSQL advisory lock a sync holds ("secfindings sync").
ADVISORY_LOCK = 0x5EC_F1D_5C


#: DuckDB's memory limit during a sync (its buffer pool; the first load's peak RSS stays under
#: 400 MB with it, see benches/bench_sync.py).
DUCKDB_MEMORY_LIMIT = "128MB"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
SCHEMES = ("duckdb", "sqlite", "postgresql")
_ALIASES = {"postgres": "postgresql", "postgresql": "postgresql", "duckdb": "duckdb", "sqlite": "sqlite"}
_EXTRA = {"duckdb": "duckdb", "sqlite": "sqlite", "postgresql": "postgres"}
_ACCEPTED = (
    "a path (a DuckDB file), duckdb:///relative.db, duckdb:////absolute.db, sqlite:///relative.db, "
    "sqlite:////absolute.db or postgresql://user@host:port/dbname"
)


@dataclass(frozen=True)
class Destination:
    """A parsed destination: ``scheme`` (duckdb, sqlite or postgresql) and where. ``str()`` and
    ``repr()`` never show a password."""

    scheme: str
    path: str | None = None  # duckdb and sqlite: the file
    url: str | None = None  # postgresql: the URL as given (may hold a password)

    @property
    def extra(self) -> str:
        """The extra that installs this database's driver (``pip install 'secfindings[...]'``)."""
        return _EXTRA[self.scheme]

    def __str__(self) -> str:
        if self.scheme == "postgresql":
            return redact_url(self.url or "")
        return f"{self.scheme}:///{self.path}"

    def __repr__(self) -> str:
        return f"Destination({str(self)!r})"


def one_line(message: str) -> str:
    """A driver's message on one line (drivers spread theirs over several; the CLI prints one)."""
    return "; ".join(line.strip() for line in message.splitlines() if line.strip())


def redact_url(url: str) -> str:
    """The URL with its password (and any ``password=`` query parameter) replaced by ``***``."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<a URL that does not parse>"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        if ":" in userinfo:
            userinfo = userinfo.split(":", 1)[0] + ":***"
        netloc = f"{userinfo}@{host}"
    query = re.sub(r"(?i)(password=)[^&]*", r"\1***", parts.query)
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def secret_free(message: str, url: str) -> str:
    """A driver's message without the password of ``url`` (drivers may echo the URL)."""
    parts = urllib.parse.urlsplit(url)
    if parts.password:
        message = message.replace(url, redact_url(url))
        message = message.replace(parts.password, "***")
        quoted = urllib.parse.unquote(parts.password)
        if quoted:
            message = message.replace(quoted, "***")
    return message


_SQLITE_MAGIC = b"SQLite format 3\x00"
_SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db3")


def _not_sqlite(path: str) -> None:
    """A plain path is a DuckDB file. One that is an SQLite database (DuckDB would fetch its
    SQLite extension from the network to open it), or a new one named as an SQLite file, is
    refused with the URLs that say which database is meant."""
    head = b""
    if os.path.isfile(path):
        try:
            with open(path, "rb") as f:
                head = f.read(len(_SQLITE_MAGIC))
        except OSError:
            return  # the destination's own checks say what is wrong with it
    if head == _SQLITE_MAGIC:
        what = "an SQLite database"
    elif not head and path.lower().endswith(_SQLITE_SUFFIXES):
        what = "named as an SQLite file"
    else:
        return
    raise ConfigurationError(
        f"{path!r} is {what}, and a plain path is a DuckDB file: give sqlite:///{path} for SQLite "
        f"(or duckdb:///{path} for DuckDB)"
    )


def parse_destination(dest: str | os.PathLike[str] | Destination) -> Destination:
    """``DEST`` as a :class:`Destination`. A plain path is a DuckDB file. URLs follow
    SQLAlchemy's spelling: three slashes then a relative path, four for an absolute one."""
    if isinstance(dest, Destination):
        return dest
    if isinstance(dest, os.PathLike):
        return Destination("duckdb", path=os.fspath(dest))
    if not isinstance(dest, str):
        raise ConfigurationError(f"the destination must be a str or a path, not {type(dest).__name__}")
    text = dest.strip()
    if not text:
        raise ConfigurationError(f"the destination is empty; accepted: {_ACCEPTED}")
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if match is None:
        if text.lower().startswith(":memory:"):
            raise ConfigurationError(
                f"{text!r} is an in-memory database: a sync into it is gone when the run ends; give a file"
            )
        _not_sqlite(text)
        return Destination("duckdb", path=text)  # a path (C:\... has no "//" after its colon)
    given = match.group(1).lower()
    scheme = _ALIASES.get(given.split("+", 1)[0])
    if scheme is None:
        raise ConfigurationError(f"unsupported destination scheme {given!r}; accepted: {_ACCEPTED}")
    if scheme == "postgresql":
        parts = urllib.parse.urlsplit(text)
        if not parts.hostname and "host=" not in parts.query:
            raise ConfigurationError(
                f"a PostgreSQL destination needs a host: postgresql://user@host:port/dbname, "
                f"got {redact_url(text)!r}"
            )
        # The driver takes libpq's spelling (postgresql://); postgres:// and +driver are ours.
        return Destination("postgresql", url="postgresql://" + text[match.end() :])
    rest = text[match.end() :]
    if not rest.startswith("/") or len(rest) < 2:
        raise ConfigurationError(
            f"a {scheme} destination is {scheme}:///relative/path or {scheme}:////absolute/path, got {text!r}"
        )
    path = urllib.parse.unquote(rest[1:])
    if path.strip().lower().startswith((":memory:", "file::memory:")) or "mode=memory" in path.lower():
        raise ConfigurationError(
            f"{text!r} is an in-memory database: a sync into it is gone when the run ends; "
            f"give a file ({scheme}:///relative/path or {scheme}:////absolute/path)"
        )
    return Destination(scheme, path=path)


def quote(name: str) -> str:
    """An SQL identifier, double-quoted (the same in the three databases)."""
    return '"' + name.replace('"', '""') + '"'


def literal(value: Any) -> str:
    """An SQL literal of a value of ours (ints, floats, text, None); text is single-quoted."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, float)):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


class Backend(ABC):
    """One open connection to the destination, with the SQL that differs between databases.

    Every write of a sync happens between :meth:`begin` and :meth:`commit`; :meth:`rollback`
    (or a killed process) leaves nothing of it."""

    scheme = ""
    #: Whether ``findings`` has a PRIMARY KEY (upserts by ON CONFLICT); without, an upsert is a
    #: delete and an insert in one transaction, and the sync alone keeps ids unique.
    primary_key = True
    #: Pages committed together by the first load and the reconcile (None: the engine's).
    chunk_pages: int | None = None
    #: Whether to index findings_history by id (DuckDB scans are fast without; its indexes slow
    #: the first load).
    index_history = True

    def __init__(self, dest: Destination) -> None:
        self.dest = dest

    # -- connection
    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def begin(self) -> None: ...

    @abstractmethod
    def commit(self) -> None: ...

    @abstractmethod
    def rollback(self) -> None: ...

    @abstractmethod
    def execute(self, sql: str) -> None: ...

    @abstractmethod
    def query(self, sql: str) -> list[tuple[Any, ...]]: ...

    @abstractmethod
    def ingest(self, table: str, batches: Sequence[Any]) -> None:
        """Appends record batches to the temporary table ``table`` (created by the first call
        from the batches' Arrow schema)."""
        ...

    @abstractmethod
    def columns(self, table: str) -> list[str] | None:
        """The columns of ``table`` in order, or None when there is no such table."""
        ...

    @abstractmethod
    def append(self, table: str, batches: Sequence[Any]) -> None:
        """Appends record batches (the table's columns, in order) to the existing ``table``."""
        ...

    # -- dialect
    def sql_type(self, arrow_type: Any) -> str:
        pa = need("pyarrow", "arrow", "sync()")
        t = arrow_type
        if pa.types.is_boolean(t):
            return "BOOLEAN"
        if pa.types.is_integer(t):
            return "BIGINT"
        if pa.types.is_floating(t):
            return "DOUBLE PRECISION"
        if pa.types.is_timestamp(t):
            return "TIMESTAMPTZ"
        if pa.types.is_date(t):
            return "DATE"
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            return self.list_type(t)
        return "TEXT"

    def list_type(self, arrow_type: Any) -> str:
        return "TEXT"

    def distinct(self, a: str, b: str) -> str:
        return f"{a} IS DISTINCT FROM {b}"

    def timestamp(self, value: dt.datetime) -> str:
        """A literal of an aware datetime, as this database stores the batches' timestamps."""
        return f"CAST({literal(value.astimezone(dt.timezone.utc).isoformat())} AS TIMESTAMPTZ)"

    def ts_out(self, expr: str) -> str:
        """``expr`` (a timestamp column) as :meth:`read_timestamp` reads it back."""
        return expr

    def read_timestamp(self, value: Any) -> dt.datetime | None:
        """A timestamp read back from this database, as an aware UTC datetime."""
        if value is None:
            return None
        if isinstance(value, int):  # microseconds since the epoch
            return _EPOCH + dt.timedelta(microseconds=value)
        if isinstance(value, dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
        parsed = parse_datetime(str(value))
        if parsed is None:
            raise ValueError(f"not a timestamp: {str(value)[:60]!r}")
        return parsed

    def prepare_batch(self, batch: Any) -> Any:
        """A record batch in the form this database's loader takes."""
        return batch

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """:meth:`begin`, then :meth:`commit` when the block ends, or :meth:`rollback` when it
        raises (the block's error is raised, not one of a rollback that failed after it)."""
        self.begin()
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                self.rollback()
            raise
        self.commit()

    def lock(self) -> None:
        """Makes sure no other sync writes into this database meanwhile (held until close)."""
        return None


def _regular_file(dest: Destination) -> Path:
    """The destination's file, refused when it is there but not a regular file (a FIFO would
    block the driver's open for ever, a folder or a device is no database)."""
    assert dest.path is not None
    path = Path(dest.path).expanduser()
    if not path.parent.is_dir():
        raise ConfigurationError(f"the folder of {dest} does not exist: {path.parent}")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path  # a new file
    except OSError as exc:
        raise ConfigurationError(f"cannot use {dest}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(mode):
        raise ConfigurationError(f"{dest} is not a regular file (a database file is): {path}")
    return path


class DuckDB(Backend):
    scheme = "duckdb"
    index_history = False
    # A DuckDB commit writes and compresses what it holds: fewer, larger commits load faster
    # (50,000 findings a commit; a killed first load redoes at most that much).
    chunk_pages = 500
    # No index to maintain on a first load of a million rows (DuckDB's ART index costs a fifth
    # of the load); the sync's upserts delete and insert, so ids stay unique.
    primary_key = False

    def ts_out(self, expr: str) -> str:
        # Integers: DuckDB hands out TIMESTAMPTZ values only with pytz installed.
        return f"epoch_us({expr})"

    def __init__(self, dest: Destination) -> None:
        super().__init__(dest)
        duckdb = need("duckdb", "duckdb", f"sync({dest})")
        path = _regular_file(dest)
        self.con = duckdb.connect(str(path))
        # A sync appends and compares; DuckDB's default buffer pool (80% of the RAM) would keep
        # the whole first load in memory. This bound spills to disk instead, if ever needed.
        self.con.execute(f"SET memory_limit = '{DUCKDB_MEMORY_LIMIT}'")
        self._limit = _bytes(DUCKDB_MEMORY_LIMIT)
        self.con.execute("SET preserve_insertion_order = false")
        self.con.execute("SET checkpoint_threshold = '1GB'")
        self._n = 0

    def close(self) -> None:
        self.con.close()

    def begin(self) -> None:
        self.con.execute("BEGIN TRANSACTION")

    def commit(self) -> None:
        self.con.execute("COMMIT")

    def rollback(self) -> None:
        self.con.execute("ROLLBACK")

    def execute(self, sql: str) -> None:
        self.con.execute(sql)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        return list(self.con.execute(sql).fetchall())

    def _scan(self, batches: Sequence[Any], sql: Any) -> None:
        """Runs ``sql(view)`` with the batches registered as the view (DuckDB scans the Arrow
        buffers itself, no Python rows, fastest in one piece: its scan of many 100-row chunks
        costs twice as much)."""
        pa = need("pyarrow", "arrow", "sync()")
        data = pa.Table.from_batches(list(batches)).combine_chunks()
        self._room_for(data)
        self._n += 1
        view = f"_sf_arrow_{self._n}"
        self.con.register(view, data)
        try:
            self.con.execute(sql(quote(view)))
        except BaseException:
            # After a failed statement DuckDB refuses every other ("Current transaction is
            # aborted") until the rollback: the unregister must not hide the first error.
            with contextlib.suppress(Exception):
                self.con.unregister(view)
            raise
        self.con.unregister(view)

    def _room_for(self, data: Any) -> None:
        """Raises DuckDB's memory limit for this connection when one value of ``data`` would
        not fit in it (DuckDB holds a value in one block): a 100 MB text must still sync."""
        pc = need("pyarrow.compute", "arrow", "sync()")
        pa = need("pyarrow", "arrow", "sync()")
        largest = 0
        for column in data.columns:
            if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
                got = pc.max(pc.binary_length(column)).as_py()
                largest = max(largest, int(got or 0))
        needed = 4 * largest + (64 << 20)
        if needed > self._limit:
            self._limit = needed
            self.con.execute(f"SET memory_limit = '{needed // (1 << 20)}MB'")

    def ingest(self, table: str, batches: Sequence[Any]) -> None:
        if self.columns(table) is None:
            self._scan(batches, lambda view: f"CREATE TEMP TABLE {quote(table)} AS SELECT * FROM {view}")
        else:
            self._scan(batches, lambda view: f"INSERT INTO {quote(table)} SELECT * FROM {view}")

    def append(self, table: str, batches: Sequence[Any]) -> None:
        self._scan(batches, lambda view: f"INSERT INTO {quote(table)} SELECT * FROM {view}")

    def columns(self, table: str) -> list[str] | None:
        rows = self.con.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
            "ORDER BY ordinal_position",
            [table],
        ).fetchall()
        return [r[0] for r in rows] or None

    def list_type(self, arrow_type: Any) -> str:
        return f"{self.sql_type(arrow_type.value_type)}[]"

    def sql_type(self, arrow_type: Any) -> str:
        got = super().sql_type(arrow_type)
        return "DOUBLE" if got == "DOUBLE PRECISION" else got


class _Adbc(Backend):
    """PostgreSQL and SQLite through ADBC's DB-API (autocommit off: every write is in a
    transaction until commit or rollback)."""

    def __init__(self, dest: Destination, con: Any) -> None:
        super().__init__(dest)
        self.con = con
        self.cur = con.cursor()

    def close(self) -> None:
        try:
            self.cur.close()
        finally:
            self.con.close()

    def begin(self) -> None:
        return None  # ADBC opens a transaction by itself (autocommit is off)

    def commit(self) -> None:
        self.con.commit()

    def rollback(self) -> None:
        self.con.rollback()

    def execute(self, sql: str) -> None:
        self.cur.execute(sql)

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        self.cur.execute(sql)
        return list(self.cur.fetchall())

    def ingest(self, table: str, batches: Sequence[Any]) -> None:
        pa = need("pyarrow", "arrow", "sync()")
        batches = [self.prepare_batch(b) for b in batches]
        if not batches:
            return
        reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
        self.cur.adbc_ingest(table, reader, mode="create_append", temporary=True)

    def append(self, table: str, batches: Sequence[Any]) -> None:
        pa = need("pyarrow", "arrow", "sync()")
        batches = [self.prepare_batch(b) for b in batches]
        if batches:
            reader = pa.RecordBatchReader.from_batches(batches[0].schema, batches)
            self.cur.adbc_ingest(table, reader, mode="append")


class Postgres(_Adbc):
    scheme = "postgresql"

    def __init__(self, dest: Destination) -> None:
        pg = need("adbc_driver_postgresql.dbapi", "postgres", f"sync({dest})")
        assert dest.url is not None
        try:
            con = pg.connect(dest.url)
        except Exception as exc:
            # A server that is down is a failure of the run, not bad usage; the driver may echo
            # the URL: never its password.
            raise DatabaseError(
                one_line(f"cannot connect to {dest}: {secret_free(str(exc), dest.url)}")
            ) from None
        super().__init__(dest, con)

    def prepare_batch(self, batch: Any) -> Any:
        # PostgreSQL's text cannot hold NUL: it becomes U+FFFD, the replacement character (one
        # finding's odd title must not fail every sync).
        pa = need("pyarrow", "arrow", "sync()")
        pc = need("pyarrow.compute", "arrow", "sync()")
        columns = list(batch.columns)
        changed = False
        for i, column in enumerate(columns):
            nested = pa.types.is_list(column.type) or pa.types.is_large_list(column.type)
            values = column.values if nested else column
            if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
                continue
            if not _has_nul(values):
                continue
            clean = pc.replace_substring(values, "\x00", "\ufffd")
            columns[i] = (
                type(column).from_arrays(column.offsets, clean, mask=column.is_null()) if nested else clean
            )
            changed = True
        return pa.RecordBatch.from_arrays(columns, names=batch.schema.names) if changed else batch

    def columns(self, table: str) -> list[str] | None:
        rows = self.query(
            "SELECT column_name FROM information_schema.columns WHERE table_name = "
            f"{literal(table)} AND table_schema = current_schema() ORDER BY ordinal_position"
        )
        if not rows:  # a temporary table lives in pg_temp
            rows = self.query(
                "SELECT column_name FROM information_schema.columns WHERE table_name = "
                f"{literal(table)} AND table_schema LIKE 'pg_temp%' ORDER BY ordinal_position"
            )
        return [r[0] for r in rows] or None

    def list_type(self, arrow_type: Any) -> str:
        return f"{self.sql_type(arrow_type.value_type)}[]"

    def lock(self) -> None:
        # Two syncs into one database at once (an overlapping cron) would each write the same
        # versions; a session advisory lock makes the second one stop at once instead. DuckDB
        # (one writing process) and SQLite (one writer) refuse a second writer by themselves.
        got = self.query(f"SELECT pg_try_advisory_lock({ADVISORY_LOCK})")
        self.commit()
        if not got or not got[0][0]:
            raise SyncBusyError(f"another sync is writing into {self.dest} (its advisory lock is held)")


def _has_nul(strings: Any) -> bool:
    """Whether a string array may hold a NUL: a byte search of its data buffer (a few
    microseconds a page; ``pyarrow.compute`` is twenty times that, for every column of every
    page), which may also see bytes outside a sliced array's range (then only the slow path
    runs for nothing)."""
    data = strings.buffers()[2]
    return data is not None and b"\x00" in data.to_pybytes()


class SQLite(_Adbc):
    scheme = "sqlite"

    def __init__(self, dest: Destination) -> None:
        sq = need("adbc_driver_sqlite.dbapi", "sqlite", f"sync({dest})")
        super().__init__(dest, sq.connect(str(_regular_file(dest))))

    def columns(self, table: str) -> list[str] | None:
        rows = self.query(f"SELECT name FROM pragma_table_info({literal(table)}) ORDER BY cid")
        if not rows:
            rows = self.query(f"SELECT name FROM pragma_table_info({literal(table)}, 'temp') ORDER BY cid")
        return [r[0] for r in rows] or None

    def sql_type(self, arrow_type: Any) -> str:
        got = super().sql_type(arrow_type)
        # SQLite stores what the loader gives: timestamps as ISO 8601 text in UTC
        # (2025-06-07T23:59:24.000000), booleans as 0/1, lists as JSON text.
        return {"TIMESTAMPTZ": "TEXT", "DOUBLE PRECISION": "REAL", "BOOLEAN": "INTEGER"}.get(got, got)

    def distinct(self, a: str, b: str) -> str:
        return f"{a} IS NOT {b}"

    def timestamp(self, value: dt.datetime) -> str:
        utc = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return literal(utc.isoformat(timespec="microseconds"))

    def prepare_batch(self, batch: Any) -> Any:
        # SQLite has no list type and its ADBC loader refuses lists: JSON text instead (the only
        # place a sync builds Python values, and only for list columns).
        pa = need("pyarrow", "arrow", "sync()")
        columns = list(batch.columns)
        changed = False
        for i, column in enumerate(columns):
            if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
                columns[i] = pa.array(
                    [None if v is None else json.dumps(v) for v in column.to_pylist()], pa.string()
                )
                changed = True
        if not changed:
            return batch
        return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _bytes(text: str) -> int:
    """``"128MB"`` in bytes."""
    number = re.match(r"\d+", text)
    assert number is not None
    return int(number.group(0)) << {"KB": 10, "MB": 20, "GB": 30}[text[number.end() :].strip().upper()]


def connect(dest: Destination) -> Backend:
    """An open :class:`Backend` for ``dest`` (ImportError naming the extra without its driver)."""
    if dest.scheme == "duckdb":
        return DuckDB(dest)
    if dest.scheme == "sqlite":
        return SQLite(dest)
    return Postgres(dest)
