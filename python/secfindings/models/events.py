"""Subscription events. The specification shows no Subscription fields; these are the ones the
emulator models (``finding_created``, ``finding_changed``, ``rule_changed``)."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import Model
from secfindings.models.findings import Finding

__all__ = ["FindingEvent", "RuleEvent"]


class FindingEvent(Model):
    """A finding was created or changed. ``cursor`` is the event's place in the stream."""

    cursor: str
    kind: str
    occurred_at: dt.datetime
    finding: Finding | None


class RuleEvent(Model):
    """A scoring, status, SLA or ticket SLA rule was added, edited, enabled or deleted."""

    cursor: str
    kind: str
    rule_type: str
    rule_id: str | None
    occurred_at: dt.datetime
