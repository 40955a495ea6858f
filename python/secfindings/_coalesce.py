"""Coalescing: single-object lookups by id (``await client.finding(i)``) made concurrently on one
event loop are sent together, as one batched lookup (see :mod:`secfindings._lookup`).

The calls made within one window are collected per (operation, selection): a window of ``0``
(the default) is the current turn of the event loop, so ``asyncio.gather(*(client.finding(i) for
i in ids))`` is one batch; a window of ``w > 0`` seconds also takes the calls of the next ``w``
seconds. Then each group is sent:

- one distinct id: the plain call, exactly as without coalescing (same request, same errors);
- more: one batched lookup (up to ``batch_size`` aliases per request, the core halving a
  document the server refuses); each caller gets its own result, or its own
  :class:`~secfindings.NotFoundError` when its id does not exist.

A failure of a batch (the network, a rate limit, a closed client) reaches every caller of it. A
caller cancelled while it waits gives up its place; the others still get theirs, and a batch
nobody waits for any more is cancelled. Imports nothing of the package but its errors.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

from secfindings.errors import GraphQLError, NotFoundError, ValidationError

__all__ = ["Coalescer", "check_window"]

#: Sends many ids of one lookup: (operation, ids, fields, batch_size) -> raw objects or None.
SendMany = Callable[[str, list[Any], "str | None", int], Awaitable[list[Any]]]
#: Sends one id the plain way: (operation, id, fields) -> the raw object (or raises).
SendOne = Callable[[str, Any, "str | None"], Awaitable[Any]]


def check_window(window: object) -> float | None:
    """The coalescing window in seconds (None: coalescing off), or ValidationError."""
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, (int, float)):
        raise ValidationError(
            f"coalesce_window must be a number of seconds (0 for one event-loop turn) or None, not {window!r}"
        )
    seconds = float(window)
    if not math.isfinite(seconds) or seconds < 0 or seconds > 60:
        raise ValidationError(f"coalesce_window must be between 0 and 60 seconds, not {window!r}")
    return seconds


class _Group:
    """The calls waiting for one (operation, selection) in one window."""

    __slots__ = ("calls", "task")

    def __init__(self) -> None:
        self.calls: list[tuple[Any, asyncio.Future[Any]]] = []
        self.task: asyncio.Task[None] | None = None

    def abandoned(self) -> bool:
        return all(f.done() for _, f in self.calls)


class Coalescer:
    """Collects concurrent lookups by id per event loop and window; see the module's docstring."""

    __slots__ = ("_pending", "_running", "_send_many", "_send_one", "batch_size", "window")

    def __init__(self, send_many: SendMany, send_one: SendOne, window: float | None = 0.0) -> None:
        self._send_many = send_many
        self._send_one = send_one
        #: Seconds to collect calls for (0: the current event-loop turn; None: off).
        self.window = window
        #: Aliases per request of a coalesced batch (the core may use fewer for a server that
        #: refused as many).
        self.batch_size = 100
        # Per event loop (by id, with the loop: an entry lives only until its window closes).
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, dict[tuple[str, str | None], _Group]]] = {}
        # The batches being sent: a task nobody references may be collected while it runs.
        self._running: set[asyncio.Task[None]] = set()

    @property
    def enabled(self) -> bool:
        return self.window is not None

    async def submit(self, name: str, ident: Any, fields: str | None) -> Any:
        """The raw object of ``name(id: ident)``, sent together with the calls of the same window."""
        loop = asyncio.get_running_loop()
        entry = self._pending.get(id(loop))
        if entry is None or entry[0] is not loop:
            # (A loop closed before its window did left its entry, and its calls, behind: dropped
            # here, so that they are not kept for ever.)
            for key in [k for k, (old, _) in self._pending.items() if old.is_closed()]:
                del self._pending[key]
            entry = self._pending[id(loop)] = (loop, {})
            if self.window:
                loop.call_later(self.window, self._flush, loop)
            else:
                loop.call_soon(self._flush, loop)
        groups = entry[1]
        group = groups.get((name, fields))
        if group is None:
            group = groups[(name, fields)] = _Group()
        future: asyncio.Future[Any] = loop.create_future()
        group.calls.append((ident, future))
        future.add_done_callback(lambda _f: self._maybe_abandon(group))
        return await future

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        entry = self._pending.get(id(loop))
        if entry is None or entry[0] is not loop:
            return
        del self._pending[id(loop)]
        for (name, fields), group in entry[1].items():
            if group.abandoned():
                continue
            task = loop.create_task(self._send(name, fields, group))
            group.task = task
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    @staticmethod
    def _maybe_abandon(group: _Group) -> None:
        # Every caller has its answer, or gave up: a batch still being sent serves nobody.
        if group.task is not None and not group.task.done() and group.abandoned():
            group.task.cancel()

    async def _isolating(self, name: str, ids: list[Any], fields: str | None, budget: list[int]) -> list[Any]:
        """The raw objects of ``ids``, or per id the error of its own: when an error of the
        server names fields of the batch (an id it refuses, not a missing one), the batch is
        split in two and each half asked again, down to that id's plain call, so that one
        caller's bad id does not fail the others (queries only: asking again changes nothing).
        ``budget`` caps the requests the splitting may add (a server refusing every id, say for
        a permission, must not turn one batch into a request per id): past it, each id of a
        failing part gets the part's error."""
        if len(ids) == 1:
            try:
                return [await self._send_one(name, ids[0], fields)]
            except NotFoundError:
                return [None]
            except GraphQLError as e:
                return [e]
        try:
            raws = await self._send_many(name, ids, fields, self.batch_size)
        except NotFoundError:
            raise
        except GraphQLError as e:
            if not e.errors or not all(err.get("path") for err in e.errors):
                raise  # about the document, not about some ids
            if budget[0] < 2:
                return [e] * len(ids)
            budget[0] -= 2
            half = len(ids) // 2
            return [
                *await self._isolating(name, ids[:half], fields, budget),
                *await self._isolating(name, ids[half:], fields, budget),
            ]
        if len(raws) != len(ids):
            raise RuntimeError(f"the core answered {len(raws)} objects for {len(ids)} ids")
        return raws

    async def _send(self, name: str, fields: str | None, group: _Group) -> None:
        waiting = [(i, f) for i, f in group.calls if not f.done()]
        ids = list(dict.fromkeys(i for i, _ in waiting))
        try:
            if len(ids) == 1:
                raw = await self._send_one(name, ids[0], fields)
                for _, f in waiting:
                    if not f.done():
                        f.set_result(raw)
                return
            # Enough to isolate a few refused ids (each costs about 2 log2(n) requests).
            raws = await self._isolating(name, ids, fields, [8 * len(ids).bit_length()])
        except Exception as e:  # every caller gets the batch's failure
            for _, f in waiting:
                if not f.done():
                    f.set_exception(e)
            return
        except BaseException:  # cancelled (nobody waits any more, or the loop closes)
            for _, f in waiting:
                f.cancel()
            raise
        found = dict(zip(ids, raws, strict=True))
        for i, f in waiting:
            if f.done():
                continue
            raw = found.get(i)
            if isinstance(raw, GraphQLError):
                f.set_exception(raw)
            elif raw is None:
                f.set_exception(
                    NotFoundError(f"{name}(id: {i!r}) does not exist (asked in a coalesced batch)")
                )
            else:
                f.set_result(raw)
