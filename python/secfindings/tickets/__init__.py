"""Ticket drift: do the tickets in Jira or GitHub tell the truth about the findings?

    import secfindings
    from secfindings.tickets import Jira, drift

    report = drift(secfindings.Client(), Jira("https://acme.atlassian.net", project="SEC"))
    print(report.text())
    report = drift(client, system, close_fixed=True)   # also closes tickets of fixed findings

The findings and the tickets the service lists for them come from the live API (a client) or a
synced destination that holds a ``finding_tickets`` table (``save(from_client(client), dest)``
or ``secfindings tickets pull DEST`` keeps one there). A ticket of the ticket system belongs
to a finding when the service lists it on the finding (Jira: its key, ``external_id``; GitHub:
its issue URL, ``link``), or when it carries the label ``finding-<id_int>``; our tickets carry
the label ``secfindings``. What is reported (see :class:`Drift`):

- ``fixed_open``: a fixed finding whose ticket is open;
- ``closed_open``: a closed ticket of an open finding that has no open ticket in the system;
- ``unticketed``: an open finding in a ticketed remediation phase (TICKET_OPENED,
  IN_REMEDIATION, VERIFYING) that has no ticket (the service lists none, or none of those it
  lists exists in the system);
- ``duplicates``: a finding with two or more open tickets in the system;
- ``orphans``: an open ticket whose finding no longer exists.

Read-only unless ``close_fixed=True``: then each ``fixed_open`` ticket whose findings are all
fixed is closed with a comment naming the finding. A closed ticket is never reopened.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from secfindings.formats import line_text
from secfindings.tickets._github import GitHub
from secfindings.tickets._jira import Jira
from secfindings.tickets._model import (
    IN_QUEUE_PHASES,
    LABEL,
    ExternalTicket,
    FindingTickets,
    ServiceTicket,
    TicketSystem,
    finding_label,
)
from secfindings.tickets._source import copy_filter, from_client, from_database, save

__all__ = [
    "LABEL",
    "Drift",
    "ExternalTicket",
    "FindingTickets",
    "GitHub",
    "Jira",
    "ServiceTicket",
    "TicketSystem",
    "drift",
    "finding_label",
    "from_client",
    "from_database",
    "save",
]

KINDS = {
    "fixed_open": "fixed findings whose ticket is open",
    "closed_open": "closed tickets whose finding is open",
    "unticketed": "open findings in a queue without a ticket",
    "duplicates": "findings with two or more open tickets",
    "orphans": "open tickets whose finding no longer exists",
}


def _quoted(title: str | None) -> str:
    """A finding's title (scanner text) as it goes into a ticket's comment: one line, cut, in a
    code span, so that GitHub's Markdown shows it as text (no mention it pings, no image it loads,
    no HTML or link); Jira's comment is plain text already."""
    return "`" + line_text(title, 200).replace("`", "'") + "`"


def _marker(finding_id: int) -> str:
    return f"[secfindings] finding {finding_id} is fixed"


@dataclass
class Drift:
    """The mismatches, each a sorted list of ``(finding id, ticket key)`` pairs
    (``unticketed``: the ticket is None; ``duplicates``: one pair per open ticket; ``orphans``:
    the finding named by the label or the service). ``closed``: tickets this run closed;
    ``kept``: fixed findings' open tickets not closed because an open finding shares them."""

    system: str
    findings: int
    tickets: int
    fixed_open: list[tuple[int, str]] = field(default_factory=list)
    closed_open: list[tuple[int, str]] = field(default_factory=list)
    unticketed: list[tuple[int, None]] = field(default_factory=list)
    duplicates: list[tuple[int, str]] = field(default_factory=list)
    orphans: list[tuple[int, str]] = field(default_factory=list)
    closed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        """Mismatches of every kind, added up."""
        return sum(len(getattr(self, k)) for k in KINDS)

    def as_dict(self) -> dict[str, Any]:
        """The report as plain data (what :meth:`json` writes)."""
        return {
            "system": self.system,
            "findings": self.findings,
            "tickets": self.tickets,
            **{k: [list(p) for p in getattr(self, k)] for k in KINDS},
            "closed": self.closed,
            "kept": self.kept,
            "notes": self.notes,
        }

    def json(self) -> str:
        """The report as indented JSON."""
        return json.dumps(self.as_dict(), indent=2)

    def text(self) -> str:
        """The report for a person: counts by kind, then the findings and tickets of each."""
        head = f"{self.system}: {self.findings} findings, {self.tickets} tickets compared"
        lines = [f"{head}; {self.total} mismatches"]
        for kind, label in KINDS.items():
            pairs = getattr(self, kind)
            lines.append(f"{label}: {len(pairs)}")
            for fid, key in pairs:
                lines.append(f"  finding {fid}" + (f"  ticket {key}" if key is not None else ""))
        if self.closed:
            lines.append(f"closed: {', '.join(self.closed)}")
        if self.kept:
            lines.append(f"kept open (an open finding shares them): {', '.join(self.kept)}")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines) + "\n"


def drift(
    source: Any,
    system: TicketSystem,
    *,
    close_fixed: bool = False,
) -> Drift:
    """Compare the findings of ``source`` (a :class:`secfindings.Client`, a synced destination
    with a ``finding_tickets`` table, or an iterable of :class:`FindingTickets`) with
    ``system``. See the module's docstring for what is reported."""
    partial = False
    if isinstance(source, (str, os.PathLike)):
        findings = from_database(source)
        partial = copy_filter(source) is not None
    elif hasattr(source, "paginate"):
        findings = from_client(source)
    else:
        findings = list(source)
    return compare(findings, system, close_fixed=close_fixed, partial=partial)


def compare(
    findings: Iterable[FindingTickets],
    system: TicketSystem,
    *,
    close_fixed: bool = False,
    partial: bool = False,
) -> Drift:
    """The report of ``findings`` against ``system`` (see :func:`drift`). ``partial``: the
    findings are some of the service's only (a copy synced with a filter), so a ticket naming
    another finding is not known to be an orphan: it is counted in a note instead."""
    by_id = {f.id_int: f for f in findings}
    # the keys of this system the service lists, per finding, and its findings per key
    listed: dict[int, set[str]] = defaultdict(set)
    for f in by_id.values():
        for st in f.tickets:
            key = system.key_of(st)
            if key is not None:
                listed[f.id_int].add(key)
    labelled = {t.key: t for t in system.labelled()}
    wanted = {k for keys in listed.values() for k in keys} - set(labelled)
    known = {**labelled, **system.fetch(wanted)}
    owners: dict[str, set[int]] = defaultdict(set)  # key -> the findings it belongs to
    for fid, keys in listed.items():
        for k in keys:
            if k in known:
                owners[k].add(fid)
    for ext in known.values():
        owners[ext.key] |= ext.labelled
    per_finding: dict[int, set[str]] = defaultdict(set)
    for k, fids in owners.items():
        for fid in fids:
            per_finding[fid].add(k)
    out = Drift(system.name, len(by_id), len(known))
    if by_id and all(f.phase is None for f in by_id.values()):
        out.notes.append(
            "the findings have no remediation phase: findings in a queue without a ticket not checked"
        )
    outside = 0
    for k, fids in sorted(owners.items()):
        if known[k].open and any(fid not in by_id for fid in fids):
            if partial:
                outside += 1
                continue
            out.orphans += [(fid, k) for fid in sorted(fids) if fid not in by_id]
    if outside:
        out.notes.append(
            f"{outside} open ticket{'s' if outside != 1 else ''} name findings outside this copy's "
            "filter: not judged as orphans (drift live judges them)"
        )
    for fid, f in sorted(by_id.items()):
        keys = per_finding.get(fid, set())
        open_keys = sorted(k for k in keys if known[k].open)
        if f.category == "FIXED":
            out.fixed_open += [(fid, k) for k in open_keys]
        if f.category == "OPEN":
            if not open_keys:
                out.closed_open += [(fid, k) for k in sorted(keys) if not known[k].open]
            if f.phase in IN_QUEUE_PHASES and not keys and (not f.tickets or listed.get(fid)):
                out.unticketed.append((fid, None))
        if len(open_keys) > 1:
            out.duplicates += [(fid, k) for k in open_keys]
    if close_fixed:
        _close(out, by_id, owners, system)
    return out


def _close(
    out: Drift, by_id: dict[int, FindingTickets], owners: dict[str, set[int]], system: TicketSystem
) -> None:
    for key in sorted({k for _, k in out.fixed_open}, key=_natural):
        fids = sorted(owners[key])
        if any(by_id[f].category == "OPEN" for f in fids if f in by_id):
            out.kept.append(key)
            continue
        named = ", ".join(
            f"{f} ({_quoted(by_id[f].title)})" if f in by_id and by_id[f].title else str(f) for f in fids
        )
        markers = " ".join(_marker(f) for f in fids)
        comment = f"{markers}. Closed by secfindings tickets drift --close-fixed: finding {named} is fixed."
        if system.close(key, comment, _marker(fids[0])):
            out.closed.append(key)


def _natural(key: str) -> tuple[str, int]:
    head, _, num = key.rpartition("-")
    return (head, int(num)) if num.isdigit() else (key, 0)
