"""The tables of a sync and the SQL that writes them: the state and run log (ours, checked),
the findings and their history made from the batches' Arrow schema, the staging of batches, the
merge of staged rows (a new version for what changed), removals, and the watermark of the staged
rows. :class:`Tables` is the half of an engine that talks to the database; the runs are in
:mod:`secfindings.sync._engine`."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

from secfindings._shared import need, parse_datetime
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.sync._dest import Backend, literal, quote, secret_free
from secfindings.sync._model import (
    FINDINGS,
    Collection,
    Options,
    Source,
    SyncResult,
    _now,
    _State,
    column_name,
)

__all__ = ["FUTURE_MARGIN", "META_COLUMNS", "RUNS", "SEQ", "STAGE", "STATE", "Tables", "future", "warn"]

STATE = "sync_state"
RUNS = "sync_runs"
STAGE = "_sf_stage"
SEQ = "_sf_seq"

#: The columns of the state and run-log tables, to tell ours from someone else's.
META_COLUMNS = {
    STATE: [
        "collection", "fields", "columns", "watermark", "watermark_id", "lookback_seconds",
        "last_full_reconcile", "reconcile_after_id", "reconcile_mark", "reconcile_started", "updated_at",
        "filters",
    ],
    RUNS: [
        "run_id", "collection", "kind", "status", "started_at", "finished_at", "rows_read", "created",
        "updated", "removed", "incremental_requests", "reconcile_requests", "watermark", "error",
    ],
}  # fmt: skip

#: How far past the client's clock a finding's time may be and still move a watermark. A time
#: further ahead (a scanner's year 9999) would make every later run miss every change.
FUTURE_MARGIN = dt.timedelta(hours=1)


def future() -> dt.datetime:
    """The latest time a watermark may take now."""
    return _now() + FUTURE_MARGIN


log = logging.getLogger("secfindings.sync")


def _future() -> dt.datetime:
    """The latest time a watermark may take now."""
    return _now() + FUTURE_MARGIN


def _aware(value: Any) -> dt.datetime | None:
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is None:
            raise ValueError(f"not an ISO 8601 datetime: {value[:60]!r}")
        return parsed
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    return None


#: The columns of a sync_state made before ``filters`` (a column added to it on the next run).
OLD_STATE = [c for c in META_COLUMNS[STATE] if c != "filters"]


def _ours(db: Backend, table: str, names: list[str]) -> None:
    """Refuses a table ``table`` that exists with other columns than ``names`` (not a sync's)."""
    have = db.columns(table)
    if have is not None and have != names and not (table == STATE and have == OLD_STATE):
        raise ConfigurationError(
            f"{db.dest} has a table {table} that a sync did not make (its columns: "
            f"{', '.join(have[:8])}{', ...' if len(have) > 8 else ''}): sync into another database, "
            "or rename that table"
        )


def warn(result: SyncResult, message: str) -> None:
    result.warnings.append(message)
    log.warning("%s", message)


class Tables:
    """The database side of one sync of one collection into one open backend."""

    def __init__(
        self, backend: Backend, source: Source, options: Options, collection: Collection = FINDINGS
    ) -> None:
        self.db = backend
        self.source = source
        self.opt = options
        self.col = collection
        self.pa = need("pyarrow", "arrow", "sync()")
        self.columns: list[str] | None = None
        self._pc = need("pyarrow.compute", "arrow", "sync()")
        self._zeros: dict[int, Any] = {}
        self._seq = 0

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
                f"reconcile_started {ts}, updated_at {ts}, filters TEXT)"
            )
            if self.db.columns(STATE) == OLD_STATE:  # made before filters=: every finding
                self.db.execute(f"ALTER TABLE {STATE} ADD COLUMN filters TEXT")
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
            f"{t('reconcile_started')}, filters FROM {STATE} "
            f"WHERE collection = {literal(self.col.name)}"
        )
        if not rows:
            return _State()
        r = rows[0]
        ts = self.db.read_timestamp
        return _State(r[0], r[1], ts(r[2]), r[3], r[4], ts(r[5]), r[6], ts(r[7]), ts(r[8]), r[9])

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
            "filters": literal(state.filters),
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
        limit = self.db.timestamp(future())
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
        warn(
            result,
            f"finding {key} has last_reported_time {when}, later than this machine's clock allows "
            f"({FUTURE_MARGIN} ahead): ignored for the watermark (it is synced; the watermark does "
            "not move there, or every later run would miss every change)",
        )

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
            f"WHERE last_reported_time <= {self.db.timestamp(future())}"
        )
        return self.db.read_timestamp(rows[0][0]) if rows else None

    def _has(self, key: int) -> bool:
        rows = self.db.query(
            f"SELECT 1 FROM {quote(self.col.name)} WHERE {quote(self.col.key)} = {literal(key)}"
        )
        return bool(rows)
