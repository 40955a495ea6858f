"""The ground floor of the Python package: what the paging, filter, model, schema and client
modules share. It imports nothing of the package but the Rust core (``_native``, which imports
nothing of Python's), so any module may import it.

- did-you-mean suggestions with bounded work, the core's (:func:`suggestions`,
  :func:`did_you_mean`, :func:`listed`);
- ISO 8601 datetimes read by the core's rule (:func:`parse_datetime`, :func:`has_offset`);
- how a JSON value is named in a message (:func:`kind`);
- the field types of a live schema, as models read them (:data:`FieldTypes`);
- a cell of a notebook's HTML table (:func:`html_cell`);
- an optional dependency, or an ImportError naming the extra to install (:func:`need`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import importlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from secfindings import _native

__all__ = [
    "MAX_LISTED",
    "MAX_SUGGESTION_CANDIDATES",
    "FieldTypes",
    "did_you_mean",
    "has_offset",
    "html_cell",
    "kind",
    "listed",
    "need",
    "parse_datetime",
    "poll_briefly",
    "suggestions",
]

#: A live schema's answer to "what is field ``name`` of type ``owner``": its named type and
#: whether it is a leaf, or None where the schema does not know the type or the field
#: (:meth:`secfindings.Schema.field_type`). Models built by a client carry their client's.
FieldTypes = Callable[[str, str], tuple[str, bool] | None]


# ------------------------------------------------------------------------------ async waits


def _spin_seconds() -> float:
    try:
        us = int(os.environ.get("SECFINDINGS_SPIN_US", "50"))
    except ValueError:
        us = 50
    return min(max(us, 0), 10_000) / 1e6


#: How long an async consumer keeps giving the event loop turns, looking for what the I/O
#: thread is about to hand over, before it waits for it: the sync client's spin
#: (``SECFINDINGS_SPIN_US``, default 50 us; 0 waits at once). A wait costs a wake-up of the
#: loop's thread; a thread kept busy takes the result as it lands (benches/events.py: an event
#: in 73 us p50, against 134 us without; an async walk of 1,000 pages 0.114 against 0.135 s).
SPIN_SECONDS = _spin_seconds()


async def poll_briefly(poll: Callable[[], Any], pending: Any) -> Any:
    """``poll()`` again between turns of the running loop (its other tasks run) until it
    returns something other than ``pending`` or :data:`SPIN_SECONDS` have passed; its last
    answer. It takes nothing but what ``poll`` takes, so a cancelled spin loses nothing."""
    deadline = time.perf_counter() + SPIN_SECONDS
    result = pending
    while time.perf_counter() < deadline:
        await asyncio.sleep(0)
        result = poll()
        if result is not pending:
            break
    return result


# ------------------------------------------------------------------------------ suggestions

#: At most this many candidates are compared with a misspelt name (those closest to it in
#: length; the core's bound, src/core/suggest.rs): the candidates may come from a server (an enum
#: of its schema), which must not be able to make a misspelling slow.
MAX_SUGGESTION_CANDIDATES = 1000
#: At most this many valid values are listed in a message.
MAX_LISTED = 30


def suggestions(name: str, choices: Iterable[str], n: int = 3, prefixes: bool = True) -> list[str]:
    """The choices ``name`` was probably meant to be, best first, by the core's rule
    (``src/core/suggest.rs``): one equal but for case; else, with ``prefixes``, the few (at most
    ``n``) that start with it, ignoring case; else the nearest by edit distance among a bounded
    number of candidates. Choices that are not text are passed over."""
    pool = [c for c in choices if isinstance(c, str)]
    return _native.suggestions(name, pool, n, prefixes) if pool else []


def listed(values: Sequence[str], limit: int = MAX_LISTED) -> str:
    """``A, B, C`` for at most ``limit`` values, then how many more there are."""
    shown = ", ".join(str(v) for v in values[:limit])
    return f"{shown}, ... ({len(values) - limit} more)" if len(values) > limit else shown


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of choices (the same but for case first, then the
    only one that starts with it), or an empty string. The work is bounded whatever the number of
    choices (see :data:`MAX_SUGGESTION_CANDIDATES`)."""
    close = suggestions(name, choices, n=1, prefixes=True)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ------------------------------------------------------------------------------ datetimes

# The shape both Python's fromisoformat and the core read alike (a hypothesis test checks it):
# the API's own spelling (milliseconds or microseconds too), read without crossing into Rust.
_CANONICAL = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{3}(?:\d{3})?)?(?:Z|[+-]\d{2}:\d{2})", re.ASCII
)


def parse_datetime(text: str) -> dt.datetime | None:
    """An ISO 8601 datetime, or a date (its midnight), as an aware datetime with the offset
    given (UTC where none is: see :func:`has_offset`); None when the text is none. The core's
    rule (``src/core/scalars.rs``): ``T`` or a space between date and time, seconds and fraction
    optional (cut to microseconds), offsets ``Z``, ``+HH``, ``+HHMM``, ``+HH:MM``, space around
    ignored; no leap second."""
    if _CANONICAL.fullmatch(text):
        try:
            return dt.datetime.fromisoformat(text[:-1] + "+00:00" if text[-1] == "Z" else text)
        except ValueError:
            pass  # not a day of the calendar, an offset of a day or more: the core decides
    try:
        return _native.parse_datetime(text)
    except (ValueError, OverflowError):  # a year Python's datetime cannot hold (0)
        return None


def has_offset(text: str) -> bool:
    """Whether a text :func:`parse_datetime` reads gives its UTC offset (``Z`` or ``+HH...``)
    rather than being taken as UTC. Only meaningful for a text it reads."""
    text = text.strip()
    return text[-1:] in ("Z", "z") or "+" in text[10:] or "-" in text[10:]


# ------------------------------------------------------------------------------ values


def kind(value: Any) -> str:
    """What a JSON value is, for messages: ``a string``, ``an object``, ..."""
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "null" if value is None else f"a {type(value).__name__}"


def html_cell(v: Any, width: int = 60) -> str:
    """A value as the escaped text of an HTML table cell, cut to ``width`` characters."""
    if isinstance(v, (dict, list)):
        text = json.dumps(v, default=str, ensure_ascii=False, separators=(",", ":"))
    elif hasattr(v, "to_dict"):
        text = json.dumps(v.to_dict(), default=str, ensure_ascii=False)
    else:
        text = "" if v is None else str(v)
    if len(text) > width:
        text = text[: width - 1] + "\u2026"
    return html.escape(text)


def need(module: str, extra: str, what: str) -> Any:
    """An optional dependency, or an ImportError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        top = module.split(".")[0]
        raise ImportError(f"{what} needs {top}: pip install 'secfindings[{extra}]'") from exc
