"""The sync of findings into a database: the first load, incremental runs, the full reconcile,
and the merge (upsert by id, history of versions, state in the same transaction).

Every write happens in a transaction that also writes the state describing it, so the
database always shows whole runs (or whole reconcile chunks, each a consistent set of rows with
the reconcile's progress): a run that fails or is killed leaves the watermark where it was and
the next run converges.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Sequence
from typing import Any

from secfindings import _newer, _plan
from secfindings._schema import ANALYST
from secfindings.errors import ConfigurationError
from secfindings.filters import field
from secfindings.sync._ahead import ReadAhead
from secfindings.sync._dest import Backend, literal, quote
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
    analyst_and,
    budget,
    column_name,
    run_kinds,
    with_required,
)
from secfindings.sync._order import IdOrder
from secfindings.sync._scope import refuse_change, same_scope, selection
from secfindings.sync._tables import STAGE, Tables, future, warn

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

#: Pages of a reconcile (and of the first load) committed together, with its progress.
CHUNK_PAGES = 100

#: Pages read ahead of the database at most (memory: about this many pages).
READ_AHEAD = 200

#: Findings the request for the newest time reads: those in the future are passed over.
NEWEST_PAGE = 20

#: The sub-fields of the analyst preset's nested selections (not fields of FindingsView).
_NESTED = frozenset({"category", "key"})


class Engine(Tables):
    """One sync of one collection into one open backend: the runs (the database side is
    :class:`~secfindings.sync._tables.Tables`)."""

    def __init__(
        self, backend: Backend, source: Source, options: Options, collection: Collection = FINDINGS
    ) -> None:
        super().__init__(backend, source, options, collection)
        self.fresh = False
        self._order: IdOrder | None = None
        self.readable = True  # whether the rows carry last_reported_time (see _settle_fields)
        self._start: int | None = None
        #: An incremental run's changed findings: whether each matches the sync's filter.
        self._verdicts: dict[int, bool] = {}
        if not self.opt.chunk_pages:
            self.opt.chunk_pages = backend.chunk_pages or CHUNK_PAGES

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

    def incremental(self, state: _State, started: dt.datetime, result: SyncResult) -> None:
        """Findings last reported since the watermark, less the lookback, in one transaction with
        the new watermark. Where the server honours a range filter on the time (a probe says),
        one filtered walk oldest first (then by id, so the walk is stable); else newest first,
        stopped after the first page that reaches past ``since`` (see :mod:`secfindings._newer`)."""
        assert state.watermark is not None
        since = state.watermark - self.opt.lookback
        before = self.source.requests()
        try:
            newer = self.source.newer(_newer.KEY)
            with self.db.transaction():
                self.db.execute(f"DROP TABLE IF EXISTS {STAGE}")
                self._verdicts = {}
                if newer.filtered:
                    staged = self._stage_walk(self._judged(self._filtered_walk(since)), state, result)
                    newest, newest_id = self._watermark_of_stage(result) if staged else (None, None)
                else:
                    staged, newest, newest_id = self._newest_first(newer, since, state, result)
                if staged:
                    left = self._out_of_scope()
                    self._merge(started, result)
                    self.db.execute(f"DROP TABLE {STAGE}")
                    self._remove(left, started, result)
                if newest is not None and newest >= state.watermark:
                    state.watermark, state.watermark_id = newest, newest_id
                state.lookback_seconds = self.opt.lookback.total_seconds()
                result.watermark = state.watermark
                self._write_state(state, started)
        finally:
            result.incremental_requests += self.source.requests() - before

    def _filtered_walk(self, since: dt.datetime) -> Iterator[Any]:
        return self._pages(
            fields=self.opt.fields,
            sort=["LAST_REPORTED_TIME_ASC", "ID_ASC"],
            filters=field(_newer.KEY).gte(since.isoformat()),
        )

    def _judged(self, walk: Iterator[Any]) -> Iterator[Any]:
        for batch in walk:
            self._judge(batch)
            yield batch

    def _judge(self, batch: Any) -> None:
        """Notes whether each changed row matches the sync's filter (an incremental run reads
        the changes unfiltered: a finding that left the filter must be seen to be removed)."""
        scope = self._scope()
        if scope is not None and batch.num_rows:
            self._verdicts.update(scope.matching(batch, self.col.key, self._server_matches))

    def _server_matches(self, ids: list[int]) -> set[int]:
        """Which of ``ids`` match the filter, as the server says (one request a page of ids)."""
        scope = self._scope()
        assert scope is not None
        found: set[int] = set()
        # the filter's fields beside the id: the rows a server sends are judged on them too (one
        # that honoured the ids but ignored the severity said a lowered critical still matched)
        schema = self.source.schema()
        have = set(schema.fields("FindingsView")) if schema is not None else set()
        leaves = [p for p in scope.leaves() if p.split(".", 1)[0] in have]
        fields = " ".join(["id_int", *([selection(leaves)] if leaves else [])])
        for start in range(0, len(ids), self.opt.page_size):
            part = ids[start : start + self.opt.page_size]
            for b in self.source.batches(
                page_size=self.opt.page_size, fields=fields, filters=scope.with_(field("id").in_(part))
            ):
                if leaves and b.num_rows:
                    b = scope.keep(self._renamed(b))
                found.update(int(v) for v in b.column("id_int").to_pylist() if v is not None)
        return found

    def _out_of_scope(self) -> list[int]:
        """The staged findings that do not match the filter, taken out of the stage; returns
        those of them the table holds (to remove, their version closed)."""
        left = sorted(k for k, ok in self._verdicts.items() if not ok)
        self._verdicts = {}
        if not left or self.db.columns(self.col.name) is None:
            return []
        key = quote(self.col.key)
        present: list[int] = []
        for start in range(0, len(left), 500):
            part = ", ".join(literal(k) for k in left[start : start + 500])
            self.db.execute(f"DELETE FROM {STAGE} WHERE {key} IN ({part})")
            rows = self.db.query(f"SELECT {key} FROM {quote(self.col.name)} WHERE {key} IN ({part})")
            present.extend(int(r[0]) for r in rows)
        return present

    def _scope(self) -> Any:
        return self.opt.scope if self.col is FINDINGS else None

    def _scoped(self, extra: Any) -> Any:
        """A walk's filter within the sync's filter (sent to the server: full loads, reconciles
        and lookups by id read only what matches)."""
        scope = self._scope()
        return extra if scope is None else scope.with_(extra)

    def _stage_walk(self, walk: Iterator[Any], state: _State, result: SyncResult) -> bool:
        """Stages a walk's batches, ``chunk_pages`` at a time; whether anything was staged."""
        staged = False
        chunk: list[Any] = []
        for batch in walk:
            result.rows_read += batch.num_rows
            chunk.append(batch)
            if len(chunk) >= self.opt.chunk_pages:
                self._stage(chunk, state)
                staged, chunk = True, []
        if chunk:
            self._stage(chunk, state)
            staged = True
        return staged

    def _newest_first(
        self, newer: Any, since: dt.datetime, state: _State, result: SyncResult
    ) -> tuple[bool, dt.datetime | None, int | None]:
        """The findings newest first, page by page (no read-ahead: the walk stops early), until
        a page reaches a time before ``since``; each page's times from its rows or, where the
        rows lack them, one lookup. Returns whether it staged, and the newest time (not in the
        future) with its finding."""
        walk = self.source.batches(page_size=self.opt.page_size, fields=self.opt.fields, sort=newer.sort)
        newest: dt.datetime | None = None
        newest_id: int | None = None
        staged = False
        chunk: list[Any] = []  # staged together, as the filtered walk's pages are
        limit = future()
        last: dt.datetime | None = None  # the walk's last time, to check it is newest first
        unsorted = False
        try:
            for raw in walk:
                self._stopping()
                if self.opt.on_page is not None:
                    self.opt.on_page(raw.num_rows)
                batch = self._renamed(raw)
                result.rows_read += batch.num_rows
                if not batch.num_rows:
                    continue
                self._judge(batch)
                chunk.append(batch)
                if len(chunk) >= self.opt.chunk_pages:
                    self._stage(chunk, state)
                    staged, chunk = True, []
                ids = batch.column(self.col.key).to_pylist()
                times = self._times(batch, ids)
                for ident, when in zip(ids, times, strict=True):
                    if when is None:
                        continue
                    if when > limit:
                        self._ignored(result, ident, when)
                    elif newest is None or when > newest:
                        newest, newest_id = when, ident
                for when in times:
                    if when is None:
                        continue
                    if last is not None and when > last and not unsorted:
                        # The sort values are inferred, not confirmed: a server that answers in
                        # another order must not make the run stop early and miss changes.
                        unsorted = True
                        warn(
                            result,
                            "the server does not answer newest first as asked (a later "
                            "last_reported_time after an earlier one): this run reads the whole walk",
                        )
                    last = when
                if not unsorted and any(when is not None and when < since for when in times):
                    break  # sorted newest first: every later row is older still
        finally:
            close = getattr(walk, "close", None)
            if callable(close):
                close()
        if chunk:
            self._stage(chunk, state)
            staged = True
        return staged, newest, newest_id

    def _times(self, batch: Any, ids: list[Any]) -> list[dt.datetime | None]:
        """The ``last_reported_time`` of a batch's rows: its column, or looked up by id."""
        if _newer.KEY in batch.schema.names:
            return [_newer.aware(v) for v in batch.column(_newer.KEY).to_pylist()]
        found = self.source.times([int(i) for i in ids if i is not None])
        return [None if i is None else found.get(int(i)) for i in ids]

    def _newest(self, result: SyncResult) -> tuple[dt.datetime | None, int | None]:
        """The newest last_reported_time on the server (one request, and one lookup where the
        rows lack the time), taken before a reconcile: whatever is reported after it has a later
        time, so the next incremental run finds it. Times in the future are passed over (and
        named in the result's warnings)."""
        limit = future()
        fields = "id_int last_reported_time" if self.readable else "id_int"
        for batch in self.source.batches(
            page_size=NEWEST_PAGE, limit=NEWEST_PAGE, fields=fields, sort=["LAST_REPORTED_TIME_DESC"]
        ):
            ids = batch.column("id_int").to_pylist()
            for ident, when in zip(ids, self._times(batch, ids), strict=True):
                if when is None:
                    continue
                if when > limit:
                    self._ignored(result, ident, when)
                    continue
                return when, ident
        return None, None

    def _verify(self, keys: list[int]) -> list[Any]:
        """The batches of the given ids that the server still lists (a walk by offset can skip a
        row when another vanishes before it, so absence is confirmed before a delete)."""
        out: list[Any] = []
        scope = self._scope()
        for start in range(0, len(keys), self.opt.page_size):
            part = keys[start : start + self.opt.page_size]
            for b in self._pages(fields=self.opt.fields, filters=self._scoped(field("id").in_(part))):
                if scope is not None:
                    b = scope.keep(b)  # a server that ignored the filter: a row seen not to match is gone
                if b.num_rows:
                    out.append(b)
        return out

    def reconcile(self, state: _State, started: dt.datetime, result: SyncResult, by_time: bool) -> None:
        """Every finding, walked by id in chunks of ``chunk_pages`` pages. Each chunk commits with
        the reconcile's progress, so a killed reconcile resumes where it stopped; the first
        load is a reconcile. Findings in the table but not on the server are removed (after the
        server confirms they are gone)."""

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
                fields=self.opt.fields, sort=["ID_ASC"], filters=self._scoped(self._past(after))
            )
            scope = self._scope()
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
                    if scope is not None:
                        batch = scope.keep(batch)  # a server that ignored the filter
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

    def _past(self, after: int | None) -> Any:
        """The filter of a walk by id past ``after``: a range where the server honours one (a
        probe says), else none (the walk reads from the start; :class:`IdOrder` drops the ids
        up to ``after``, already committed)."""
        if after is None or not self.source.capable(_plan.ID_RANGE):
            return None
        return field("id").gte(after + 1)

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
        with self.db.transaction():
            if self.fresh and chunk:
                self._append(chunk, state, started, result)
            else:
                self._compare_chunk(chunk, state, started, result, after, last, done, key, broken)
            self._chunk_state(state, started, result, last, done)
        return last if last is not None else after

    def _compare_chunk(
        self,
        chunk: list[Any],
        state: _State,
        started: dt.datetime,
        result: SyncResult,
        after: int | None,
        last: int | None,
        done: bool,
        key: str,
        broken: bool,
    ) -> None:
        """A chunk staged and merged into the table, and the table's rows in its range that the
        walk did not read removed once the server confirms they are gone."""
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
        warn(
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
        done: bool,
    ) -> None:
        """The reconcile's progress (or its end), written in the chunk's transaction."""
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

    def run_ids(self, ids: Sequence[int]) -> SyncResult:
        """The findings of ``ids`` fetched and merged in one transaction (the watch's answer to
        events); those the server no longer lists are removed. The watermark does not move."""
        started = _now()
        result = SyncResult(str(self.db.dest), self.col.name, "events")
        t0 = time.perf_counter()
        self.ensure_meta()
        state = self.state()
        self._settle_fields(result)
        if state.last_full_reconcile is None:
            return self.run()  # nothing to merge into yet: the first load
        before = self.source.requests()
        try:
            with self.db.transaction():
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
                gone = [k for k in sorted(set(ids)) if k not in present and self._has(k)]
                self._remove(gone, started, result)
                result.incremental_requests = self.source.requests() - before
                result.watermark = state.watermark
                result.seconds = time.perf_counter() - t0
                self._write_state(state, started)
                self._log(result, started, "ok")
        except BaseException as exc:
            self.log_failure(result, started, exc)
            raise
        return result

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
        try:
            with self.db.transaction():
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
        except BaseException as exc:
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
        schema = self._settle_fields(result)
        if state.fields is not None and state.fields != self.opt.fields:
            was, now = self._as_given(state.fields, schema), self._as_given(self.opt.fields, schema)
            raise ConfigurationError(
                f"{self.db.dest} was synced with fields={was!r}, not {now!r}: "
                "use the same fields, or a new destination"
            )
        if self.col is FINDINGS:
            self._settle_scope(state)
        state.fields = self.opt.fields
        by_time = _by_time(schema)
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
        with self.db.transaction():
            self._log(result, started, "ok")
        return result

    def _settle_scope(self, state: _State) -> None:
        """The filter of this run against the one the destination was synced with: the same, or
        (with ``reconcile=True``) a load again under the new one, over the rows there: compared
        chunk by chunk, those that left the filter removed, the history kept."""
        wanted = self.opt.scope.text if self.opt.scope is not None else None
        synced = state.fields is not None
        if synced and not same_scope(state.filters, wanted):
            if self.opt.reconcile is not True:
                refuse_change(str(self.db.dest), state.filters, wanted)
            state.last_full_reconcile = None  # the state is written at the first chunk's commit
            state.reconcile_after_id = state.reconcile_started = state.reconcile_mark = None
        state.filters = wanted

    def _as_given(self, stored: str, schema: Any) -> str:
        """The fields a destination was synced with, as they were given: ``"analyst
        datasource_tags_values"`` rather than the preset spelt out, where they settle into
        exactly ``stored`` on this server (else ``stored`` itself)."""
        preset = (schema.preset("FindingsView", "analyst") if schema is not None else None) or ANALYST[
            "FindingsView"
        ]
        if not stored.startswith(preset + " "):
            return stored
        given = f"analyst {stored[len(preset) + 1 :]}"
        settled = analyst_and(given, schema)
        if self.readable:
            settled = with_required(settled, [_newer.KEY])
        return given if settled == stored else stored

    def _settle_fields(self, result: SyncResult) -> Any:
        """The selection for this server: ``last_reported_time`` added where its rows have it;
        for ``"analyst"``, one WARNING naming the fields its rows lack (the preset leaves them
        out). Returns the live schema."""
        schema = self.source.schema()
        self.readable = _newer.has(schema, "FindingsView", _newer.KEY)
        if self.col is not FINDINGS:
            return schema
        analyst = self.opt.fields.split(None, 1)[:1] == ["analyst"]
        self.opt.fields = analyst_and(self.opt.fields, schema)
        if self.readable:
            self.opt.fields = with_required(self.opt.fields, [_newer.KEY])
        if analyst and schema is not None:
            wanted = ANALYST["FindingsView"].replace("{", " ").replace("}", " ").split()
            have = set(schema.fields("FindingsView"))
            top = [w for w in wanted if w not in have and w not in _NESTED]
            if top:
                warn(
                    result,
                    f"the server's FindingsView has no {', '.join(top)}: the findings table is "
                    "made without them (fields='analyst' takes what the server has)",
                )
        return schema
