"""What rules as code manages: the kinds of objects, their fields as the YAML file names them,
and the canonical form both sides of a comparison are brought to (the file's and the server's).

The canonical form of one object is a dict of its YAML fields without its name (the name is the
key): references are names, lists with set semantics are sorted, a filter's JSON is a structure
(keys sorted), and empty values (None, ``[]``, ``{}``) are left out. Two objects are equal when
their canonical dicts are; a field a kind marks ``server_default`` that the file leaves out is
not managed (the server picks it and the plan leaves it alone)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from secfindings._shared import did_you_mean
from secfindings.errors import ValidationError

#: The version of the file format, written as ``version:`` at the top of every export.
FORMAT_VERSION = 1

FieldType = Literal[
    "str", "int", "float", "bool", "enum", "json", "filters_config", "ref", "refset", "strset"
]


class Executor(Protocol):
    """What rules as code needs of a client: :meth:`secfindings.Client.execute`. (A protocol, so
    that this package does not import the client's module, which offers ``client.rules``.)"""

    def execute(
        self, query: str, variables: dict[str, Any] | None = None, operation_name: str | None = None
    ) -> dict[str, Any]: ...


class RulesError(ValidationError):
    """A rules file or a server's state that rules as code cannot work with (an unknown field, a
    name given twice, a reference to a name that does not exist, a change the API cannot make).
    Nothing has been sent when it is raised by ``plan`` or before ``apply``'s first mutation."""


@dataclass(frozen=True)
class Field:
    """One field of a kind, as the file names it (``api`` is the GraphQL name where it differs)."""

    name: str
    type: FieldType
    api: str = ""
    #: The kind a ``ref`` / ``refset`` names.
    ref: str = ""
    required: bool = False
    #: Left out of the file, the server's value stands (not managed).
    server_default: bool = False
    enum: tuple[str, ...] = ()

    @property
    def api_name(self) -> str:
        return self.api or self.name


@dataclass(frozen=True)
class Kind:
    """A kind of object: how it is read, created, edited, deleted and switched on or off."""

    key: str
    label: str
    #: The alias-free query field that lists them and its fixed arguments.
    query: str
    query_args: str
    selection: str
    fields: tuple[Field, ...]
    create: str
    #: ``flat``: the mutation takes the fields as arguments; else the name of its input argument.
    create_input: str
    input_type: str
    result: str
    update: str = ""
    update_input: str = ""
    delete: str = ""
    #: The on/off field and its mutation: (field, mutation, argument).
    flag: tuple[str, str, str] | None = None
    #: The kinds its references may name (what must exist before it).
    deps: tuple[str, ...] = field(default=())

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]


_FC_REFS = {
    "filter": ("filtersid", "filters"),
    "scopes": ("scopesid", "scope_groups"),
    "scope_group": ("scope_group", "scope_groups"),
}
_FC_JSON = ("filtersjson", "scopesjson")
_FC_LISTS = tuple(
    f"{side}_fields_to_{what}"
    for side in ("filters", "scopes")
    for what in ("exclude", "include", "override")
)
#: The keys of a filters_config in the file.
FC_KEYS = (*_FC_JSON, *_FC_REFS, *_FC_LISTS)

FC_SELECTION = (
    "filters_config { " + " ".join((*_FC_JSON, "filtersid", "scopesid", "scope_group", *_FC_LISTS)) + " }"
)

_METHODS = ("SET", "INCREASE", "DECREASE", "MULTIPLY")
_ROUNDS = ("ROUND", "FLOOR", "CEIL")
_PROVIDERS = ("JIRA", "SERVICENOW", "AZURE_DEVOPS", "MONDAY")

_DESC = Field("description", "str")
_FC = Field("filters_config", "filters_config")
_PRIORITY = Field("priority", "int", server_default=True)

KINDS: tuple[Kind, ...] = (
    Kind(
        key="filters",
        label="filter",
        query="finding_filters",
        query_args="type: FILTER",
        selection="id name description filter",
        fields=(_DESC, Field("filter", "json", required=True)),
        create="new_finding_filter_v2",
        create_input="finding_filter",
        input_type="FindingFilterInput",
        result="finding_filter",
        update="update_finding_filter_v2",
        update_input="finding_filter",
        delete="delete_finding_filter_v2",
    ),
    Kind(
        key="scopes",
        label="scope",
        query="finding_filters",
        query_args="type: SCOPE",
        selection="id name description filter",
        fields=(_DESC, Field("filter", "json", required=True)),
        create="new_finding_scope_v2",
        create_input="finding_scope",
        input_type="FindingFilterInput",
        result="finding_scope",
        update="update_finding_scope_v2",
        update_input="finding_scope",
        delete="delete_finding_scope_v2",
    ),
    Kind(
        key="scope_groups",
        label="scope group",
        query="scope_hierarchy",
        query_args="",
        selection="id name description users scopes { id name }",
        fields=(_DESC, Field("scopes", "refset", api="scope_ids", ref="scopes"), Field("users", "strset")),
        create="create_scope_group",
        create_input="flat",
        input_type="",
        result="scope_group",
        update="edit_scope_group",
        update_input="flat",
        delete="delete_scope_group",
        deps=("scopes",),
    ),
    Kind(
        key="sla_groups",
        label="SLA group",
        query="sla_groups",
        query_args="",
        selection=f"id name description priority {FC_SELECTION}",
        fields=(_DESC, _FC, _PRIORITY),
        create="add_sla_group",
        create_input="flat",
        input_type="",
        result="sla_group",
        deps=("filters", "scope_groups"),
    ),
    Kind(
        key="scoring_rules",
        label="scoring rule",
        query="scoring_rules",
        query_args="",
        selection=f"id name description method value round_function priority active {FC_SELECTION}",
        fields=(
            _DESC,
            _FC,
            Field("method", "enum", required=True, enum=_METHODS),
            Field("value", "float", required=True),
            Field("round_function", "enum", enum=_ROUNDS),
            _PRIORITY,
            Field("active", "bool", server_default=True),
        ),
        create="add_scoring_rule",
        create_input="scoring_rule",
        input_type="ScoringRuleInput",
        result="scoring_rule",
        update="edit_scoring_rule",
        update_input="scoring_rule",
        delete="delete_scoring_rule",
        flag=("active", "activate_scoring_rule", "active"),
        deps=("filters", "scope_groups"),
    ),
    Kind(
        key="status_rules",
        label="status rule",
        query="status_rules",
        query_args="",
        selection=f"id name description status_key enabled priority {FC_SELECTION}",
        fields=(
            _DESC,
            _FC,
            Field("status_key", "str", required=True),
            _PRIORITY,
            Field("enabled", "bool", server_default=True),
        ),
        create="add_status_rule",
        create_input="status_rule",
        input_type="StatusRuleInput",
        result="status_rule",
        update="edit_status_rule",
        update_input="status_rule",
        delete="delete_status_rule",
        flag=("enabled", "enable_status_rule", "enabled"),
        deps=("filters", "scope_groups"),
    ),
    Kind(
        key="sla_rules",
        label="SLA rule",
        query="sla_preferences",
        query_args="",
        selection=f"id name sla_group_id severity days at_risk_days active {FC_SELECTION}",
        fields=(
            Field("group", "ref", api="sla_group_id", ref="sla_groups", required=True),
            Field("severity", "int", required=True),
            Field("days", "int", required=True),
            Field("at_risk_days", "int", server_default=True),
            _FC,
            Field("active", "bool", server_default=True),
        ),
        create="add_sla_rule",
        create_input="sla_rule",
        input_type="SLARuleInput",
        result="sla_rule",
        update="edit_sla_rule",
        update_input="sla_rule",
        delete="delete_sla_rule",
        flag=("active", "activate_sla_rule", "active"),
        deps=("sla_groups", "filters", "scope_groups"),
    ),
    Kind(
        key="ticket_sla_rules",
        label="ticket SLA rule",
        query="ticket_sla_rules",
        query_args="",
        selection=f"id name description days provider_type enabled priority {FC_SELECTION}",
        fields=(
            _DESC,
            _FC,
            Field("days", "int", required=True),
            Field("provider_type", "enum", enum=_PROVIDERS),
            _PRIORITY,
            Field("enabled", "bool", server_default=True),
        ),
        create="add_ticket_sla_rule",
        create_input="ticket_sla",
        input_type="TicketSLAInput",
        result="ticket_sla_rule",
        update="edit_ticket_sla_rule",
        update_input="ticket_sla",
        delete="delete_ticket_sla_rule",
        flag=("enabled", "enable_ticket_sla_rule", "enabled"),
        deps=("filters", "scope_groups"),
    ),
)

BY_KEY: dict[str, Kind] = {k.key: k for k in KINDS}
#: The scope hierarchy is no kind of named objects: ``scope_hierarchy: {saved: true}`` asks that
#: the hierarchy saved on the server show the file's scope groups and their scopes.
HIERARCHY = "scope_hierarchy"
ALL_KINDS: tuple[str, ...] = (*BY_KEY, HIERARCHY)
"""The kinds of a rules file, in the order it holds them (what a reference names comes first)."""
TOP_KEYS = ("version", *ALL_KINDS)


def targets(kind: str) -> tuple[str, ...]:
    """The kinds a reference to ``kind`` may name: a saved filter (``filtersid``) may be a scope,
    which the API stores as a finding filter too."""
    return ("filters", "scopes") if kind == "filters" else (kind,)


def parse_kinds(kinds: str | list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """The kinds asked for (``a,b`` or a list), in the file's order; every kind by default."""
    if kinds is None:
        return ALL_KINDS
    names = [k.strip() for k in kinds.split(",")] if isinstance(kinds, str) else [str(k) for k in kinds]
    for n in names:
        if n not in ALL_KINDS:
            raise RulesError(f"unknown kind {n!r}{_dym(n, ALL_KINDS)}; kinds: {', '.join(ALL_KINDS)}")
    return tuple(k for k in ALL_KINDS if k in names)


def _dym(name: str, choices: Any) -> str:
    return did_you_mean(name, list(choices))


# ------------------------------------------------------------------------------ canonical values


def sort_json(value: Any) -> Any:
    """A JSON structure with every object's keys sorted (lists keep their order)."""
    if isinstance(value, Mapping):
        return {str(k): sort_json(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [sort_json(v) for v in value]
    return value


def json_value(text: Any) -> Any:
    """A filter's JSON as a structure: a server's text is parsed; text that is no JSON stays."""
    if isinstance(text, str):
        try:
            return sort_json(json.loads(text))
        except ValueError:
            return text
    return sort_json(text)


def json_text(value: Any) -> str:
    """A filter structure as the compact JSON text the API takes."""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def prune_empty(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` without None, empty text, empty lists and empty mappings, keys sorted (an empty
    description is no description: an edit clears one by sending ``""``)."""
    return {k: d[k] for k in sorted(d) if d[k] is not None and d[k] != "" and d[k] != [] and d[k] != {}}


def valid_float(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))
