"""The result objects of the mutations: ``ok`` plus, for most, the object created or changed."""

from __future__ import annotations

from secfindings.models._base import Model
from secfindings.models.filters import FindingFilter
from secfindings.models.rules import ScoringRule, StatusRuleObject
from secfindings.models.scopes import ScopeGroup, ScopeHierarchy
from secfindings.models.sla import SLAGroup, SLAPreference, TicketSLARule

__all__ = [
    "ActivateSLAStatus",
    "ActivateScoringRule",
    "AddSLAGroup",
    "AddSLARule",
    "AddScoringRule",
    "AddStatusRule",
    "AddTicketSLARule",
    "CreateScopeGroup",
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
    "GenerateScopes",
    "NewFindingFilterV2",
    "NewFindingScopeV2",
    "UpdateFindingFilterV2",
    "UpdateFindingScopeV2",
    "UpdateSLAV2",
    "UpdateUserSLAWithComment",
]


class ActivateScoringRule(Model):
    """The result of ``activate_scoring_rule``."""

    ok: bool | None
    scoring_rule: ScoringRule | None


class AddScoringRule(Model):
    """The result of ``add_scoring_rule``."""

    ok: bool | None
    scoring_rule: ScoringRule | None


class EditScoringRule(Model):
    """The result of ``edit_scoring_rule``."""

    ok: bool | None
    scoring_rule: ScoringRule | None


class DeleteScoringRule(Model):
    """The result of ``delete_scoring_rule``."""

    ok: bool | None


class AddSLAGroup(Model):
    """The result of ``add_sla_group``."""

    ok: bool | None
    sla_group: SLAGroup | None


class AddSLARule(Model):
    """The result of ``add_sla_rule``."""

    ok: bool | None
    sla_rule: SLAPreference | None


class EditSLARule(Model):
    """The result of ``edit_sla_rule``."""

    ok: bool | None
    sla_rule: SLAPreference | None


class ActivateSLAStatus(Model):
    """The result of ``activate_sla_rule``."""

    ok: bool | None
    sla_rule: SLAPreference | None


class DeleteSLAStatus(Model):
    """The result of ``delete_sla_rule``."""

    ok: bool | None


class UpdateSLAV2(Model):
    """The result of ``update_sla_settings_v2``."""

    ok: bool | None
    sla_preferences: list[SLAPreference] | None


class UpdateUserSLAWithComment(Model):
    """The result of ``set_user_sla_and_comment``: ``updated_count`` findings were updated."""

    ok: bool | None
    updated_count: int | None


class AddStatusRule(Model):
    """The result of ``add_status_rule``."""

    ok: bool | None
    status_rule: StatusRuleObject | None


class EditStatusRule(Model):
    """The result of ``edit_status_rule``."""

    ok: bool | None
    status_rule: StatusRuleObject | None


class EnableStatusRule(Model):
    """The result of ``enable_status_rule``."""

    ok: bool | None
    status_rule: StatusRuleObject | None


class DeleteStatusRule(Model):
    """The result of ``delete_status_rule``."""

    ok: bool | None


class AddTicketSLARule(Model):
    """The result of ``add_ticket_sla_rule``."""

    ok: bool | None
    ticket_sla_rule: TicketSLARule | None


class EditTicketSLARule(Model):
    """The result of ``edit_ticket_sla_rule``."""

    ok: bool | None
    ticket_sla_rule: TicketSLARule | None


class EnableTicketSLARule(Model):
    """The result of ``enable_ticket_sla_rule``."""

    ok: bool | None
    ticket_sla_rule: TicketSLARule | None


class DeleteTicketSLARule(Model):
    """The result of ``delete_ticket_sla_rule``."""

    ok: bool | None


class CreateScopeGroup(Model):
    """The result of ``create_scope_group``."""

    ok: bool | None
    scope_group: ScopeGroup | None


class EditScopeGroup(Model):
    """The result of ``edit_scope_group``."""

    ok: bool | None
    scope_group: ScopeGroup | None


class DeleteScopeGroup(Model):
    """The result of ``delete_scope_group``."""

    ok: bool | None


class GenerateScopes(Model):
    """The result of ``save_scope_hierarchy``."""

    ok: bool | None
    scope_hierarchy: ScopeHierarchy | None


class NewFindingScopeV2(Model):
    """The result of ``new_finding_scope_v2``."""

    ok: bool | None
    finding_scope: FindingFilter | None


class UpdateFindingScopeV2(Model):
    """The result of ``update_finding_scope_v2``."""

    ok: bool | None
    finding_scope: FindingFilter | None


class DeleteFindingScopeV2(Model):
    """The result of ``delete_finding_scope_v2``."""

    ok: bool | None


class NewFindingFilterV2(Model):
    """The result of ``new_finding_filter_v2`` (and of the deprecated ``new_finding_filter``)."""

    ok: bool | None
    finding_filter: FindingFilter | None


class UpdateFindingFilterV2(Model):
    """The result of ``update_finding_filter_v2`` (and of the deprecated ``update_finding_filter``)."""

    ok: bool | None
    finding_filter: FindingFilter | None


class DeleteFindingFilterV2(Model):
    """The result of ``delete_finding_filter_v2`` (and of the deprecated ``delete_finding_filter``)."""

    ok: bool | None
