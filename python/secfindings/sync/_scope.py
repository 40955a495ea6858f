"""The filter of a sync (``filters=``, ``--severity``, ``--status``, ``--filter``): the findings
table holds exactly the findings that match it.

Full loads and reconciles send it to the server. An incremental run must not: a finding that
stops matching (fixed, under ``--status open``) would never be read again, and would stay in
the table. So the incremental walk reads the changed findings unfiltered, and each one is judged
here: on its own row where the row has every column the filter names and the filter is made of
what can be decided on a row (``in`` / ``equals`` of scalar text or integer columns, joined by
``and`` / ``or``, as ``--severity`` and ``--status`` are), else by asking the server which of
the changed ids match (the filter AND ``id in [...]``, one request per page of changed ids).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from secfindings._shared import need
from secfindings.errors import ConfigurationError, ValidationError
from secfindings.filters import filter_tree
from secfindings.sync._names import column_name

__all__ = ["Scope", "refuse_change", "same_scope", "scope_of"]

#: The conditions decided on a row: a value among the filter's (compared as text).
_LOCAL = frozenset({"in", "equals"})

#: A filter nested deeper than this is judged by the server.
_MAX_DEPTH = 16

#: A test of a batch's rows against the filter: a boolean Arrow array, True where a row matches.
RowTest = Callable[[Any], Any]


@dataclass(frozen=True)
class Scope:
    """A sync's filter: the tree sent to the server and its canonical text (kept in
    ``sync_state.filters``)."""

    tree: dict[str, Any]
    text: str

    def with_(self, other: Any) -> dict[str, Any]:
        """The filter AND ``other`` (a :class:`~secfindings.filters.Filter`, a dict tree or None)."""
        if other is None:
            return self.tree
        extra = other.to_dict() if hasattr(other, "to_dict") else other
        return {"operator": "and", "operands": [self.tree, extra]}

    def local(self, schema: Any) -> RowTest | None:
        """A test of batches of ``schema`` (an Arrow schema of the table's column names), in
        Arrow compute (no Python object per row), or None where the server must judge (a column
        missing, or a condition that a row cannot decide the way the server does)."""
        scalar = {f.name for f in schema if _scalar(f.type)}
        return _compile(self.tree, "", scalar, 0)

    def matching(self, batch: Any, key: str, server: Callable[[list[int]], set[int]]) -> dict[int, bool]:
        """For each row of ``batch`` (table column names), whether it matches: ``{id: bool}``."""
        ids = batch.column(key).to_pylist()
        test = self.local(batch.schema)
        if test is None:
            wanted = [int(i) for i in ids if i is not None]
            found = server(wanted) if wanted else set()
            return {int(i): int(i) in found for i in ids if i is not None}
        return {int(i): bool(m) for i, m in zip(ids, test(batch).to_pylist(), strict=True) if i is not None}

    def leaves(self) -> list[str]:
        """The dotted fields of the filter's leaves a row can decide (``in``, ``equals``): what a
        lookup by id selects beside the id, so that a server that ignored part of the filter is
        judged on the rows it sends (``["severity", "actual_status.category"]``)."""
        out: list[str] = []
        _leaves(self.tree, "", out, 0)
        return out

    def keep(self, batch: Any) -> Any:
        """``batch`` without the rows that can be seen not to match (a server that ignored the
        filter); as it is where a row cannot tell."""
        test = self.local(batch.schema) if batch.num_rows else None
        if test is None:
            return batch
        mask = test(batch)
        if mask.true_count == batch.num_rows:
            return batch
        return batch.filter(mask)


def scope_of(filters: Any) -> Scope | None:
    """The scope of ``filters=`` (a Filter, a dict tree, JSON text, or None for every finding)."""
    if filters is None:
        return None
    tree = filter_tree(filters)
    try:
        text = json.dumps(tree, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"filters: not a filter that can be kept as JSON ({exc})") from None
    return Scope(tree, text)


#: Conditions whose value list is a set: its order says nothing.
_SET_CONDITIONS = frozenset({"in", "not_in", "overlap"})


def _key(node: Any) -> str:
    return json.dumps(node, sort_keys=True, separators=(",", ":"), default=str)


def _canonical(node: Any) -> Any:
    """``node`` with the order that says nothing taken out: the values of ``in``, ``not_in`` and
    ``overlap``, and the operands of ``and`` and ``or``, sorted."""
    if isinstance(node, list):
        return [_canonical(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _canonical(v) for k, v in node.items()}
    if out.get("condition") in _SET_CONDITIONS and isinstance(out.get("value"), list):
        out["value"] = sorted(out["value"], key=_key)
    if str(out.get("operator", "")).lower() in ("and", "or") and isinstance(out.get("operands"), list):
        out["operands"] = sorted(out["operands"], key=_key)
    return out


def same_scope(stored: str | None, wanted: str | None) -> bool:
    """Whether the filter a destination was synced with (its kept text) and this run's are the
    same filter: ``--severity high,critical`` is ``--severity critical,high``."""
    if stored is None or wanted is None:
        return stored == wanted
    try:
        return _key(_canonical(json.loads(stored))) == _key(_canonical(json.loads(wanted)))
    except (ValueError, RecursionError):  # a kept text that is not JSON: compared as text
        return stored == wanted


def _shown(text: str | None) -> str:
    if text is None:
        return "no filter (every finding)"
    return f"the filter {text if len(text) <= 200 else text[:197] + '...'}"


def refuse_change(dest: str, stored: str | None, wanted: str | None) -> None:
    """The one-line error for a destination synced with another filter (or none)."""
    raise ConfigurationError(
        f"{dest} was synced with {_shown(stored)}, not {_shown(wanted)}: use the same filter, or "
        "load it again under the new one with --reconcile (reconcile=True; rows that leave the "
        "filter are removed, history kept), or sync into a new destination"
    )


def _scalar(arrow_type: Any) -> bool:
    pa = need("pyarrow", "arrow", "sync()")
    t = arrow_type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_integer(t))


def _text(value: Any) -> str | None:
    """A value as the filter compares it: text; integers as their digits (a severity ``5``
    and the filter's ``"5"``). Anything else cannot be decided on a row."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, str)):
        return str(value)
    return None


def _compile(node: Any, prefix: str, columns: set[str], depth: int) -> RowTest | None:
    if depth > _MAX_DEPTH or not isinstance(node, Mapping):
        return None
    operands = node.get("operands")
    if operands is not None:
        op = str(node.get("operator", "")).lower()
        if op not in ("and", "or") or not isinstance(operands, Sequence) or not operands:
            return None
        parts = [_compile(o, prefix, columns, depth + 1) for o in operands]
        if any(p is None for p in parts):
            return None
        tests: list[RowTest] = [p for p in parts if p is not None]
        return _joined(op, tests)
    name, condition = node.get("field"), node.get("condition")
    if not isinstance(name, str) or not isinstance(condition, str):
        return None
    full = f"{prefix}.{name}" if prefix else name.removeprefix("finding.")
    if condition == "":
        # A relation (actual_status { category in [...] }): its leaf is the column actual_status_category.
        return _compile(node.get("value"), full, columns, depth + 1)
    if condition.lower() not in _LOCAL:
        return None
    column = column_name(full)
    if column not in columns:
        return None
    given = node.get("value")
    values = given if isinstance(given, (list, tuple)) else [given]
    wanted = {_text(v) for v in values}
    if None in wanted:
        return None
    return _member(column, wanted)


def _leaves(node: Any, prefix: str, out: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH or not isinstance(node, Mapping):
        return
    operands = node.get("operands")
    if operands is not None:
        if isinstance(operands, Sequence):
            for o in operands:
                _leaves(o, prefix, out, depth + 1)
        return
    name, condition = node.get("field"), node.get("condition")
    if not isinstance(name, str) or not isinstance(condition, str):
        return
    full = f"{prefix}.{name}" if prefix else name.removeprefix("finding.")
    if condition == "":
        _leaves(node.get("value"), full, out, depth + 1)
    elif condition.lower() in _LOCAL and full not in out:
        out.append(full)


def selection(paths: Iterable[str]) -> str:
    """Dotted fields as a selection: ``["a", "b.c"]`` is ``a b { c }``."""
    tree: dict[str, Any] = {}
    for path in paths:
        node = tree
        for part in path.split("."):
            node = node.setdefault(part, {})

    def shown(node: dict[str, Any]) -> str:
        return " ".join(f"{k} {{ {shown(v)} }}" if v else k for k, v in node.items())

    return shown(tree)


def _member(column: str, wanted: Iterable[str | None]) -> RowTest:
    pa = need("pyarrow", "arrow", "sync()")
    pc = need("pyarrow.compute", "arrow", "sync()")
    allowed = pa.array(sorted(w for w in wanted if w is not None), pa.string())

    def test(batch: Any) -> Any:
        values = batch.column(column)
        if not pa.types.is_string(values.type):
            values = pc.cast(values, pa.string())  # integers as their digits
        return pc.fill_null(pc.is_in(values, value_set=allowed), False)

    return test


def _joined(op: str, tests: list[RowTest]) -> RowTest:
    pc = need("pyarrow.compute", "arrow", "sync()")
    join = pc.and_ if op == "and" else pc.or_

    def test(batch: Any) -> Any:
        mask = tests[0](batch)
        for t in tests[1:]:
            mask = join(mask, t(batch))
        return mask

    return test
