"""The client side of a sync: the sync client used directly, the async client driven from the
sync's worker thread (its paginators are read through the Arrow C stream, which is
synchronous by design, and its coroutines are run on the caller's event loop)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from secfindings import _batched, _newer, _plan
from secfindings._shared import need
from secfindings.sync._model import Source

if TYPE_CHECKING:
    from secfindings._estimate import Estimate
    from secfindings._schema import Schema

__all__ = [
    "AsyncClientProtocol",
    "AsyncSource",
    "ClientSource",
    "SyncClientProtocol",
]

# The clients as the sync sees them: exactly the methods it calls, itself or through the walk
# plan (``_plan.capable``, ``_newer``), and what it does with their results. ``Client.sync``
# calls this package, so this package must not import the client's module (no import circle,
# see docs/architecture.md): these Protocols say what it needs instead, as
# ``_opsupport.Native`` does for the generated methods. tests/typed/sync_protocols.py checks
# (with mypy) that the real clients satisfy them. A collection's method (``scoring_rules``...)
# is called by its name (``getattr``), so it is no member here.


class _Pages(Protocol):
    """A :class:`~secfindings.Paginator`, as read by a sync."""

    def to_arrow(self) -> Any: ...
    def to_arrow_batches(self) -> Iterator[Any]: ...
    def estimate(self) -> Estimate: ...


class _AsyncPages(Protocol):
    """An :class:`~secfindings.AsyncPaginator`, as read by a sync (its Arrow C stream is read
    from the sync's worker thread)."""

    def to_arrow(self) -> Awaitable[Any]: ...
    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object: ...


class _Events(Protocol):
    """A :class:`~secfindings.Subscription` of finding events."""

    def __iter__(self) -> Iterator[Any]: ...
    def close(self) -> None: ...


class SyncClientProtocol(Protocol):
    """What a sync uses of a :class:`secfindings.Client`."""

    @property
    def base_url(self) -> str: ...
    def schema(self, refresh: bool = False) -> Schema | None: ...
    def stats(self) -> Mapping[str, float]: ...
    def execute(
        self, query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
    ) -> Mapping[str, Any]: ...
    def findings_view(self, *args: Any, **kwargs: Any) -> _Pages: ...
    def findings(self, ids: Iterable[str | int], *, fields: str) -> Sequence[Any]: ...
    def subscribe(self, document: str, *, fields: str | None = None) -> _Events: ...


class AsyncClientProtocol(Protocol):
    """What a sync uses of a :class:`secfindings.AsyncClient`."""

    @property
    def base_url(self) -> str: ...
    async def schema(self, refresh: bool = False) -> Schema | None: ...
    def stats(self) -> Mapping[str, float]: ...
    async def execute(
        self, query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
    ) -> Mapping[str, Any]: ...
    def findings_view(self, *args: Any, **kwargs: Any) -> _AsyncPages: ...
    async def findings(self, ids: Iterable[str | int], *, fields: str) -> Sequence[Any]: ...


def _walk_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if v is not None}


class ClientSource(Source):
    def __init__(self, client: SyncClientProtocol) -> None:
        self.client = client

    def schema(self) -> Any:
        return self.client.schema()

    def batches(self, **arguments: Any) -> Iterator[Any]:
        # The sync keeps its own place (by id or time), never a cursor: aliased page batches
        # where the walk allows them (the first load and reconcile walk by id; issue 37).
        with _batched.whole_walks():
            pager = self.client.findings_view(**_walk_arguments(arguments))
        batches: Iterator[Any] = pager.to_arrow_batches()
        return batches

    def empty(self, fields: str) -> Any:
        return self.client.findings_view(fields=fields, limit=0).to_arrow().schema

    def requests(self) -> int:
        return int(self.client.stats()["requests"])

    def call(self, name: str, **arguments: Any) -> Any:
        return getattr(self.client, name)(**_walk_arguments(arguments)).to_arrow()

    def newer(self, key: str) -> Any:
        return _newer.newer(self.client, key)

    def capable(self, name: str) -> bool:
        return _plan.capable(self.client, name)

    def times(self, ids: Sequence[int]) -> dict[int, dt.datetime | None]:
        return _newer.times_of(self.client.findings(list(ids), fields=_newer.TIMES))


class AsyncSource(Source):
    """An :class:`~secfindings.AsyncClient` seen from a worker thread."""

    def __init__(self, client: AsyncClientProtocol, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop

    def _await(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def schema(self) -> Any:
        return self._await(self.client.schema())

    def batches(self, **arguments: Any) -> Iterator[Any]:
        pa = need("pyarrow", "arrow", "sync()")
        with _batched.whole_walks():  # as ClientSource.batches
            pager = self.client.findings_view(**_walk_arguments(arguments))
        # The async paginator's Arrow C stream reads synchronously: this thread waits for each
        # page while the event loop goes on.
        yield from pa.RecordBatchReader.from_stream(pager)

    def empty(self, fields: str) -> Any:
        return self._await(self.client.findings_view(fields=fields, limit=0).to_arrow()).schema

    def requests(self) -> int:
        return int(self.client.stats()["requests"])

    def call(self, name: str, **arguments: Any) -> Any:
        return self._await(getattr(self.client, name)(**_walk_arguments(arguments)).to_arrow())

    def newer(self, key: str) -> Any:
        return self._await(_newer.newer_async(self.client, key))

    def capable(self, name: str) -> bool:
        return bool(self._await(_plan.capable_async(self.client, name)))

    def times(self, ids: Sequence[int]) -> dict[int, dt.datetime | None]:
        return _newer.times_of(self._await(self.client.findings(list(ids), fields=_newer.TIMES)))
