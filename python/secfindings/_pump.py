"""Reading several walks at once and handing their pages to one consumer: in threads for the
sync client (each waits for its pages with the GIL released), in tasks for the async one. The
partitions of a walk (:mod:`secfindings._partitions`) are read this way."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from secfindings._native import NativePages

__all__ = ["Fetch", "Handle", "pump_tasks", "pump_threads"]

Fetch = Callable[["NativePages"], Any]
Handle = Callable[[int, Any], None]


def pump_threads(walks: list[tuple[int, NativePages]], fetch: Fetch, handle: Handle) -> None:
    """Reads the walks in threads (each waits for its pages with the GIL released) and hands
    every page, and None at a walk's end, to ``handle`` under one lock. The first failure stops
    the others after their current page (nothing more is handed over) and is raised; so is a
    KeyboardInterrupt of the waiting thread."""
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(i: int, pages: NativePages) -> None:
        try:
            while True:
                got = fetch(pages)
                with lock:
                    if stop.is_set():
                        return
                    handle(i, got)
                if got is None:
                    return
        except BaseException as exc:
            with lock:
                if not stop.is_set():
                    errors.append(exc)
                stop.set()

    threads = [
        threading.Thread(target=work, args=(i, p), name=f"secfindings-partition-{i}", daemon=True)
        for i, p in walks
    ]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    except BaseException:
        with lock:
            stop.set()
        raise
    if errors:
        raise errors[0]


async def pump_tasks(
    walks: list[tuple[int, NativePages]], fetch: Callable[[NativePages], Awaitable[Any]], handle: Handle
) -> None:
    """:func:`pump_threads` with a task per walk: the first failure (or a cancellation of the
    caller) cancels the others, whose page in flight is dropped and not handed over."""

    async def one(i: int, pages: NativePages) -> None:
        while True:
            got = await fetch(pages)
            handle(i, got)
            if got is None:
                return

    if not walks:
        return
    tasks = [asyncio.ensure_future(one(i, p)) for i, p in walks]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    for t in tasks:
        if not t.cancelled() and t.exception() is not None:
            raise t.exception()  # type: ignore[misc]
