"""The findings and their tickets as the service lists them: from the live API (one walk of
``findings_view`` with each row's tickets) or from a synced destination holding a
``finding_tickets`` table (``id_int, external_id, link, status, provider_type``)."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from typing import Any

from secfindings.errors import ConfigurationError, PaginationError
from secfindings.tickets._model import FindingTickets, ServiceTicket

__all__ = [
    "TICKETS_PAGE",
    "TICKETS_TABLE",
    "check_synced",
    "copy_filter",
    "from_client",
    "from_database",
    "save",
]

TICKETS_TABLE = "finding_tickets"

#: Tickets asked for per request of a finding's ``tickets`` connection (graphene-django's cap
#: is 100; the walk asks again, past the last one, while the connection says there are more).
TICKETS_PAGE = 50

#: The ticket fields the facts confirm (service-facts §6.1: IT-FQ, IT-TQ), and the one taken
#: where the server's live schema shows it (our schema models it; the facts do not).
_CONFIRMED = ("external_id", "link", "status")
_PROBED = ("provider_type",)

_WALK = """
query FindingTickets($first: Int, $after: String%(declare)s) {
  findings_view(first: $first, after: $after%(filter)s) {
    edges { node {
      id_int title actual_status { category } remediation_sub_phase
      tickets(first: %(page)d) { edges { node { %(fields)s } } pageInfo { hasNextPage endCursor } }
    } }
    pageInfo { hasNextPage endCursor }
  }
}
"""

_MORE = """
query FindingTicketsMore($filters: FiltersConfigInput, $after: String) {
  findings_view(first: 1, filters_config: $filters) {
    edges { node {
      id_int
      tickets(first: %(page)d, after: $after) {
        edges { node { %(fields)s } } pageInfo { hasNextPage endCursor }
      }
    } }
  }
}
"""


def _ticket_fields(client: Any) -> str:
    """The ticket fields to ask for: the confirmed ones, and ``provider_type`` where the live
    schema's ``Ticket`` has it (a server without it would refuse the whole walk; with no live
    schema to read, the facts alone)."""
    schema = client.schema() if callable(getattr(client, "schema", None)) else None
    have = set(schema.fields("Ticket")) if schema is not None else set()
    return " ".join([*_CONFIRMED, *(f for f in _PROBED if f in have)])


def _tickets(connection: Any) -> tuple[list[ServiceTicket], bool, str | None]:
    """A page of a finding's ``tickets``: the tickets, whether there are more, the end cursor."""
    connection = connection or {}
    tickets = [
        ServiceTicket(n.get("external_id"), n.get("link"), n.get("status"), n.get("provider_type"))
        for e in (connection.get("edges") or [])
        if (n := (e or {}).get("node"))
    ]
    info = connection.get("pageInfo") or {}
    return tickets, bool(info.get("hasNextPage")), info.get("endCursor")


def _rest(client: Any, finding: int, first: str | None, fields: str) -> list[ServiceTicket]:
    """The tickets of ``finding`` past the cursor ``first`` (its first page came with the walk):
    a request per page, by id (``filters_config``'s ``id in [...]``, a confirmed filter), until
    the connection says there are no more. A cursor that does not move on (none, or one seen
    before) is a :class:`PaginationError`: the rest cannot be read, and drift must not run on
    part of a finding's tickets (it would call the missing ones closed or absent)."""
    query = _MORE % {"page": TICKETS_PAGE, "fields": fields}
    filters = {"filtersjson": json.dumps({"field": "id", "condition": "in", "value": [finding]})}
    seen: set[str] = set()
    after = first
    out: list[ServiceTicket] = []
    while True:
        if after is None or after in seen:
            raise PaginationError(
                f"the tickets of finding {finding} cannot be read past {len(out) + TICKETS_PAGE}: the "
                "server says there are more but gives "
                + ("no end cursor" if after is None else f"the cursor {after!r} again")
            )
        seen.add(after)
        data = client.execute(query, {"filters": filters, "after": after}) or {}
        edges = ((data.get("findings_view") or {}).get("edges")) or []
        node = next((e["node"] for e in edges if (e or {}).get("node")), None)
        if node is None:
            return out  # the finding is gone since the walk: the next run sees that
        tickets, more, after = _tickets(node.get("tickets"))
        out += tickets
        if not more:
            return out


def _unique(tickets: list[ServiceTicket]) -> list[ServiceTicket]:
    """Each ticket once (a list that shifted between two pages may show one twice)."""
    seen: set[tuple[str | None, str | None]] = set()
    out = []
    for t in tickets:
        key = (t.external_id, t.link)
        if key not in seen:
            seen.add(key)
            out.append(t)
    return out


def from_client(client: Any, page_size: int = 100, filters: str | None = None) -> list[FindingTickets]:
    """Every finding (``filters``: a filter's JSON text, those that match it) with all its
    tickets: one walk of the findings with the first :data:`TICKETS_PAGE` tickets of each, and
    for a finding with more, a request per further page of its tickets."""
    fields = _ticket_fields(client)
    scoped = filters is not None
    query = _WALK % {
        "page": TICKETS_PAGE,
        "fields": fields,
        "declare": ", $filters: FiltersConfigInput" if scoped else "",
        "filter": ", filters_config: $filters" if scoped else "",
    }
    variables = {"filters": {"filtersjson": filters}} if scoped else None
    out = []
    for node in client.paginate(query, variables, page_size=page_size):
        finding = int(node["id_int"])
        tickets, more, after = _tickets(node.get("tickets"))
        if more:
            tickets = _unique(tickets + _rest(client, finding, after, fields))
        status = node.get("actual_status") or {}
        out.append(
            FindingTickets(
                finding,
                node.get("title"),
                status.get("category"),
                node.get("remediation_sub_phase"),
                tickets,
            )
        )
    return out


def from_database(dest: str | os.PathLike[str]) -> list[FindingTickets]:
    """The findings of a synced destination with the tickets of its ``finding_tickets``
    table (the findings themselves, a few columns, are read whole: one row each)."""
    from secfindings.analytics import Database  # noqa: PLC0415 - pandas: the analytics extra

    with Database(dest) as db:
        if db.columns(TICKETS_TABLE) is None:
            raise ConfigurationError(
                f"{db} has no {TICKETS_TABLE} table (id_int, external_id, link, status, provider_type): "
                f"keep the tickets there first (secfindings tickets pull {dest}), or compare against "
                "the live API (SOURCE 'live')"
            )
        phase = "remediation_sub_phase" if db.has("remediation_sub_phase") else "NULL"
        title = "title" if db.has("title") else "NULL"
        rows = db.rows(f'SELECT id_int, {title}, "{db.status}", {phase} FROM findings')
        tickets: dict[int, list[ServiceTicket]] = defaultdict(list)
        for fid, ext, link, status, provider in db.rows(
            f"SELECT id_int, external_id, link, status, provider_type FROM {TICKETS_TABLE}"
        ):
            tickets[int(fid)].append(ServiceTicket(ext, link, status, provider))
    return [FindingTickets(int(r[0]), r[1], r[2], r[3], tickets.get(int(r[0]), [])) for r in rows]


def copy_filter(dest: str | os.PathLike[str]) -> str | None:
    """The filter a synced destination's findings match (the JSON text its sync kept in
    ``sync_state``), or None: every finding."""
    from secfindings.sync import database_errors  # noqa: PLC0415 - the sync's drivers, on use
    from secfindings.sync._dest import connect, literal, parse_destination  # noqa: PLC0415

    where = parse_destination(dest)
    with database_errors(where):
        db = connect(where)
        try:
            if "filters" not in (db.columns("sync_state") or []):
                return None
            rows = db.query(f"SELECT filters FROM sync_state WHERE collection = {literal('findings')}")
        finally:
            db.close()
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


def check_synced(dest: str | os.PathLike[str]) -> None:
    """Refuses (:class:`ConfigurationError`) a destination that is not a synced one: a file
    that is not there (a misspelt name would otherwise become a new database holding only
    tickets, which drift cannot read), or a database without the sync's ``findings`` table.
    Nothing is created."""
    from secfindings.sync import database_errors  # noqa: PLC0415 - the sync's drivers, on use
    from secfindings.sync._dest import connect, parse_destination  # noqa: PLC0415

    where = parse_destination(dest)
    if where.path is not None and not os.path.isfile(os.path.expanduser(where.path)):
        raise ConfigurationError(
            f"{where}: no such database file; the tickets are kept beside a synced copy "
            "(the DEST of secfindings sync)"
        )
    with database_errors(where):
        db = connect(where)
        try:
            synced = db.columns("findings") is not None
        finally:
            db.close()
    if not synced:
        raise ConfigurationError(
            f"{where} has no findings table: the tickets are kept beside a synced copy "
            "(the DEST of secfindings sync)"
        )


def save(findings: list[FindingTickets], dest: str | os.PathLike[str]) -> int:
    """Keep the tickets of ``findings`` in the ``finding_tickets`` table of ``dest`` (a synced
    destination: DuckDB, SQLite or PostgreSQL; another is refused, see :func:`check_synced`),
    replacing what it held, in one transaction; a later drift can then read ``dest``. Returns
    the number of rows."""
    from secfindings._shared import need  # noqa: PLC0415 - pyarrow: the database's extra
    from secfindings.sync import database_errors  # noqa: PLC0415 - the sync's drivers, on use
    from secfindings.sync._dest import connect, parse_destination  # noqa: PLC0415

    check_synced(dest)
    pa = need("pyarrow", "arrow", "tickets.save()")
    rows = [(f.id_int, t) for f in findings for t in f.tickets]
    batch = pa.RecordBatch.from_arrays(
        [
            pa.array([i for i, _ in rows], pa.int64()),
            pa.array([t.external_id for _, t in rows], pa.string()),
            pa.array([t.link for _, t in rows], pa.string()),
            pa.array([t.status for _, t in rows], pa.string()),
            pa.array([t.provider_type for _, t in rows], pa.string()),
        ],
        names=["id_int", "external_id", "link", "status", "provider_type"],
    )
    where = parse_destination(dest)
    with database_errors(where):
        db = connect(where)
        try:
            with db.transaction():
                db.execute(
                    f"CREATE TABLE IF NOT EXISTS {TICKETS_TABLE} (id_int BIGINT, external_id TEXT, "
                    "link TEXT, status TEXT, provider_type TEXT)"
                )
                db.execute(f"DELETE FROM {TICKETS_TABLE}")
                if rows:
                    db.append(TICKETS_TABLE, [batch])
        finally:
            db.close()
    return len(rows)
