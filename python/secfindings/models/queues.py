"""Remediation queues."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import Model
from secfindings.models.filters import FiltersConfigOutput

__all__ = ["RemediationQueue"]


class RemediationQueue(Model):
    """A remediation queue: opens tickets for the findings it matches on a ``cron`` schedule.

    ``state``, ``status``, ``priority``, ``endpoint_type`` and ``ticket_provider_type`` are enum
    values (strings such as ``"ENABLED"`` or ``"TICKET"``).
    """

    id: str
    id_int: int | None
    title: str | None
    description: str | None
    cron: str | None
    state: str | None
    status: str | None
    priority: str | None
    endpoint_type: str | None
    ticket_provider_type: str | None
    max_concurrent_opened_tickets: int | None
    opened_tickets_count: int | None
    filters_config: FiltersConfigOutput | None
    created_time: dt.datetime | None
    last_run_time: dt.datetime | None
