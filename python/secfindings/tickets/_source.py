"""The findings and their tickets as the service lists them: from the live API (one walk of
``findings_view`` with each row's tickets) or from a synced destination holding a
``finding_tickets`` table (``id_int, external_id, link, status, provider_type``)."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from secfindings.errors import ConfigurationError
from secfindings.tickets._model import FindingTickets, ServiceTicket

__all__ = ["TICKETS_TABLE", "from_client", "from_database", "save"]

TICKETS_TABLE = "finding_tickets"

_QUERY = """
query FindingTickets($first: Int, $after: String) {
  findings_view(first: $first, after: $after) {
    edges { node {
      id_int title actual_status { category } remediation_sub_phase
      tickets(first: 50) { edges { node { external_id link status provider_type } } }
    } }
    pageInfo { hasNextPage endCursor }
  }
}
"""


def from_client(client: Any, page_size: int = 100) -> list[FindingTickets]:
    """Every finding with its tickets (the first 50 of each), in one walk."""
    out = []
    for node in client.paginate(_QUERY, page_size=page_size):
        tickets = [
            ServiceTicket(n.get("external_id"), n.get("link"), n.get("status"), n.get("provider_type"))
            for e in ((node.get("tickets") or {}).get("edges") or [])
            if (n := (e or {}).get("node"))
        ]
        status = node.get("actual_status") or {}
        out.append(
            FindingTickets(
                int(node["id_int"]),
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
                "compare against the live API (SOURCE 'live') instead"
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


def save(findings: list[FindingTickets], dest: str | os.PathLike[str]) -> int:
    """Keep the tickets of ``findings`` in the ``finding_tickets`` table of ``dest`` (a synced
    destination: DuckDB, SQLite or PostgreSQL), replacing what it held, in one transaction; a
    later drift can then read ``dest``. Returns the number of rows."""
    from secfindings._shared import need  # noqa: PLC0415 - pyarrow: the database's extra
    from secfindings.sync import database_errors  # noqa: PLC0415 - the sync's drivers, on use
    from secfindings.sync._dest import connect, parse_destination  # noqa: PLC0415

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
