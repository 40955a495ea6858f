"""The sync of findings into a database: the first load, incremental runs, the full reconcile,
and the merge (upsert by id, history of versions, state in the same transaction).

Every write happens in a transaction that also writes the state describing it, so the
database always shows whole runs (or whole reconcile chunks, each a consistent set of rows with
the reconcile's progress): a run that fails or is killed leaves the watermark where it was and
the next run converges.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

from secfindings._shared import need
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.sync._ahead import ReadAhead
from secfindings.sync._dest import Backend, literal, quote, secret_free
from secfindings.sync._model import (
    FINDINGS,
    SNAPSHOTS,
    Collection,
    Options,
    Source,
    SyncResult,
    _by_time,
    _now,
    _State,
    budget,
    column_name,
    run_kinds,
    with_required,
)
from secfindings.sync._order import IdOrder

__all__ = [
    "FINDINGS",
    "SNAPSHOTS",
    "Collection",
    "Engine",
    "Options",
    "Source",
    "SyncResult",
    "budget",
    "column_name",
    "run_kinds",
    "with_required",
]

STATE = "sync_state"
RUNS = "sync_runs"
STAGE = "_sf_stage"
SEQ = "_sf_seq"

#: Pages of a reconcile (and of the first load) committed together, with its progress.
CHUNK_PAGES = 100

#: Pages read ahead of the database at most (memory: about this many pages).
READ_AHEAD = 200

#: The columns of the state and run-log tables, to tell ours from someone else's.
META_COLUMNS = {
    STATE: [
        "collection", "fields", "columns", "watermark", "watermark_id", "lookback_seconds",
        "last_full_reconcile", "reconcile_after_id", "reconcile_mark", "reconcile_started", "updated_at",
    ],
    RUNS: [
        "run_id", "collection", "kind", "status", "started_at", "finished_at", "rows_read", "created",
        "updated", "removed", "incremental_requests", "reconcile_requests", "watermark", "error",
    ],
}  # fmt: skip

#: How far past the client's clock a finding's time may be and still move a watermark. A time
#: further ahead (a scanner's year 9999) would make every later run miss every change.
FUTURE_MARGIN = dt.timedelta(hours=1)

#: Findings the request for the newest time reads: those in the future are passed over.
NEWEST_PAGE = 20

log = logging.getLogger("secfindings.sync")


def _future() -> dt.datetime:
    """The latest time a watermark may take now."""
    return _now() + FUTURE_MARGIN


def _aware(value: Any) -> dt.datetime | None:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    return None


def _ours(db: Backend, table: str, names: list[str]) -> None:
    """Refuses a table ``table`` that exists with other columns than ``names`` (not a sync's)."""
    have = db.columns(table)
    if have is not None and have != names:
        raise ConfigurationError(
            f"{db.dest} has a table {table} that a sync did not make (its columns: "
            f"{', '.join(have[:8])}{', ...' if len(have) > 8 else ''}): sync into another database, "
            "or rename that table"
        )


def _warn(result: SyncResult, message: str) -> None:
    result.warnings.append(message)
    log.warning("%s", message)


class Engine:
    """One sync of one collection into one open backend."""

    def __init__(
        self, backend: Backend, source: Source, options: Options, collection: Collection = FINDINGS
    ) -> None:
        self.db = backend
        self.source = source
        self.opt = options
        self.col = collection
        self.pa = need("pyarrow", "arrow", "sync()")
        self.columns: list[str] | None = None
        self.fresh = False
        self._pc = need("pyarrow.compute", "arrow", "sync()")
        self._zeros: dict[int, Any] = {}
        self._seq = 0
        self._order: IdOrder | None = None
        self._start: int | None = None
        if not self.opt.chunk_pages:
            self.opt.chunk_pages = backend.chunk_pages or CHUNK_PAGES

    # ------------------------------------------------------------------------------ tables

    def _ts(self) -> str:
        return "TEXT" if self.db.scheme == "sqlite" else "TIMESTAMPTZ"

    def ensure_meta(self) -> None:
        """The state and run-log tables (committed on their own: they hold no rows of a run).
        A table of that name that is not ours is refused before anything is written: the run
        would otherwise fail at its end, after its rows were committed, on every run."""
        ts = self._ts()
        for table, names in META_COLUMNS.items():
            _ours(self.db, table, names)
        with self.db.transaction():
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {STATE} (collection TEXT PRIMARY KEY, fields TEXT, "
                f"columns TEXT, watermark {ts}, watermark_id BIGINT, lookback_seconds DOUBLE PRECISION, "
                f"last_full_reconcile {ts}, reconcile_after_id BIGINT, reconcile_mark {ts}, "
                f"reconcile_started {ts}, updated_at {ts})"
            )
            self.db.execute(
                f"CREATE TABLE IF NOT EXISTS {RUNS} (run_id TEXT PRIMARY KEY, collection TEXT, kind TEXT, "
                f"status TEXT, started_at {ts}, finished_at {ts}, rows_read BIGINT, created BIGINT, "
                "updated BIGINT, removed BIGINT, incremental_requests BIGINT, reconcile_requests BIGINT, "
                f"watermark {ts}, error TEXT)"
            )

    def state(self) -> _State:
        t = self.db.ts_out
        rows = self.db.query(
            f"SELECT fields, columns, {t('watermark')}, watermark_id, lookback_seconds, "
            f"{t('last_full_reconcile')}, reconcile_after_id, {t('reconcile_mark')}, "
            f"{t('reconcile_started')} FROM {STATE} "
            f"WHERE collection = {literal(self.col.name)}"
        )
        if not rows:
            return _State()
        r = rows[0]
        ts = self.db.read_timestamp
        return _State(r[0], r[1], ts(r[2]), r[3], r[4], ts(r[5]), r[6], ts(r[7]), ts(r[8]))

    def _create_tables(self, schema: Any) -> None:
        """``findings`` and ``findings_history`` from the batches' Arrow schema (in the open
        transaction)."""
        ts = self._ts()
        defs = []
        for f in schema:
            if f.name == SEQ:
                continue
            defs.append(f"{quote(f.name)} {self.db.sql_type(f.type)}")
        key = quote(self.col.key)
        primary = f", PRIMARY KEY ({key})" if self.db.primary_key else ""
        self.db.execute(f"CREATE TABLE IF NOT EXISTS {quote(self.col.name)} ({', '.join(defs)}{primary})")
        self.db.execute(
            f"CREATE TABLE IF NOT EXISTS {quote(self.col.history)} ({', '.join(defs)}, "
            f"valid_from {ts} NOT NULL, valid_to {ts})"
        )
        if self.db.index_history:
            self.db.execute(
                f"CREATE INDEX IF NOT EXISTS {quote(self.col.history + '_key')} "
                f"ON {quote(self.col.history)} ({key}, valid_to)"
            )

    def _check_columns(self, schema: Any, state: _State) -> None:
        names = [f.name for f in schema if f.name != SEQ]
        if self.col.key not in names:
            raise ValidationError(f"the selection must include {self.col.key!r} (the key of the table)")
        existing = self.db.columns(self.col.name)
        if existing is not None and existing != names:
            raise ConfigurationError(
                f"the table {self.col.name} of {self.db.dest} has the columns {', '.join(existing)}, "
                f"but this selection gives {', '.join(names)}: sync with the fields it was created "
                f"with ({state.fields!r}), or into a new destination"
            )
        if existing is None:
            self._create_tables(schema)
        self.columns = names

    # ------------------------------------------------------------------------------ batches

    def _renamed(self, batch: Any) -> Any:
        """The batch with the table's column names (no copy)."""
        names = [column_name(n) for n in batch.schema.names]
        return self.pa.RecordBatch.from_arrays(batch.columns, names=names)

    def _sequenced(self, batch: Any) -> Any:
        """The batch with the staging sequence: a later page wins over an earlier one of the
        same finding (built in C from a cached array of zeros)."""
        pa = self.pa
        self._seq += 1
        n = batch.num_rows
        zeros = self._zeros.get(n)
        if zeros is None:
            zeros = self._zeros[n] = pa.array([0] * n, pa.int64())
        arrays = [*batch.columns, self._pc.add(zeros, self._seq)]
        return pa.RecordBatch.from_arrays(arrays, names=[*batch.schema.names, SEQ])

    def _stopping(self) -> None:
        if self.opt.should_stop is not None and self.opt.should_stop():
            raise InterruptedError("the sync was stopped")

    def _pages(self, **arguments: Any) -> Iterator[Any]:
        """The walk's batches (renamed), checking between pages whether to stop. A thread reads
        the walk ahead (up to :data:`READ_AHEAD` pages) while this one writes to the database:
        both wait outside the GIL (the native walk, the database's driver), so the network
        and the database overlap."""
        walk = self.source.batches(page_size=self.opt.page_size, **arguments)
        pages = ReadAhead(walk, min(2 * self.opt.chunk_pages, READ_AHEAD))
        try:
            for batch in pages:
                self._stopping()
                if self.opt.on_page is not None:
                    self.opt.on_page(batch.num_rows)
                yield self._renamed(batch)
        finally:
            pages.close()

    def _empty_schema(self) -> Any:
        """The schema of the selection when the walk had no page (a walk of zero rows)."""
        schema = self.source.empty(self.opt.fields)
        return self._renamed(self.pa.RecordBatch.from_pylist([], schema=schema)).schema

    # ------------------------------------------------------------------------------ merge

    def _merge(self, now: dt.datetime, result: SyncResult) -> None:
        """The staged rows into the table: a new version for each row whose values changed
        (history closed and opened at ``now``), volatile columns updated in place."""
        assert self.columns is not None
        cols = self.columns
        key = quote(self.col.key)
        names = ", ".join(quote(c) for c in cols)
        table, history = quote(self.col.name), quote(self.col.history)
        stamp = self.db.timestamp(now)
        self.db.execute("DROP TABLE IF EXISTS _sf_new")
        self.db.execute("DROP TABLE IF EXISTS _sf_diff")
        self.db.execute(
            f"CREATE TEMP TABLE _sf_new AS SELECT {names} FROM (SELECT {names}, ROW_NUMBER() OVER "
            f"(PARTITION BY {key} ORDER BY {quote(SEQ)} DESC) AS _sf_rn FROM {STAGE}) AS s WHERE _sf_rn = 1"
        )
        kept = [c for c in cols if c != self.col.key and c not in self.col.volatile]
        moving = [c for c in cols if c != self.col.key and c in self.col.volatile]
        versioned = " OR ".join(self.db.distinct(f"n.{quote(c)}", f"f.{quote(c)}") for c in kept) or "FALSE"
        drift = " OR ".join(self.db.distinct(f"n.{quote(c)}", f"f.{quote(c)}") for c in moving) or "FALSE"
        self.db.execute(
            f"CREATE TEMP TABLE _sf_diff AS SELECT n.{key} AS k, "
            f"CASE WHEN f.{key} IS NULL THEN 1 ELSE 0 END AS created, "
            f"CASE WHEN f.{key} IS NULL OR {versioned} THEN 1 ELSE 0 END AS versioned "
            f"FROM _sf_new n LEFT JOIN {table} f ON f.{key} = n.{key} "
            f"WHERE f.{key} IS NULL OR {versioned} OR {drift}"
        )
        counts = self.db.query("SELECT COALESCE(SUM(created), 0), COALESCE(SUM(versioned), 0) FROM _sf_diff")
        created, versions = (int(v) for v in counts[0])
        result.created += created
        result.updated += versions - created
        if versions:
            self.db.execute(
                f"UPDATE {history} SET valid_to = {stamp} WHERE valid_to IS NULL AND {key} IN "
                "(SELECT k FROM _sf_diff WHERE versioned = 1 AND created = 0)"
            )
            self.db.execute(
                f"INSERT INTO {history} ({names}, valid_from, valid_to) SELECT {names}, {stamp}, NULL "
                f"FROM _sf_new WHERE {key} IN (SELECT k FROM _sf_diff WHERE versioned = 1)"
            )
        updates = ", ".join(f"{quote(c)} = excluded.{quote(c)}" for c in cols if c != self.col.key)
        if self.db.primary_key:
            self.db.execute(
                f"INSERT INTO {table} ({names}) SELECT {names} FROM _sf_new "
                f"WHERE {key} IN (SELECT k FROM _sf_diff) ON CONFLICT ({key}) DO UPDATE SET {updates}"
            )
        else:
            self.db.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT k FROM _sf_diff)")
            self.db.execute(
                f"INSERT INTO {table} ({names}) SELECT {names} FROM _sf_new "
                f"WHERE {key} IN (SELECT k FROM _sf_diff)"
            )
        self.db.execute("DROP TABLE _sf_new")
        self.db.execute("DROP TABLE _sf_diff")

    def _remove(self, keys: Sequence[Any], now: dt.datetime, result: SyncResult) -> None:
        """Findings the server no longer lists: gone from the table, their version closed."""
        if not keys:
            return
        stamp = self.db.timestamp(now)
        key = quote(self.col.key)
        for start in range(0, len(keys), 500):
            part = ", ".join(literal(k) for k in keys[start : start + 500])
            self.db.execute(
                f"UPDATE {quote(self.col.history)} SET valid_to = {stamp} "
                f"WHERE valid_to IS NULL AND {key} IN ({part})"
            )
            self.db.execute(f"DELETE FROM {quote(self.col.name)} WHERE {key} IN ({part})")
        result.removed += len(keys)

    def _write_state(self, state: _State, now: dt.datetime) -> None:
        ts = self.db.timestamp
        values = {
            "fields": literal(state.fields),
            "columns": literal(state.columns),
            "watermark": ts(state.watermark) if state.watermark else "NULL",
            "watermark_id": literal(state.watermark_id),
            "lookback_seconds": literal(state.lookback_seconds),
            "last_full_reconcile": ts(state.last_full_reconcile) if state.last_full_reconcile else "NULL",
            "reconcile_after_id": literal(state.reconcile_after_id),
            "reconcile_mark": ts(state.reconcile_mark) if state.reconcile_mark else "NULL",
            "reconcile_started": ts(state.reconcile_started) if state.reconcile_started else "NULL",
            "updated_at": ts(now),
        }
        self.db.execute(f"DELETE FROM {STATE} WHERE collection = {literal(self.col.name)}")
        self.db.execute(
            f"INSERT INTO {STATE} (collection, {', '.join(values)}) VALUES "
            f"({literal(self.col.name)}, {', '.join(values.values())})"
        )

    def _log(self, result: SyncResult, started: dt.datetime, status: str, error: str | None = None) -> None:
        ts = self.db.timestamp
        self.db.execute(
            f"INSERT INTO {RUNS} VALUES ({literal(result.run_id)}, {literal(self.col.name)}, "
            f"{literal(result.kind)}, {literal(status)}, {ts(started)}, {ts(_now())}, "
            f"{result.rows_read}, {result.created}, {result.updated}, {result.removed}, "
            f"{result.incremental_requests}, {result.reconcile_requests}, "
            f"{ts(result.watermark) if result.watermark else 'NULL'}, {literal(error)})"
        )

    def log_failure(self, result: SyncResult, started: dt.datetime, error: BaseException) -> None:
        """A failed run in the run log, in a transaction of its own (best effort)."""
        text = f"{type(error).__name__}: {error}"
        if self.db.dest.url:
            text = secret_free(text, self.db.dest.url)
        with contextlib.suppress(Exception), self.db.transaction():
            self._log(result, started, "failed", text[:2000])

    # ------------------------------------------------------------------------------ runs

    def _stage(self, batches: Sequence[Any], state: _State) -> None:
        if self.columns is None:
            self._check_columns(batches[0].schema, state)
        self.db.ingest(STAGE, [self._sequenced(b) for b in batches])

    def _watermark_of_stage(self, result: SyncResult) -> tuple[dt.datetime | None, int | None]:
        """The newest time of the staged rows that is not in the future (those that are, are
        named in the result's warnings)."""
        key, t = quote(self.col.key), self.db.ts_out("last_reported_time")
        limit = self.db.timestamp(_future())
        for row in self.db.query(
            f"SELECT {key}, {t} FROM {STAGE} WHERE last_reported_time > {limit} ORDER BY {key} LIMIT 20"
        ):
            self._ignored(result, row[0], self.db.read_timestamp(row[1]))
        rows = self.db.query(
            f"SELECT {t}, {key} FROM {STAGE} WHERE last_reported_time <= {limit} "
            f"ORDER BY last_reported_time DESC, {key} DESC LIMIT 1"
        )
        if not rows or rows[0][0] is None:
            return None, None
        return self.db.read_timestamp(rows[0][0]), int(rows[0][1])

    def _ignored(self, result: SyncResult, key: Any, when: Any) -> None:
        _warn(
            result,
            f"finding {key} has last_reported_time {when}, later than this machine's clock allows "
            f"({FUTURE_MARGIN} ahead): ignored for the watermark (it is synced; the watermark does "
            "not move there, or every later run would miss every change)",
        )

    def incremental(self, state: _State, started: dt.datetime, result: SyncResult) -> None:
        """Findings last reported since the watermark, less the lookback, in one transaction with
        the new watermark (ordered by last_reported_time then id, so the walk is stable)."""
        from secfindings.filters import field as f

        assert state.watermark is not None
        since = state.watermark - self.opt.lookback
        before = self.source.requests()
        try:
            self.db.begin()
            self.db.execute(f"DROP TABLE IF EXISTS {STAGE}")
            staged = False
            chunk: list[Any] = []
            for batch in self._pages(
                fields=self.opt.fields,
                sort=["LAST_REPORTED_TIME_ASC", "ID_ASC"],
                filters=f("last_reported_time").gte(since.isoformat()),
            ):
                result.rows_read += batch.num_rows
                chunk.append(batch)
                if len(chunk) >= self.opt.chunk_pages:
                    self._stage(chunk, state)
                    staged, chunk = True, []
            if chunk:
                self._stage(chunk, state)
                staged = True
            if staged:
                self._merge(started, result)
                newest, newest_id = self._watermark_of_stage(result)
                if newest is not None and newest >= state.watermark:
                    state.watermark, state.watermark_id = newest, newest_id
                self.db.execute(f"DROP TABLE {STAGE}")
            state.lookback_seconds = self.opt.lookback.total_seconds()
            result.watermark = state.watermark
            self._write_state(state, started)
            self.db.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                self.db.rollback()
            raise
        finally:
            result.incremental_requests += self.source.requests() - before

    def _newest(self, result: SyncResult) -> tuple[dt.datetime | None, int | None]:
        """The newest last_reported_time on the server (one request), taken before a reconcile:
        whatever is reported after it has a later time, so the next incremental run finds it.
        Times in the future are passed over (and named in the result's warnings)."""
        limit = _future()
        for batch in self.source.batches(
            page_size=NEWEST_PAGE, limit=NEWEST_PAGE, fields="id_int last_reported_time",
            sort=["LAST_REPORTED_TIME_DESC"],
        ):  # fmt: skip
            for row in batch.to_pylist():
                when = _aware(row.get("last_reported_time"))
                if when is None:
                    continue
                if when > limit:
                    self._ignored(result, row.get("id_int"), when)
                    continue
                return when, row.get("id_int")
        return None, None

    def _verify(self, keys: list[int]) -> list[Any]:
        """The batches of the given ids that the server still lists (a walk by offset can skip a
        row when another vanishes before it, so absence is confirmed before a delete)."""
        from secfindings.filters import field as f

        out: list[Any] = []
        for start in range(0, len(keys), self.opt.page_size):
            part = keys[start : start + self.opt.page_size]
            out.extend(
                b for b in self._pages(fields=self.opt.fields, filters=f("id").in_(part)) if b.num_rows
            )
        return out

    def reconcile(self, state: _State, started: dt.datetime, result: SyncResult, by_time: bool) -> None:
        """Every finding, walked by id in chunks of ``chunk_pages`` pages. Each chunk commits with
        the reconcile's progress, so a killed reconcile resumes where it stopped; the first
        load is a reconcile. Findings in the table but not on the server are removed (after the
        server confirms they are gone)."""
        from secfindings.filters import field as f

        before = self.source.requests()
        key = quote(self.col.key)
        try:
            if state.reconcile_after_id is None or state.reconcile_started is None:
                state.reconcile_started = started
                state.reconcile_mark = self._newest(result)[0] if by_time else None
            after = state.reconcile_after_id
            # The first load into an empty table (or past what a killed first load committed):
            # every row is new, so chunks are appended without staging and comparing.
            self.fresh = state.last_full_reconcile is None and not self._rows_after(after)
            walk = self._pages(
                fields=self.opt.fields,
                sort=["ID_ASC"],
                filters=None if after is None else f("id").gt(after),
            )
            self._order = order = IdOrder(self.col.key, after)
            self._start = after
            chunk: list[Any] = []
            done = False
            while not done:
                batch = next(walk, None)
                if batch is not None:
                    result.rows_read += batch.num_rows
                    unbroken = not order.broken
                    batch = order.take(batch)
                    if order.broken and unbroken:
                        self._disorder(result, after, [*chunk, batch])
                    if batch.num_rows:
                        chunk.append(batch)
                    if len(chunk) < self.opt.chunk_pages:
                        continue
                else:
                    done = True
                after = self._commit_chunk(chunk, state, started, result, after, done, key)
                chunk = []
        finally:
            result.reconcile_requests += self.source.requests() - before

    def _commit_chunk(
        self,
        chunk: list[Any],
        state: _State,
        started: dt.datetime,
        result: SyncResult,
        after: int | None,
        done: bool,
        key: str,
    ) -> int | None:
        last: int | None = None
        broken = self._order is not None and self._order.broken
        if chunk and not broken:
            ids = chunk[-1].column(self.col.key)
            last = int(ids[len(ids) - 1].as_py())
        self.db.begin()
        try:
            if self.fresh and chunk:
                self._append(chunk, state, started, result)
                return self._chunk_state(state, started, result, last, after, done)
            self.db.execute(f"DROP TABLE IF EXISTS {STAGE}")
            if chunk:
                self._stage(chunk, state)
            elif self.columns is None:
                if self.db.columns(self.col.name) is None:
                    self._check_columns(self._empty_schema(), state)
                else:
                    self.columns = self.db.columns(self.col.name)
            missing = self._missing(chunk, after, last, done, key, broken)
            if missing:
                found = self._verify(missing)
                if found:
                    self._stage(found, state)
                    present = {int(v) for b in found for v in b.column(self.col.key).to_pylist()}
                    missing = [k for k in missing if k not in present]
            if chunk or self.db.columns(STAGE) is not None:
                self._merge(started, result)
                self.db.execute(f"DROP TABLE {STAGE}")
            self._remove(missing, started, result)
            return self._chunk_state(state, started, result, last, after, done)
        except BaseException:
            self.db.rollback()
            raise

    def _missing(
        self, chunk: list[Any], after: int | None, last: int | None, done: bool, key: str, broken: bool
    ) -> list[int]:
        """The table's ids that the walk passed without reading (in the staged chunk's range;
        for a walk out of order, at its end, every id past its start that it never read)."""
        if broken:
            if not done or self._order is None:
                return []
            low = "" if self._start is None else f" WHERE {key} > {literal(self._start)}"
            rows = self.db.query(f"SELECT {key} FROM {quote(self.col.name)}{low}")
            return [int(r[0]) for r in rows if int(r[0]) not in self._order.seen]
        low = "" if after is None else f" AND f.{key} > {literal(after)}"
        high = "" if done or last is None else f" AND f.{key} <= {literal(last)}"
        seen = f"AND f.{key} NOT IN (SELECT {key} FROM {STAGE})" if chunk else ""
        rows = self.db.query(f"SELECT f.{key} FROM {quote(self.col.name)} f WHERE 1 = 1{low}{high} {seen}")
        return [int(r[0]) for r in rows]

    def _disorder(self, result: SyncResult, after: int | None, read: list[Any]) -> None:
        """The walk by id came out of order: from here the run stages every chunk (no append
        of rows taken for new), keeps its checkpoint where it was at the run's start (a rerun
        reads everything again rather than trust an order it did not see), and removes at its
        end only what it never read."""
        assert self._order is not None
        self.fresh = False
        seen = self._order.seen
        for batch in read:
            seen.update(int(v) for v in batch.column(self.col.key).to_pylist() if v is not None)
        if after is not None and after != self._start and self.db.columns(self.col.name) is not None:
            # What this run committed before, in order: (start, after].
            key = quote(self.col.key)
            low = "" if self._start is None else f" AND {key} > {literal(self._start)}"
            high = f" AND {key} <= {literal(after)}"
            rows = self.db.query(f"SELECT {key} FROM {quote(self.col.name)} WHERE 1 = 1{low}{high}")
            seen.update(int(r[0]) for r in rows)
        _warn(
            result,
            f"the server did not answer the walk by id (ID_ASC) in id order (id {self._order.late} came "
            f"after {self._order.last}): this run reads to the end without a checkpoint and removes "
            "only what it never read",
        )

    def _chunk_state(
        self,
        state: _State,
        started: dt.datetime,
        result: SyncResult,
        last: int | None,
        after: int | None,
        done: bool,
    ) -> int | None:
        """The reconcile's progress (or its end), written and committed with the chunk's rows."""
        try:
            if done:
                if state.last_full_reconcile is None:
                    self._first_versions(state.reconcile_started or started)
                state.reconcile_after_id = None
                state.last_full_reconcile = state.reconcile_started
                mark = state.reconcile_mark
                if mark is not None and (state.watermark is None or mark > state.watermark):
                    state.watermark = mark
                if state.watermark is None:
                    state.watermark = self._table_newest()
                state.reconcile_started = state.reconcile_mark = None
                result.reconciled = True
            elif self._order is not None and self._order.broken:
                state.reconcile_after_id = self._start  # not past ids it did not see in order
            else:
                state.reconcile_after_id = last
            state.lookback_seconds = self.opt.lookback.total_seconds()
            result.watermark = state.watermark
            self._write_state(state, started)
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise
        return last if last is not None else after

    def _rows_after(self, after: int | None) -> bool:
        """Whether the table has rows past ``after`` (any row when None)."""
        if self.db.columns(self.col.name) is None:
            return False
        where = "" if after is None else f" WHERE {quote(self.col.key)} > {literal(after)}"
        return bool(self.db.query(f"SELECT 1 FROM {quote(self.col.name)}{where} LIMIT 1"))

    def _append(self, chunk: list[Any], state: _State, now: dt.datetime, result: SyncResult) -> None:
        """New rows straight into the table. Their first version goes into the history once, when
        the first load ends (:meth:`_first_versions`): one copy inside the database instead of
        one per chunk."""
        if self.columns is None:
            self._check_columns(chunk[0].schema, state)
        assert self.columns is not None
        self.db.append(self.col.name, chunk)
        result.created += sum(b.num_rows for b in chunk)

    def _first_versions(self, since: dt.datetime) -> None:
        """The first version of every row that has none yet (the rows of the first load)."""
        if self.columns is None:
            self.columns = self.db.columns(self.col.name)
        if self.columns is None:
            return
        key = quote(self.col.key)
        names = ", ".join(quote(c) for c in self.columns)
        cols = ", ".join(f"f.{quote(c)}" for c in self.columns)
        self.db.execute(
            f"INSERT INTO {quote(self.col.history)} ({names}, valid_from, valid_to) "
            f"SELECT {cols}, {self.db.timestamp(since)}, NULL FROM {quote(self.col.name)} f "
            f"WHERE NOT EXISTS (SELECT 1 FROM {quote(self.col.history)} h WHERE h.{key} = f.{key})"
        )

    def _table_newest(self) -> dt.datetime | None:
        if self.columns is None or "last_reported_time" not in self.columns:
            return None
        newest = self.db.ts_out("MAX(last_reported_time)")
        rows = self.db.query(
            f"SELECT {newest} FROM {quote(self.col.name)} "
            f"WHERE last_reported_time <= {self.db.timestamp(_future())}"
        )
        return self.db.read_timestamp(rows[0][0]) if rows else None

    def run_ids(self, ids: Sequence[int]) -> SyncResult:
        """The findings of ``ids`` fetched and merged in one transaction (the watch's answer to
        events); those the server no longer lists are removed. The watermark does not move."""
        started = _now()
        result = SyncResult(str(self.db.dest), self.col.name, "events")
        t0 = time.perf_counter()
        self.ensure_meta()
        state = self.state()
        if state.last_full_reconcile is None:
            return self.run()  # nothing to merge into yet: the first load
        before = self.source.requests()
        self.db.begin()
        try:
            self.db.execute(f"DROP TABLE IF EXISTS {STAGE}")
            found = self._verify(sorted(set(ids)))
            result.rows_read = sum(b.num_rows for b in found)
            present: set[int] = set()
            if found:
                self._stage(found, state)
                present = {int(v) for b in found for v in b.column(self.col.key).to_pylist()}
            else:
                self.columns = self.db.columns(self.col.name)
            if self.db.columns(STAGE) is not None:
                self._merge(started, result)
                self.db.execute(f"DROP TABLE {STAGE}")
            self._remove([k for k in sorted(set(ids)) if k not in present and self._has(k)], started, result)
            result.incremental_requests = self.source.requests() - before
            result.watermark = state.watermark
            result.seconds = time.perf_counter() - t0
            self._write_state(state, started)
            self._log(result, started, "ok")
            self.db.commit()
        except BaseException as exc:
            self.db.rollback()
            self.log_failure(result, started, exc)
            raise
        return result

    def _has(self, key: int) -> bool:
        rows = self.db.query(
            f"SELECT 1 FROM {quote(self.col.name)} WHERE {quote(self.col.key)} = {literal(key)}"
        )
        return bool(rows)

    def snapshot(self) -> SyncResult:
        """A full snapshot of a small collection in one transaction: new and changed items
        versioned, items the server no longer lists removed (their version closed)."""
        started = _now()
        result = SyncResult(str(self.db.dest), self.col.name, "snapshot")
        t0 = time.perf_counter()
        self.ensure_meta()
        state = self.state()
        state.fields = "*"
        before = self.source.requests()
        self.db.begin()
        try:
            table = self.source.call(self.col.name, fields="*", page_size=self.opt.page_size)
            result.rows_read = table.num_rows
            batches = [self._renamed(b) for b in table.combine_chunks().to_batches()]
            if not batches:
                batches = [self._renamed(self.pa.RecordBatch.from_pylist([], schema=table.schema))]
            self.db.execute(f"DROP TABLE IF EXISTS {STAGE}")
            self._stage(batches, state)
            self._merge(started, result)
            key = quote(self.col.key)
            gone = [
                r[0]
                for r in self.db.query(
                    f"SELECT f.{key} FROM {quote(self.col.name)} f "
                    f"WHERE f.{key} NOT IN (SELECT {key} FROM {STAGE})"
                )
            ]
            self.db.execute(f"DROP TABLE {STAGE}")
            self._remove(gone, started, result)
            state.last_full_reconcile = started
            result.reconciled = True
            result.reconcile_requests = self.source.requests() - before
            result.seconds = time.perf_counter() - t0
            self._write_state(state, started)
            self._log(result, started, "ok")
            self.db.commit()
        except BaseException as exc:
            self.db.rollback()
            result.reconcile_requests = self.source.requests() - before
            self.log_failure(result, started, exc)
            raise
        return result

    def kinds(self, state: _State, by_time: bool, now: dt.datetime) -> list[str]:
        """What a run does now (see :func:`run_kinds`)."""
        return run_kinds(state, by_time, now, self.opt)

    def run(self) -> SyncResult:
        """One sync run: the first load, or an incremental run and a reconcile when one is due."""
        started = _now()
        result = SyncResult(str(self.db.dest), self.col.name, "first")
        t0 = time.perf_counter()
        self.ensure_meta()
        state = self.state()
        if state.fields is not None and state.fields != self.opt.fields:
            raise ConfigurationError(
                f"{self.db.dest} was synced with fields={state.fields!r}, not {self.opt.fields!r}: "
                "use the same fields, or a new destination"
            )
        state.fields = self.opt.fields
        by_time = _by_time(self.source.schema())
        kinds = self.kinds(state, by_time, started)
        try:
            if kinds == ["first"]:
                self.reconcile(state, started, result, by_time)
            else:
                if "incremental" in kinds:
                    self.incremental(state, started, result)
                if "reconcile" in kinds:
                    self.reconcile(state, started, result, by_time)
                result.kind = "+".join(kinds) or "nothing"
        except BaseException as exc:
            result.seconds = time.perf_counter() - t0
            self.log_failure(result, started, exc)
            raise
        result.seconds = time.perf_counter() - t0
        self.db.begin()
        try:
            self._log(result, started, "ok")
            self.db.commit()
        except BaseException:
            self.db.rollback()
            raise
        return result
