"""Scoring rules and status rules."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import Model
from secfindings.models.filters import FiltersConfigOutput
from secfindings.models.findings import Status

__all__ = ["ScoringRule", "StatusRuleObject"]


class ScoringRule(Model):
    """A rule that assigns risk scores to the findings it matches.

    ``method`` is a ScoringRuleMethods value and ``round_function`` a RoundFunctions value.
    """

    id: str
    id_int: int | None
    name: str | None
    description: str | None
    filters_config: FiltersConfigOutput | None
    method: str | None
    value: float | None
    round_function: str | None
    priority: int | None
    active: bool | None
    affected_findings: int | None
    created_by: str | None
    created_time: dt.datetime | None
    last_updated_time: dt.datetime | None


class StatusRuleObject(Model):
    """A rule that assigns a status to the findings it matches."""

    id: str
    id_int: int | None
    name: str | None
    description: str | None
    filters_config: FiltersConfigOutput | None
    status_key: str | None
    status: Status | None
    enabled: bool | None
    priority: int | None
    affected_findings: int | None
    created_by: str | None
    created_time: dt.datetime | None
    last_updated_time: dt.datetime | None
