"""SLA groups, SLA rules (preferences) and ticket SLA rules."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import Model
from secfindings.models.filters import FiltersConfigOutput

__all__ = ["SLAGroup", "SLAPreference", "TicketSLARule"]


class SLAPreference(Model):
    """An SLA rule: the days to remediate findings of one severity in an SLA group."""

    id: str
    id_int: int | None
    name: str | None
    sla_group_id: str | None
    sla_group_name: str | None
    severity: int | None
    days: int | None
    at_risk_days: int | None
    filters_config: FiltersConfigOutput | None
    active: bool | None
    affected_findings: int | None
    created_time: dt.datetime | None
    last_updated_time: dt.datetime | None


class SLAGroup(Model):
    """A group of findings sharing SLA rules (``sla_rules``)."""

    id: str
    id_int: int | None
    name: str | None
    description: str | None
    filters_config: FiltersConfigOutput | None
    priority: int | None
    sla_rules: list[SLAPreference] | None
    created_time: dt.datetime | None


class TicketSLARule(Model):
    """A rule giving tickets a due date; ``provider_type`` is a TicketProviderTypeEnum value."""

    id: str
    id_int: int | None
    name: str | None
    description: str | None
    filters_config: FiltersConfigOutput | None
    days: int | None
    provider_type: str | None
    enabled: bool | None
    priority: int | None
    created_time: dt.datetime | None
    last_updated_time: dt.datetime | None
