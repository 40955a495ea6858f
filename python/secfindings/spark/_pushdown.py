"""The filters Spark pushes down (``DataSourceReader.pushFilters``, PySpark 4.1 and later) in the
API's filter language, where they map onto what the public facts confirm of it.

The facts (docs/guides/testing.md, the "known" profile) confirm the conditions ``equals``,
``not_equals``, ``in``, ``not_in`` and ``exists``, the relation form
``{"field": "actual_status", "condition": "", "value": {...}}``, integer ids in ``id`` filters
and ``severity`` compared as text (``"4"``). They do not say how the service treats a null under
``not_in`` or ``not_equals``, nor how it compares numbers, times or booleans. So:

=================================  ================================================
Spark                              sent as
=================================  ================================================
``c = v``                          ``equals``
``c IN (v, ...)``                  ``in``
``NOT c = v`` / ``c <> v``         ``not_equals``
``NOT c IN (v, ...)``              ``not_in``
``c IS NULL`` / ``IS NOT NULL``    ``exists`` ``"false"`` / ``"true"``
=================================  ================================================

for a column that is a field of the filter catalogue (:data:`secfindings.filters.FIELDS`) and
holds text, and for ``id_int`` (integers), ``id`` (a finding's global id, sent as its integer id)
and ``severity`` (integers, sent as text). ``actual_status.category`` and the other one-level
dotted columns go as relation filters. Ranges, ``LIKE``, numbers, times and booleans are left to
Spark.

Every filter, sent or not, is also handed back to Spark, which checks it on the rows: the
server's answer only narrows what is read, so a server that treats nulls otherwise, or ignores a
filter, cannot change the result.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from secfindings.filters import FIELDS, ID_FIELDS, Filter, _as_global_id, all_of, field

__all__ = ["translate", "translate_all"]

#: Integer columns whose values are sent as integers (the facts' ``id`` filters).
_INT_FIELDS = frozenset({"id_int"})
#: Integer columns whose values are sent as text (the facts' ``severity`` values, ``"3"``).
_TEXT_INT_FIELDS = frozenset({"severity"})
_TEXT_TYPES = frozenset({"StringType", "VarcharType", "CharType"})
_INT_TYPES = frozenset({"LongType", "IntegerType", "ShortType", "ByteType"})
#: A value of each column that is not text, to ask whether the column maps at all.
_SAMPLE: dict[str, Any] = {"id": "RmluZGluZ3NWaWV3OjE=", "id_int": 1, "severity": 1}


def _column(attribute: Any) -> str | None:
    """The column a filter names: a one-part column path (a dotted column name arrives whole)."""
    if isinstance(attribute, tuple) and len(attribute) == 1 and isinstance(attribute[0], str):
        return attribute[0]
    return None


def _value(column: str, spark_type: str, value: Any) -> Any:
    """The value as the filter language takes it for this column, or None where it does not
    map (the filter is then left to Spark)."""
    if column == "id":
        found = _as_global_id(value)
        if spark_type in _TEXT_TYPES and found is not None and found[0] in ID_FIELDS["id"]:
            return found[1]
        return None
    if column in _INT_FIELDS and spark_type in _INT_TYPES:
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if column in _TEXT_INT_FIELDS and spark_type in _INT_TYPES:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else None
    if spark_type in _TEXT_TYPES and column not in _INT_FIELDS | _TEXT_INT_FIELDS:
        return value if isinstance(value, str) else None
    return None


def _on(column: str, build: Any) -> Filter:
    """``build(field)`` on the column; a dotted column as a relation filter."""
    owner, dot, inner = column.partition(".")
    if dot:
        return field(owner).where(build(field(inner)))
    result: Filter = build(field(column))
    return result


def translate(spark_filter: Any, types: dict[str, str]) -> Filter | None:
    """One pushed filter in the filter language, or None where it does not map. ``types``: the
    Spark type name of each column (``"StringType"``...)."""
    kind = type(spark_filter).__name__
    negated = kind == "Not"
    inner = spark_filter.child if negated else spark_filter
    inner_kind = type(inner).__name__
    column = _column(getattr(inner, "attribute", None))
    if column is None or column not in FIELDS or column not in types:
        return None
    if column.count(".") > 1:
        return None
    spark_type = types[column]
    if inner_kind in ("IsNull", "IsNotNull"):
        if negated or _value(column, spark_type, _SAMPLE.get(column, "")) is None:
            return None  # the null checks go where equality does (text, ids, severity)
        present = inner_kind == "IsNotNull"
        return _on(column, lambda f: f.exists(present))
    if inner_kind == "EqualTo":
        value = _value(column, spark_type, inner.value)
        if value is None:
            return None
        return _on(column, (lambda f: f.not_equals(value)) if negated else (lambda f: f.equals(value)))
    if inner_kind == "In":
        raw = tuple(inner.value)
        values = [_value(column, spark_type, v) for v in raw]
        if not values or any(v is None for v in values):
            return None
        return _on(column, (lambda f: f.not_in(values)) if negated else (lambda f: f.in_(values)))
    return None


def translate_all(filters: Sequence[Any], types: dict[str, str]) -> tuple[Filter | None, list[Any]]:
    """The filters that map, ANDed (None: none did), and those that did not."""
    sent: list[Filter] = []
    left: list[Any] = []
    for spark_filter in filters:
        got = translate(spark_filter, types)
        if got is None:
            left.append(spark_filter)
        else:
            sent.append(got)
    if not sent:
        return None, left
    return (all_of(*sent) if len(sent) > 1 else sent[0]), left
