"""Paginators: lazy, one-pass walks over a Relay connection.

The Rust core fetches page N+1 while the caller works on page N; these classes only turn pages
into items (and items into typed models, when the operation has one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from secfindings.errors import PaginationError

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
    #: Each item's edge cursor when the query selected it (the typed methods do); else empty.
    cursors: list[str | None] = field(default_factory=list, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.items)


def _page(
    raw: tuple[list[Any], dict[str, Any], list[str | None]], wrap: Callable[[Any], T] | None
) -> Page[T]:
    items, info, cursors = raw
    if wrap is not None:
        # A null node stays None (a server may null one out with a resolver error).
        items = [wrap(i) if i is not None else i for i in items]
    return Page(items=items, page_info=PageInfo(**info), cursors=cursors)


class _Position:
    """Where a walk stands, for ``cursor``: the page being handed out and its list iterator.

    Items are handed out with ``yield from`` over the list (no Python code runs per item), and
    the cursor is worked out only when asked for, from how far the iterator has got.
    """

    __slots__ = ("base", "it", "page")

    def __init__(self, base: str | None) -> None:
        self.base = base  # the cursor before the current page
        self.page: Page[Any] | None = None
        self.it: Iterator[Any] | None = None

    def cursor(self) -> str | None:
        page, it = self.page, self.it
        if page is None or it is None:
            return self.base
        items = page.items
        if not items:
            return page.page_info.end_cursor or self.base
        used = len(items) - it.__length_hint__()  # type: ignore[attr-defined]
        cursors, last, end = page.cursors, len(items) - 1, page.page_info.end_cursor
        for j in range(used - 1, -1, -1):
            if cursors and cursors[j] is not None:
                return cursors[j]
            if j == last and end:
                return end
        return self.base

    def start(self, page: Page[T]) -> Iterator[T]:
        """Begins handing out ``page``; returns the iterator to hand it out with."""
        self.base = self.cursor()
        it = iter(page.items)
        self.page, self.it = page, it
        return it

    def whole(self, page: Page[Any]) -> None:
        """A page handed out as a whole (``pages()``)."""
        self.base = self.cursor()
        self.page = self.it = None
        self.base = page.page_info.end_cursor or self.base


def _repr(owner: Paginator[Any] | AsyncPaginator[Any]) -> str:
    kind = getattr(owner._wrap, "__name__", "dict")
    state = "exhausted" if owner._done else "lazy"
    return f"<{type(owner).__name__}[{kind}] {state}, cursor={owner.cursor!r}>"


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
        self._pos = _Position(pages.cursor)

    @property
    def cursor(self) -> str | None:
        """Where to resume (``after=paginator.cursor``): the cursor of the last item handed out,
        mid-page too, when the query selects the edges' cursors (the typed methods do); otherwise
        the end cursor of the last page fully consumed. Nothing is skipped on resume."""
        return self._pos.cursor()

    def _next_raw(self) -> Any:
        # The page fetched ahead, when it has arrived; otherwise wait for it on the I/O thread.
        raw = self._pages.try_next_page()
        return self._pages.next_page() if raw is False else raw

    def pages(self) -> Iterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            raw = self._next_raw()
            if raw is None:
                self._done = True
                return
            page = _page(raw, self._wrap)
            self._pos.whole(page)
            yield page

    def __iter__(self) -> Iterator[T]:
        while not self._done:
            raw = self._next_raw()
            if raw is None:
                self._done = True
                return
            yield from self._pos.start(_page(raw, self._wrap))

    def __repr__(self) -> str:
        return _repr(self)

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
        self._interrupted = False
        self._pos = _Position(pages.cursor)

    @property
    def cursor(self) -> str | None:
        """Where to resume (``after=paginator.cursor``); see :attr:`Paginator.cursor`."""
        return self._pos.cursor()

    async def _next_raw(self) -> Any:
        if self._interrupted:
            raise PaginationError(
                "this paginator was cancelled while a page was on its way, so iterating on could "
                f"skip that page; start a new one with after={self.cursor!r} (paginator.cursor)",
                cursor=self.cursor,
            )
        raw = self._pages.try_next_page()
        if raw is False:
            try:
                raw = await self._pages.next_page_async()
            except BaseException as exc:
                import asyncio  # already loaded: this runs in an event loop

                if isinstance(exc, asyncio.CancelledError):
                    # The page may have left the walk already; it must not be skipped silently.
                    self._interrupted = True
                raise
        return raw

    async def pages(self) -> AsyncIterator[Page[T]]:
        """Iterate page by page."""
        while not self._done:
            raw = await self._next_raw()
            if raw is None:
                self._done = True
                return
            page = _page(raw, self._wrap)
            self._pos.whole(page)
            yield page

    async def __aiter__(self) -> AsyncIterator[T]:
        while not self._done:
            raw = await self._next_raw()
            if raw is None:
                self._done = True
                return
            for item in self._pos.start(_page(raw, self._wrap)):
                yield item

    def __repr__(self) -> str:
        return _repr(self)

    async def to_list(self) -> list[T]:
        """All remaining items, in a list."""
        return [item async for item in self]

    async def to_pandas(self) -> Any:
        """All remaining items as a pandas DataFrame, nested fields flattened to dotted columns."""
        return _frame(await self.to_list())
