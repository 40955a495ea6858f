"""The findings and their tickets as the service lists them: from the live API (one walk of
``findings_view`` with each row's tickets) or from a synced destination holding a
``finding_tickets`` table (``id_int, external_id, link, status, provider_type``)."""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from secfindings.errors import ConfigurationError
from secfindings.tickets._model import FindingTickets, ServiceTicket

__all__ = ["TICKETS_TABLE", "from_client", "from_database"]

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
