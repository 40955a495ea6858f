"""The native client with the live schema in front of it: selections chosen from the server's
schema, documents and variables checked against it before anything is sent. (Where the schema
comes from and when: :mod:`secfindings._schema_loading`.)

``schema=`` on the clients: ``"live"`` (default: introspect the server on first need, cached per
base URL in memory and on disk, falling back to the built-in SDL when introspection is refused),
``"builtin"`` (the package's SDL, never introspect) or ``"off"`` (no checks, catalog defaults).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from secfindings import _batched, _native
from secfindings._schema import ANALYST, Schema
from secfindings._schema_loading import (
    _MEMORY,
    _UNCHECKED,
    _builtin,
    _kept,
    _lock,
    _older_server,
    _settled,
    forget_server,
    introspection_query,
)
from secfindings.errors import GraphQLError, ValidationError
from secfindings.filters import global_id_problem, unknown_fields, unknown_values
from secfindings.models import model_for

__all__ = ["MODES", "LiveNative", "forget_server", "introspection_query"]

MODES = ("live", "builtin", "off")

_CATALOG: dict[str, dict[str, Any]] = {op["name"]: op for op in _native.catalog()}
#: The variables paging fills in itself.
_PAGING = frozenset({"first", "after"})


class LiveNative:
    """The native client with this client's live schema in front of it: the calls the Python
    classes make (:class:`secfindings._opsupport.Native`), with the schema's selections and
    checks first; ``loaded_schema`` is the schema they were checked against, which types the
    models made from their answers."""

    __slots__ = ("_async_loading", "_base_url", "_mode", "_n", "_schema", "pages_per_request")

    def __init__(self, native: Any, mode: str) -> None:
        if mode not in MODES:
            raise ValidationError(f"schema must be one of {', '.join(map(repr, MODES))}, not {mode!r}")
        self._n = native
        self._mode = mode
        self._base_url: str = native.base_url
        self._schema: Schema | None = None
        self._async_loading: dict[int, asyncio.Future[Schema | None]] = {}
        #: Pages per request of this client's walks (None: the default; see _batched).
        self.pages_per_request: int | None = None

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
    ) -> _native.PreparedOperation:
        """The catalog operation ``name`` built once by the core (its argument checks and
        coercions), then checked against the live schema: the object returned is what is sent."""
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
        prepared = _native.prepare_operation(name, dict(args), fields)
        if schema is not None:
            self._check(schema, prepared.query, prepared.variables, name, converted=True)
        return prepared

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
        return self._n.call_prepared(self._prepare(self.schema_sync(), name, args, fields))

    async def call_async(self, name: str, args: Mapping[str, Any], fields: str | None = None) -> Any:
        prepared = self._prepare(await self.schema_async(), name, args, fields)
        return await self._n.call_prepared_async(prepared)

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
        prepared = self._prepare(self.schema_sync(), name, args, fields)
        # In aliased batches where that is safe, else one page per request (see _batched).
        return _batched.pages(self, name, args, prepared, page_size, limit, fields)

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
