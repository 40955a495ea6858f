"""``watch()``: a live feed of new and changed findings by polling, for servers without
subscriptions. What a watch does is written once, in :class:`_WatchBase`; :class:`Watch` and
:class:`AsyncWatch` only walk and wait, one blocking and one awaiting."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from secfindings import _newer
from secfindings._native import catalog, poll_backoff
from secfindings._shared import has_offset, parse_datetime
from secfindings.errors import RateLimitError, ValidationError
from secfindings.filters import Filter, Tree, all_of, field, filter_tree

log = logging.getLogger("secfindings.watch")

if TYPE_CHECKING:
    from secfindings._pages import Page
    from secfindings._schema import Schema

__all__ = ["AsyncWatch", "Watch", "watch_key"]

T = TypeVar("T")

_WATCH_KEYS = {"last_reported_time": "LAST_REPORTED_TIME_ASC", "id": "ID_ASC"}


def watch_key(schema: Schema | None) -> str:
    """``last_reported_time`` when the server can give the findings newer than a time (sorted by
    it, the time on the rows or by ``finding(id)``; or when the schema is not known), else
    ``id`` (see :mod:`secfindings._newer`)."""
    return "last_reported_time" if _newer.by_time(schema) else "id"


#: How far past this machine's clock a finding's time may be and still be watched: one further
#: ahead (a scanner's year 9999) would hold the watermark there and hide every later finding.
FUTURE_MARGIN = dt.timedelta(hours=1)


#: Between a time watermark and the findings already handed out at that time.
_TIE = ";"


def _ident(item: Any) -> Any:
    """What tells findings apart at a tie: the integer id, else the global id."""
    ident = getattr(item, "id_int", None)
    return ident if ident is not None else getattr(item, "id", None)


def _placed(value: Any) -> dt.datetime | None:
    """A finding's time as a watch can place it: aware, and not past the clock's margin (else
    None: not watched)."""
    when = _newer.aware(value)
    if when is None or when > dt.datetime.now(dt.timezone.utc) + FUTURE_MARGIN:
        return None
    return when


def _order(pair: tuple[Any, Any]) -> tuple[Any, int]:
    return pair[0], int(getattr(pair[1], "id_int", None) or 0)


def _tie_text(ids: set[Any]) -> str:
    """The ids as text a user can store: integers as sorted runs (``3-7,9``), others as they are."""
    runs: list[list[int]] = []
    for i in sorted(i for i in ids if isinstance(i, int)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    parts.extend(sorted(str(i) for i in ids if not isinstance(i, int)))
    return ",".join(parts)


def _tie_ids(text: str, given: Any) -> set[Any]:
    """:func:`_tie_text` read back."""
    out: set[Any] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        low, dash, high = part.partition("-")
        if _number(low) and (not dash or _number(high)):
            first, last = int(low), int(high) if dash else int(low)
            if last < first or len(out) + (last - first) >= _MAX_TIE_IDS:
                raise ValidationError(
                    "the watermark's ids are not a run of ids "
                    f"({_MAX_TIE_IDS:,} at most in all): {part[:40]!r}"
                )
            out.update(range(first, last + 1))
        elif len(out) < _MAX_TIE_IDS:
            out.add(part)
        else:
            raise ValidationError(f"the watermark names more than {_MAX_TIE_IDS:,} findings")
    return out


#: The most findings a watermark names at its instant (about 70 MB as a set).
_MAX_TIE_IDS = 1_000_000


def _number(text: str) -> bool:
    """ASCII digits that fit an id (``²`` is a digit to ``str.isdigit``, not to ``int``)."""
    return 0 < len(text) <= 19 and text.isascii() and text.isdigit()


class _WatchState:
    """The watermark of a watch: the highest key seen (a finding's ``last_reported_time`` or its
    integer id) and which findings were already yielded at exactly that key (their ``id_int``,
    else their ``id``)."""

    def __init__(self, by: str, watermark: str | int | None) -> None:
        if by not in _WATCH_KEYS:
            raise ValidationError(f"by must be one of {sorted(_WATCH_KEYS)}, got {by!r}")
        self.by = by
        self.key: Any = None
        self.ids: set[Any] = set()
        #: The server was seen not to sort newest first as asked (see ``collect``).
        self.unsorted = False
        if watermark is not None:
            self.key = self._parse(watermark)

    def _parse(self, value: Any) -> Any:
        if self.by == "id":
            if isinstance(value, str) and _number(value.strip()):
                return int(value)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValidationError(f"a watermark by id is an int, got {repr(value)[:60]}")
            return value
        if isinstance(value, dt.datetime):
            parsed = value
        else:
            text, _, tie = str(value).partition(_TIE)
            read = parse_datetime(text)
            if read is None:
                raise ValidationError(f"the watermark is not an ISO 8601 datetime: {value!r}")
            # Taken as UTC by the parser, but a watermark must say which instant it means.
            parsed = read if has_offset(text) else read.replace(tzinfo=None)
            self.ids = _tie_ids(tie, value)
        if parsed.tzinfo is None:
            raise ValidationError("the watermark needs a timezone (e.g. 2026-01-01T00:00:00+00:00)")
        return parsed

    @property
    def value(self) -> str | int | None:
        """The watermark to keep across restarts (pass it back as ``watermark=``): by time, the
        ISO 8601 time and, after ``;``, the findings already handed out at exactly that time,
        so that a restart hands none of them out again."""
        if self.key is None:
            return None
        if self.by == "id":
            return int(self.key)
        text = str(self.key.isoformat())
        return f"{text}{_TIE}{_tie_text(self.ids)}" if self.ids else text

    def own_keys(self, items: list[Any], newer: _newer.Newer) -> list[Any] | None:
        """The keys of items read off them (None: their times must be looked up)."""
        if self.by == "id":
            return [getattr(i, "id_int", None) for i in items]
        if not newer.readable:
            return None
        return [_placed(getattr(i, "last_reported_time", None)) for i in items]

    def begin(self, pairs: Iterable[tuple[Any, Any]]) -> bool:
        """Takes (item, key) pairs of the newest-first walk that starts a watch from now: the
        newest key and every finding at it count as seen. False when the walk has passed them."""
        page = [(item, key) for item, key in pairs if key is not None]  # no key: not watchable
        self._check_order([key for _, key in page], self.key)
        for item, key in page:
            if self.key is None or key > self.key:
                self.key, self.ids = key, {_ident(item)}
            elif key == self.key:
                self.ids.add(_ident(item))
            elif not self.unsorted:
                return False
        return True

    def _check_order(self, keys: list[Any], before: Any) -> None:
        """Newest first means no key newer than the one before it (``before``: the last key of
        the walk's previous page); the first that is turns the early stop off."""
        for key in keys:
            if before is not None and key > before and not self.unsorted:
                self._disorder()
            before = key

    def _disorder(self) -> None:
        self.unsorted = True
        log.warning(
            "watch: the server does not answer newest first as asked (a %s newer than the one "
            "before it); every poll now reads the whole walk",
            self.by,
        )

    def seen(self, item: Any, key: Any) -> bool:
        """Whether the item is behind the watermark or was yielded already at it (or has no key,
        which a watch cannot place); else it moves the watermark and counts as yielded."""
        if key is None:
            return True
        ident = _ident(item)
        if self.key is not None and key < self.key:
            return True
        if self.key is not None and key == self.key:
            if ident in self.ids:
                return True
            self.ids.add(ident)
            return False
        self.key, self.ids = key, {ident}
        return False

    def collect(self, pairs: Iterable[tuple[Any, Any]], out: list[tuple[Any, Any]]) -> bool:
        """Takes (item, key) pairs of a newest-first poll (a page) into ``out`` (key, item); True
        once the walk is past the watermark (everything after is older). The page is checked
        first: where a key is newer than one before it, the server does not sort as asked, and
        from then on every poll reads the whole walk (one WARNING), or it would stop early and
        miss what is new."""
        page = [(item, key) for item, key in pairs if key is not None]
        self._check_order([key for _, key in page], out[-1][0] if out else None)
        for item, key in page:
            past = self.key is not None and (key < self.key or (self.by == "id" and key == self.key))
            if past and not self.unsorted:
                return True
            if not past:
                out.append((key, item))
        return False

    def arguments(
        self, base: dict[str, Any], newer: _newer.Newer, newest_first: bool = False
    ) -> dict[str, Any]:
        """The walk's arguments: oldest first with the watermark ANDed into its filters where
        the server honours the range (``newer.filtered``), else newest first (it stops at the
        watermark)."""
        args = dict(base)
        parts: list[Any] = []
        user = args.pop("filters", None)
        config = dict(args.get("filters_config") or {})
        text = config.pop("filtersjson", None)
        for part in (user, text):
            if part is None:
                continue
            parts.append(part if isinstance(part, Filter) else Tree(filter_tree(part)))
        ascending = newer.filtered and not newest_first
        if self.key is not None and ascending:
            # Ids are unique: past the watermark exactly. Times tie: from it, and the ids seen
            # at it are skipped.
            if self.by == "id":
                parts.append(field("id").gte(int(self.key) + 1))
            else:
                parts.append(field("last_reported_time").gte(self.key.isoformat()))
        args["filters"] = all_of(*parts) if len(parts) > 1 else (parts[0] if parts else None)
        args["filters_config"] = config or None
        order = _WATCH_KEYS[self.by]
        args["sort"] = order if ascending else order.replace("_ASC", "_DESC")
        # The fields the key needs, and no more: a server may lack last_reported_time.
        needed = "id id_int last_reported_time" if self.by != "id" and newer.readable else "id id_int"
        fields = args.get("fields")
        if fields is not None:
            text_fields = fields if isinstance(fields, str) else " ".join(fields)
            if text_fields.strip() not in ("*", "analyst"):
                args["fields"] = f"{text_fields} {needed}"
        elif self.by != "id":
            default = next(op["selection"] for op in catalog() if op["name"] == "findings_view")
            args["fields"] = f"{default} {needed}"
        return args


def _backoff(exc: BaseException, failures: int, interval: float) -> float:
    """How long a watch waits after its ``failures``-th 429 in a row: the core's rule (what the
    server asks, never less than the polling interval or a backoff that doubles with each
    failure, so it cannot spin)."""
    retry_after = getattr(exc, "retry_after", None)
    asked = float(retry_after) if isinstance(retry_after, (int, float)) and retry_after > 0 else None
    return poll_backoff(failures, asked, interval)


_WATCH_DOC = """A live feed of findings by polling (for servers without subscriptions).

    Every ``interval`` seconds it walks the findings past the watermark (their
    ``last_reported_time``, or their id with ``by="id"``), oldest first, and yields each finding
    once per key: with ``last_reported_time``, new findings and findings reported again (a
    scanner saw them again; a status change alone does not move it); with ``by="id"``, new
    findings only. Within a poll it goes on from the moved watermark rather than from a page
    cursor, so findings that move while it walks are not skipped. ``watermark`` is where it
    stands: keep it (a str, or an int by id) and pass it back as ``watermark=`` after a restart
    to go on exactly from there: by time it holds the time and the findings already handed out
    at that instant (``2026-01-01T00:04:00+00:00;3-4,9``), so none comes twice; a plain time
    means "from that instant on".
    Without one it starts, at the first iteration, from the newest finding then. Findings
    without the key, or with a time more than an hour past this machine's clock, are not
    watched. Where no probe showed that the server honours a range filter on the key, each
    poll reads newest first and stops at the watermark (the times looked up by ``finding(id)``
    where the rows lack them), and still yields oldest first. A 429 makes it wait as the
    server asks (at least ``interval``, and longer with each 429 in a row); other errors are
    raised. ``max_polls`` bounds the polls (tests, batch jobs).
    """


class _WatchBase(Generic[T]):
    """What the sync and async watches share: their settings, their state, which items of a page
    are new, and how long to wait between polls."""

    def __init__(
        self,
        method: Callable[..., Any],
        args: dict[str, Any],
        *,
        interval: float,
        watermark: str | int | None,
        by: str,
        max_polls: int | None,
    ) -> None:
        if not (interval >= 0):
            raise ValidationError(f"interval must be >= 0 seconds, got {interval!r}")
        self._method, self._args = method, args
        self._state = _WatchState(by, watermark)
        self._interval = float(interval)
        self._max_polls = max_polls
        self.polls = 0
        self._started = watermark is not None
        self._failures = 0  # 429s in a row
        self._restart = False
        #: How this server reads newer findings (decided at the first poll: one probe at most).
        self._newer: _newer.Newer | None = None

    @property
    def watermark(self) -> str | int | None:
        """Where the watch stands: keep it, and ``watch(watermark=...)`` goes on from there
        (an id with ``by="id"``, an ISO 8601 time with ``by="last_reported_time"``)."""
        return self._state.value

    def _more(self) -> bool:
        return self._max_polls is None or self.polls < self._max_polls

    @property
    def _client(self) -> Any:
        return getattr(self._method, "__self__", None)

    @property
    def _key_name(self) -> str:
        return "id" if self._state.by == "id" else _newer.KEY

    def _walk(self, newest_first: bool = False) -> Any:
        """A paginator over the findings past the watermark (newest first: where "now" is)."""
        assert self._newer is not None
        return self._method(**self._state.arguments(self._args, self._newer, newest_first=newest_first))

    def _looked_up(self, items: list[Any], found: Any) -> list[Any]:
        times = _newer.times_of(found)
        return [
            _placed(times.get(int(i.id_int))) if getattr(i, "id_int", None) is not None else None
            for i in items
        ]

    @staticmethod
    def _ids(items: list[Any]) -> list[int]:
        return [int(i.id_int) for i in items if getattr(i, "id_int", None) is not None]

    def _new(self, page: Page[T], keys: list[Any]) -> Iterator[T]:
        """The items of a page not yielded before, each counted as yielded when handed out. At
        the end, ``_restart`` says whether the poll goes on from the moved watermark rather than
        from the page's cursor (findings that move while it walks are not skipped)."""
        moved = False
        for item, key in zip(page.items, keys, strict=True):
            if not self._state.seen(item, key):
                moved = True
                yield item
        self._restart = moved and page.page_info.has_next_page

    def _fresh(self, found: list[tuple[Any, Any]]) -> Iterator[T]:
        """What a newest-first poll collected, oldest first, each not yielded before."""
        for key, item in sorted(found, key=_order):
            if not self._state.seen(item, key):
                yield item

    def _pause(self, throttled: RateLimitError | None) -> float | None:
        """After a poll (or a 429): counts it; the seconds to wait before the next, None when no
        poll follows."""
        self.polls += 1
        if throttled is not None:
            self._failures += 1
            return _backoff(throttled, self._failures, self._interval)
        self._failures = 0
        return self._interval if self._more() else None


class Watch(_WatchBase[T]):
    __doc__ = _WATCH_DOC

    def _decide(self) -> None:
        if self._newer is None:
            client = self._client
            self._newer = (
                _newer.Newer(self._key_name, True, True)
                if client is None
                else _newer.newer(client, self._key_name)
            )

    def _keys(self, items: list[Any]) -> list[Any]:
        assert self._newer is not None
        keys = self._state.own_keys(items, self._newer)
        if keys is None:
            ids = self._ids(items)
            keys = self._looked_up(items, self._client.findings(ids, fields=_newer.TIMES) if ids else [])
        return keys

    def _start(self) -> None:
        for page in self._walk(newest_first=True).pages():
            if not self._state.begin(zip(page.items, self._keys(page.items), strict=True)):
                break

    def _poll(self) -> Iterator[T]:
        assert self._newer is not None
        if not self._newer.filtered:
            found: list[tuple[Any, Any]] = []
            for page in self._walk().pages():
                if self._state.collect(zip(page.items, self._keys(page.items), strict=True), found):
                    break
            yield from self._fresh(found)
            return
        while True:
            self._restart = False
            for page in self._walk().pages():
                yield from self._new(page, self._keys(page.items))
                if self._restart:
                    break
            if not self._restart:
                return

    def __iter__(self) -> Iterator[T]:
        while self._more():
            try:
                self._decide()
                if not self._started:
                    self._start()
                    self._started = True
                yield from self._poll()
            except RateLimitError as exc:
                wait = self._pause(exc)
            else:
                wait = self._pause(None)
            if wait is not None:
                time.sleep(wait)


class AsyncWatch(_WatchBase[T]):
    __doc__ = "The asyncio twin of :class:`Watch` (``async for``).\n\n    " + _WATCH_DOC

    async def _decide(self) -> None:
        if self._newer is None:
            client = self._client
            self._newer = (
                _newer.Newer(self._key_name, True, True)
                if client is None
                else await _newer.newer_async(client, self._key_name)
            )

    async def _keys(self, items: list[Any]) -> list[Any]:
        assert self._newer is not None
        keys = self._state.own_keys(items, self._newer)
        if keys is None:
            ids = self._ids(items)
            keys = self._looked_up(
                items, await self._client.findings(ids, fields=_newer.TIMES) if ids else []
            )
        return keys

    async def _start(self) -> None:
        async for page in self._walk(newest_first=True).pages():
            if not self._state.begin(zip(page.items, await self._keys(page.items), strict=True)):
                break

    async def _poll(self) -> AsyncIterator[T]:
        assert self._newer is not None
        if not self._newer.filtered:
            found: list[tuple[Any, Any]] = []
            async for page in self._walk().pages():
                if self._state.collect(zip(page.items, await self._keys(page.items), strict=True), found):
                    break
            for item in self._fresh(found):
                yield item
            return
        while True:
            self._restart = False
            async for page in self._walk().pages():
                for item in self._new(page, await self._keys(page.items)):
                    yield item
                if self._restart:
                    break
            if not self._restart:
                return

    async def __aiter__(self) -> AsyncIterator[T]:
        while self._more():
            try:
                await self._decide()
                if not self._started:
                    await self._start()
                    self._started = True
                async for item in self._poll():
                    yield item
            except RateLimitError as exc:
                wait = self._pause(exc)
            else:
                wait = self._pause(None)
            if wait is not None:
                await asyncio.sleep(wait)
