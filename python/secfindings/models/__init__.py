"""Typed result models: one class per GraphQL object type, named exactly as the type.

    from secfindings.models import Finding
    f = Finding(data["finding"])
    f.discovered_time          # aware datetime, converted on first access
    f.finding_score.severity   # nested model
    f.to_dict()                # JSON-ready dict

A model is a lazy, read-only view over the response dict; see :class:`Model`. ``registry``
maps each GraphQL type name to its class, and :func:`model_for` looks one up.
"""

from __future__ import annotations

from secfindings._shared import did_you_mean
from secfindings.models._base import Connection, GenericModel, JSONString, Model
from secfindings.models.events import FindingEvent, RuleEvent
from secfindings.models.filters import FiltersConfigOutput, FindingFilter
from secfindings.models.findings import (
    Attachment,
    Comment,
    Datasource,
    Finding,
    FindingAdditionalData,
    FindingScore,
    FindingsView,
    Status,
    Ticket,
)
from secfindings.models.queues import RemediationQueue
from secfindings.models.resources import CHResource
from secfindings.models.results import (
    ActivateScoringRule,
    ActivateSLAStatus,
    AddScoringRule,
    AddSLAGroup,
    AddSLARule,
    AddStatusRule,
    AddTicketSLARule,
    CreateScopeGroup,
    DeleteFindingFilterV2,
    DeleteFindingScopeV2,
    DeleteScopeGroup,
    DeleteScoringRule,
    DeleteSLAStatus,
    DeleteStatusRule,
    DeleteTicketSLARule,
    EditScopeGroup,
    EditScoringRule,
    EditSLARule,
    EditStatusRule,
    EditTicketSLARule,
    EnableStatusRule,
    EnableTicketSLARule,
    GenerateScopes,
    NewFindingFilterV2,
    NewFindingScopeV2,
    UpdateFindingFilterV2,
    UpdateFindingScopeV2,
    UpdateSLAV2,
    UpdateUserSLAWithComment,
)
from secfindings.models.rules import ScoringRule, StatusRuleObject
from secfindings.models.scopes import ScopeGroup, ScopeHierarchy, ScopeNode
from secfindings.models.sla import SLAGroup, SLAPreference, TicketSLARule

__all__ = [
    "ActivateSLAStatus",
    "ActivateScoringRule",
    "AddSLAGroup",
    "AddSLARule",
    "AddScoringRule",
    "AddStatusRule",
    "AddTicketSLARule",
    "Attachment",
    "CHResource",
    "Comment",
    "Connection",
    "CreateScopeGroup",
    "Datasource",
    "DeleteFindingFilterV2",
    "DeleteFindingScopeV2",
    "DeleteSLAStatus",
    "DeleteScopeGroup",
    "DeleteScoringRule",
    "DeleteStatusRule",
    "DeleteTicketSLARule",
    "EditSLARule",
    "EditScopeGroup",
    "EditScoringRule",
    "EditStatusRule",
    "EditTicketSLARule",
    "EnableStatusRule",
    "EnableTicketSLARule",
    "FiltersConfigOutput",
    "Finding",
    "FindingAdditionalData",
    "FindingEvent",
    "FindingFilter",
    "FindingScore",
    "FindingsView",
    "GenerateScopes",
    "GenericModel",
    "JSONString",
    "Model",
    "NewFindingFilterV2",
    "NewFindingScopeV2",
    "RemediationQueue",
    "RuleEvent",
    "SLAGroup",
    "SLAPreference",
    "ScopeGroup",
    "ScopeHierarchy",
    "ScopeNode",
    "ScoringRule",
    "Status",
    "StatusRuleObject",
    "Ticket",
    "TicketSLARule",
    "UpdateFindingFilterV2",
    "UpdateFindingScopeV2",
    "UpdateSLAV2",
    "UpdateUserSLAWithComment",
    "model_for",
    "registry",
]

registry: dict[str, type[Model]] = {
    cls.__name__: cls
    for cls in (
        ActivateSLAStatus,
        ActivateScoringRule,
        AddSLAGroup,
        AddSLARule,
        AddScoringRule,
        AddStatusRule,
        AddTicketSLARule,
        Attachment,
        CHResource,
        Comment,
        CreateScopeGroup,
        Datasource,
        DeleteFindingFilterV2,
        DeleteFindingScopeV2,
        DeleteSLAStatus,
        DeleteScopeGroup,
        DeleteScoringRule,
        DeleteStatusRule,
        DeleteTicketSLARule,
        EditSLARule,
        EditScopeGroup,
        EditScoringRule,
        EditStatusRule,
        EditTicketSLARule,
        EnableStatusRule,
        EnableTicketSLARule,
        FiltersConfigOutput,
        Finding,
        FindingAdditionalData,
        FindingEvent,
        FindingFilter,
        FindingScore,
        FindingsView,
        GenerateScopes,
        NewFindingFilterV2,
        NewFindingScopeV2,
        RemediationQueue,
        SLAGroup,
        SLAPreference,
        ScopeGroup,
        ScopeHierarchy,
        RuleEvent,
        ScopeNode,
        ScoringRule,
        Status,
        StatusRuleObject,
        Ticket,
        TicketSLARule,
        UpdateFindingFilterV2,
        UpdateFindingScopeV2,
        UpdateSLAV2,
        UpdateUserSLAWithComment,
    )
}
"""Every model class, by its GraphQL type name."""


def model_for(type_name: str) -> type[Model]:
    """The model class of the GraphQL object type ``type_name`` (e.g. ``"Finding"``).

    Raises:
        KeyError: no model is registered under that name.
    """
    try:
        return registry[type_name]
    except KeyError:
        hint = did_you_mean(type_name, registry)
        raise KeyError(f"no model for GraphQL type {type_name!r}{hint}") from None
