"""Progress of a walk (``progress=``): a tqdm bar on a terminal or in a notebook, plain lines on
stderr every few seconds for logs, or a callable of the caller's."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from secfindings._plain import plural

if TYPE_CHECKING:
    from secfindings._native import NativePages

__all__ = ["Progress", "Reporter"]

#: ``progress=``: True (a tqdm.auto bar where tqdm is installed and stderr is a terminal or a
#: notebook; else a plain line on stderr every few seconds, for logs), or a callable given
#: ``{"items", "pages", "waits", "total"}`` after each page; ``total`` is the connection's count
#: when the query selects it (``totalCount`` / ``total_count``), else None.
Progress = bool | Callable[[dict[str, Any]], object] | None

#: The clock of the plain progress lines (a test replaces it).
_clock = time.monotonic


def _interactive() -> bool:
    """Whether stderr shows a live bar: a terminal, or a notebook (tqdm.auto draws a widget)."""
    # A running kernel, not a module that was merely imported (a test suite or a tool may import
    # ipykernel without being a notebook).
    ipython = sys.modules.get("IPython")
    get_shell = getattr(ipython, "get_ipython", None)
    shell = get_shell() if callable(get_shell) else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        return True
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Reporter:
    """Reports a walk page by page; ``waits`` counts rate-limit holds and 429s so far."""

    #: Seconds between plain progress lines (stderr not a terminal, or no tqdm): a log gets a
    #: line now and then, never a bar redrawn with carriage returns.
    EVERY = 5.0

    def __init__(self, progress: Progress, pages: NativePages, what: str) -> None:
        self._pages = pages
        self.items = self.pages = 0
        self._bar: Any = None
        self._cb: Callable[[dict[str, Any]], object] | None = None
        self._last: float | None = None
        if progress is None or progress is False:
            return
        if progress is not True:
            self._cb = progress
            return
        if not _interactive():
            self._cb = self._plain
            return
        try:
            from tqdm.auto import tqdm  # type: ignore[import-untyped,unused-ignore]  # noqa: PLC0415 - optional
        except ImportError:
            self._cb = self._plain
        else:
            self._bar = tqdm(desc=what, unit=" items", file=sys.stderr, dynamic_ncols=True)

    @property
    def active(self) -> bool:
        return self._bar is not None or self._cb is not None

    def page(self, rows: int) -> None:
        self.items += rows
        self.pages += 1
        total = self._pages.total
        if self._bar is not None:
            if total is not None and self._bar.total != total:
                self._bar.total = total
            self._bar.update(rows)
            waits = sum(self._pages.waits())
            if waits:
                self._bar.set_postfix(pages=self.pages, waits=waits, refresh=False)
        elif self._cb is not None:
            waits = sum(self._pages.waits())
            self._cb({"items": self.items, "pages": self.pages, "waits": waits, "total": total})

    def _plain(self, info: dict[str, Any]) -> None:
        now = _clock()
        if self._last is None or now - self._last >= self.EVERY:
            self._last = now
            if info["total"] is not None:
                items = f"{info['items']} of {plural(info['total'], 'item')}"
            else:
                items = plural(info["items"], "item")
            _say(f"{items}, {plural(info['pages'], 'page')}, {plural(info['waits'], 'wait')}")

    def close(self, ok: bool = True) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self._cb == self._plain and self.pages:
            _say(f"{plural(self.items, 'item')}, {plural(self.pages, 'page')}: {'done' if ok else 'stopped'}")


def _say(line: str) -> None:
    """A progress line on stderr (none where there is no stderr, as under pythonw)."""
    if sys.stderr is not None:
        print(line, file=sys.stderr, flush=True)
