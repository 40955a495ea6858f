"""The native client with the live schema in front of it: selections chosen from the server's
schema, documents and variables checked against it before anything is sent.

``schema=`` on the clients: ``"live"`` (default: introspect the server on first need, cached per
base URL in memory and on disk, falling back to the built-in SDL when introspection is refused),
``"builtin"`` (the package's SDL, never introspect) or ``"off"`` (no checks, catalog defaults).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from secfindings import _native
from secfindings._schema import ANALYST, Schema, SchemaTooLarge, forget_cached, read_cached, write_cached
from secfindings.errors import APIStatusError, GraphQLError, RateLimitError, ValidationError
from secfindings.filters import global_id_problem, unknown_fields, unknown_values
from secfindings.models import model_for

__all__ = ["MODES", "LiveNative", "forget_server", "introspection_query"]

log = logging.getLogger("secfindings.schema")

MODES = ("live", "builtin", "off")

#: Schemas by base URL, shared by the clients of this process.
_MEMORY: dict[tuple[str, str], Schema] = {}
_LOCKS: dict[str, threading.Lock] = {}
#: Base URLs that refused introspection in a build without the built-in schema: not asked again.
_UNCHECKED: set[str] = set()
_LOCKS_GUARD = threading.Lock()
_CATALOG: dict[str, dict[str, Any]] = {op["name"]: op for op in _native.catalog()}
_QUERY: list[str] = []
#: The variables paging fills in itself.
_PAGING = frozenset({"first", "after"})


def introspection_query(deprecated_inputs: bool = True) -> str:
    """With deprecated arguments and input fields (a server still takes them), or the plain query
    for servers that do not know ``includeDeprecated`` on them."""
    if not _QUERY:
        import graphql

        _QUERY.append(graphql.get_introspection_query(descriptions=True, input_value_deprecation=True))
        _QUERY.append(graphql.get_introspection_query(descriptions=True))
    return _QUERY[0 if deprecated_inputs else 1]


#: Called with a base URL when a new server answers there (see :func:`forget_server`).
FORGET_HOOKS: list[Any] = []


def forget_server(base_url: str) -> None:
    """Drop what this process and the disk cache know of the server at ``base_url`` (its schema,
    and what the hooks registered in ``FORGET_HOOKS`` keep, such as probes): a new server answers
    there now, as when a test emulator gets a port an earlier one used."""
    _MEMORY.pop((base_url, "live"), None)
    _UNCHECKED.discard(base_url)
    forget_cached(base_url)
    for hook in FORGET_HOOKS:
        hook(base_url)


def _lock(base_url: str) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(base_url, threading.Lock())


_BUILTIN: list[Schema] = []


def _builtin(base_url: str) -> Schema | None:
    """The package's own schema: one for the process, whatever the server (None in a build
    without the emulator, which carries it: then there is nothing to check against)."""
    del base_url
    if not _BUILTIN:
        sdl = _native.builtin_sdl()
        if not sdl:
            return None
        with _LOCKS_GUARD:
            if not _BUILTIN:
                _BUILTIN.append(Schema("(built-in)", "built-in", sdl=sdl))
    return _BUILTIN[0]


def _refused(error: Exception) -> bool:
    """Whether an introspection failure means "not available here" (fall back, remembered)
    rather than a failure the user's own call would meet too (a 429, a 5xx, the network: raised,
    and asked again next time)."""
    if isinstance(error, GraphQLError):
        return True
    status = getattr(error, "status_code", None)
    return (
        isinstance(error, APIStatusError)
        and not isinstance(error, RateLimitError)
        and isinstance(status, int)
        and 400 <= status < 500
    )


def _older_server(error: GraphQLError) -> bool:
    """Whether the server refused only the arguments of the full introspection query (one that
    predates deprecated input values), not introspection itself."""
    text = str(error)
    return "includeDeprecated" in text or "Unknown argument" in text


def _masked(error: Exception) -> str:
    """The first line of an error's message, cut (the client's errors are masked already; a
    schema's own problem carries no secret)."""
    return (str(error).splitlines() or [""])[0][:200]


def _fell_back(base_url: str, error: Exception) -> Schema | None:
    schema = _builtin(base_url)
    then = "checking against the built-in schema" if schema else "no schema checks (this build has none)"
    if isinstance(error, _Unusable) and error.too_large:
        log.warning("the schema of %s is not used: %s; %s", base_url, _masked(error), then)
    else:
        log.info("introspection is not available at %s (%s); %s", base_url, _masked(error), then)
    if schema is not None:
        _MEMORY[(base_url, "live")] = schema
    else:
        _UNCHECKED.add(base_url)
    return schema


def _from_disk(base_url: str) -> Schema | None:
    kept = read_cached(base_url)
    if kept is None:
        return None
    try:
        return Schema(base_url, "disk cache", introspection=kept[0], fetched_at=kept[1])
    except Exception:  # a file written by someone else, or by a bug: not trusted, not kept
        forget_cached(base_url)
        return None


def _kept(base_url: str, refresh: bool) -> Schema | None:
    """The schema on disk for ``base_url`` (put in memory too), unless asked to refresh."""
    schema = None if refresh else _from_disk(base_url)
    if schema is not None:
        _MEMORY[(base_url, "live")] = schema
    return schema


def _settled(base_url: str, data: Any = None, error: Exception | None = None) -> Schema | None:
    """What an introspection attempt gives (shared by the sync and async loads): the server's
    schema, the built-in one when introspection is refused, or the error, raised."""
    if error is None:
        return _introspected(base_url, data)
    if not _refused(error):
        raise error
    return _fell_back(base_url, error)


class _Unusable(Exception):
    """An introspection answer the client cannot build a schema from (``too_large``: beyond the
    limits of :mod:`secfindings._schema`)."""

    def __init__(self, message: str, too_large: bool = False) -> None:
        super().__init__(message)
        self.too_large = too_large


def _fetched(base_url: str, data: Any) -> Schema:
    if not isinstance(data, dict) or not isinstance(data.get("__schema"), dict):
        raise _Unusable("the answer has no __schema object")
    now = time.time()
    try:
        schema = Schema(base_url, "server", introspection=data, fetched_at=now)
    except SchemaTooLarge as e:
        raise _Unusable(f"it is larger than the client accepts: {e}", too_large=True) from None
    except Exception as e:  # graphql-core's errors for a malformed answer are of several kinds
        raise _Unusable(f"the answer is not a usable schema: {str(e)[:200]}") from None
    write_cached(base_url, data, now)
    _MEMORY[(base_url, "live")] = schema
    return schema


def _introspected(base_url: str, data: Any) -> Schema | None:
    try:
        return _fetched(base_url, data)
    except _Unusable as e:
        return _fell_back(base_url, e)


class LiveNative:
    """The native client with this client's live schema in front of it: the calls the Python
    classes make (:class:`secfindings._opsupport.Native`), with the schema's selections and
    checks first; ``loaded_schema`` is the schema they were checked against, which types the
    models made from their answers."""

    __slots__ = ("_async_loading", "_base_url", "_mode", "_n", "_schema")

    def __init__(self, native: Any, mode: str) -> None:
        if mode not in MODES:
            raise ValidationError(f"schema must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
        self._n = native
        self._mode = mode
        self._base_url: str = native.base_url
        self._schema: Schema | None = None
        self._async_loading: dict[int, asyncio.Future[Schema | None]] = {}

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def loaded_schema(self) -> Schema | None:
        """This client's schema as its last call loaded it (None: checks off, or none yet)."""
        return self._schema

    # ------------------------------------------------------------------------------ the client

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def auth_url(self) -> str:
        url: str = self._n.auth_url
        return url

    @property
    def region(self) -> str:
        region: str = self._n.region
        return region

    @property
    def closed(self) -> bool:
        return bool(self._n.closed)

    def close(self) -> None:
        self._n.close()

    def stats(self) -> dict[str, int | float]:
        stats: dict[str, int | float] = self._n.stats()
        return stats

    def budget(self) -> dict[str, Any]:
        budget: dict[str, Any] = self._n.budget()
        return budget

    def current_jwt(self) -> str:
        jwt: str = self._n.current_jwt()
        return jwt

    def pickle_state(self) -> dict[str, Any]:
        state: dict[str, Any] = self._n.pickle_state()
        return state

    # ------------------------------------------------------------------------------ loading

    def _remembered(self, refresh: bool) -> Schema | None:
        if self._mode == "off" or self._base_url in _UNCHECKED:
            return None
        if self._mode == "builtin":
            self._schema = _builtin(self._base_url)
        elif not refresh and self._schema is None:
            self._schema = _MEMORY.get((self._base_url, "live"))
        return self._schema

    def schema_sync(self, refresh: bool = False) -> Schema | None:
        """The schema (loading it on first need; None when checks are off)."""
        schema = self._remembered(refresh)
        if schema is not None and (not refresh or self._mode == "builtin"):
            return schema
        if self._mode == "builtin":
            return None
        if self._mode == "off" or self._base_url in _UNCHECKED:
            return None
        with _lock(self._base_url):
            if not refresh and (kept := _MEMORY.get((self._base_url, "live"))) is not None:
                self._schema = kept
                return kept
            schema = _kept(self._base_url, refresh)
            if schema is None:
                try:
                    try:
                        data = self._n.execute(introspection_query(), None, "IntrospectionQuery")
                    except GraphQLError as e:
                        if not _older_server(e):
                            raise
                        data = self._n.execute(introspection_query(False), None, "IntrospectionQuery")
                except Exception as e:
                    schema = _settled(self._base_url, error=e)
                else:
                    schema = _settled(self._base_url, data=data)
        self._schema = schema
        return schema

    async def schema_async(self, refresh: bool = False) -> Schema | None:
        schema = self._remembered(refresh)
        if schema is not None and (not refresh or self._mode == "builtin"):
            return schema
        if self._mode in ("off", "builtin") or self._base_url in _UNCHECKED:
            return None
        loop = asyncio.get_running_loop()
        while not refresh:
            pending = self._async_loading.get(id(loop))
            if pending is None:
                break
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                # The task loading it was cancelled, not this one: load it here instead.
                task = asyncio.current_task()
                cancelling = getattr(task, "cancelling", None)
                if pending.cancelled() and not (cancelling and cancelling()):
                    continue
                raise
        future: asyncio.Future[Schema | None] = loop.create_future()
        self._async_loading[id(loop)] = future
        try:
            schema = (
                None if refresh else _MEMORY.get((self._base_url, "live")) or _kept(self._base_url, False)
            )
            if schema is None:
                try:
                    try:
                        data = await self._n.execute_async(introspection_query(), None, "IntrospectionQuery")
                    except GraphQLError as e:
                        if not _older_server(e):
                            raise
                        data = await self._n.execute_async(
                            introspection_query(False), None, "IntrospectionQuery"
                        )
                except Exception as e:
                    schema = _settled(self._base_url, error=e)
                else:
                    schema = _settled(self._base_url, data=data)
            self._schema = schema
            future.set_result(schema)
            return schema
        except asyncio.CancelledError:
            future.cancel()  # waiters see a cancelled load and start their own
            raise
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            self._async_loading.pop(id(loop), None)

    # ------------------------------------------------------------------------------ checks

    def _check(
        self,
        schema: Schema,
        query: str,
        variables: Mapping[str, Any] | None,
        name: str | None,
        converted: bool = False,
        supplied: frozenset[str] = frozenset(),
    ) -> None:
        """Raises ValidationError when the document or the variables do not fit. A document the
        client built (``converted``) is not checked for undeclared or missing variables; for the
        caller's own, ``supplied`` names the variables the core fills in (paging's)."""
        if not isinstance(query, str):
            return  # the core refuses it with its own error
        names = not converted

        def convert() -> Mapping[str, Any]:
            # The core's conversion first: its checks (int ranges, naive datetimes, cycles)
            # speak first, and what is checked here is what will be sent.
            given = dict(variables) if variables is not None else None
            sent: Mapping[str, Any] = _native.prepare_request(query, given, name)["variables"]
            return sent

        try:
            schema.check(
                query, variables, name, None if converted else convert, names=names, supplied=supplied
            )
        except ValidationError:
            # A schema from the disk cache may be older than the server's: ask again once.
            if schema.source != "disk cache":
                raise
            fresh = self.schema_sync(refresh=True)
            if fresh is None or fresh is schema:
                raise
            fresh.check(
                query, variables, name, None if converted else convert, names=names, supplied=supplied
            )

    def _selection(self, schema: Schema | None, name: str, fields: str | None) -> str | None:
        op = _CATALOG.get(name)
        if op is None:
            return fields
        type_name: str = op["type"]
        default: str = op["selection"]
        if fields is None:
            if schema is None:
                return None
            chosen = schema.default_selection(type_name, default)
            return None if chosen == default else chosen
        preset = fields.strip()
        if preset not in ("*", "analyst"):
            return fields
        if schema is not None:
            return schema.preset(type_name, preset) or default
        # No schema: the package's own model says what "*" is.
        if preset == "analyst" and type_name in ANALYST:
            return ANALYST[type_name]
        try:
            selection: str = model_for(type_name).selection()
        except KeyError:
            return default
        return selection

    def _prepare(
        self, schema: Schema | None, name: str, args: Mapping[str, Any], fields: str | None
    ) -> str | None:
        fields = self._selection(schema, name, fields)
        config = args.get("filters_config")
        if isinstance(config, Mapping) and config.get("filtersjson") is not None:
            problem = global_id_problem(config["filtersjson"])
            if problem:
                raise ValidationError(problem)
        if schema is not None and isinstance(config, Mapping) and config.get("filtersjson") is not None:
            tree = config["filtersjson"]
            problem = unknown_fields(tree, schema.fields("FindingsView")) or unknown_values(
                tree, schema.filter_enum
            )
            if problem:
                raise ValidationError(problem)
        if schema is not None:
            built = _native.build_operation(name, dict(args), fields)
            self._check(schema, built["query"], built["variables"], name, converted=True)
        return fields

    # ------------------------------------------------------------------------------ the calls

    def execute(self, query: str, variables: Any = None, operation_name: str | None = None) -> Any:
        schema = self.schema_sync()
        if schema is not None:
            self._check(schema, query, variables, operation_name)
        return self._n.execute(query, variables, operation_name)

    async def execute_async(
        self, query: str, variables: Any = None, operation_name: str | None = None
    ) -> Any:
        schema = await self.schema_async()
        if schema is not None:
            self._check(schema, query, variables, operation_name)
        return await self._n.execute_async(query, variables, operation_name)

    def paginate(
        self,
        query: str,
        variables: Any = None,
        operation_name: str | None = None,
        path: str | None = None,
        page_size: Any = None,
        limit: Any = None,
    ) -> Any:
        schema = self.schema_sync()
        if schema is not None:
            self._check(schema, query, variables, operation_name, supplied=_PAGING)
        return self._n.paginate(query, variables, operation_name, path, page_size, limit)

    def call(self, name: str, args: Mapping[str, Any], fields: str | None = None) -> Any:
        fields = self._prepare(self.schema_sync(), name, args, fields)
        return self._n.call(name, args, fields)

    async def call_async(self, name: str, args: Mapping[str, Any], fields: str | None = None) -> Any:
        fields = self._prepare(await self.schema_async(), name, args, fields)
        return await self._n.call_async(name, args, fields)

    def paginate_operation(
        self,
        name: str,
        args: Mapping[str, Any],
        fields: str | None = None,
        page_size: Any = None,
        limit: Any = None,
    ) -> Any:
        # Also for AsyncClient (a paginator is made without awaiting): the first need of the
        # schema there waits for it, once per base URL and process.
        fields = self._prepare(self.schema_sync(), name, args, fields)
        return self._n.paginate_operation(name, args, fields, page_size, limit)

    def subscribe(
        self,
        query: str,
        variables: Any = None,
        operation_name: str | None = None,
        resume: str | None = None,
        queue_size: int = 256,
        max_reconnects: int = 10,
    ) -> Any:
        schema = self.schema_sync()
        if schema is not None:
            self._check(schema, query, variables, operation_name)
        return self._n.subscribe(query, variables, operation_name, resume, queue_size, max_reconnects)
