"""A walk read ahead by a thread, so that the network and the database overlap."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any

__all__ = ["ReadAhead"]


class ReadAhead(Iterator[Any]):
    """An iterator read ahead by a thread into a bounded queue; errors come out in order."""

    _END = object()

    def __init__(self, source: Iterator[Any], size: int) -> None:
        self._queue: queue.Queue[Any] = queue.Queue(maxsize=max(1, size))
        self._closed = threading.Event()
        self._source = source
        self._thread = threading.Thread(target=self._fill, name="secfindings-sync-walk", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        """Puts an item, unless the consumer closed the walk meanwhile (then False)."""
        while not self._closed.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _fill(self) -> None:
        try:
            for item in self._source:
                if not self._put((True, item)):
                    return
            self._put((True, self._END))
        except BaseException as exc:
            self._put((False, exc))

    def __next__(self) -> Any:
        ok, item = self._queue.get()
        if not ok:
            raise item
        if item is self._END:
            raise StopIteration
        return item

    def close(self) -> None:
        """Stops reading ahead (the walk is dropped with what it fetched)."""
        self._closed.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._queue.get_nowait()
