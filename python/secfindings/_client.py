"""The sync and async clients. Both wrap the same native client; every rule (token exchange,
refresh, retries, paging) lives once, in the Rust core."""

from __future__ import annotations

import datetime as dt
import importlib
import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast, overload

from secfindings import _batched, _logging, _lookup
from secfindings._budget import Budget, budget_required_setting, budget_setting
from secfindings._lookup import AsyncBatch, Batch, LookupNative, Missing
from secfindings._native import NativeClient, NativePages
from secfindings._operations import AsyncOperations, SyncOperations
from secfindings._opsupport import Fields, Native
from secfindings._paginator import AsyncPaginator, Paginator
from secfindings._schema import Schema
from secfindings._shared import FieldTypes, did_you_mean
from secfindings._subscribe import SUBSCRIPTIONS, AsyncSubscription, Subscription, subscription_document
from secfindings.errors import ValidationError
from secfindings.models import FindingEvent, RuleEvent
from secfindings.sync import SyncResult, sync, sync_async

if TYPE_CHECKING:
    from secfindings.models import Finding
    from secfindings.rules import Rules

__all__ = ["AsyncClient", "Client"]


class _Base:
    _native: Native

    def __init__(
        self,
        api_token: str | None = None,
        *,
        base_url: str | None = None,
        region: str | None = None,
        auth_url: str | None = None,
        jwt: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 3,
        max_retry_wait: float = 120.0,
        proxy: str | None = None,
        ca_bundle: str | None = None,
        refresh_advisory: float = 120.0,
        refresh_mandatory: float = 30.0,
        max_response_bytes: int = 256 * 1024 * 1024,
        rate_limit: tuple[int, float] | None = None,
        schema: str = "live",
        budget: bool | str | os.PathLike[str] = True,
        budget_required: bool = False,
    ) -> None:
        _logging.sync_levels()
        native = NativeClient(
            api_token,
            base_url=base_url,
            region=region,
            auth_url=auth_url,
            jwt=jwt,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            proxy=proxy,
            ca_bundle=ca_bundle,
            refresh_advisory=refresh_advisory,
            refresh_mandatory=refresh_mandatory,
            max_response_bytes=max_response_bytes,
            rate_limit=rate_limit,
            budget=budget_setting(budget),
            budget_required=budget_required_setting(budget_required),
        )
        # The typed methods and paginators call the native client through this client's live
        # schema: its selections and checks sit in front of the calls, and it types the models.
        self._live = LookupNative(native, schema)
        self._native = self._live

    @property
    def pages_per_request(self) -> int:
        """Pages one request of a walk carries, as aliased fields (``p1: findings_view(first:
        100, offset: 0) ...``): default 10, or ``$SECFINDINGS_PAGES_PER_REQUEST``; 1 turns the
        batches off (one page per request, the server's own cursors). Every walk that allows
        them reads in batches by default: iteration, ``to_list()``, the Arrow stream,
        ``to_arrow()`` / ``to_pandas()`` / ``to_polars()``, the exports, ``partitions=`` (a
        partitioned export's parts too) and the sync. A batched walk's cursor is its
        own (``sfb1:<offset>:<key>``), and ``after=`` it resumes a batched walk. Set it before
        making a walk: a walk keeps the value it was made with. See
        docs/guides/performance.md and :mod:`secfindings._batched` for where it applies."""
        return _batched.setting(self._live)

    @pages_per_request.setter
    def pages_per_request(self, value: int) -> None:
        self._live.pages_per_request = _batched.check_pages_per_request(value)

    @property
    def base_url(self) -> str:
        """The API root this client calls (ends in ``/api/v1``)."""
        return self._native.base_url

    @property
    def region(self) -> str:
        """The deployment region (it chooses the identity provider's endpoint)."""
        return self._native.region

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called (then every call raises ClientClosedError)."""
        return self._native.closed

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self.base_url!r}, region={self.region!r})"

    def stats(self) -> dict[str, int | float]:
        """What this client has done so far, for logs and progress: ``requests`` (every attempt),
        ``retries`` and ``retry_wait_seconds``, ``rate_limited`` (429 answers), ``limiter_waits``
        and ``limiter_wait_seconds`` (held back by ``rate_limit``), ``token_exchanges``,
        ``bytes_received`` (after decompression)."""
        return self._native.stats()

    def budget(self) -> Budget:
        """The request budget of this client's API token, shared by every client, thread and
        process of it on this machine (or on every machine, with a ``redis://`` or
        ``postgresql://`` budget): ``limit`` (this client's ``rate_limit``), ``used``,
        ``remaining``, ``resets_at``, and ``blocked_until`` when a server's ``Retry-After``
        holds them all back; ``store`` and ``location`` say where it is kept. Reads a small file,
        or asks the store once; sends nothing to the API."""
        return Budget.from_native(self._native.budget())

    def __reduce__(self) -> tuple[Any, tuple[type[_Base], dict[str, Any]]]:
        # A client pickles as its settings and API token, never a JWT or a connection: the copy
        # in another process (a dask or multiprocessing worker) makes its own.
        state = self._native.pickle_state()
        state["schema"] = self._live.mode
        return (_rebuild, (type(self), state))

    def _pages(
        self,
        query: str,
        variables: dict[str, Any] | None,
        path: str | None,
        page_size: int,
        limit: int | None,
        operation_name: str | None,
    ) -> NativePages:
        # One walk for both clients; only the iterator around it differs.
        return self._native.paginate(query, variables, operation_name, path, page_size, limit)

    def _field_types(self) -> FieldTypes | None:
        """The field types of this client's live schema, for the models of its events."""
        schema = self._live.loaded_schema
        return schema.field_type if schema is not None else None

    def _subscription(
        self,
        document: str,
        variables: Mapping[str, Any] | None,
        operation_name: str | None,
        fields: str | None,
        resume: str | None,
        queue_size: int,
        max_reconnects: int,
    ) -> Any:
        if not isinstance(document, str):
            raise ValidationError(f"document must be a str, not {type(document).__name__}")
        if resume is not None and not isinstance(resume, str):
            raise ValidationError(f"resume must be a variable name or None, not {resume!r}")
        text = document.strip()
        if text.isidentifier():
            if text not in SUBSCRIPTIONS:
                raise ValidationError(
                    f"unknown subscription field {text!r}{did_you_mean(text, SUBSCRIPTIONS)}; "
                    f"known: {', '.join(sorted(SUBSCRIPTIONS))} (or pass a subscription document)"
                )
            document, variables = subscription_document(text, variables, fields)
        elif fields is not None:
            raise ValidationError("fields= applies to a subscription field name, not to a document")
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise ValidationError(f"queue_size must be an int of at least 1, not {queue_size!r}")
        if isinstance(max_reconnects, bool) or not isinstance(max_reconnects, int) or max_reconnects < 0:
            raise ValidationError(f"max_reconnects must be an int of at least 0, not {max_reconnects!r}")
        return self._native.subscribe(
            document,
            dict(variables) if variables is not None else None,
            operation_name,
            resume,
            min(queue_size, 1 << 20),
            min(max_reconnects, 1 << 20),
        )


#: Clients unpickled in this process, by their settings: every task a worker runs (dask sends the
#: client pickled with each one) shares one client, so one JWT, one connection pool and one
#: ``rate_limit`` per process instead of per task. Copies unpickled in one process are that one
#: client: closing one closes it for all (a closed one is replaced on the next unpickling).
_UNPICKLED: dict[tuple[Any, ...], _Base] = {}


def _rebuild(cls: type[_Base], state: dict[str, Any]) -> _Base:
    key = (os.getpid(), cls, *sorted((k, repr(v)) for k, v in state.items()))
    client = _UNPICKLED.get(key)
    if client is None or client.closed:
        client = _UNPICKLED[key] = cls(**state)
    return client


class Client(_Base, SyncOperations):
    """Synchronous client. Safe to share across threads; never touches asyncio (works in Jupyter).

    Args:
        api_token: the API token, exchanged for a JWT at the identity provider; default
            ``$SECFINDINGS_API_TOKEN``. Exactly one of ``api_token`` and ``jwt``.
        base_url: the API's URL, ending in ``/api/v1``; default ``$SECFINDINGS_BASE_URL``. Plain
            ``http://`` only to a loopback host.
        region: ``eu-central-1`` (default), ``eu-west-2`` or ``us-east-2``: it chooses the
            identity provider; default ``$SECFINDINGS_REGION``.
        auth_url: another identity provider's endpoint (the emulator's); default
            ``$SECFINDINGS_AUTH_URL``.
        jwt: a ready bearer JWT instead of an API token (it cannot be refreshed).
        timeout: seconds per HTTP attempt (the connect timeout is 5 s).
        max_retries: retries of one call after its first attempt.
        max_retry_wait: the longest ``Retry-After`` the client sleeps; a longer one raises
            ``RateLimitError`` at once.
        proxy: an HTTP(S) proxy URL (``HTTPS_PROXY`` / ``NO_PROXY`` are honoured for HTTP
            requests without it).
        ca_bundle: a PEM file of certificates trusted besides the system's store.
        refresh_advisory: seconds before expiry when a background token exchange starts.
        refresh_mandatory: seconds before expiry when calls wait for a fresh JWT.
        max_response_bytes: the largest answer read, after decompression.
        rate_limit: ``(requests, per_seconds)``, a client-side limit shared by every client,
            thread and process of the API token through its budget (on this machine, or on every
            machine with a store as ``budget``); default ``$SECFINDINGS_RATE_LIMIT``
            (``"200/60"``), else none.
        schema: ``"live"`` (learn the server's schema and check against it), ``"builtin"``
            (the package's schema, no introspection) or ``"off"`` (no checks).
        budget: where the API token's shared request budget is kept: True (the default:
            ``$SECFINDINGS_BUDGET``, else a folder of this machine), False (none), a folder, or
            a store shared by every machine: ``"redis://host:6379/0"`` or
            ``"postgresql://user@host/db"`` (docs/guides/many-workers.md). When the store cannot
            be reached, the client books in the folder instead, with one WARNING.
        budget_required: with a store, fail a request (``TransportError``) when the store
            cannot be used, instead of falling back to the folder.
    """

    def execute(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        operation_name: str | None = None,
    ) -> dict[str, Any]:
        """Run one GraphQL operation and return its ``data``.

        Raises :class:`~secfindings.GraphQLError` (with ``.errors`` and the partial ``.data``)
        when the response carries errors.
        """
        result: dict[str, Any] = self._native.execute(query, variables, operation_name)
        return result

    def paginate(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        path: str | None = None,
        page_size: int = 100,
        limit: int | None = None,
        operation_name: str | None = None,
    ) -> Paginator[dict[str, Any]]:
        """Walk any Relay connection lazily.

        The query declares ``$first: Int`` and ``$after: String`` and passes them to the
        connection; ``path`` is the dotted path to the connection in ``data`` (default: the only
        top-level field). Every other variable is sent with every page.
        """
        return Paginator(self._pages(query, variables, path, page_size, limit, operation_name))

    @overload
    def subscribe(
        self,
        document: Literal["finding_created", "finding_changed"],
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> Subscription[FindingEvent]: ...

    @overload
    def subscribe(
        self,
        document: Literal["rule_changed"],
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> Subscription[RuleEvent]: ...

    @overload
    def subscribe(
        self,
        document: str,
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> Subscription[Any]: ...

    def subscribe(
        self,
        document: str,
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> Subscription[Any]:
        """Subscribe over WebSocket and iterate over the events as they come.

        ``document`` is a subscription document, or the name of a subscription field the
        package knows (``"finding_created"``, ``"finding_changed"``, ``"rule_changed"``), whose
        arguments are then ``variables`` and whose selection ``fields`` may replace. Events of a
        known field (not aliased) are typed models (:class:`~secfindings.models.FindingEvent`,
        ...); others are the ``data`` dicts.

        The socket speaks graphql-transport-ws (graphql-ws when the server picks it), sends the
        JWT in ``connection_init`` and answers pings. When the socket drops, the server closes
        it, or the JWT is about to lapse, the client connects again with a fresh JWT and
        subscribes again with the variable named by ``resume`` (``$after``) set to the last
        event's ``cursor``, so a server that holds recent events loses none. The position is
        fixed before this call returns (the server's newest event cursor, asked for over HTTP
        when the server has ``subscription_cursor``, as the emulator does): an event published
        after the call is delivered even when the socket drops before the first event. An event
        at or before the position is never handed out twice, and reconnects that bring nothing
        new count as failed attempts. After
        ``max_reconnects`` failed attempts in a row it raises
        :class:`~secfindings.SubscriptionError`. At most ``queue_size`` events wait for a slow
        consumer; then the client stops reading the socket (nothing is dropped).
        """
        native = self._subscription(
            document, variables, operation_name, fields, resume, queue_size, max_reconnects
        )
        # The position is fixed before returning: whatever the server publishes from now on is
        # delivered, even if the socket drops before the first event.
        native.wait_started()
        return Subscription(native, self._field_types())

    @overload
    def findings(
        self,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = ...,
        batch_size: int = ...,
        missing: Literal["none"] = ...,
    ) -> list[Finding | None]: ...
    @overload
    def findings(
        self,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = ...,
        batch_size: int = ...,
        missing: Literal["raise"],
    ) -> list[Finding]: ...
    def findings(
        self,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = None,
        batch_size: int = 100,
        missing: Missing = "none",
    ) -> list[Finding | None] | list[Finding]:
        """Many findings by id in few requests: :meth:`finding` for each id, in the order of
        ``ids``, up to ``batch_size`` per request (aliased selections of one document).

        An id that does not exist gives None in its place, or with ``missing="raise"`` a
        :class:`~secfindings.NotFoundError` naming every such id (after fetching all). An id
        given twice is fetched once. An id that cannot be one (neither a number nor a global
        id, such as a CSV header) is a :class:`~secfindings.ValidationError` naming it, before
        anything is sent. ``fields=`` is taken as by :meth:`finding`. When the server refuses a
        document as too large (413, too many aliases, a depth or complexity error, a timeout) the
        batch is halved, and the size that worked is remembered for this client.
        See docs/guides/batching.md.
        """
        return _lookup.findings(self._live, ids, fields=fields, batch_size=batch_size, missing=missing)

    def lookup(
        self,
        operation: str,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = None,
        batch_size: int = 100,
        missing: Missing = "none",
        mutations: bool = False,
    ) -> list[Any]:
        """:meth:`findings` for any lookup by one id of the catalog (``"finding"``): the models
        of the operation's type, or None, in the order of ``ids`` (typed ``Any``: the operation
        is a name chosen at run time; :meth:`findings` is the typed face). A
        ``delete_*`` mutation is merged only with ``mutations=True``, and such a batch is never
        resent once it may have reached the server."""
        return _lookup.lookup(
            self._live,
            operation,
            ids,
            fields=fields,
            batch_size=batch_size,
            missing=missing,
            mutations=mutations,
        )

    def batch(self, *, mutations: bool = False, batch_size: int = 100) -> Batch:
        """A block whose lookups are sent together when it ends::

            with client.batch() as b:
                a, c = b.finding(1), b.finding(2)
            print(a.result().title, c.result().title)

        ``b.finding(id)`` and ``b.lookup(operation, id)`` return
        :class:`~secfindings.Deferred` handles, filled by one batched lookup per operation and
        selection when the block ends (a sync call that returns must have its answer, so the
        handles are how the sync client merges; ``client.finding()`` itself still runs at once).
        A block that ends with an exception sends nothing. Mutations are refused unless
        ``mutations=True``.
        """
        return Batch(self._live, mutations, batch_size)

    def sync(
        self,
        dest: str | os.PathLike[str],
        *,
        fields: str | Sequence[str] = "analyst",
        lookback: dt.timedelta | float = dt.timedelta(minutes=15),
        reconcile: bool | None = None,
        reconcile_every: dt.timedelta | float = dt.timedelta(hours=24),
        page_size: int = 100,
        progress: Any = None,
        collections: Sequence[str] | str | None = None,
        filters: Any = None,
    ) -> SyncResult:
        """Brings a local copy of the findings in ``dest`` up to date and returns what the run
        did (:class:`~secfindings.sync.SyncResult`).

        ``dest``: a path (a DuckDB file), ``duckdb:///f.db``, ``sqlite:///f.sqlite`` or
        ``postgresql://user@host:port/db`` (extras ``secfindings[duckdb]``, ``[sqlite]``,
        ``[postgres]``). Tables ``findings`` (one row per finding, the columns of ``fields``;
        default the fields analysts group and sort by), ``findings_history`` (each version,
        ``valid_from`` / ``valid_to``), ``sync_state`` and ``sync_runs`` (the run log).

        The first run loads everything (walked by id, committed in chunks, resumable). Later runs
        read the findings last reported since the watermark less ``lookback`` and upsert them
        by id, in one transaction with the new watermark; a full reconcile (status changes,
        removed findings) runs every ``reconcile_every``, or now with ``reconcile=True``, never
        with ``False``. Where the server cannot sort and filter by ``last_reported_time``, every
        run reconciles. ``collections`` (``"all"`` or names such as ``"scoring_rules"``): full
        snapshots with history of the other collections too. ``filters``: the table holds
        exactly the findings that match (a destination keeps its filter; see the guide).
        See docs/guides/sync.md.
        """
        return sync(
            self,
            dest,
            fields=fields,
            lookback=lookback,
            reconcile=reconcile,
            reconcile_every=reconcile_every,
            page_size=page_size,
            progress=progress,
            collections=collections,
            filters=filters,
        )

    @property
    def rules(self) -> Rules:
        """Rules as code with this client: ``export()``, ``plan(doc)``, ``apply(doc)``,
        ``drift(doc)`` (:mod:`secfindings.rules`; extra ``secfindings[rules]``)."""
        # Loaded on first use: the package costs `import secfindings` some 20 ms otherwise.
        return cast("Rules", importlib.import_module("secfindings.rules").Rules(self))

    def schema(self, refresh: bool = False) -> Schema | None:
        """The schema of the server this client talks to (None with ``schema="off"``).

        Introspected on first need (this call, a typed method or ``execute()``), then kept per
        base URL in memory and on disk (see the live schema guide); ``refresh=True`` asks again.
        When the server refuses introspection it is the built-in schema, and one INFO line on
        the ``secfindings.schema`` logger says so.
        """
        return self._live.schema_sync(refresh)

    def close(self) -> None:
        """Stop the client; later calls raise ClientClosedError."""
        self._native.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    if not TYPE_CHECKING:
        # `async with Client()` gets a message that says what to use instead of Python's generic
        # one (hidden from type checkers, which report the mistake themselves).
        async def __aenter__(self) -> NoReturn:
            raise TypeError(
                "Client is synchronous: use `with Client(...)`, or secfindings.AsyncClient for `async with`"
            )

        async def __aexit__(self, *exc: object) -> None:
            return None


class AsyncClient(_Base, AsyncOperations):
    """Asyncio client with the methods of :class:`Client`, awaited. Safe to share across tasks;
    cancelling a task cancels its request."""

    async def execute(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        operation_name: str | None = None,
    ) -> dict[str, Any]:
        """Run one GraphQL operation and return its ``data`` (see :meth:`Client.execute`)."""
        result: dict[str, Any] = await self._native.execute_async(query, variables, operation_name)
        return result

    def paginate(
        self,
        query: str,
        variables: dict[str, Any] | None = None,
        path: str | None = None,
        page_size: int = 100,
        limit: int | None = None,
        operation_name: str | None = None,
    ) -> AsyncPaginator[dict[str, Any]]:
        """Walk any Relay connection lazily with ``async for`` (see :meth:`Client.paginate`)."""
        return AsyncPaginator(self._pages(query, variables, path, page_size, limit, operation_name))

    @overload
    def subscribe(
        self,
        document: Literal["finding_created", "finding_changed"],
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> AsyncSubscription[FindingEvent]: ...

    @overload
    def subscribe(
        self,
        document: Literal["rule_changed"],
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> AsyncSubscription[RuleEvent]: ...

    @overload
    def subscribe(
        self,
        document: str,
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> AsyncSubscription[Any]: ...

    def subscribe(
        self,
        document: str,
        variables: Mapping[str, Any] | None = None,
        *,
        operation_name: str | None = None,
        fields: str | None = None,
        resume: str | None = "after",
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> AsyncSubscription[Any]:
        """Subscribe over WebSocket; ``async for`` over the events (see :meth:`Client.subscribe`).

        The start position is fixed by ``async with`` (or ``await sub.started()``); without
        either, shortly after the call (the task asks for it at once).
        """
        native = self._subscription(
            document, variables, operation_name, fields, resume, queue_size, max_reconnects
        )
        return AsyncSubscription(native, self._field_types())

    @overload
    async def findings(
        self,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = ...,
        batch_size: int = ...,
        missing: Literal["none"] = ...,
    ) -> list[Finding | None]: ...
    @overload
    async def findings(
        self,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = ...,
        batch_size: int = ...,
        missing: Literal["raise"],
    ) -> list[Finding]: ...
    async def findings(
        self,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = None,
        batch_size: int = 100,
        missing: Missing = "none",
    ) -> list[Finding | None] | list[Finding]:
        """Many findings by id in few requests (see :meth:`Client.findings`)."""
        return await _lookup.findings_async(
            self._live, ids, fields=fields, batch_size=batch_size, missing=missing
        )

    async def lookup(
        self,
        operation: str,
        ids: Iterable[str | int],
        *,
        fields: Fields | None = None,
        batch_size: int = 100,
        missing: Missing = "none",
        mutations: bool = False,
    ) -> list[Any]:
        """Any lookup by one id of the catalog, batched (see :meth:`Client.lookup`)."""
        return await _lookup.lookup_async(
            self._live,
            operation,
            ids,
            fields=fields,
            batch_size=batch_size,
            missing=missing,
            mutations=mutations,
        )

    def batch(self, *, mutations: bool = False, batch_size: int = 100) -> AsyncBatch:
        """``async with client.batch() as b:``: ``b.finding(id)`` handles sent together when the
        block ends (see :meth:`Client.batch`). Concurrent ``await client.finding(id)`` calls are
        merged without it (see :attr:`coalesce_window`)."""
        return AsyncBatch(self._live, mutations, batch_size)

    @property
    def coalesce_window(self) -> float | None:
        """How long concurrent ``await client.finding(id)`` calls are collected before they are
        sent as one batched lookup: 0 (the default) is one turn of the event loop (what
        ``asyncio.gather`` starts together), a number of seconds waits that long for more, None
        sends each call on its own. A lone call is sent as without coalescing. A pickled client
        is rebuilt with the default."""
        return self._live.coalescer.window

    @coalesce_window.setter
    def coalesce_window(self, seconds: float | None) -> None:
        self._live.coalescer.window = _lookup.check_window(seconds)

    async def sync(
        self,
        dest: str | os.PathLike[str],
        *,
        fields: str | Sequence[str] = "analyst",
        lookback: dt.timedelta | float = dt.timedelta(minutes=15),
        reconcile: bool | None = None,
        reconcile_every: dt.timedelta | float = dt.timedelta(hours=24),
        page_size: int = 100,
        progress: Any = None,
        collections: Sequence[str] | str | None = None,
        filters: Any = None,
    ) -> SyncResult:
        """:meth:`Client.sync`, awaited: the database work runs in a worker thread while the
        event loop goes on; cancelling the task rolls the run back."""
        return await sync_async(
            self,
            dest,
            fields=fields,
            lookback=lookback,
            reconcile=reconcile,
            reconcile_every=reconcile_every,
            page_size=page_size,
            progress=progress,
            collections=collections,
            filters=filters,
        )

    async def schema(self, refresh: bool = False) -> Schema | None:
        """The schema of the server this client talks to (see :meth:`Client.schema`)."""
        return await self._live.schema_async(refresh)

    async def aclose(self) -> None:
        """Stop the client; later calls raise ClientClosedError."""
        self._native.close()

    def close(self) -> None:
        """Synchronous close, for places where no event loop runs (fixtures, atexit)."""
        self._native.close()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    if not TYPE_CHECKING:
        # `with AsyncClient()` gets a message that says what to use (see Client.__aenter__).
        def __enter__(self) -> NoReturn:
            raise TypeError(
                "AsyncClient is asynchronous: use `async with AsyncClient(...)`, or secfindings.Client "
                "for `with`"
            )

        def __exit__(self, *exc: object) -> None:
            return None
