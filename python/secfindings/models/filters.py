"""Saved finding filters and scopes, and stored ``filters_config`` objects."""

from __future__ import annotations

import datetime as dt

from secfindings.models._base import JSONString, Model

__all__ = ["FiltersConfigOutput", "FindingFilter"]


class FiltersConfigOutput(Model):
    """A stored ``filters_config`` (the keys of FiltersConfigInput).

    ``filtersjson`` and ``scopesjson`` are GraphQL Strings holding filter JSON text; they are
    returned as the text, like the schema types them.
    """

    filtersjson: str | None
    scopesjson: str | None
    scopesid: str | None
    filtersid: str | None
    filters_fields_to_exclude: list[str] | None
    filters_fields_to_include: list[str] | None
    filters_fields_to_override: list[str] | None
    scopes_fields_to_exclude: list[str] | None
    scopes_fields_to_include: list[str] | None
    scopes_fields_to_override: list[str] | None
    scope_group: str | None


class FindingFilter(Model):
    """A saved finding filter, or (``type == "SCOPE"``) a finding scope; ``filter`` is decoded."""

    id: str
    id_int: int | None
    name: str | None
    description: str | None
    type: str | None
    filter: JSONString | None
    created_by: str | None
    created_time: dt.datetime | None
    last_updated_time: dt.datetime | None
