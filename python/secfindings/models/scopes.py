"""Scope groups and the saved scope hierarchy."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import Connection, Model
from secfindings.models.filters import FindingFilter

__all__ = ["ScopeGroup", "ScopeHierarchy", "ScopeNode"]


class ScopeGroup(Model):
    """A group of finding scopes (``scopes``) that organizes access permissions."""

    id: str
    id_int: int | None
    name: str | None
    description: str | None
    scopes: list[FindingFilter] | None
    users: list[str] | None
    created_time: dt.datetime | None
    last_updated_time: dt.datetime | None


class ScopeNode(Model):
    """A node of the scope hierarchy: a scope group, a scope, or the unscoped node.

    ``id`` is None for the unscoped node; ``node_type`` is ``SCOPE_GROUP``, ``SCOPE`` or
    ``UNSCOPED``.
    """

    id: str | None
    name: str | None
    node_type: str | None
    findings_count: int | None
    children: list[ScopeNode] | None


class ScopeHierarchy(Model):
    """The saved scope hierarchy: root ``nodes`` (one per scope group) with finding counts."""

    generated_time: dt.datetime | None
    total_findings: int | None
    nodes: list[ScopeNode] | None
    scope_groups: Connection[ScopeGroup] | None
