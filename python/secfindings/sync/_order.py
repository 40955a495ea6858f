"""The ids of a walk that asked for ``ID_ASC``, checked as they come (the reconcile and the
first load move their checkpoint by them, so they may only trust an order they saw)."""

from __future__ import annotations

from typing import Any

from secfindings._shared import need

__all__ = ["IdOrder"]


class IdOrder:
    """Takes the pages of a walk by id. While the ids ascend, an id equal to the one before it
    is dropped (a page that lists a finding twice, a page that starts again with the last one);
    a row without an id is dropped (a table keyed by id cannot hold it), and so is one at or
    before ``after`` (committed before: a walk that cannot start past it reads it again). An id lower than one
    before it means the server does not keep the order: ``broken`` turns True, and from then
    on every id is kept in ``seen`` (the caller adds what it read before) and nothing is
    dropped but rows without an id (the staging keeps one row per id)."""

    def __init__(self, key: str, after: int | None) -> None:
        self.key = key
        self.start = after
        self.last = after
        self.broken = False
        self.seen: set[int] = set()
        #: The first id that came after a higher one.
        self.late: int | None = None

    def take(self, batch: Any) -> Any:
        ids = batch.column(self.key).to_pylist()
        keep: list[int] = []
        for n, ident in enumerate(ids):
            if ident is None or (self.start is not None and ident <= self.start):
                continue  # no id, or one committed before (a walk that could not start past it)
            if self.broken:
                self.seen.add(ident)
                keep.append(n)
            elif self.last is not None and ident <= self.last:
                if ident != self.last:
                    self.broken, self.late = True, ident
                    self.seen.add(ident)
                    keep.append(n)
                # else: the id again, dropped
            else:
                self.last = ident
                keep.append(n)
        if len(keep) == len(ids):
            return batch
        pa = need("pyarrow", "arrow", "sync()")
        return batch.take(pa.array(keep, pa.int64()))
