"""What drift compares: the findings with the tickets the service lists for them, and the
tickets of a ticket system, behind one small protocol that the Jira and GitHub adapters follow."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
    "IN_QUEUE_PHASES",
    "LABEL",
    "ExternalTicket",
    "FindingTickets",
    "ServiceTicket",
    "TicketSystem",
    "finding_label",
    "finding_of_label",
]

LABEL = "secfindings"
"""The label every ticket of ours carries in the ticket system (:func:`finding_label` names its
finding)."""
_FINDING_LABEL = re.compile(r"^finding-(\d{1,18})$")

#: Remediation phases in which a queue has opened (or should have opened) a ticket.
IN_QUEUE_PHASES = frozenset({"TICKET_OPENED", "IN_REMEDIATION", "VERIFYING"})


def finding_label(finding_id: int) -> str:
    """The label that ties a ticket to finding ``finding_id`` (``finding-17``)."""
    return f"finding-{finding_id}"


def finding_of_label(label: str) -> int | None:
    m = _FINDING_LABEL.match(label)
    return int(m.group(1)) if m else None


@dataclass(frozen=True)
class ServiceTicket:
    """A ticket as the service lists it on a finding (``Finding.tickets``)."""

    external_id: str | None
    link: str | None
    status: str | None
    provider_type: str | None


@dataclass
class FindingTickets:
    """A finding (``category`` OPEN, FIXED or IGNORED; ``phase`` its remediation sub-phase,
    None where the copy lacks it) and the tickets the service lists for it."""

    id_int: int
    title: str | None
    category: str | None
    phase: str | None
    tickets: list[ServiceTicket] = field(default_factory=list)


@dataclass
class ExternalTicket:
    """A ticket of the ticket system: its key (``SEC-12``, an issue number), whether it is
    open, its URL, and the findings its labels name (``finding-<id>``)."""

    key: str
    open: bool
    url: str | None = None
    title: str | None = None
    labelled: set[int] = field(default_factory=set)


class TicketSystem(Protocol):
    """What drift needs of a ticket system."""

    name: str

    def key_of(self, ticket: ServiceTicket) -> str | None:
        """The key of a service's ticket in this system, or None where it is not one of its."""
        ...

    def labelled(self) -> Iterator[ExternalTicket]:
        """Every ticket that carries :data:`LABEL` (paged)."""
        ...

    def fetch(self, keys: Iterable[str]) -> dict[str, ExternalTicket]:
        """The tickets of ``keys`` that exist (a key the system does not know is left out)."""
        ...

    def close(self, key: str, comment: str, marker: str) -> bool:
        """Close ``key`` with ``comment`` unless it is closed already; True when this call
        closed it. ``marker`` is a text of the comment that tells a rerun it was posted."""
        ...
