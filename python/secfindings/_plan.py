"""The walk plan: one object that says what a findings walk reads (:class:`Walk`), and a planner
that picks how to read it from what the server offers, instead of every feature guessing.

What a server offers is read from two places. The live schema the client introspected says
whether the connection has ``total_count``, whether ``findings_view`` takes ``offset`` and which
sort values exist. Everything else is a **probe**: one small request (``first: 1``) per server
and capability, asked the first time a strategy needs it and remembered per server (base URL and
schema hash) in memory and on disk beside the schema cache (``<hash>.probes.json`` in
:func:`secfindings._schema.cache_dir`, read with the schema cache's care and trusted as long).
A refusal (a GraphQL error, a 4xx other than 429, the live schema's own check) or an answer that
shows the server ignored what was asked selects the fallback: it is never an error the user
sees. A 429, a 5xx or the network are raised as they are (and the probe is asked again later).

Capabilities (:func:`capable`, :func:`capable_async`):

- :data:`ID_RANGE`: ``gte`` / ``lte`` on ``id`` are accepted and honoured (a probe for ids above
  any real one must come back empty).
- :data:`OFFSET`: ``offset`` skips rows (graphene-django's ``DjangoConnectionField``): the row at
  offset 1 is the second row of the same walk.
- :data:`TOTAL_COUNT`: the connection has ``total_count`` (read off the schema; probed only when
  the client has none).
- :func:`time_range` ``(key)``: ``gte`` on a time field (``last_reported_time``) is accepted and
  honoured (a probe for a date in year 9999 must come back empty).

The strategies that use them:

- **partitions** (:func:`split_steps`; :mod:`secfindings._partitions`, ``secfindings.dask``, and
  ``estimate(partitions=N)``, which hands its split to the walk that follows): ``id_ranges`` where
  :data:`ID_RANGE` holds; else ``offset_slices`` where :data:`OFFSET` holds (the rows counted,
  each slice starting after the cursor of the row before it, found by ``first: 1`` probes at
  those offsets, all in one request, and reading a fixed number of rows); else ``sequential``,
  one walk, with one WARNING line (with ``client.pages_per_request`` set, the parts of
  ``to_arrow`` / ``to_list(partitions=N)`` go in aliased page batches where
  :mod:`secfindings._batched` allows, offset slices from their offset). Every slice also
  knows the id interval its rows must lie in: rows outside it are dropped, so a server that
  ignores a filter, strays past a range or shifts a slice cannot make a row appear twice.
- **count** (:func:`count_steps`, used by ``estimate()``): ``total_count`` where offered; else
  ``first: 1`` probes by offset (a ladder of offsets, then a search 16 ways a request, the
  offsets of a request as aliased fields of one document), their requests and time reported on
  the estimate.
- **newer than a watermark** (:func:`newer_than`, :func:`newer_than_async`): for ``watch()`` and
  the incremental sync (which other modules own). It returns a :class:`NewerThan`:

      plan = newer_than(Walk.of(pager), "last_reported_time", watermark, lookback)
      # the walk to make: sorted by the key descending where the schema sorts by it, the range
      # filter only where a probe showed the server honours it
      for row in plan.paginator(fields="id_int last_reported_time"):
          if plan.past(row.last_reported_time):   # sorted: everything after is older
              break
          if plan.keep(row.last_reported_time):   # at or after watermark - lookback
              ...

  ``plan.sorted`` / ``plan.filtered`` say what the server does for it; ``plan.readable`` whether
  the key is a field of the rows at all (not on a facts-only server's FindingsView for
  ``last_reported_time``: then the caller must choose another key).

Adding a strategy: a generator of requests here (``Steps``: it yields ``(document, variables,
operation name)`` and is sent each answer's ``data`` or thrown its error), driven by
:func:`drive` (sync) or :func:`drive_async` (async) so one text serves both clients; a
capability it needs gets a name and a probe in :data:`_PROBES`. The feature module then asks
the plan, never the paginator's private state.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import logging
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from secfindings import _native
from secfindings._probes import forget, known, remember
from secfindings._shared import parse_datetime
from secfindings.errors import (
    APIStatusError,
    GraphQLError,
    RateLimitError,
    TransportError,
    ValidationError,
)
from secfindings.filters import Filter, Tree, _as_global_id, all_of, filter_tree
from secfindings.filters import field as filter_field

__all__ = [
    "ID_RANGE",
    "OFFSET",
    "TOTAL_COUNT",
    "Bounds",
    "Counted",
    "NewerThan",
    "Slice",
    "Split",
    "Walk",
    "capable",
    "capable_async",
    "count_steps",
    "drive",
    "drive_async",
    "forget",
    "newer_than",
    "newer_than_async",
    "remember",
    "time_range",
]

log = logging.getLogger("secfindings.plan")

ID_RANGE = "id_range"
OFFSET = "offset"
TOTAL_COUNT = "total_count"

#: An id no finding has: a range filter from here up must select nothing.
_NO_ID = 2_147_483_647
#: A time no finding has.
_NO_TIME = "9999-12-31T00:00:00+00:00"
#: A time every finding is after.
_EPOCH = "1970-01-01T00:00:00+00:00"

T = TypeVar("T")
#: One request: the document, its variables and the operation's name.
Ask = tuple[str, dict[str, Any] | None, str]
#: A plan's requests as a generator: yields what to ask, is sent the answer's ``data`` (or
#: thrown its error), returns what it found.
Steps = Generator[Ask, Any, T]


# ---------------------------------------------------------------------------------- the walk


@dataclass(frozen=True)
class Walk:
    """A findings walk as the user declared it: the client, the operation, its arguments
    (``filters``, ``filters_config``, ``sort``, ``page_size``) and the selection."""

    client: Any
    operation: str
    args: Mapping[str, Any]
    selection: Any = None

    @classmethod
    def of(cls, pager: Any) -> Walk:
        """The walk a paginator was made for (a typed ``findings_view(...)``); a
        ValidationError for one that cannot be made again (``execute``/``paginate``)."""
        replay = getattr(pager, "_replay", None)
        if replay is None:
            raise ValidationError("only findings_view(...) paginators can be planned")
        method, args = replay
        return cls(getattr(method, "__self__", None), method.__name__, dict(args), args.get("fields"))

    def method(self) -> Callable[..., Any]:
        made: Callable[..., Any] = getattr(self.client, self.operation)
        return made

    def user_filter(self) -> Filter | None:
        """The walk's own filters (``filters=`` and ``filters_config.filtersjson``) as one."""
        config = self.args.get("filters_config") or {}
        given = [self.args.get("filters"), config.get("filtersjson")]
        found = [f if isinstance(f, Filter) else Tree(filter_tree(f)) for f in given if f is not None]
        if not found:
            return None
        return all_of(*found) if len(found) > 1 else found[0]

    def paginator(
        self,
        *,
        extra: Filter | None = None,
        sort: Any = "unchanged",
        after: str | None = None,
        limit: int | None = None,
        fields: Any = "unchanged",
    ) -> Any:
        """A paginator of this walk, with ``extra`` ANDed into its filters and other changes."""
        args = dict(self.args)
        config = dict(args.pop("filters_config", None) or {})
        config.pop("filtersjson", None)
        args.pop("filters", None)
        own = self.user_filter()
        both = [f for f in (own, extra) if f is not None]
        args["filters"] = (all_of(*both) if len(both) > 1 else both[0]) if both else None
        args["filters_config"] = config or None
        if sort != "unchanged":
            args["sort"] = sort
        if fields != "unchanged":
            args["fields"] = fields
        return self.method()(**args, after=after, limit=limit)

    def variables(self) -> dict[str, Any]:
        """The walk's ``filters_config`` as the typed method sends it (``filtersjson`` text)."""
        return filter_variables(self.args.get("filters_config"), self.args.get("filters"))


def filter_variables(
    filters_config: Mapping[str, Any] | None, filters: Filter | Mapping[str, Any] | None
) -> dict[str, Any]:
    """The filters as the typed method sends them (the core serializes ``filtersjson``)."""
    config = dict(filters_config or {})
    if filters is not None:
        if config.get("filtersjson") is not None:
            raise ValidationError("pass either filters= or filters_config['filtersjson'], not both")
        config["filtersjson"] = filter_tree(filters)
    if not config:
        return {}
    return _native.prepare_operation("findings_view", {"filters_config": config}, "id_int").variables


# ---------------------------------------------------------------------------------- drivers


@dataclass
class Cost:
    """What a plan's requests cost: how many, their time (seconds, summed), and each request's
    operation name and time."""

    requests: int = 0
    seconds: float = 0.0
    log: list[tuple[str, float]] = field(default_factory=list)

    def took(self, name: str, seconds: float) -> None:
        self.requests += 1
        self.seconds += seconds
        self.log.append((name, seconds))

    def of(self, name: str) -> tuple[int, float]:
        """How many requests named ``name`` were made, and their time."""
        times = [t for n, t in self.log if n == name]
        return len(times), sum(times)


def drive(client: Any, steps: Steps[T], cost: Cost | None = None) -> T:
    """Runs a plan's requests with a :class:`~secfindings.Client`."""
    cost = cost if cost is not None else Cost()
    try:
        ask = next(steps)
        while True:
            started = time.perf_counter()
            try:
                data = client.execute(*ask)
            except Exception as exc:
                cost.took(ask[2], time.perf_counter() - started)
                ask = steps.throw(exc)
            else:
                cost.took(ask[2], time.perf_counter() - started)
                ask = steps.send(data)
    except StopIteration as done:
        value: T = done.value
        return value


async def drive_async(client: Any, steps: Steps[T], cost: Cost | None = None) -> T:
    """:func:`drive` with an :class:`~secfindings.AsyncClient`."""
    cost = cost if cost is not None else Cost()
    try:
        ask = next(steps)
        while True:
            started = time.perf_counter()
            try:
                data = await client.execute(*ask)
            except Exception as exc:
                cost.took(ask[2], time.perf_counter() - started)
                ask = steps.throw(exc)
            else:
                cost.took(ask[2], time.perf_counter() - started)
                ask = steps.send(data)
    except StopIteration as done:
        value: T = done.value
        return value


def refused(error: BaseException) -> bool:
    """Whether a probe's failure means "the server does not do this" (a fallback is chosen)
    rather than a failure any request would meet (raised)."""
    if isinstance(error, (GraphQLError, ValidationError)):
        return True
    status = getattr(error, "status_code", None)
    return (
        isinstance(error, APIStatusError)
        and not isinstance(error, RateLimitError)
        and isinstance(status, int)
        and 400 <= status < 500
        and status not in (401, 403)
    )


# ---------------------------------------------------------------------------------- the schema


def _arguments(schema: Any, operation: str = "findings_view") -> list[str] | None:
    """The arguments of a query field in the schema (None: no schema to say)."""
    if schema is None:
        return None
    try:
        query = schema.graphql_schema.query_type
        found = query.fields.get(operation) if query is not None else None
    except Exception:
        return None
    return None if found is None else list(found.args)


def sorts(schema: Any) -> list[str] | None:
    """The sort values of findings_view (None: no schema to say)."""
    return None if schema is None else schema.enum_values("FindingsViewSortEnum")


def node_fields(schema: Any) -> list[str] | None:
    return None if schema is None else schema.fields("FindingsView")


def id_sort(schema: Any, descending: bool = False) -> str | None:
    """The id order to walk slices in: ``ID_ASC`` / ``ID_DESC`` where the schema has it (or says
    nothing), else None (the server's own order)."""
    value = "ID_DESC" if descending else "ID_ASC"
    values = sorts(schema)
    return value if values is None or value in values else None


def _sort_arg(schema: Any, value: str) -> str:
    """``sort: [VALUE]`` where the schema has it (or says nothing), else nothing."""
    values = sorts(schema)
    return f", sort: [{value}]" if values is None or value in values else ""


# ---------------------------------------------------------------------------------- probes


def _edges(data: Any, alias: str) -> list[Mapping[str, Any]]:
    conn = data.get(alias) if isinstance(data, Mapping) else None
    edges = conn.get("edges") if isinstance(conn, Mapping) else None
    if not isinstance(edges, list):
        raise TransportError(f"the server's answer to a probe has no edges at {alias!r}")
    return [e for e in edges if isinstance(e, Mapping)]


def _id_of(edge: Mapping[str, Any]) -> int:
    node = edge.get("node")
    value = node.get("id_int") if isinstance(node, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TransportError(f"the server answered a finding id that is not an integer: {str(value)[:40]!r}")
    return value


def _filtered(*leaves: tuple[str, Mapping[str, Any]]) -> tuple[str, dict[str, Any]]:
    """Aliased ``first: 1`` fields of findings, one per (alias, filter leaf), and their
    variables."""
    declared = ", ".join(f"${alias}: FiltersConfigInput" for alias, _ in leaves)
    fields = "".join(
        f" {alias}: findings_view(filters_config: ${alias}, first: 1) {{ edges {{ node {{ id_int }} }} }}"
        for alias, _ in leaves
    )
    variables = {alias: {"filtersjson": json.dumps(tree, separators=(",", ":"))} for alias, tree in leaves}
    return f"({declared}) {{{fields} }}", variables


_ANY = " any: findings_view(first: 1) { edges { node { id_int } } }"


def _held(data: Any, empty: tuple[str, ...], full: tuple[str, ...]) -> bool:
    """A range filter is honoured when the ranges no finding is in come back empty and, where
    there are findings at all (``any``), the ranges every finding is in do not: a server that
    answers an unknown condition with nothing must not pass for one that filters."""
    if any(_edges(data, alias) for alias in empty):
        return False
    return not _edges(data, "any") or all(_edges(data, alias) for alias in full)


def _probe_id_range(schema: Any) -> Steps[bool]:
    body, variables = _filtered(
        ("above", {"field": "id", "condition": "gte", "value": _NO_ID}),
        ("below", {"field": "id", "condition": "lte", "value": -1}),
        ("from", {"field": "id", "condition": "gte", "value": 0}),
        ("to", {"field": "id", "condition": "lte", "value": _NO_ID - 1}),
    )
    data = yield f"query probe_id_range{body[:-1]}{_ANY} }}", variables, "probe_id_range"
    return _held(data, ("above", "below"), ("from", "to"))


def _probe_offset(schema: Any) -> Steps[bool]:
    args = _arguments(schema)
    if args is not None and "offset" not in args:
        return False
    sort = _sort_arg(schema, "ID_ASC")
    doc = (
        "query probe_offset {"
        f" two: findings_view(first: 2{sort}) {{ edges {{ node {{ id_int }} }} }}"
        f" second: findings_view(first: 1, offset: 1{sort}) {{ edges {{ node {{ id_int }} }} }}"
        " }"
    )
    data = yield doc, None, "probe_offset"
    two, second = _edges(data, "two"), _edges(data, "second")
    if len(two) < 2:
        return not second
    return len(second) == 1 and _id_of(second[0]) == _id_of(two[1]) and _id_of(two[0]) != _id_of(two[1])


def offset_capability(operation: str) -> str:
    """The capability name of ``offset`` (with aliases and ``sort: [ID_ASC]``) on the connection
    ``operation``: :data:`OFFSET` for ``findings_view`` (shared with partitions and estimates),
    ``offset:NAME`` for another (aliased page batches, :mod:`secfindings._batched`)."""
    return OFFSET if operation == "findings_view" else f"offset:{operation}"


def _sort_values(schema: Any, operation: str) -> list[str] | None:
    """The values of the enum of ``operation``'s ``sort`` argument (None: no schema to say)."""
    if schema is None:
        return None
    try:
        query = schema.graphql_schema.query_type
        arg = query.fields[operation].args.get("sort") if query is not None else None
        named: Any = None if arg is None else arg.type
        while hasattr(named, "of_type"):  # [Enum!]! -> Enum
            named = named.of_type
        values = getattr(named, "values", None)
    except Exception:
        return None
    return [] if values is None else list(values)


def _key_of(edge: Mapping[str, Any]) -> int | None:
    """The integer pk of an edge's node's global ``id`` (None: no id, or not one of an integer)."""
    node = edge.get("node")
    found = _as_global_id(node.get("id")) if isinstance(node, Mapping) else None
    return None if found is None else found[1]


def _probe_connection_offset(operation: str) -> Callable[[Any], Steps[bool]]:
    """The offset probe of another connection than findings_view: it takes ``offset`` and
    ``sort: [ID_ASC]`` on aliased fields (the row at offset 1 is the second of the same walk),
    and its rows' global ids hold integer keys in ascending order (what a batched walk orders
    and checks rows by)."""

    def probe(schema: Any) -> Steps[bool]:
        if not operation.isidentifier():
            return False
        args = _arguments(schema, operation)
        if args is not None and not {"offset", "sort"} <= set(args):
            return False
        values = _sort_values(schema, operation)
        if values is not None and "ID_ASC" not in values:
            return False
        rows = "{ edges { node { id } } }"
        name = f"probe_offset_{operation}"
        doc = (
            f"query {name} {{ two: {operation}(first: 2, sort: [ID_ASC]) {rows}"
            f" second: {operation}(first: 1, offset: 1, sort: [ID_ASC]) {rows} }}"
        )
        data = yield doc, None, name
        two = [_key_of(e) for e in _edges(data, "two")]
        after = [_key_of(e) for e in _edges(data, "second")]
        if None in two or None in after:
            return False
        if len(two) < 2:
            return not after
        return after == [two[1]] and two[0] < two[1]  # type: ignore[operator]

    return probe


def _probe_total(schema: Any) -> Steps[bool]:
    if schema is not None:
        return TOTAL_COUNT in schema.fields("FindingConnection")
    data = yield (
        "query probe_total_count { findings_view(first: 1) { total_count } }",
        None,
        "probe_total_count",
    )
    conn = data.get("findings_view") if isinstance(data, Mapping) else None
    return isinstance(conn, Mapping) and TOTAL_COUNT in conn


def _probe_time_range(key: str) -> Callable[[Any], Steps[bool]]:
    def probe(schema: Any) -> Steps[bool]:
        body, variables = _filtered(
            ("above", {"field": key, "condition": "gte", "value": _NO_TIME}),
            ("since", {"field": key, "condition": "gte", "value": _EPOCH}),
        )
        data = yield f"query probe_time_range{body[:-1]}{_ANY} }}", variables, "probe_time_range"
        return _held(data, ("above",), ("since",))

    return probe


def time_range(key: str) -> str:
    """The capability name of a ``gte`` filter on the time field ``key``."""
    return f"range:{key}"


_PROBES: dict[str, Callable[[Any], Steps[bool]]] = {
    ID_RANGE: _probe_id_range,
    OFFSET: _probe_offset,
    TOTAL_COUNT: _probe_total,
}


def _probe_of(name: str) -> Callable[[Any], Steps[bool]]:
    if name.startswith("offset:"):
        return _probe_connection_offset(name.split(":", 1)[1])
    if name.startswith("range:"):
        return _probe_time_range(name.split(":", 1)[1])
    return _PROBES[name]


def capability_steps(base_url: str, schema: Any, name: str) -> Steps[bool]:
    """Whether the server at ``base_url`` has capability ``name``: remembered, read off the
    schema, or probed (one request) and remembered."""
    held = known(base_url, schema, name)
    if held is not None:
        return held
    try:
        held = yield from _probe_of(name)(schema)
    except Exception as exc:
        if not refused(exc):
            raise
        log.debug(
            "probe %s at %s refused: %s", name, base_url, str(exc).splitlines()[0][:200] if str(exc) else ""
        )
        held = False
    remember(base_url, schema, name, held)
    return held


def capable(client: Any, name: str, cost: Cost | None = None) -> bool:
    """Whether the server of a :class:`~secfindings.Client` has capability ``name``."""
    return drive(client, capability_steps(client.base_url, client.schema(), name), cost)


async def capable_async(client: Any, name: str, cost: Cost | None = None) -> bool:
    """:func:`capable` for an :class:`~secfindings.AsyncClient`."""
    schema = await client.schema()
    return await drive_async(client, capability_steps(client.base_url, schema, name), cost)


# ---------------------------------------------------------------------------------- bounds


@dataclass(frozen=True)
class Bounds:
    """The lowest and highest finding id a walk's filters select, and how many findings they
    select (None where the server gives no ``total_count``)."""

    low: int
    high: int
    total: int | None


def _count_of(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TransportError(f"the server answered a total_count that is not a count: {str(value)[:40]!r}")
    return value


def bounds_steps(walk: Walk, schema: Any, with_total: bool) -> Steps[Bounds | None]:
    """The id bounds (and count) of what the walk's filters select, in one request; None when
    they select nothing. A TransportError for an answer that cannot be bounds."""
    total = " total_count" if with_total else ""
    doc = (
        "query findings_bounds($filters_config: FiltersConfigInput) {"
        f" low: findings_view(filters_config: $filters_config{_sort_arg(schema, 'ID_ASC')}, first: 1)"
        f" {{ edges {{ node {{ id_int }} }}{total} }}"
        f" high: findings_view(filters_config: $filters_config{_sort_arg(schema, 'ID_DESC')}, first: 1)"
        " { edges { node { id_int } } } }"
    )
    variables = walk.variables()
    data = yield doc, variables or None, "findings_bounds"
    low, high = _edges(data, "low"), _edges(data, "high")
    if not low or not high:
        return None
    lo, hi = _id_of(low[0]), _id_of(high[0])
    if lo > hi:
        raise TransportError(
            f"the server's bounds are not usable: its lowest finding id ({lo}) is above its highest ({hi})"
        )
    count = _count_of(data["low"].get(TOTAL_COUNT)) if with_total else None
    return Bounds(lo, hi, count)


# ---------------------------------------------------------------------------------- counting


@dataclass(frozen=True)
class Counted:
    """Rows found by ``first: 1`` probes by offset, and the probes' cost."""

    rows: int
    probes: int


def _at_offset(
    walk: Walk, schema: Any, offset: int, sort: str | None
) -> Steps[tuple[str | None, int] | None]:
    """The cursor and id of the row at ``offset`` of the walk (None: no row there)."""
    order = f", sort: [{sort}]" if sort else ""
    doc = (
        "query findings_at($filters_config: FiltersConfigInput, $offset: Int) {"
        f" findings_view(filters_config: $filters_config, first: 1, offset: $offset{order})"
        " { edges { cursor node { id_int } } } }"
    )
    variables = {**walk.variables(), "offset": offset}
    data = yield doc, variables, "findings_at"
    edges = _edges(data, "findings_view")
    if not edges:
        return None
    cursor = edges[0].get("cursor")
    return (cursor if isinstance(cursor, str) else None), _id_of(edges[0])


#: The most rows looked up in one request (aliased fields); a server that refuses that many is
#: asked one offset at a time.
_ALIASES = 16
#: The offsets the count asks for first, in one request: 0, then 64 times powers of 8.
_LADDER = [0, *(64 * 8**k for k in range(9))]


def _at_offsets(
    walk: Walk, schema: Any, offsets: list[int], sort: str | None, singles: list[bool] | None = None
) -> Steps[dict[int, tuple[str | None, int] | None]]:
    """The cursor and id of the row at each offset (None: no row there): up to
    :data:`_ALIASES` offsets a request, as aliased fields of one document; one at a time where
    the server refuses such a document (then ``singles``, when given, holds True)."""
    found: dict[int, tuple[str | None, int] | None] = {}
    if len(offsets) == 1 or (singles and singles[0]):
        for o in offsets:
            found[o] = yield from _at_offset(walk, schema, o, sort)
        return found
    order = f", sort: [{sort}]" if sort else ""
    for start in range(0, len(offsets), _ALIASES):
        chunk = offsets[start : start + _ALIASES]
        fields = "".join(
            f" o{k}: findings_view(filters_config: $filters_config, first: 1, offset: {int(o)}{order})"
            " { edges { cursor node { id_int } } }"
            for k, o in enumerate(chunk)
        )
        doc = f"query findings_at_offsets($filters_config: FiltersConfigInput) {{{fields} }}"
        try:
            data = yield doc, walk.variables() or None, "findings_at_offsets"
        except Exception as exc:
            if not refused(exc):
                raise
            if singles is not None:
                singles[0] = True
            for o in chunk:  # one at a time
                found[o] = yield from _at_offset(walk, schema, o, sort)
            continue
        for k, o in enumerate(chunk):
            edges = _edges(data, f"o{k}")
            cursor = edges[0].get("cursor") if edges else None
            found[o] = ((cursor if isinstance(cursor, str) else None), _id_of(edges[0])) if edges else None
    return found


class _Counter:
    """Counts the requests of a generator it wraps (what a count's probes cost)."""

    def __init__(self) -> None:
        self.requests = 0

    def run(self, steps: Steps[T]) -> Steps[T]:
        try:
            ask = next(steps)
            while True:
                self.requests += 1
                try:
                    answer = yield ask
                except Exception as exc:
                    ask = steps.throw(exc)
                else:
                    ask = steps.send(answer)
        except StopIteration as done:
            value: T = done.value
            return value


def count_steps(walk: Walk, schema: Any, sort: str | None = None) -> Steps[Counted]:
    """How many rows the walk has, found with ``first: 1`` probes by offset: a ladder of offsets
    (0, 64, 512, 4096, ...) in one request, then a search between the last offset with a row and
    the first without, 15 offsets a request (each narrows the span 16 times): about 6 requests
    for 100,000 rows."""
    counter = _Counter()
    singles = [False]  # the server refused aliased fields: a binary search, one probe a request
    if (yield from counter.run(_at_offsets(walk, schema, [0], sort)))[0] is None:
        return Counted(0, counter.requests)
    found = yield from counter.run(_at_offsets(walk, schema, _LADDER[1:], sort, singles))
    present = max([0, *(o for o in _LADDER[1:] if found[o] is not None)])
    beyond = [o for o in _LADDER if o > present and found[o] is None]
    if not beyond:
        raise TransportError("the server answers a row at every offset: it does not end")
    absent = min(beyond)
    while absent - present > 1:
        ways = 2 if singles[0] else _ALIASES
        step = max(1, (absent - present) // ways)
        offsets = list(range(present + step, absent, step))[: ways - 1]
        found = yield from counter.run(_at_offsets(walk, schema, offsets, sort, singles))
        for o in offsets:
            if found[o] is None:
                absent = min(absent, o)
        present = max([present, *(o for o in offsets if found[o] is not None and o < absent)])
    return Counted(present + 1, counter.requests)


# ---------------------------------------------------------------------------------- partitions


@dataclass(frozen=True)
class Slice:
    """One partition of a walk: the ids its rows must lie in (None: open on that side), the
    cursor its walk starts after, how many rows it reads from there (None: to the end), and
    whether the id range is sent as a filter (``id_ranges``) or only checked."""

    low: int | None
    high: int | None
    cursor: str | None = None
    limit: int | None = None
    filtered: bool = True
    #: Offset slices: the offset of the slice's first row (its walk may start there in
    #: aliased batches instead of after ``cursor``; see :mod:`secfindings._batched`).
    offset: int | None = None


@dataclass
class Split:
    """How a walk is read in partitions: the strategy, its slices, and the bounds and count it
    found (``bounds.total`` counted by probes where the server has no ``total_count``)."""

    strategy: str
    slices: list[Slice]
    bounds: Bounds | None


def id_ranges(low: int, high: int, partitions: int) -> list[tuple[int, int]]:
    """``partitions`` contiguous, disjoint id ranges covering ``low..high`` (inclusive); fewer
    when the span has fewer ids than that."""
    span = high - low + 1
    step = max(1, -(-span // partitions))
    return [(lo, min(lo + step - 1, high)) for lo in range(low, high + 1, step)]


_WARNED: set[str] = set()


def _sequential(base_url: str, bounds: Bounds | None, why: str) -> Split:
    if base_url not in _WARNED:
        _WARNED.add(base_url)
        log.warning("the server at %s %s: the partitions are read as one sequential walk", base_url, why)
    return Split("sequential", [Slice(None, None, filtered=False)], bounds)


def split_steps(
    walk: Walk, schema: Any, partitions: int, descending: bool, bounds: Bounds | None, have_bounds: bool
) -> Steps[Split]:
    """How to read ``walk`` in ``partitions`` parts on this server (see the module's doc)."""
    base_url = walk.client.base_url
    if not have_bounds:
        with_total = yield from capability_steps(base_url, schema, TOTAL_COUNT)
        bounds = yield from bounds_steps(walk, schema, with_total)
    if bounds is None:
        # Nothing selected now: one walk says so (one request).
        return Split("sequential", [Slice(None, None, filtered=False)], None)
    if (yield from capability_steps(base_url, schema, ID_RANGE)):
        ranges = id_ranges(bounds.low, bounds.high, partitions)
        last = len(ranges) - 1
        slices = [
            Slice(None if i == 0 else lo, None if i == last else hi) for i, (lo, hi) in enumerate(ranges)
        ]
        return Split("id_ranges", slices, bounds)
    if not (yield from capability_steps(base_url, schema, OFFSET)):
        return _sequential(base_url, bounds, "takes neither an id range filter nor offset")
    sort = id_sort(schema, descending)
    rows = bounds.total
    if rows is None:
        rows = (yield from count_steps(walk, schema, sort)).rows
        bounds = Bounds(bounds.low, bounds.high, rows)
    size = -(-rows // partitions) if rows else 1
    starts = list(range(0, max(rows, 1), size))
    # The row before each slice: its cursor starts the slice, its id bounds the slice before.
    rows_before = [start - 1 for start in starts[1:]]
    at = (yield from _at_offsets(walk, schema, rows_before, sort)) if rows_before else {}
    before = [at[o] for o in rows_before]
    found = [b for b in before if b is not None]
    ids = [b[1] for b in found]
    ordered = all((a > b) if descending else (a < b) for a, b in itertools.pairwise(ids))
    if len(found) != len(before) or not ordered or any(c is None for c, _ in found):
        return _sequential(
            base_url, bounds, "takes no id range filter, and its offsets do not give rows in id order"
        )
    slices = []
    for k in range(len(starts)):
        cursor = None if k == 0 else found[k - 1][0]
        last = k == len(starts) - 1
        limit = None if last else size
        # ids of slice k: after the row before it, up to the row before the next slice.
        after_id = None if k == 0 else found[k - 1][1]
        until_id = None if last else found[k][1]
        if descending:
            low, high = until_id, (None if after_id is None else after_id - 1)
        else:
            low, high = (None if after_id is None else after_id + 1), until_id
        slices.append(Slice(low, high, cursor, limit, filtered=False, offset=starts[k]))
    return Split("offset_slices", slices, bounds)


# ---------------------------------------------------------------------------------- watermarks


@dataclass(frozen=True)
class NewerThan:
    """How to read the findings whose ``key`` is at or after ``since`` (a watermark minus its
    lookback) on this server. ``sorted``: the walk is sorted by the key descending, so it may stop
    at the first older row (:meth:`past`); ``filtered``: the server takes ``key gte since`` (a
    probe showed it honours it); ``readable``: the key is a field of the rows; ``sortable``: the
    server sorts by the key (``sorted`` needs it readable too: a walk sorted by a key it cannot
    show cannot tell where to stop, unless the caller looks the key up elsewhere, as
    ``client.findings(ids)`` does on ``Finding``)."""

    walk: Walk
    key: str
    since: dt.datetime
    sorted: bool
    filtered: bool
    readable: bool
    sortable: bool = False

    @property
    def sort(self) -> str | None:
        return f"{self.key.upper()}_DESC" if self.sorted else None

    def extra_filter(self) -> Filter | None:
        return filter_field(self.key).gte(self.since) if self.filtered else None

    def paginator(self, **changes: Any) -> Any:
        """The walk to make (its own filters, the range filter where it works, sorted by the key
        descending where the schema sorts by it)."""
        sort = self.sort if self.sorted else "unchanged"
        return self.walk.paginator(extra=self.extra_filter(), sort=sort, **changes)

    def keep(self, value: Any) -> bool:
        """Whether a row whose key is ``value`` is new enough (an unreadable key is kept)."""
        when = _as_time(value)
        return when is None or when >= self.since

    def past(self, value: Any) -> bool:
        """Whether a sorted walk may stop at a row whose key is ``value``."""
        when = _as_time(value)
        return self.sorted and when is not None and when < self.since


def _as_time(value: Any) -> dt.datetime | None:
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if isinstance(value, str):
        return parse_datetime(value)
    return None


def _newer_than(
    walk: Walk, schema: Any, key: str, watermark: dt.datetime, lookback: dt.timedelta
) -> Steps[NewerThan]:
    values = sorts(schema)
    fields = node_fields(schema)
    sortable = values is None or f"{key.upper()}_DESC" in values
    readable = fields is None or key in fields
    filtered = yield from capability_steps(walk.client.base_url, schema, time_range(key))
    since = _as_time(watermark)
    if since is None:
        raise ValidationError(f"a watermark is a datetime, not {type(watermark).__name__}")
    return NewerThan(walk, key, since - lookback, sortable and readable, filtered, readable, sortable)


def newer_than(
    walk: Walk, key: str, watermark: dt.datetime, lookback: dt.timedelta = dt.timedelta(0)
) -> NewerThan:
    """How to read ``walk``'s findings newer than ``watermark - lookback`` by ``key`` (a
    :class:`~secfindings.Client`; at most one probe, remembered)."""
    return drive(walk.client, _newer_than(walk, walk.client.schema(), key, watermark, lookback))


async def newer_than_async(
    walk: Walk, key: str, watermark: dt.datetime, lookback: dt.timedelta = dt.timedelta(0)
) -> NewerThan:
    """:func:`newer_than` for an :class:`~secfindings.AsyncClient`."""
    schema = await walk.client.schema()
    return await drive_async(walk.client, _newer_than(walk, schema, key, watermark, lookback))
