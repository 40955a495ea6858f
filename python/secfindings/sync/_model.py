"""What a sync is about: the collections, a run's options and result, the client side (the
:class:`Source`), the state kept in ``sync_state``, and what a run does now."""

from __future__ import annotations

import abc
import datetime as dt
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from secfindings._newer import by_time
from secfindings._plain import plural
from secfindings._schema import ANALYST
from secfindings.sync._names import column_name

if TYPE_CHECKING:
    from secfindings.sync._scope import Scope

__all__ = [
    "FINDINGS",
    "SNAPSHOTS",
    "Collection",
    "Options",
    "Source",
    "SyncResult",
    "analyst_and",
    "budget",
    "column_name",
    "expand_preset",
    "run_kinds",
    "with_required",
]

#: Columns whose change alone is not a new version: they move on their own (a finding's age
#: grows every day). They are updated in place; the history keeps the value of each version.
VOLATILE = frozenset({"age"})


@dataclass(frozen=True)
class Collection:
    """A synced collection: its table, history table and key column."""

    name: str
    key: str
    volatile: frozenset[str] = VOLATILE

    @property
    def history(self) -> str:
        return f"{self.name}_history"


FINDINGS = Collection("findings", "id_int")

#: Counters and times that move with the findings or the clock, not with an edit of the rule.
SNAPSHOT_VOLATILE = frozenset({"affected_findings", "opened_tickets_count", "last_run_time"})

#: The other collections, synced as full snapshots with history (table name: the client's
#: method). Each is small: one walk of every item, ``fields="*"``, key ``id``.
SNAPSHOTS: dict[str, Collection] = {
    name: Collection(name, "id", SNAPSHOT_VOLATILE)
    for name in (
        "scoring_rules",
        "status_rules",
        "ticket_sla_rules",
        "sla_groups",
        "sla_preferences",
        "remediation_queues",
        "finding_filters",
    )
}


@dataclass
class Options:
    """What a sync run does (see :func:`secfindings.sync.sync`)."""

    fields: str = "analyst"
    lookback: dt.timedelta = dt.timedelta(minutes=15)
    reconcile: bool | None = None  # None: when due
    reconcile_every: dt.timedelta = dt.timedelta(hours=24)
    page_size: int = 100
    chunk_pages: int = 0  # 0: CHUNK_PAGES
    should_stop: Callable[[], bool] | None = None
    on_page: Callable[[int], None] | None = None
    #: The filter the table holds the findings of (None: every finding).
    scope: Scope | None = None


@dataclass
class SyncResult:
    """What one sync run did. ``requests`` counts API requests (every attempt, retries too):
    ``incremental_requests`` for the incremental walk, ``reconcile_requests`` for the full
    reconcile (or the first load)."""

    destination: str
    collection: str
    kind: str
    rows_read: int = 0
    created: int = 0
    updated: int = 0
    removed: int = 0
    incremental_requests: int = 0
    reconcile_requests: int = 0
    watermark: dt.datetime | None = None
    reconciled: bool = False
    seconds: float = 0.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    #: The snapshots of other collections made by the same call, by name.
    collections: dict[str, SyncResult] = field(default_factory=dict)
    #: What the run ignored or could not do, one line each (also logged as WARNING on the
    #: ``secfindings.sync`` logger): a finding whose time is far in the future, fields the
    #: server does not have, a server that does not keep the id order.
    warnings: list[str] = field(default_factory=list)

    @property
    def requests(self) -> int:
        """Every API request of the run: the incremental part's and the reconcile's."""
        return self.incremental_requests + self.reconcile_requests

    @property
    def changed(self) -> int:
        """Findings created, updated (a new version) or removed by the run."""
        return self.created + self.updated + self.removed

    def summary(self) -> str:
        """One line for a log: what ran, what changed, what it cost."""
        mark = self.watermark.isoformat() if self.watermark else "none"
        return (
            f"{self.collection} -> {self.destination}: {self.kind}, {self.rows_read} read, "
            f"{self.created} created, {self.updated} updated, {self.removed} removed, "
            f"{plural(self.requests, 'request')} ({self.incremental_requests} incremental, "
            f"{self.reconcile_requests} reconcile), {self.seconds:.1f} s; watermark {mark}"
        )


class Source(abc.ABC):
    """The client side of a sync: walks of ``findings_view`` as Arrow record batches, the live
    schema, and the client's request counter. :class:`~secfindings.Client` is used directly; the
    async client is driven from the sync's worker thread (see ``_api.py``)."""

    @abc.abstractmethod
    def schema(self) -> Any:
        """The client's live schema (None without one)."""

    @abc.abstractmethod
    def batches(self, **arguments: Any) -> Iterator[Any]:
        """A walk of ``findings_view`` with ``arguments``, as Arrow record batches."""

    @abc.abstractmethod
    def empty(self, fields: str) -> Any:
        """The Arrow schema of a walk of ``fields`` (no request)."""

    @abc.abstractmethod
    def call(self, name: str, **arguments: Any) -> Any:
        """Every item of the client's paginated method ``name``, as one Arrow table."""

    @abc.abstractmethod
    def requests(self) -> int:
        """Requests the client has sent so far."""

    @abc.abstractmethod
    def newer(self, key: str) -> Any:
        """How this server reads findings newer than a watermark by ``key``
        (:class:`secfindings._newer.Newer`; at most one probe, remembered)."""

    @abc.abstractmethod
    def capable(self, name: str) -> bool:
        """Whether the server has the walk plan's capability ``name`` (probed once)."""

    @abc.abstractmethod
    def times(self, ids: Sequence[int]) -> dict[int, dt.datetime | None]:
        """The ``last_reported_time`` of findings by id, looked up (``finding(id)``, batched)."""


@dataclass
class _State:
    fields: str | None = None
    columns: str | None = None
    watermark: dt.datetime | None = None
    watermark_id: int | None = None
    lookback_seconds: float | None = None
    last_full_reconcile: dt.datetime | None = None
    reconcile_after_id: int | None = None
    reconcile_mark: dt.datetime | None = None
    reconcile_started: dt.datetime | None = None
    #: The canonical JSON of the sync's filter (None: every finding).
    filters: str | None = None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def with_required(fields: str, needed: Sequence[str]) -> str:
    """A selection with the fields the sync needs added (``analyst`` and ``*`` hold them)."""
    text = fields.strip()
    if text in ("analyst", "*"):
        return text
    have = set(text.replace("{", " ").replace("}", " ").split())
    missing = [f for f in needed if f not in have]
    return " ".join([text, *missing]) if missing else text


def expand_preset(fields: str, preset: str | None) -> str:
    """``"analyst datasource_tags_values"``: the preset's selection (``preset``, as the live
    schema trims it) with the fields after its name added (a bare name the preset has already is
    not repeated). Any other selection is returned as it is. A field added this way is asked for
    as given: one the server lacks is the client's error (it is not trimmed like the preset's)."""
    words = fields.split(None, 1)
    if len(words) < 2 or words[0] != "analyst" or words[1].startswith("{") or preset is None:
        return fields
    have = {name for name, block in _items(preset)}
    extra = [f"{name} {block}".strip() for name, block in _items(words[1]) if block or name not in have]
    return " ".join([preset, *extra])


def analyst_and(fields: str, schema: Any) -> str:
    """``fields`` with ``"analyst <more fields>"`` spelt out for this server (see
    :func:`expand_preset`): the preset as the live schema (None: the package's own) has it."""
    if fields.split(None, 1)[:1] != ["analyst"] or fields.strip() == "analyst":
        return fields
    preset = schema.preset("FindingsView", "analyst") if schema is not None else None
    return expand_preset(fields, preset or ANALYST["FindingsView"])


def _items(selection: str) -> list[tuple[str, str]]:
    """The top-level fields of a selection, each with its sub-selection (``"{ ... }"``, or "")."""
    items: list[tuple[str, str]] = []
    depth = 0
    for token in selection.replace("{", " { ").replace("}", " } ").split():
        if depth == 0 and token not in ("{", "}"):
            items.append((token, ""))
            continue
        depth += (token == "{") - (token == "}")
        if items:
            items[-1] = (items[-1][0], f"{items[-1][1]} {token}".strip())
    return items


def run_kinds(state: _State, by_time: bool, now: dt.datetime, opt: Options) -> list[str]:
    """What a run does now: ``["first"]`` (the first load, or its continuation), else
    ``"incremental"`` and/or ``"reconcile"`` (when due, or asked for)."""
    if state.last_full_reconcile is None:
        return ["first"]
    kinds = []
    if by_time and state.watermark is not None:
        kinds.append("incremental")
    due = (
        not by_time
        or state.watermark is None
        or state.reconcile_after_id is not None
        or now - state.last_full_reconcile >= opt.reconcile_every
    )
    if opt.reconcile is True or (opt.reconcile is None and due):
        kinds.append("reconcile")
    return kinds


def _by_time(schema: Any) -> bool:
    """Whether the server can give the findings newer than a time (see :mod:`secfindings._newer`)."""
    return by_time(schema)


def budget(changed: int, page_size: int = 100) -> int:
    """The most requests an incremental run of ``changed`` findings makes."""
    return math.ceil(changed / page_size) + 3
