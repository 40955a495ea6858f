"""A local copy of the findings that stays current: DuckDB, SQLite or PostgreSQL.

    client = secfindings.Client(api_token, base_url=...)
    client.sync("findings.duckdb")                       # a DuckDB file
    client.sync("postgresql://me@db.internal:5432/sec")  # PostgreSQL
    client.sync("sqlite:///findings.sqlite")             # SQLite

Tables: ``findings`` (one row per finding), ``findings_history`` (a row per version, with
``valid_from`` / ``valid_to``), ``sync_state`` (watermark, lookback, last full reconcile) and
``sync_runs`` (the run log). See docs/guides/sync.md for what each run does and costs.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from secfindings import _newer, _plan
from secfindings._plain import check_values, plural
from secfindings._shared import did_you_mean
from secfindings.errors import SecFindingsError, ValidationError
from secfindings.filters import field, unknown_fields, unknown_values
from secfindings.sync._dest import (
    DatabaseError,
    Destination,
    SyncBusyError,
    connect,
    one_line,
    parse_destination,
    secret_free,
)
from secfindings.sync._engine import (
    FINDINGS,
    SNAPSHOTS,
    Engine,
    Options,
    Source,
    SyncResult,
    budget,
    with_required,
)
from secfindings.sync._model import _by_time, _State, analyst_and, run_kinds
from secfindings.sync._scope import refuse_change, same_scope, scope_of
from secfindings.sync._source import AsyncClientProtocol, AsyncSource, ClientSource, SyncClientProtocol

if TYPE_CHECKING:
    from secfindings._schema import Schema

__all__ = [
    "COLLECTIONS",
    "DatabaseError",
    "Destination",
    "SyncBusyError",
    "SyncPlan",
    "SyncResult",
    "budget",
    "database_errors",
    "parse_destination",
    "plan",
    "sync",
    "sync_async",
    "watch",
]

#: What ``progress=`` takes: True (a line on stderr every few seconds) or a callable given
#: ``{"items": rows read so far, "pages": pages so far}`` after each page.
SyncProgress = bool | Callable[[dict[str, Any]], object] | None


@contextlib.contextmanager
def database_errors(dest: str | os.PathLike[str] | Destination) -> Iterator[None]:
    """Errors of the database driver as :class:`DatabaseError`, with any password of ``dest``
    blotted out (the command line prints them)."""
    try:
        yield
    except (SecFindingsError, ImportError, KeyboardInterrupt, OSError):
        raise
    except Exception as exc:
        text = f"{type(exc).__name__}: {exc}"
        url = dest.url if isinstance(dest, Destination) else dest
        if isinstance(url, str):
            text = secret_free(text, url)
        raise DatabaseError(one_line(f"the database failed: {text}")) from None


def _duration(name: str, value: dt.timedelta | float | int) -> dt.timedelta:
    if isinstance(value, dt.timedelta):
        out = value
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out = dt.timedelta(seconds=value)
    else:
        raise ValidationError(f"{name} must be a timedelta or seconds, not {value!r}")
    if out < dt.timedelta(0):
        raise ValidationError(f"{name} must not be negative, got {value!r}")
    return out


def _options(
    fields: str | Sequence[str],
    lookback: dt.timedelta | float,
    reconcile: bool | None,
    reconcile_every: dt.timedelta | float,
    page_size: int,
    progress: SyncProgress,
    should_stop: Callable[[], bool] | None = None,
    filters: Any = None,
) -> Options:
    if not isinstance(fields, str):
        if not all(isinstance(f, str) for f in fields):
            raise ValidationError(f"fields must be a str or a list of str, not {fields!r}")
        fields = " ".join(fields)
    if not fields.strip():
        raise ValidationError("fields must not be empty (the default is 'analyst')")
    if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 100:
        raise ValidationError(f"page_size must be an int from 1 to 100, not {page_size!r}")
    if reconcile not in (True, False, None):
        raise ValidationError(f"reconcile must be True, False or None (when due), not {reconcile!r}")
    return Options(
        # last_reported_time too where the server's rows have it (the engine adds it).
        fields=with_required(fields, ["id_int"]),
        lookback=_duration("lookback", lookback),
        reconcile=reconcile,
        reconcile_every=_duration("reconcile_every", reconcile_every),
        page_size=page_size,
        should_stop=should_stop,
        on_page=_progress(progress),
        scope=scope_of(filters),
    )


def _progress(progress: SyncProgress) -> Callable[[int], None] | None:
    if progress is None or progress is False:
        return None
    seen = {"items": 0, "pages": 0}
    last = [0.0]

    def on_page(rows: int) -> None:
        seen["items"] += rows
        seen["pages"] += 1
        if progress is True:
            now = time.monotonic()
            if now - last[0] >= 5.0 and sys.stderr is not None:
                last[0] = now
                said = f"sync: {plural(seen['items'], 'finding')}, {plural(seen['pages'], 'page')} so far"
                print(said, file=sys.stderr, flush=True)
        elif callable(progress):
            progress(dict(seen))

    return on_page


COLLECTIONS = tuple(SNAPSHOTS)
"""The other collections ``collections=`` takes (``"all"``: every one): each is synced as a full
snapshot with history into a table of its name and ``<name>_history``."""


def _collections(collections: Sequence[str] | str | None) -> list[str]:
    if collections is None:
        return []
    if isinstance(collections, str):
        collections = list(COLLECTIONS) if collections == "all" else [c for c in collections.split(",") if c]
    names = [c.strip() for c in collections]
    for name in names:
        if name not in SNAPSHOTS:
            raise ValidationError(
                f"unknown collection {name!r}{did_you_mean(name, COLLECTIONS)}; "
                f"known: {', '.join(COLLECTIONS)} (or 'all')"
            )
    return names


def _run(source: Source, dest: Destination, options: Options, collections: Sequence[str] = ()) -> SyncResult:
    with database_errors(dest):
        backend = connect(dest)
        try:
            backend.lock()
            result = Engine(backend, source, options, FINDINGS).run()
            for name in collections:
                result.collections[name] = Engine(backend, source, options, SNAPSHOTS[name]).snapshot()
            return result
        finally:
            backend.close()


def sync(
    client: SyncClientProtocol,
    dest: str | os.PathLike[str] | Destination,
    *,
    fields: str | Sequence[str] = "analyst",
    lookback: dt.timedelta | float = dt.timedelta(minutes=15),
    reconcile: bool | None = None,
    reconcile_every: dt.timedelta | float = dt.timedelta(hours=24),
    page_size: int = 100,
    progress: SyncProgress = None,
    collections: Sequence[str] | str | None = None,
    filters: Any = None,
) -> SyncResult:
    """Brings the findings in ``dest`` up to date (see :meth:`secfindings.Client.sync`), then
    takes a full snapshot of each of ``collections`` (``"all"``, or names of :data:`COLLECTIONS`)
    into a table of that name with its ``_history``; their results are in
    ``result.collections``.

    ``filters`` (a :mod:`secfindings.filters` filter, a dict tree or its JSON text): the table
    holds exactly the findings that match it. Full loads and reconciles send it to the server;
    incremental runs read the changed findings unfiltered and judge each (on its row, or by
    asking the server), removing those that left the filter. A destination keeps the filter it
    was synced with: another one is refused unless ``reconcile=True`` (a load again under the
    new one). See docs/guides/sync.md."""
    target = parse_destination(dest)
    options = _options(fields, lookback, reconcile, reconcile_every, page_size, progress, filters=filters)
    if options.scope is not None:
        check_values(client, options.scope.tree)
        _check_against(client.schema(), options.scope.tree)
    return _run(ClientSource(client), target, options, _collections(collections))


def _check_against(schema: Schema | None, tree: Any) -> None:
    """Refuses a filter naming a field or a value the server's schema does not have, with a "did
    you mean", before a destination's kept filter is compared with it (a misspelt value was
    refused as another filter, and --reconcile then failed on it)."""
    if schema is None:
        return
    problem = unknown_fields(tree, schema.fields("FindingsView")) or unknown_values(tree, schema.filter_enum)
    if problem:
        raise ValidationError(problem)


@dataclass
class SyncPlan:
    """What the next :func:`sync` into a destination would do, and what it would cost
    (:func:`plan`; ``secfindings sync DEST --dry-run``). ``incremental`` and ``reconcile`` are the
    estimates of their walks (:class:`~secfindings.Estimate`), None for a part that will not run;
    a reconcile's figure leaves out its one request for the newest time and the requests that
    confirm findings that left."""

    destination: str
    kinds: list[str]
    watermark: dt.datetime | None
    since: dt.datetime | None
    last_full_reconcile: dt.datetime | None
    incremental: Any = None
    reconcile: Any = None

    @property
    def requests(self) -> int | None:
        """The requests of the run (None where the server gave no count)."""
        if "incremental" in self.kinds and self.incremental is None:
            return None  # read newest first until past the window: not counted beforehand
        total = 0
        for part in (self.incremental, self.reconcile):
            if part is not None:
                if _asks(part) is None:
                    return None
                total += _asks(part) + (1 if part is self.reconcile else 0)
        return total

    def __str__(self) -> str:
        lines = [f"next sync into {self.destination}: {' + '.join(self.kinds) or 'nothing'}"]
        if self.watermark is not None:
            lines.append(f"  watermark {self.watermark.isoformat()}, window from {self.since}")
        if self.last_full_reconcile is not None:
            lines.append(f"  last full reconcile {self.last_full_reconcile.isoformat()}")
        full = "first load" if self.kinds == ["first"] else "reconcile"
        for name, part in (("incremental", self.incremental), (full, self.reconcile)):
            if part is not None:
                rows = "? findings" if part.rows is None else _count(part.rows, "finding")
                asks = "? requests" if _asks(part) is None else _count(_asks(part), "request")
                seconds = _took(part)
                when = "" if seconds is None else f", about {seconds:,.0f} s at the budget"
                lines.append(f"  {name}: {rows}, {asks}{when}")
        total = "?" if self.requests is None else f"{self.requests:,}"
        unknown = " (a newest-first walk cannot be counted ahead: it stops where it meets the watermark)"
        lines.append(f"  requests in all: {total}{unknown if self.requests is None else ''}")
        return "\n".join(lines)


def _asks(part: Any) -> Any:
    """The requests of a walk of the run: in aliased page batches where the sync's walk will be
    read in them (the reconcile's, by id; issue 37), else one page per request."""
    batched = getattr(part, "batched_requests", None)
    return part.requests if batched is None else batched


def _took(part: Any) -> Any:
    """The time of a walk of the run, of the requests :func:`_asks` counts (in batches: theirs;
    None where it is unknown)."""
    if getattr(part, "batched_requests", None) is None:
        return part.seconds
    return getattr(part, "batched_seconds", None)


def plan(
    client: SyncClientProtocol,
    dest: str | os.PathLike[str] | Destination,
    *,
    fields: str | Sequence[str] = "analyst",
    lookback: dt.timedelta | float = dt.timedelta(minutes=15),
    reconcile: bool | None = None,
    reconcile_every: dt.timedelta | float = dt.timedelta(hours=24),
    page_size: int = 100,
    filters: Any = None,
) -> SyncPlan:
    """What :func:`sync` would do now with these arguments and what it would cost, without
    writing anything: it reads the destination's state and asks the server for the count of
    each walk (one request each, see :meth:`~secfindings.Paginator.estimate`)."""
    target = parse_destination(dest)
    options = _options(fields, lookback, reconcile, reconcile_every, page_size, None, filters=filters)
    if options.scope is not None:
        _check_against(client.schema(), options.scope.tree)
    state = _State()
    # A file that does not exist yet is not created by a plan.
    exists = target.path is None or os.path.exists(os.path.expanduser(target.path))
    if exists:
        with database_errors(target):
            backend = connect(target)
            try:
                if backend.columns("sync_state") is not None:
                    state = Engine(backend, ClientSource(client), options, FINDINGS).state()
            finally:
                backend.close()
    wanted = options.scope.text if options.scope is not None else None
    if state.fields is not None and not same_scope(state.filters, wanted):
        if reconcile is not True:
            refuse_change(str(target), state.filters, wanted)
        state.last_full_reconcile = state.reconcile_after_id = None  # a load again under the new filter
    now = dt.datetime.now(dt.timezone.utc)
    by_time = _by_time(client.schema())
    kinds = run_kinds(state, by_time, now, options)
    since = state.watermark - options.lookback if state.watermark is not None else None
    result = SyncPlan(str(target), kinds, state.watermark, since, state.last_full_reconcile)
    if "incremental" in kinds and since is not None and _newer.newer(client, _newer.KEY).filtered:
        # (Where the server takes no range on the time, the run reads newest first and stops:
        # nothing counts that walk beforehand, and the plan says "?".)
        result.incremental = client.findings_view(
            fields="id_int",
            sort=["LAST_REPORTED_TIME_ASC", "ID_ASC"],
            filters=field("last_reported_time").gte(since.isoformat()),
            page_size=page_size,
        ).estimate()
    if "reconcile" in kinds or "first" in kinds:
        after = state.reconcile_after_id
        ranged = after is not None and _plan.capable(client, _plan.ID_RANGE)
        past = field("id").gte(after + 1) if ranged and after is not None else None
        scoped = past if options.scope is None else options.scope.with_(past)
        result.reconcile = client.findings_view(
            fields=analyst_and(options.fields, client.schema()),
            sort=["ID_ASC"],
            filters=scoped,
            page_size=page_size,
        ).estimate()
    return result


async def sync_async(
    client: AsyncClientProtocol,
    dest: str | os.PathLike[str] | Destination,
    *,
    fields: str | Sequence[str] = "analyst",
    lookback: dt.timedelta | float = dt.timedelta(minutes=15),
    reconcile: bool | None = None,
    reconcile_every: dt.timedelta | float = dt.timedelta(hours=24),
    page_size: int = 100,
    progress: SyncProgress = None,
    collections: Sequence[str] | str | None = None,
    filters: Any = None,
) -> SyncResult:
    """:func:`sync` for the async client: the database work runs in a worker thread, the event
    loop goes on. Cancelling the task stops the run at the next page and rolls it back."""
    target = parse_destination(dest)
    stop = threading.Event()
    options = _options(
        fields, lookback, reconcile, reconcile_every, page_size, progress, stop.is_set, filters=filters
    )
    if options.scope is not None:
        check_values(None, options.scope.tree)  # the names; the server checks the rest
    loop = asyncio.get_running_loop()
    names = _collections(collections)
    future = loop.run_in_executor(None, _run, AsyncSource(client, loop), target, options, names)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        stop.set()
        # The worker rolls back at its next page; wait for it so nothing runs after the cancel.
        with contextlib.suppress(BaseException):
            await future
        raise


def _changed_id(event: Any) -> int | None:
    finding = getattr(event, "finding", None)
    ident = getattr(finding, "id_int", None)
    return int(ident) if ident is not None else None


def watch(
    client: SyncClientProtocol,
    dest: str | os.PathLike[str] | Destination,
    *,
    interval: float = 60.0,
    subscribe: bool = True,
    max_runs: int | None = None,
    settle: float = 1.0,
    **kwargs: Any,
) -> Iterator[SyncResult]:
    """Keeps ``dest`` current; yields each run's :class:`SyncResult`, stops after ``max_runs``
    runs (None: never; Ctrl-C ends it between two runs without harm).

    A sync now; then, where the server has subscriptions (and ``subscribe``), the findings named
    by ``finding_created`` and ``finding_changed`` events (those arriving within ``settle``
    seconds of each other are taken together) are fetched by id and merged (a finding the
    server no longer lists is removed), which also catches a status change that does not move
    ``last_reported_time``. A full sync (incremental, and a reconcile when due) runs at least
    every ``interval`` seconds, and is all there is where the server has no subscriptions
    (polling). ``kwargs`` are :func:`sync`'s."""
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0:
        raise ValidationError(f"interval must be a positive number of seconds, not {interval!r}")
    if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1):
        raise ValidationError(f"max_runs must be a positive int or None, not {max_runs!r}")
    target = parse_destination(dest)
    events: queue.Queue[int | None] = queue.Queue()
    subs = _subscribe(client, events) if subscribe else []
    try:
        runs = 0
        result = sync(client, target, **kwargs)
        while True:
            runs += 1
            yield result
            if max_runs is not None and runs >= max_runs:
                return
            pending: set[int | None] = set()
            deadline = time.monotonic() + interval
            while True:
                wait = deadline - time.monotonic()
                if wait <= 0:
                    break
                try:
                    pending.add(events.get(timeout=wait))
                except queue.Empty:
                    break
                deadline = min(deadline, time.monotonic() + settle)
            if pending and None not in pending:
                options = _options(
                    kwargs.get("fields", "analyst"),
                    kwargs.get("lookback", dt.timedelta(minutes=15)),
                    None,
                    kwargs.get("reconcile_every", dt.timedelta(hours=24)),
                    kwargs.get("page_size", 100),
                    kwargs.get("progress"),
                    filters=kwargs.get("filters"),
                )
                ids = sorted(i for i in pending if i is not None)
                backend = connect(target)
                try:
                    backend.lock()
                    result = Engine(backend, ClientSource(client), options, FINDINGS).run_ids(ids)
                finally:
                    backend.close()
            else:
                # The interval passed, or an event named no finding: the usual run.
                result = sync(client, target, **kwargs)
    finally:
        for sub in subs:
            with contextlib.suppress(Exception):
                sub.close()


def _subscribe(client: SyncClientProtocol, events: queue.Queue[int | None]) -> list[Any]:
    """Subscriptions to finding events whose ids go to ``events`` (from a thread each); none
    where the server has no subscriptions."""
    subs: list[Any] = []
    for name in ("finding_created", "finding_changed"):
        try:
            sub = client.subscribe(name, fields="cursor kind finding { id_int }")
        except Exception:
            for s in subs:
                with contextlib.suppress(Exception):
                    s.close()
            return []  # no subscriptions here: polling only
        subs.append(sub)

        def pump(sub: Any = sub) -> None:
            with contextlib.suppress(Exception):
                for event in sub:
                    events.put(_changed_id(event))

        threading.Thread(target=pump, name=f"secfindings-sync-{name}", daemon=True).start()
    return subs


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"
