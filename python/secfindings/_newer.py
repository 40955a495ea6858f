"""How ``watch()`` and the incremental sync read the findings newer than a watermark on what a
server offers (issue 30), on top of the walk plan's probes (:mod:`secfindings._plan`).

By time (``last_reported_time``) two readings exist:

- **filtered**: ``last_reported_time gte <since>``, oldest first. Only where the rows carry the
  field, the schema sorts by it ascending, and a probe showed the server honours the range
  (the probe is :func:`secfindings._plan.time_range`, remembered per server).
- **sorted**: ``LAST_REPORTED_TIME_DESC``, newest first, stopping at the first row older than
  ``since`` (the service's facts name the sort, not a range condition). Where the rows do not
  carry the time (a facts-only server's ``FindingsView``), each page's times are looked up with
  ``finding(id)`` (``Finding.last_reported_time``), batched: one request per page.

By id: ``id gte <watermark + 1>`` where the id range probe holds (:data:`secfindings._plan.
ID_RANGE`), else ``ID_DESC`` newest first, stopping at the watermark.

Nothing here sends a request but the probes; the callers walk.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from secfindings import _plan
from secfindings._shared import has_offset, parse_datetime

__all__ = ["KEY", "TIMES", "Newer", "aware", "by_time", "has", "newer", "newer_async", "times_of"]

KEY = "last_reported_time"
#: What a lookup of times selects.
TIMES = "id_int last_reported_time"


def has(schema: Any, type_name: str, name: str) -> bool:
    if schema is None:
        return True
    try:
        return name in schema.fields(type_name)
    except Exception:
        return False


def _sorts(schema: Any, value: str) -> bool:
    values = _plan.sorts(schema)
    return values is None or value in values


def by_time(schema: Any) -> bool:
    """Whether findings can be read newer than a time on this server: sorted by
    ``last_reported_time`` (descending, or ascending with the field on the rows), and the time
    readable on the rows or by ``finding(id)``."""
    readable = has(schema, "FindingsView", KEY)
    lookup = has(schema, "Finding", KEY)
    return (_sorts(schema, "LAST_REPORTED_TIME_DESC") and (readable or lookup)) or (
        readable and _sorts(schema, "LAST_REPORTED_TIME_ASC")
    )


@dataclass(frozen=True)
class Newer:
    """How to read newer findings by ``key`` on one server: ``filtered`` (the range filter,
    oldest first) or not (sorted newest first and stopped); ``readable``: the rows carry the key
    (else times come from :func:`times_of`)."""

    key: str
    filtered: bool
    readable: bool

    @property
    def sort(self) -> list[str]:
        if self.key == "id":
            return ["ID_ASC"] if self.filtered else ["ID_DESC"]
        return ["LAST_REPORTED_TIME_ASC", "ID_ASC"] if self.filtered else ["LAST_REPORTED_TIME_DESC"]

    def needed(self) -> str:
        """The fields a walk must select for it."""
        return "id id_int last_reported_time" if self.key != "id" and self.readable else "id id_int"


def _choose(schema: Any, key: str) -> tuple[bool, str | None]:
    """(readable, the capability whose probe decides "filtered", or None: not filtered)."""
    if key == "id":
        return True, _plan.ID_RANGE
    readable = has(schema, "FindingsView", KEY)
    if readable and _sorts(schema, "LAST_REPORTED_TIME_ASC"):
        return readable, _plan.time_range(KEY)
    return readable, None


def newer(client: Any, key: str) -> Newer:
    """The reading for a :class:`~secfindings.Client` (at most one probe, remembered)."""
    readable, capability = _choose(client.schema(), key)
    filtered = capability is not None and _plan.capable(client, capability)
    return Newer(key, filtered, readable)


async def newer_async(client: Any, key: str) -> Newer:
    """:func:`newer` for an :class:`~secfindings.AsyncClient`."""
    readable, capability = _choose(await client.schema(), key)
    filtered = capability is not None and await _plan.capable_async(client, capability)
    return Newer(key, filtered, readable)


def aware(value: Any) -> dt.datetime | None:
    """A finding's time as an aware datetime (None: none, or one that cannot be placed)."""
    if isinstance(value, str):
        return parse_datetime(value) if has_offset(value) else None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else None
    return None


def times_of(found: Iterable[Any]) -> dict[int, dt.datetime | None]:
    """The times of looked-up findings (models or dicts) by integer id."""
    out: dict[int, dt.datetime | None] = {}
    for item in found:
        if item is None:
            continue
        get = item.get if isinstance(item, Mapping) else (lambda name, item=item: getattr(item, name, None))
        ident = get("id_int")
        if ident is not None:
            out[int(ident)] = aware(get(KEY))
    return out
