"""One scenario, both clients: the `either` fixture (tests/conftest.py) runs a test once with
:class:`~secfindings.Client` and once with :class:`~secfindings.AsyncClient`.

The test body is written once, in plain synchronous code::

    def test_finding(either):
        assert either.run(either.client.finding(7)).id_int == 7
        ids = [f.id_int for f in either.items(either.client.findings_view(limit=5))]

``run`` awaits what the async client returns (on an event loop of its own) and hands back what the
sync client returns; ``items`` and ``pages`` walk with ``for`` or ``async for``. ``run`` refuses an
awaitable from the sync client and anything else from the async one, so a test cannot pass for
the async client without awaiting it.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterable, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Literal, Protocol, TypeVar, cast

from tests.servers import http as hostile

from secfindings import AsyncClient, Client

T = TypeVar("T")
Kind = Literal["sync", "async"]
KINDS: list[Kind] = ["sync", "async"]


class Source(Protocol):
    """Where clients come from: an :class:`~secfindings.testing.Emulator`, or :class:`Hostile`."""

    def client(self, **options: Any) -> Client: ...

    def async_client(self, **options: Any) -> AsyncClient: ...


class Hostile:
    """Clients of a hostile server (tests/servers/http.py) as a :class:`Source`."""

    def __init__(self, server: hostile.HostileServer) -> None:
        self.server = server

    def client(self, **options: Any) -> Client:
        return hostile.client(self.server, **options)

    def async_client(self, **options: Any) -> AsyncClient:
        return hostile.async_client(self.server, **options)


class Either:
    """A client of one kind from an emulator (or a :class:`Hostile` server), with the helpers that
    make one test body drive both kinds."""

    def __init__(self, kind: Kind, source: Source, **options: Any) -> None:
        self.kind: Kind = kind
        self.source = source
        self._options = options
        self._loop = asyncio.new_event_loop() if kind == "async" else None
        self._made: list[Client | AsyncClient] = []
        self.client: Any = self.make()

    @property
    def name(self) -> str:
        """The client's class name, as error messages give it."""
        return "AsyncClient" if self._loop is not None else "Client"

    def make(self, **options: Any) -> Any:
        """Another client of the same kind from the same source (a new API token); closed with this
        one."""
        merged = {**self._options, **options}
        made: Client | AsyncClient = (
            self.source.async_client(**merged) if self._loop is not None else self.source.client(**merged)
        )
        self._made.append(made)
        return made

    def run(self, value: Awaitable[T] | T) -> T:
        """The result of a client call: awaited for the async client, as is for the sync one."""
        if self._loop is None:
            assert not inspect.isawaitable(value), f"the sync client returned an awaitable: {value!r}"
            return value
        assert inspect.isawaitable(value), f"the async client returned {value!r}, not an awaitable"
        return self._loop.run_until_complete(cast(Awaitable[T], value))

    def items(
        self,
        walk: Iterable[T] | AsyncIterable[T],
        limit: int | None = None,
        each: Callable[[T], object] | None = None,
    ) -> list[T]:
        """What a walk yields, read with ``for`` (sync) or ``async for`` (async), calling `each` on
        every item as it comes; stops after `limit` items (a ``break``, mid-page)."""
        out: list[T] = []
        if self._loop is None:
            assert isinstance(walk, Iterable), f"the sync client gave {walk!r}, not an iterable"
            for item in walk:
                if each is not None:
                    each(item)
                out.append(item)
                if limit is not None and len(out) == limit:
                    break
            return out
        assert isinstance(walk, AsyncIterable), f"the async client gave {walk!r}, not an async iterable"

        async def read() -> list[T]:
            async for item in walk:
                if each is not None:
                    each(item)
                out.append(item)
                if limit is not None and len(out) == limit:
                    break
            return out

        return self._loop.run_until_complete(read())

    def pages(self, pager: Any) -> list[Any]:
        """Every page of ``pager.pages()``."""
        return self.items(pager.pages())

    def close(self) -> None:
        for made in self._made:
            if isinstance(made, AsyncClient):
                assert self._loop is not None
                self._loop.run_until_complete(made.aclose())
            else:
                made.close()
        if self._loop is not None:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())  # walks left by a break
            self._loop.close()


@contextmanager
def either_client(kind: Kind, source: Source, **options: Any) -> Iterator[Either]:
    """An :class:`Either` for any emulator or :class:`Hostile` server (the fixture's is for the
    test's own `emulator`)."""
    either = Either(kind, source, **options)
    try:
        yield either
    finally:
        either.close()
