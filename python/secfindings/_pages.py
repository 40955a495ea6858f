"""Pages of a Relay connection: :class:`Page` and :class:`PageInfo`, where a walk stands in them
(for a paginator's ``cursor``), and their HTML tables for notebooks."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from secfindings._shared import FieldTypes, html_cell
from secfindings.errors import ValidationError

__all__ = ["Page", "PageInfo"]

T = TypeVar("T")

#: What builds an item of a page from its node: a model class, given the node and the field
#: types of the client's live schema.
Wrap = Callable[[Any, FieldTypes | None], T]


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

    def _repr_html_(self) -> str:
        info = self.page_info
        return (
            f"<p><b>Page</b> of {len(self.items)} items, has_next_page={info.has_next_page}</p>"
            + html_rows(self.items, 20)
        )


def make_page(
    raw: tuple[list[Any], dict[str, Any], list[str | None]],
    wrap: Wrap[T] | None,
    types: FieldTypes | None = None,
) -> Page[T]:
    """A page from the native walk's tuple, its nodes built by ``wrap`` (None: the dicts)."""
    items, info, cursors = raw
    if wrap is not None:
        # A null node stays None (a server may null one out with a resolver error).
        items = [wrap(i, types) if i is not None else i for i in items]
    return Page(items=items, page_info=PageInfo(**info), cursors=cursors)


class Position:
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

    def columns(self) -> None:
        """Before the rest of the walk goes out as columns: refuses if part of a page was handed
        out as items (its rest would be skipped), else forgets the page."""
        it = self.it
        if it is not None and it.__length_hint__():  # type: ignore[attr-defined]
            raise ValidationError(
                "part of a page was handed out as items, and the rest of the walk as columns would "
                f"skip the rest of that page; start a new paginator with after={self.cursor()!r}"
            )
        self.base = self.cursor()
        self.page = self.it = None

    def moved(self, cursor: str | None) -> None:
        """A page went out as a batch (or was written): the walk stands after it."""
        self.base = cursor or self.base


def _raw(item: Any) -> dict[str, Any]:
    data = getattr(item, "_data", item)
    return data if isinstance(data, dict) else {"value": data}


def html_rows(items: list[Any], limit: int = 10) -> str:
    """A compact HTML table of items (models or dicts), nested objects flattened one level."""
    rows: list[dict[str, Any]] = []
    for item in items[:limit]:
        row: dict[str, Any] = {}
        for k, v in _raw(item).items():
            if isinstance(v, dict) and "edges" not in v:
                for k2, v2 in v.items():
                    row[f"{k}.{k2}"] = v2
            else:
                row[k] = v
        rows.append(row)
    columns: list[str] = []
    for row in rows:
        columns.extend(c for c in row if c not in columns)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html_cell(r.get(c))}</td>" for c in columns) + "</tr>" for r in rows
    )
    more = f"<p>... and {len(items) - limit} more</p>" if len(items) > limit else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"
