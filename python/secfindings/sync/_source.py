"""The client side of a sync: the sync client used directly, the async client driven from the
sync's worker thread (its paginators are read through the Arrow C stream, which is
synchronous by design, and its coroutines are run on the caller's event loop)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

from secfindings import _newer, _plan
from secfindings._shared import need
from secfindings.sync._model import Source

__all__ = ["AnyAsyncClient", "AnyClient", "AsyncSource", "ClientSource"]

#: A :class:`secfindings.Client`. Typed loosely on purpose: ``Client.sync`` calls this package,
#: so this package must not import the client's module (no import circle, see
#: docs/architecture.md); it uses the client's public methods only.
AnyClient = Any
#: A :class:`secfindings.AsyncClient` (typed loosely, as :data:`AnyClient`).
AnyAsyncClient = Any


def _walk_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if v is not None}


class ClientSource(Source):
    def __init__(self, client: AnyClient) -> None:
        self.client = client

    def schema(self) -> Any:
        return self.client.schema()

    def batches(self, **arguments: Any) -> Iterator[Any]:
        batches: Iterator[Any] = self.client.findings_view(**_walk_arguments(arguments)).to_arrow_batches()
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

    def __init__(self, client: AnyAsyncClient, loop: asyncio.AbstractEventLoop) -> None:
        self.client = client
        self.loop = loop

    def _await(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def schema(self) -> Any:
        return self._await(self.client.schema())

    def batches(self, **arguments: Any) -> Iterator[Any]:
        pa = need("pyarrow", "arrow", "sync()")
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
