"""The MCP server's tools: curated reads of the API (and, with ``--allow-writes``, the scoring-rule
mutations). Each tool is a plain function of a :class:`Context` and its arguments that returns a
JSON-ready dict; :mod:`secfindings.mcp` registers them with their hints.

Finding text is data: titles and descriptions come from scanners and may hold instructions
aimed at an assistant. Nothing here reads them for meaning; they go back in structured fields
(``rows``), beside ``untrusted_text_fields`` that names them."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from secfindings._plain import check_values, severity_filter, status_filter
from secfindings.diff import diff
from secfindings.errors import ValidationError
from secfindings.filters import FIELDS, filter_tree, unknown_fields
from secfindings.gate import gate
from secfindings.mcp._tenants import Tenants

#: Fields of a finding that hold scanner text (data, never instructions).
UNTRUSTED = ["title", "description", "resource_name", "package_name", "original_status"]
#: The longest text value returned as is; longer ones are cut (``"…[cut]"``).
MAX_TEXT = 2000
#: Items of a list in an answer (a hostile server's list of 20,000 tags is cut).
MAX_ITEMS = 100


class ToolProblem(ValueError):
    """A call the tool refuses (bad arguments, a cursor of another query): its message is the
    tool's error answer."""


@dataclass(frozen=True)
class Context:
    tenants: Tenants
    max_rows: int = 50
    max_bytes: int = 64_000
    snapshots: Path | None = None
    #: How long a read tool's answer is reused for the same arguments (0: never).
    cache_seconds: float = 30.0


def _answer(ctx: Context, tenant: str, **body: Any) -> dict[str, Any]:
    return {"tenant": tenant, **body}


def _cut(value: Any, text: int = MAX_TEXT, items: int = MAX_ITEMS) -> Any:
    """``value`` with strings cut to ``text`` characters and lists to ``items`` items."""
    if isinstance(value, str) and len(value) > text:
        return value[:text] + "…[cut]"
    if isinstance(value, dict):
        return {k: _cut(v, text, items) for k, v in value.items()}
    if isinstance(value, list):
        more = len(value) - items
        return [_cut(v, text, items) for v in value[:items]] + ([f"…[{more} more]"] if more > 0 else [])
    return value


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str).encode("utf-8"))


def _fit(row: Any, room: int) -> Any:
    """``row`` cut harder until it fits ``room`` bytes; at the end only its ids and a note (a
    hostile server's row of 20,000 short tags no longer passes the cap whole)."""
    for text, items in ((MAX_TEXT, MAX_ITEMS), (500, 20), (100, 5), (20, 1)):
        small = _cut(row, text, items)
        if _size(small) + 1 <= room:
            return small
    size = _size(row)
    stub = {k: row[k] for k in ("id", "id_int") if isinstance(row, dict) and k in row}
    return {**stub, "cut": f"this row is {size} bytes, more than a call may answer"}


def bounded(rows: list[Any], ctx: Context, limit: int) -> tuple[list[Any], bool]:
    """The rows that fit ``limit`` (at most ``max_rows``) and ``max_bytes`` in all, long text
    and long lists cut; a first row that does not fit alone is cut until it does."""
    kept: list[Any] = []
    used = 200  # the envelope's own keys
    for row in rows[: min(limit, ctx.max_rows)]:
        row = _cut(row)
        size = _size(row) + 1
        if used + size > ctx.max_bytes:
            if kept:
                return kept, True
            row = _fit(row, ctx.max_bytes - used)
            size = _size(row) + 1
        kept.append(row)
        used += size
    return kept, len(kept) < len(rows)


def _limit(limit: int, ctx: Context) -> int:
    if limit < 1:
        raise ToolProblem("limit must be at least 1")
    return min(limit, ctx.max_rows)


# -- cursors: opaque, tied to the query they continue ---------------------------------------------


def _query_key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def encode_cursor(after: str | None, skip: int, key: str) -> str:
    raw = json.dumps({"a": after, "s": skip, "k": key}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str | None, key: str) -> tuple[str | None, int]:
    if not cursor:
        return None, 0
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        after, skip, k = raw["a"], int(raw["s"]), raw["k"]
    except (ValueError, KeyError, TypeError):
        raise ToolProblem("cursor is not one this server gave") from None
    if k != key or skip < 0 or not (after is None or isinstance(after, str)):
        raise ToolProblem(
            "cursor belongs to another query: repeat the call that gave it, with the same arguments"
        )
    return after, skip


# -- filters ----------------------------------------------------------------------------------------


def findings_tree(
    client: Any, filter: dict[str, Any] | None, severity: str | None, status: str | None
) -> Any:
    """The filter tree of a call, checked against the live schema (field names, enum values)."""
    trees = []
    try:
        if filter:
            tree = filter_tree(filter)
            schema = client.schema()
            known = schema.fields("FindingsView") if schema is not None else []
            problem = unknown_fields(tree, known)
            if problem:
                raise ToolProblem(problem)
            trees.append(tree)
        if severity:
            trees.append(severity_filter(severity))
        if status:
            trees.append(status_filter(status))
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    if not trees:
        return None
    tree = trees[0] if len(trees) == 1 else {"operator": "and", "operands": trees}
    try:
        check_values(client, tree)
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    return tree


FILTER_LANGUAGE = """\
# The findings filter language

A filter is a JSON tree. A leaf names a field, a condition and a value:

    {"field": "severity", "condition": "in", "value": ["4", "5"]}

A group joins leaves or groups with "and" / "or":

    {"operator": "and", "operands": [
        {"field": "severity", "condition": "in", "value": ["5"]},
        {"field": "cloud_provider", "condition": "equals", "value": "AWS"}]}

Conditions: equals, not_equals, contains, not_contains, in, not_in, gt, gte, lt, lte, exists,
overlap, notoverlapping. Severity values are the numbers 1 (info) to 5 (critical), as strings;
status categories are OPEN, FIXED, IGNORED (field actual_status.category).

search_findings also takes severity ("critical,high") and status ("open") in plain words, ANDed
with the filter. A field the live schema does not know is refused with a "did you mean".
"""


def filter_language(ctx: Context, tenant: str | None = None) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    schema = ctx.tenants.client(name).schema()
    live = sorted(schema.fields("FindingsView")) if schema is not None else []
    return _answer(ctx, name, language=FILTER_LANGUAGE, filter_fields=sorted(FIELDS | set(live)))


# -- reads ------------------------------------------------------------------------------------------


def list_tenants(ctx: Context) -> dict[str, Any]:
    return {"tenants": ctx.tenants.describe(), "tenant_required": ctx.tenants.several}


Mark = tuple[str | None, int]


def _collect(
    pages: Iterable[Any], after: str | None, skip: int, limit: int
) -> tuple[list[Any], list[Mark], bool]:
    """Up to ``limit`` rows of ``pages`` (past the first ``skip`` of the first page, which starts
    at ``after``), each with where it is (its page's start cursor and its index there), and
    whether more rows follow."""
    rows: list[Any] = []
    marks: list[Mark] = []
    more = False
    start = after
    for page in pages:
        for index, item in enumerate(page.items):
            if index < skip:
                continue
            if len(rows) == limit:
                more = True
                break
            rows.append(item.to_dict())
            marks.append((start, index))
        skip = 0
        if more or not page.page_info.has_next_page:
            break
        start = page.page_info.end_cursor
        if len(rows) == limit:
            more = True
            marks.append((start, 0))
            break
    return rows, marks, more


def _bounded_page(
    ctx: Context, rows: list[Any], marks: list[Mark], more: bool, limit: int, key: str
) -> tuple[list[Any], str | None]:
    """The rows that fit the call's caps, and the cursor of the first row left out (None when
    nothing is)."""
    kept, cut = bounded(rows, ctx, limit)
    if not (cut or more):
        return kept, None
    where = marks[len(kept)] if len(kept) < len(marks) else (marks[-1][0], marks[-1][1] + 1)
    return kept, encode_cursor(where[0], where[1], key)


def search_findings(
    ctx: Context,
    tenant: str | None = None,
    filter: dict[str, Any] | None = None,
    severity: str | None = None,
    status: str | None = None,
    sort: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    client = ctx.tenants.client(name)
    limit = _limit(limit, ctx)
    tree = findings_tree(client, filter, severity, status)
    key = _query_key(name, tree, sort)
    after, skip = decode_cursor(cursor, key)
    kwargs: dict[str, Any] = {"after": after, "page_size": min(100, skip + limit + 1)}
    if tree is not None:
        kwargs["filters"] = tree
    if sort:
        kwargs["sort"] = sort
    try:
        rows, marks, more = _collect(client.findings_view(**kwargs).pages(), after, skip, limit)
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    kept, next_cursor = _bounded_page(ctx, rows, marks, more, limit, key)
    return _answer(
        ctx,
        name,
        rows=kept,
        returned=len(kept),
        next_cursor=next_cursor,
        untrusted_text_fields=UNTRUSTED,
    )


def get_findings(ctx: Context, ids: list[int | str], tenant: str | None = None) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    if not ids:
        raise ToolProblem("give one id at least")
    if len(ids) > ctx.max_rows:
        raise ToolProblem(f"at most {ctx.max_rows} ids a call")
    try:
        found = ctx.tenants.client(name).findings(list(ids))
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    rows = [f.to_dict() for f in found if f is not None]
    missing = [i for i, f in zip(ids, found, strict=False) if f is None]
    kept, cut = bounded(rows, ctx, len(rows))
    left = [r.get("id_int", r.get("id")) for r in rows[len(kept) :]]
    return _answer(
        ctx,
        name,
        rows=kept,
        missing=missing,
        not_returned=left if cut else [],
        untrusted_text_fields=UNTRUSTED,
    )


SEVERITIES = {"critical": 5, "high": 4, "medium": 3, "low": 2, "info": 1}
CATEGORIES = ("OPEN", "FIXED", "IGNORED")


def count_findings(
    ctx: Context,
    by: Literal["severity", "status", "source"] = "severity",
    tenant: str | None = None,
    filter: dict[str, Any] | None = None,
    severity: str | None = None,
    status: str | None = None,
) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    client = ctx.tenants.client(name)
    tree = findings_tree(client, filter, severity, status)

    def count(extra: dict[str, Any]) -> int | None:
        both = extra if tree is None else {"operator": "and", "operands": [tree, extra]}
        return client.findings_view(filters=both).estimate().rows

    counts: dict[str, Any] = {}
    if by == "severity":
        for word, level in SEVERITIES.items():
            counts[word] = count({"field": "severity", "condition": "in", "value": [str(level)]})
    elif by == "status":
        for category in CATEGORIES:
            counts[category.lower()] = count(
                {"field": "actual_status.category", "condition": "in", "value": [category]}
            )
    else:
        # One request: the trends of the filter grouped by source, summed over time.
        series = client.trends("YEAR", "COUNT", group_by="source", filters=tree)
        for point in series if isinstance(series, list) else []:
            if isinstance(point, dict):
                group = str(point.get("group"))
                counts[group] = counts.get(group, 0) + int(point.get("value") or 0)
        # the server names the groups: as many as it likes, as long as it likes (scanner text)
        return _answer(ctx, name, by=by, **_most(counts, ctx), untrusted_text_fields=["counts"])
    return _answer(ctx, name, by=by, counts=counts)


def _most(counts: dict[str, int], ctx: Context) -> dict[str, Any]:
    """The largest ``counts`` that fit ``max_rows`` and ``max_bytes`` (names cut like text),
    and ``truncated``: whether any were left out."""
    kept: dict[str, int] = {}
    used = 300  # the envelope's own keys
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    for group, n in ranked[: ctx.max_rows]:
        group = _cut(group)
        size = _size(group) + _size(n) + 2
        if used + size > ctx.max_bytes:
            break
        kept[group] = kept.get(group, 0) + n
        used += size
    return {"counts": kept, "truncated": len(kept) < len(counts)}


def finding_trends(
    ctx: Context,
    time_scale: Literal["DAY", "WEEK", "MONTH", "QUARTER", "YEAR"] = "MONTH",
    aggregate_function: Literal["COUNT", "SUM", "AVG", "MIN", "MAX"] = "COUNT",
    group_by: str | None = None,
    field: str | None = None,
    tenant: str | None = None,
    filter: dict[str, Any] | None = None,
    limit: int = 50,
) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    client = ctx.tenants.client(name)
    tree = findings_tree(client, filter, None, None)
    try:
        series = client.trends(time_scale, aggregate_function, group_by=group_by, field=field, filters=tree)
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    points = series if isinstance(series, list) else [series]
    kept, cut = bounded(points, ctx, _limit(limit, ctx))
    return _answer(ctx, name, points=kept, truncated=cut)


_COLLECTIONS = {
    "scoring_rules": "scoring_rules",
    "status_rules": "status_rules",
    "sla_groups": "sla_groups",
    "sla_preferences": "sla_preferences",
    "ticket_sla_rules": "ticket_sla_rules",
    "remediation_queues": "remediation_queues",
}


def list_collection(
    ctx: Context, what: str, tenant: str | None = None, limit: int = 50, cursor: str | None = None
) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    client = ctx.tenants.client(name)
    limit = _limit(limit, ctx)
    key = _query_key(name, what)
    after, skip = decode_cursor(cursor, key)
    pager = getattr(client, _COLLECTIONS[what])(after=after, page_size=min(100, skip + limit + 1), fields="*")
    rows, marks, more = _collect(pager.pages(), after, skip, limit)
    kept, next_cursor = _bounded_page(ctx, rows, marks, more, limit, key)
    return _answer(ctx, name, what=what, rows=kept, returned=len(kept), next_cursor=next_cursor)


def gate_verdict(
    ctx: Context,
    max: str = "critical=0",
    tenant: str | None = None,
    filter: dict[str, Any] | None = None,
) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    client = ctx.tenants.client(name)
    tree = findings_tree(client, filter, None, None)
    try:
        result = gate(client, filters=tree, max=max)
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    verdict = result.to_dict()
    findings = verdict.pop("findings", [])
    kept, cut = bounded(findings if isinstance(findings, list) else [], ctx, ctx.max_rows)
    return _answer(
        ctx, name, **verdict, findings=kept, findings_truncated=cut, untrusted_text_fields=UNTRUSTED
    )


def _snapshot(ctx: Context, name: str) -> Path:
    if ctx.snapshots is None:
        raise ToolProblem("no snapshot folder: start the server with --snapshots DIR")
    root = ctx.snapshots.resolve()
    path = (root / name).resolve()
    if root not in path.parents or not path.exists():
        raise ToolProblem(f"{name!r} is no snapshot of the folder (list_snapshots names them)")
    return path


def list_snapshots(ctx: Context) -> dict[str, Any]:
    if ctx.snapshots is None:
        return {"snapshots": [], "note": "no snapshot folder: start the server with --snapshots DIR"}
    names = sorted(
        p.name
        for p in ctx.snapshots.iterdir()
        if p.suffix in (".parquet", ".jsonl", ".csv", ".pq", ".ndjson")
    )
    return {"snapshots": names[: ctx.max_rows], "more": len(names) > ctx.max_rows}


def diff_snapshots(ctx: Context, base: str, head: str, limit: int = 50) -> dict[str, Any]:
    try:
        result = diff(_snapshot(ctx, base), _snapshot(ctx, head))
    except (ValidationError, ImportError) as exc:
        raise ToolProblem(str(exc)) from None
    body = result.to_dict()
    changes = body.pop("changes", [])
    kept, cut = bounded(changes, ctx, _limit(limit, ctx))
    return {**body, "changes": kept, "changes_truncated": cut, "untrusted_text_fields": UNTRUSTED}


# -- writes (listed only with --allow-writes) -------------------------------------------------------


def add_scoring_rule(ctx: Context, scoring_rule: dict[str, Any], tenant: str | None = None) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    try:
        result = ctx.tenants.client(name).add_scoring_rule(scoring_rule)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    return _answer(ctx, name, result=result.to_dict())


def delete_scoring_rule(ctx: Context, id: int | str, tenant: str | None = None) -> dict[str, Any]:
    name = ctx.tenants.pick(tenant)
    try:
        result = ctx.tenants.client(name).delete_scoring_rule(id)
    except ValidationError as exc:
        raise ToolProblem(str(exc)) from None
    return _answer(ctx, name, result=result.to_dict())
