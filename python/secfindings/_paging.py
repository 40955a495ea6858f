"""Paginators: lazy, one-pass walks over a Relay connection.

The Rust core fetches page N+1 while the caller works on page N; these classes only turn pages
into items (and items into typed models, when the operation has one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from secfindings._native import NativePages

__all__ = ["AsyncPaginator", "Page", "PageInfo", "Paginator"]

T = TypeVar("T")


@dataclass(frozen=True)
class PageInfo:
    """The Relay ``pageInfo`` of one page."""

    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a connection: its items and its ``pageInfo``."""

    items: list[T]
    page_info: PageInfo

    def __len__(self) -> int:
        return len(self.items)


def _page(raw: tuple[list[Any], dict[str, Any]], wrap: Callable[[Any], T] | None) -> Page[T]:
    items, info = raw
    if wrap is not None:
        # A null node stays None (a server may null one out with a resolver error).
        items = [wrap(i) if i is not None else i for i in items]
    return Page(items=items, page_info=PageInfo(**info))


def _frame(items: list[Any]) -> Any:
    try:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("to_pandas() needs pandas: pip install 'secfindings[pandas]'") from exc
    rows = [i.to_dict() if hasattr(i, "to_dict") else i for i in items]
    return pd.json_normalize(rows, sep=".")


class Paginator(Generic[T]):
    """Iterates the items of a connection, fetching pages as needed (never all at once).

    A paginator is a single pass: iterating again continues where the last iteration stopped.
    ``cursor`` is the end cursor of the last page fetched; pass it as ``after=`` to resume later.
    """

    def __init__(self, pages: NativePages, wrap: Callable[[Any], T] | None = None) -> None:
        self._pages = pages
        self._wrap = wrap
        self._done = False

    @property
    def cursor(self) -> str | None:
        """End cursor of the last page consumed (resume with ``after=paginator.cursor``)."""
        return self._pages.cursor

    def pages(self) -> Iterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            raw = self._pages.next_page()
            if raw is None:
                self._done = True
                return
            yield _page(raw, self._wrap)

    def __iter__(self) -> Iterator[T]:
        for page in self.pages():
            yield from page.items

    def to_list(self) -> list[T]:
        """All remaining items, in a list."""
        return list(self)

    def to_pandas(self) -> Any:
        """All remaining items as a pandas DataFrame, nested fields flattened to dotted columns."""
        return _frame(self.to_list())


class AsyncPaginator(Generic[T]):
    """The asyncio twin of :class:`Paginator`: ``async for``, ``pages()``, ``await to_list()``."""

    def __init__(self, pages: NativePages, wrap: Callable[[Any], T] | None = None) -> None:
        self._pages = pages
        self._wrap = wrap
        self._done = False

    @property
    def cursor(self) -> str | None:
        """End cursor of the last page consumed (resume with ``after=paginator.cursor``)."""
        return self._pages.cursor

    async def pages(self) -> AsyncIterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            raw = await self._pages.next_page_async()
            if raw is None:
                self._done = True
                return
            yield _page(raw, self._wrap)

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.pages():
            for item in page.items:
                yield item

    async def to_list(self) -> list[T]:
        """All remaining items, in a list."""
        return [item async for item in self]

    async def to_pandas(self) -> Any:
        """All remaining items as a pandas DataFrame, nested fields flattened to dotted columns."""
        return _frame(await self.to_list())
