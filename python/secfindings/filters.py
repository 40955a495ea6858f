"""The findings filter language (``filtersjson``) as Python objects.

    from secfindings.filters import field, any_of

    open_high = field("severity").in_(["4", "5"]) & field("actual_status").where(
        field("category").in_(["OPEN"])
    )
    aws_or_gcp = any_of(field("cloud_provider").equals("AWS"), field("cloud_provider").equals("GCP"))
    (open_high & aws_or_gcp).to_dict()

A filter is a tree: a group ``{"operator": "and"|"or", "operands": [...]}`` or a leaf
``{"field": name, "condition": cond, "value": value}``; a relation filter is a leaf with an
empty condition whose value is itself a filter (``field("actual_status").where(...)``).
Filters are immutable; ``&`` and ``|`` build groups, flattening chains of the same operator.
:func:`filter_tree` checks a hand-written dict tree and names the bad node.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from secfindings._shared import did_you_mean, listed, suggestions
from secfindings.errors import ValidationError

__all__ = [
    "CONDITIONS",
    "Condition",
    "Field",
    "Filter",
    "Group",
    "Tree",
    "all_of",
    "any_of",
    "field",
    "filter_tree",
]

# Conditions whose value is a list of values.
_LIST_CONDITIONS = frozenset(
    {"in", "not_in", "overlap", "notoverlapping", "overlapilikelist", "notoverlapilikelist"}
)
# Conditions whose value is one scalar. gt/gte/lt/lte: the emulator's, not confirmed in production.
_SCALAR_CONDITIONS = frozenset({"equals", "not_equals", "contains", "not_contains", "gt", "gte", "lt", "lte"})

CONDITIONS: frozenset[str] = _LIST_CONDITIONS | _SCALAR_CONDITIONS | {"exists"}
"""The leaf conditions known to the client (a relation filter uses ``""``). A condition outside
this set is sent as given, unless it looks like a misspelling of one of them."""


#: Filter field names the client knows of (the emulator's filter catalogue, which follows the
#: fields of ``FindingsView`` and ``Finding``). An unknown name close to one of these, or to a
#: field of the server's ``FindingsView``, is taken for a misspelling; others are sent as given.
FIELDS = frozenset(
    [
        "actual_status",
        "actual_status.category",
        "actual_status.key",
        "actual_status.name",
        "actual_status.title",
        "actual_status_key",
        "age",
        "cloud_account",
        "cloud_account_friendly_name",
        "cloud_provider",
        "cve",
        "datasource",
        "datasource.friendly_name",
        "datasource.id",
        "datasource.id_int",
        "datasource.source",
        "datasource_friendly_name",
        "datasource_id",
        "datasource_tags_values",
        "description",
        "discovered_time",
        "due_date",
        "finding_id",
        "finding_score.original_score",
        "finding_score.score",
        "finding_score.severity",
        "finding_type",
        "fix_subtype",
        "id",
        "id_int",
        "last_reported_time",
        "main_resource.cloud_account",
        "main_resource.cloud_account_friendly_name",
        "main_resource.cloud_provider",
        "main_resource.region",
        "main_resource.resource_id",
        "main_resource.resource_name",
        "main_resource.resource_type",
        "original_score",
        "original_status",
        "package",
        "package_name",
        "region",
        "remediation_sub_phase",
        "resource.cloud_account",
        "resource.cloud_provider",
        "resource.name",
        "resource.region",
        "resource.resource_id",
        "resource.resource_name",
        "resource.resource_type",
        "resource_id",
        "resource_name",
        "resource_type",
        "score",
        "severity",
        "sla_status",
        "source",
        "status",
        "status.category",
        "status.key",
        "status.name",
        "status.title",
        "status_category",
        "tags_key_values",
        "tags_values",
        "ticket_status",
        "tickets",
        "tickets.status",
        "title",
    ]
)


def unknown_fields(tree: Any, known: Iterable[str]) -> str | None:
    """A message for the first field name in a filter tree that looks misspelt (close to a known
    name but not one), or None."""
    names = FIELDS | frozenset(known)
    todo = [tree]
    seen = 0
    while todo and seen < 100_000:
        seen += 1
        node = todo.pop()
        if isinstance(node, str):
            try:
                node = json.loads(node)
            except (ValueError, RecursionError):
                continue
        if isinstance(node, Mapping):
            name = node.get("field")
            if isinstance(name, str) and name and node.get("condition") != "":
                bare = name.removeprefix("finding.")
                if bare not in names:
                    hint = did_you_mean(bare, sorted(names))
                    if hint:
                        return f"unknown filter field {name!r}{hint}"
            operands = node.get("operands")
            if isinstance(operands, (list, tuple)):
                todo.extend(operands)
            # A relation's own conditions name the related object's fields: not checked here.
        elif isinstance(node, (list, tuple)):
            todo.extend(node)
    return None


def _unknown_condition(condition: str) -> str | None:
    """An error message for a likely misspelling; None lets an unknown condition through, since
    the production language may know conditions the public sources did not show."""
    hint = did_you_mean(condition, sorted(CONDITIONS))
    return f"unknown condition {condition!r}{hint}" if hint else None


_GROUP_KEYS = frozenset({"operator", "operands"})
_LEAF_KEYS = frozenset({"field", "condition", "value"})


class Filter(ABC):
    """A node of a filter tree: a :class:`Condition` or a :class:`Group`.

    Combine filters with ``&`` (and) and ``|`` (or). A filter has no truth value: Python's
    ``and`` / ``or`` would silently keep only one side, so ``bool(filter)`` raises TypeError.
    """

    __slots__ = ()

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The plain dict tree, as the API's filter JSON has it (global ids in id filters given
        as integer ids, see :func:`field`)."""

    def to_json(self) -> str:
        """The filter as compact JSON text (the form ``filters_config.filtersjson`` takes)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    def __and__(self, other: Filter) -> Filter:
        if not isinstance(other, Filter):
            return NotImplemented
        return all_of(self, other)

    def __or__(self, other: Filter) -> Filter:
        if not isinstance(other, Filter):
            return NotImplemented
        return any_of(self, other)

    def __bool__(self) -> bool:
        raise TypeError("a Filter has no truth value; combine filters with & and |, not `and` / `or`")


@dataclass(frozen=True, slots=True, repr=False)
class Condition(Filter):
    """A leaf: ``field`` compared by ``condition`` with ``value``.

    List values are kept as tuples (so filters stay immutable and hashable) and written out as
    lists. For a relation filter ``condition`` is ``""`` and ``value`` is a :class:`Filter`.
    """

    field: str
    condition: str
    value: Any

    def __post_init__(self) -> None:
        # The Field methods check their values; this catches a Condition built by hand.
        if self.condition == "":
            if not isinstance(self.value, Filter):
                raise ValidationError("a relation condition (condition '') needs a Filter as value")
        elif self.condition not in CONDITIONS and (problem := _unknown_condition(self.condition)):
            raise ValidationError(problem)

    def to_dict(self) -> dict[str, Any]:
        """The leaf as ``{"field": ..., "condition": ..., "value": ...}``."""
        return _global_ids(self._raw())

    def _raw(self) -> dict[str, Any]:
        value = self.value
        if isinstance(value, (Condition, Group)):
            value = value._raw()
        elif isinstance(value, Filter):
            value = value.to_dict()
        elif isinstance(value, tuple):
            value = list(value)
        return {"field": self.field, "condition": self.condition, "value": value}

    def __repr__(self) -> str:
        head = f"field({self.field!r})"
        value = self.value
        if self.condition == "":
            return f"{head}.where({value!r})"
        if self.condition == "exists":
            return f"{head}.exists({value == 'true'})"
        method = _METHOD_OF[self.condition]
        shown = list(value) if isinstance(value, tuple) else value
        return f"{head}.{method}({shown!r})"


@dataclass(frozen=True, slots=True, repr=False)
class Group(Filter):
    """``operator`` (``"and"`` / ``"or"``) over one or more ``operands``."""

    operator: Literal["and", "or"]
    operands: tuple[Filter, ...]

    def __post_init__(self) -> None:
        if self.operator not in ("and", "or"):
            raise ValidationError(f"operator must be 'and' or 'or', got {self.operator!r}")
        if not self.operands:
            raise ValidationError(f"an {self.operator!r} group needs at least one operand")
        for i, operand in enumerate(self.operands):
            if not isinstance(operand, Filter):
                raise ValidationError(f"operands[{i}]: expected a Filter, got {type(operand).__name__}")

    def to_dict(self) -> dict[str, Any]:
        """The group as ``{"operator": ..., "operands": [...]}``."""
        return _global_ids(self._raw())

    def _raw(self) -> dict[str, Any]:
        operands = [o._raw() if isinstance(o, (Condition, Group)) else o.to_dict() for o in self.operands]
        return {"operator": self.operator, "operands": operands}

    def __repr__(self) -> str:
        name = "all_of" if self.operator == "and" else "any_of"
        return f"{name}({', '.join(repr(o) for o in self.operands)})"


_METHOD_OF = {
    "in": "in_",
    "not_in": "not_in",
    "equals": "equals",
    "not_equals": "not_equals",
    "contains": "contains",
    "not_contains": "not_contains",
    "overlap": "overlap",
    "notoverlapping": "not_overlapping",
    "overlapilikelist": "overlap_ilike",
    "notoverlapilikelist": "not_overlap_ilike",
}


@dataclass(frozen=True, slots=True)
class Field:
    """A field of the findings to filter on; its methods build :class:`Condition` leaves.

    Use :func:`field` to make one. Values are sent as given: the production service compares
    ``severity`` as strings (``"3"``), for example. A ``date`` or an aware ``datetime`` is sent
    as ISO 8601 text (``field("last_reported_time").gte(datetime(2025, 6, 1, tzinfo=UTC))``);
    a naive datetime is refused.

    Ids: the filter language compares ``id`` (and ``id_int``, ``datasource_id``,
    ``datasource.id``) with the integer id (``id_int``), while the rest of the API takes global
    ids. Both are accepted: a global id of the right type (``Finding`` or ``FindingsView`` for a
    finding's id, ``Datasource`` for a datasource's) is sent as its integer id, and one of
    another type is a :class:`ValidationError` (it would match nothing).
    """

    name: str

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError(f"a filter field name must be a non-empty str, got {self.name!r}")

    def _list(self, condition: str, method: str, values: Iterable[Any]) -> Condition:
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise ValidationError(
                f"field({self.name!r}).{method}() takes a list of values, not {type(values).__name__}"
                f" (did you mean {method}([{values!r}])?)"
            )
        where = f"field({self.name!r}).{method}() value"
        items = tuple(_check_scalar(v, where) for v in values)
        return Condition(self.name, condition, items)

    def _scalar(self, condition: str, method: str, value: Any) -> Condition:
        return Condition(self.name, condition, _check_scalar(value, f"field({self.name!r}).{method}() value"))

    def in_(self, values: Iterable[Any]) -> Condition:
        """The field's value is one of ``values`` (condition ``in``)."""
        return self._list("in", "in_", values)

    def not_in(self, values: Iterable[Any]) -> Condition:
        """The field's value is none of ``values`` (condition ``not_in``)."""
        return self._list("not_in", "not_in", values)

    def equals(self, value: Any) -> Condition:
        """The field equals ``value`` (condition ``equals``)."""
        return self._scalar("equals", "equals", value)

    def not_equals(self, value: Any) -> Condition:
        """The field differs from ``value`` (condition ``not_equals``)."""
        return self._scalar("not_equals", "not_equals", value)

    def gt(self, value: Any) -> Condition:
        """The field is greater than ``value`` (``gt``; modelled by the emulator, not confirmed in
        production)."""
        return self._scalar("gt", "gt", value)

    def gte(self, value: Any) -> Condition:
        """The field is at least ``value`` (``gte``; see :meth:`gt`)."""
        return self._scalar("gte", "gte", value)

    def lt(self, value: Any) -> Condition:
        """The field is less than ``value`` (``lt``; see :meth:`gt`)."""
        return self._scalar("lt", "lt", value)

    def lte(self, value: Any) -> Condition:
        """The field is at most ``value`` (``lte``; see :meth:`gt`)."""
        return self._scalar("lte", "lte", value)

    def condition(self, condition: str, value: Any) -> Condition:
        """Any other condition of the service's filter language, sent as given."""
        return Condition(self.name, condition, value)

    def contains(self, value: Any) -> Condition:
        """The field contains the text ``value`` (condition ``contains``)."""
        return self._scalar("contains", "contains", value)

    def not_contains(self, value: Any) -> Condition:
        """The field does not contain the text ``value`` (condition ``not_contains``)."""
        return self._scalar("not_contains", "not_contains", value)

    def exists(self, present: bool = True) -> Condition:
        """The field has a value (or, with ``present=False``, has none): condition ``exists``.

        The value is written as the text ``"true"`` / ``"false"``, the form the service reads.
        """
        if not isinstance(present, bool):
            raise ValidationError(f"field({self.name!r}).exists() takes a bool, got {present!r}")
        return Condition(self.name, "exists", "true" if present else "false")

    def overlap(self, values: Iterable[Any]) -> Condition:
        """The array field shares at least one element with ``values`` (``overlap``)."""
        return self._list("overlap", "overlap", values)

    def not_overlapping(self, values: Iterable[Any]) -> Condition:
        """The array field shares no element with ``values`` (``notoverlapping``)."""
        return self._list("notoverlapping", "not_overlapping", values)

    def overlap_ilike(self, values: Iterable[Any]) -> Condition:
        """Like :meth:`overlap`, case-insensitively (``overlapilikelist``)."""
        return self._list("overlapilikelist", "overlap_ilike", values)

    def not_overlap_ilike(self, values: Iterable[Any]) -> Condition:
        """Like :meth:`not_overlapping`, case-insensitively (``notoverlapilikelist``)."""
        return self._list("notoverlapilikelist", "not_overlap_ilike", values)

    def where(self, condition: Filter) -> Condition:
        """A relation filter: the related object (e.g. ``actual_status``) matches ``condition``.

        ``field("actual_status").where(field("category").in_(["OPEN"]))``
        """
        if not isinstance(condition, Filter):
            raise ValidationError(
                f"field({self.name!r}).where() takes a Filter, got {type(condition).__name__}"
            )
        return Condition(self.name, "", condition)


def field(name: str) -> Field:
    """The field ``name`` of the findings, to build a condition on: ``field("severity").in_(["4"])``."""
    return Field(name)


def _combine(operator: Literal["and", "or"], filters: tuple[Filter, ...]) -> Filter:
    if not filters:
        fn = "all_of" if operator == "and" else "any_of"
        raise ValidationError(f"{fn}() needs at least one filter")
    operands: list[Filter] = []
    for i, f in enumerate(filters):
        if isinstance(f, Group) and f.operator == operator:
            # (a & b) & c is and(a, b, c): the same meaning, one level less to read and send.
            operands.extend(f.operands)
        elif isinstance(f, Filter):
            operands.append(f)
        else:
            raise ValidationError(f"argument {i}: expected a Filter, got {type(f).__name__}")
    if len(operands) == 1:
        return operands[0]
    return Group(operator, tuple(operands))


def all_of(*filters: Filter) -> Filter:
    """Every one of ``filters`` holds (an ``and`` group); one filter is returned as is."""
    return _combine("and", filters)


def any_of(*filters: Filter) -> Filter:
    """At least one of ``filters`` holds (an ``or`` group); one filter is returned as is."""
    return _combine("or", filters)


# ----------------------------------------------------------------------------- validation


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _check_scalar(value: Any, where: str) -> Any:
    """The value as it is sent: a scalar as given, a date or an aware datetime as ISO 8601 text."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValidationError(
                f"{where} is a naive datetime ({value.isoformat()}): give it a timezone, "
                "e.g. datetime.now(timezone.utc)"
            )
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if not _is_scalar(value):
        raise ValidationError(
            f"{where} must be a str, number, bool, date, datetime or None, got {type(value).__name__}"
        )
    return value


#: Id fields of the filter language (after any relation prefix, without ``finding.``) and the
#: types whose global ids they take; the language itself compares integer ids.
ID_FIELDS: dict[str, frozenset[str]] = {
    "id": frozenset({"Finding", "FindingsView"}),
    "id_int": frozenset({"Finding", "FindingsView"}),
    "datasource_id": frozenset({"Datasource"}),
    "datasource.id": frozenset({"Datasource"}),
    "datasource.id_int": frozenset({"Datasource"}),
}


def _as_global_id(value: Any) -> tuple[str, int] | None:
    """``(type, pk)`` when ``value`` is a Relay global id of an integer pk, else None."""
    if not isinstance(value, str) or not 4 <= len(value) <= 200 or value.strip().isdigit():
        return None
    text = value.strip()
    try:
        alt = b"-_" if "-" in text or "_" in text else None
        raw = base64.b64decode(text.rstrip("=") + "=" * (-len(text.rstrip("=")) % 4), alt, validate=True)
        decoded = raw.decode("utf-8").rstrip()
    except (binascii.Error, ValueError):
        return None
    type_name, sep, pk = decoded.partition(":")
    if not sep or not type_name.isidentifier() or not type_name.isascii() or not pk.isdigit():
        return None
    return type_name, int(pk)


def _id_value(value: Any, name: str, types: frozenset[str], where: str) -> Any:
    found = _as_global_id(value)
    if found is None:
        return value
    type_name, pk = found
    if type_name not in types:
        what = "finding" if "Finding" in types else "datasource"
        raise _fail(
            where,
            f"{value!r} is the global id of a {type_name}; a filter on {name!r} takes the id_int of a "
            f"{what} (or its global id: {' or '.join(sorted(types))})",
        )
    return pk


def _global_ids(tree: dict[str, Any], prefix: str = "", path: str = "") -> dict[str, Any]:
    """``tree`` with the global ids in its id filters turned into the integer ids the filter
    language compares (see :class:`Field`); a global id of another type is refused."""
    operands = tree.get("operands")
    if isinstance(operands, list):
        out = [
            _global_ids(o, prefix, _join(path, f"operands[{i}]")) if isinstance(o, dict) else o
            for i, o in enumerate(operands)
        ]
        return {**tree, "operands": out}
    name = tree.get("field")
    if not isinstance(name, str):
        return tree
    full = f"{prefix}.{name}" if prefix else name.removeprefix("finding.")
    value = tree.get("value")
    if tree.get("condition") == "":
        if isinstance(value, dict):
            return {**tree, "value": _global_ids(value, full, _join(path, "value"))}
        return tree
    types = ID_FIELDS.get(full)
    if types is None:
        return tree
    where = _join(path, "value")
    if isinstance(value, list):
        return {**tree, "value": [_id_value(v, full, types, f"{where}[{i}]") for i, v in enumerate(value)]}
    return {**tree, "value": _id_value(value, full, types, where)}


def global_id_problem(tree: Any) -> str | None:
    """For a filter given as is (a raw ``filters_config.filtersjson``, dict or JSON text): a
    message when an id filter in it holds a global id, which the filter language would compare
    with integer ids and match nothing (``filters=`` converts them); else None."""
    if isinstance(tree, Filter):
        return None  # its to_dict() converts them
    if isinstance(tree, str):
        try:
            tree = json.loads(tree)
        except (ValueError, RecursionError):
            return None
    if not isinstance(tree, dict):
        return None
    try:
        converted = _global_ids(tree)
        if converted == tree:
            return None
    except ValidationError as e:
        return str(e)
    except RecursionError:
        return None  # the core refuses a tree this deep
    return (
        "filters_config.filtersjson compares ids as integers (id_int), and it holds a global id: "
        "give the integer id, or pass the filter as filters= (which converts global ids)"
    )


#: Filter field names that mean a field of the schema under another path (the schema's enum
#: of that field gives the values the filter takes).
FIELD_PATHS = {
    "status_category": "actual_status.category",
    "status.category": "actual_status.category",
    "ticket_status": "tickets.status",
    "tickets": "tickets.status",
}

#: Conditions that compare a value exactly (so an enum field's values are known); the text
#: conditions (contains, ilike, ...) and comparisons are not checked.
_EXACT_CONDITIONS = frozenset({"in", "not_in", "equals", "not_equals", "overlap", "notoverlapping"})


def leaves(tree: Any, limit: int = 100_000) -> Iterator[tuple[Mapping[str, Any], str]]:
    """The leaves of a filter tree, in document order, with their field's full name
    (``actual_status.key`` for a relation's leaf): groups, lists, relations and operands given as
    JSON text are walked without recursion, at most ``limit`` nodes."""
    todo: list[tuple[Any, str]] = [(tree, "")]
    seen = 0
    while todo and seen < limit:
        seen += 1
        node, prefix = todo.pop()
        if isinstance(node, str):
            try:
                node = json.loads(node)
            except (ValueError, RecursionError):
                continue
        if isinstance(node, (list, tuple)):
            todo.extend((n, prefix) for n in reversed(node))
            continue
        if not isinstance(node, Mapping):
            continue
        operands = node.get("operands")
        if isinstance(operands, (list, tuple)):
            todo.extend((o, prefix) for o in reversed(operands))
            continue
        name, condition = node.get("field"), node.get("condition")
        if not isinstance(name, str) or not isinstance(condition, str):
            continue
        full = f"{prefix}.{name}" if prefix else name.removeprefix("finding.")
        if condition == "":
            todo.append((node.get("value"), full))
            continue
        yield node, full


def unknown_values(tree: Any, enum_of: Callable[[str], tuple[str, Sequence[str]] | None]) -> str | None:
    """A message for the first value compared exactly with an enum field that is not one of its
    values, or None. ``enum_of(path)`` gives the enum's name and values for a field path (None
    when the field is not an enum)."""
    for node, full in leaves(tree):
        condition = str(node.get("condition"))
        if condition.lower() not in _EXACT_CONDITIONS:
            continue
        enum = enum_of(FIELD_PATHS.get(full, full))
        if enum is None:
            continue
        enum_name, values = enum
        members = frozenset(values)
        given = node.get("value")
        for v in given if isinstance(given, (list, tuple)) else (given,):
            if isinstance(v, str) and v not in members:
                close = suggestions(v, values)
                hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
                return (
                    f"filter field {full!r}: {v!r} is not a value of {enum_name}{hint}; "
                    f"valid values: {listed(values)}"
                )
    return None


def filter_tree(value: Filter | Mapping[str, Any] | str) -> dict[str, Any]:
    """The plain dict tree of a filter, checked.

    ``value`` is a :class:`Filter`, a dict tree as the API's filter JSON has it, or that JSON as
    text. Operands given as JSON text (which the service also accepts) come back parsed, and an
    ``exists`` value given as a bool comes back as ``"true"`` / ``"false"``. Anything else is
    returned as a fresh copy.

    Raises:
        ValidationError: the tree is malformed; the message names the bad node's path, e.g.
            ``operands[1]: unknown condition 'equal' (did you mean 'equals'?)``.
    """
    try:
        if isinstance(value, Filter):
            return value.to_dict()
        return _global_ids(_check_node(value, ""))
    except RecursionError:
        # A tree nested deeper than Python's recursion limit (or one that contains itself).
        raise ValidationError("invalid filter: it nests too deeply (does it contain itself?)") from None


def _fail(path: str, message: str) -> ValidationError:
    return ValidationError(f"invalid filter: {path or '(root)'}: {message}")


def _join(path: str, key: str) -> str:
    return f"{path}{key}" if key.startswith("[") or not path else f"{path}.{key}"


def _check_node(node: Any, path: str) -> dict[str, Any]:
    if isinstance(node, Filter):
        return node.to_dict()
    if isinstance(node, str):
        try:
            node = json.loads(node)
        except ValueError as exc:
            raise _fail(path, f"a filter given as text must be JSON: {exc}") from None
    if not isinstance(node, Mapping):
        raise _fail(path, f"expected a filter object (dict), got {type(node).__name__}")
    keys = set(node)
    if keys & _GROUP_KEYS and keys & _LEAF_KEYS:
        raise _fail(path, "a node is either a group (operator, operands) or a leaf (field, condition, value)")
    if keys & _GROUP_KEYS:
        return _check_group(node, path)
    if keys & _LEAF_KEYS:
        return _check_leaf(node, path)
    raise _fail(
        path,
        "expected a group {'operator', 'operands'} or a leaf {'field', 'condition', 'value'}, "
        f"got keys {sorted(map(str, keys))}",
    )


def _unexpected(node: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    for key in node:
        if key not in allowed:
            raise _fail(path, f"unexpected key {key!r}{did_you_mean(str(key), allowed)}")


def _check_group(node: Mapping[str, Any], path: str) -> dict[str, Any]:
    _unexpected(node, _GROUP_KEYS, path)
    if "operator" not in node:
        raise _fail(path, "a group needs 'operator' ('and' or 'or')")
    operator = node["operator"]
    if operator not in ("and", "or"):
        hint = ""
        if isinstance(operator, str) and operator.lower() in ("and", "or"):
            hint = f" (did you mean {operator.lower()!r}?)"
        raise _fail(_join(path, "operator"), f"must be 'and' or 'or', got {operator!r}{hint}")
    if "operands" not in node:
        raise _fail(path, "a group needs 'operands' (a non-empty list of filters)")
    operands = node["operands"]
    if not isinstance(operands, (list, tuple)):
        raise _fail(_join(path, "operands"), f"must be a list of filters, got {type(operands).__name__}")
    if not operands:
        raise _fail(_join(path, "operands"), "must not be empty")
    checked = [_check_node(o, _join(path, f"operands[{i}]")) for i, o in enumerate(operands)]
    return {"operator": operator, "operands": checked}


def _check_leaf(node: Mapping[str, Any], path: str) -> dict[str, Any]:
    _unexpected(node, _LEAF_KEYS, path)
    for key in ("field", "condition", "value"):
        if key not in node:
            raise _fail(path, f"a leaf needs {key!r} (it has {sorted(map(str, node))})")
    name, condition, value = node["field"], node["condition"], node["value"]
    if not isinstance(name, str) or not name:
        raise _fail(_join(path, "field"), f"must be a non-empty str, got {name!r}")
    if not isinstance(condition, str):
        raise _fail(_join(path, "condition"), f"must be a str, got {type(condition).__name__}")
    if condition == "":
        if not isinstance(value, (Mapping, Filter, str)):
            raise _fail(
                _join(path, "value"),
                f"a relation filter (condition '') needs a filter as value, got {type(value).__name__}",
            )
        return {"field": name, "condition": "", "value": _check_node(value, _join(path, "value"))}
    if condition not in CONDITIONS:
        problem = _unknown_condition(condition)
        if problem:
            raise _fail(path, problem)
        return {"field": name, "condition": condition, "value": value}
    where = _join(path, "value")
    if condition in _LIST_CONDITIONS:
        if not isinstance(value, (list, tuple)):
            raise _fail(where, f"condition {condition!r} needs a list of values, got {type(value).__name__}")
        items = []
        for i, item in enumerate(value):
            try:
                items.append(_check_scalar(item, "the value"))
            except ValidationError as e:
                raise _fail(f"{where}[{i}]", str(e).removeprefix("the value ")) from None
        return {"field": name, "condition": condition, "value": items}
    if condition == "exists":
        if isinstance(value, bool):
            # The service reads "True" / "true" as present and anything else as absent, so a
            # JSON true would silently mean "absent": send the text it recognizes.
            value = "true" if value else "false"
        elif not isinstance(value, str):
            raise _fail(where, f"condition 'exists' needs true/false or 'true'/'false', got {value!r}")
        return {"field": name, "condition": condition, "value": value}
    if isinstance(value, Mapping):
        raise _fail(
            where,
            f"condition {condition!r} takes one value; for a relation filter use condition ''",
        )
    if isinstance(value, (list, tuple, set)):
        raise _fail(where, f"condition {condition!r} takes one value, got {type(value).__name__}")
    try:
        value = _check_scalar(value, "the value")
    except ValidationError as e:
        raise _fail(where, f"condition {condition!r}: {str(e).removeprefix('the value ')}") from None
    return {"field": name, "condition": condition, "value": value}


class Tree(Filter):
    """A filter tree kept as the plain dict it was given in, to combine with built filters:
    ``all_of(Tree(filter_tree(tree)), field("severity").in_(["5"]))`` (``filter_tree`` checks
    it; this class does not)."""

    __slots__ = ("_tree",)

    def __init__(self, tree: Mapping[str, Any]) -> None:
        self._tree = dict(tree)

    def to_dict(self) -> dict[str, Any]:
        """The tree as it was given (a copy of the dict)."""
        return dict(self._tree)
