"""A CI gate on findings: ``secfindings.gate(client, ...)`` and ``secfindings gate``.

Counts the findings a filter selects (open ones only, unless ``open_only=False``) per severity and
compares each count with its limit (``max``: ``{"critical": 0, "high": 5}`` or the command's
``critical=0,high=5``; severities critical, high, medium, low, info are 5..1; a severity without a
limit is not limited, and no ``max`` at all means no finding may be counted). A finding the
gate cannot place (a severity that is missing or not 1..5) counts as ``unknown``, a row of its
own whose limit is 0 unless ``max`` names it (``unknown=3``): it never passes unseen. With a
``baseline`` (an export file of an earlier run: Parquet, JSON lines or CSV) every finding of
the baseline is left out (``new_only``, which a baseline implies), so only new findings can
fail the gate, as snyk-delta does.

The gate asks only for what the server's live schema has: fields the server's ``FindingsView``
lacks are left out of its selection (one WARNING names them), and where it has no ``severity``
the findings are placed by one walk per severity level with the filter field ``severity``
(``"5"`` .. ``"1"``) ANDed with the caller's filter, and one walk for those of no level.

The result (:class:`GateResult`) says whether the gate passed and renders as a one-screen text,
Markdown (for ``$GITHUB_STEP_SUMMARY``), JUnit XML (one test case per limit, a failure per
exceeded limit), SARIF 2.1.0 (the counted findings) or JSON. The command exits 0 when it passed,
4 when a limit was exceeded, and as every command does otherwise: 1 the API or network failed,
2 bad usage, 3 authentication failed.
"""

from __future__ import annotations

import json
import math
import os
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from secfindings._client import AsyncClient
from secfindings._plain import check_values, plural
from secfindings._shared import need
from secfindings.diff import read_snapshot
from secfindings.errors import GraphQLError, ValidationError
from secfindings.filters import Filter, filter_tree
from secfindings.formats import (
    SEVERITIES,
    SEVERITY_OF,
    line_text,
    markdown_text,
    selection,
    severity_name,
    strict_dumps,
    value,
)
from secfindings.formats.sarif import sarif_log

__all__ = ["EXCEEDED", "GATE_FIELDS", "UNKNOWN", "GateResult", "Threshold", "gate", "parse_max"]

EXCEEDED = 4
"""The exit code of ``secfindings gate`` when a limit was exceeded."""
GATE_FIELDS = (
    "id id_int title severity score sla_status due_date source resource_name resource_type "
    "cloud_provider cloud_account finding_id package_name actual_status { key category }"
)
"""What the gate selects of each finding (what its outputs show)."""
#: The filter that keeps open findings (ANDed with the caller's unless ``open_only=False``).
OPEN = {
    "field": "actual_status",
    "condition": "",
    "value": {"field": "category", "condition": "in", "value": ["OPEN"]},
}
#: Worst findings a text or Markdown summary lists.
SHOWN = 10
UNKNOWN = "unknown"
"""The row of findings whose severity is missing or not 1..5 (limit 0 unless ``max`` names it)."""
_ORDER = [name for _, name in sorted(SEVERITIES.items(), reverse=True)]
_ROWS = [*_ORDER, UNKNOWN]


def place(severity: Any) -> int | None:
    """The API's severity 1..5 of a value (an int, an integral float or the text of one, as
    the filter language has them); None for anything else (null, 0, 6, 99, "high", True)."""
    if isinstance(severity, bool):
        return None
    if isinstance(severity, float) and severity.is_integer():
        severity = int(severity)
    elif isinstance(severity, str) and severity.strip().isdigit() and severity.strip().isascii():
        severity = int(severity.strip())
    return severity if isinstance(severity, int) and 1 <= severity <= 5 else None


def _number(v: Any) -> float:
    """A score as a number to sort by (0 for anything that is not a finite number)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return 0.0
    return float(v) if math.isfinite(v) else 0.0


#: What XML 1.0 cannot hold (its Char production): C0 controls but tab, LF and CR; lone
#: surrogates; U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: Any) -> str:
    """``text`` with every character XML 1.0 cannot hold (ESC, NUL, form feed, U+FFFE, ...)
    replaced by U+FFFD, so that a JUnit report parses whatever a finding's title holds."""
    return _NOT_XML.sub("\ufffd", "" if text is None else str(text))


def parse_max(spec: str | Mapping[str, int] | None) -> dict[str, int]:
    """Limits per severity name from ``critical=0,high=5`` (or a mapping): names are critical,
    high, medium, low, info (or informational), and unknown (a severity missing or not 1..5,
    limited to 0 when not named); counts are whole numbers >= 0. None: every severity at 0.
    Raises :class:`~secfindings.ValidationError` naming the bad part."""
    accepted = "critical, high, medium, low, info, unknown"
    if spec is None:
        return dict.fromkeys(_ORDER, 0)
    if isinstance(spec, str):
        pairs: list[tuple[str, Any]] = []
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            name, sep, count = part.partition("=")
            if not sep:
                raise ValidationError(f"--max: {part!r} is not SEVERITY=COUNT (e.g. critical=0,high=5)")
            pairs.append((name.strip(), count.strip()))
        if not pairs:
            raise ValidationError(f"--max: no limit given (e.g. critical=0,high=5; severities {accepted})")
    elif isinstance(spec, Mapping):
        pairs = list(spec.items())
    else:
        raise ValidationError(
            f"max must be text like 'critical=0,high=5' or a mapping, not {type(spec).__name__}"
        )
    limits: dict[str, int] = {}
    for name, count in pairs:
        key = str(name).lower()
        if key not in SEVERITY_OF and key != UNKNOWN:
            raise ValidationError(f"--max: unknown severity {name!r}: one of {accepted}")
        sev = UNKNOWN if key == UNKNOWN else SEVERITIES[SEVERITY_OF[key]]
        if sev in limits:
            raise ValidationError(f"--max: {sev} is given twice")
        try:
            n = int(count) if not isinstance(count, bool) else -1
        except (TypeError, ValueError):
            n = -1
        if n < 0 or (isinstance(count, float) and count != n):
            raise ValidationError(f"--max: {name}={count!r}: the count must be a whole number >= 0")
        limits[sev] = n
    return {sev: limits[sev] for sev in _ROWS if sev in limits}


@dataclass(frozen=True)
class Threshold:
    """One limit: ``count`` findings of ``severity`` were counted, at most ``limit`` allowed."""

    severity: str
    limit: int
    count: int

    @property
    def exceeded(self) -> bool:
        """More findings than the limit allows."""
        return self.count > self.limit

    @property
    def name(self) -> str:
        """``critical findings <= 0``."""
        return f"{self.severity} findings <= {self.limit}"

    @property
    def message(self) -> str:
        """``3 critical findings, at most 0 allowed`` (``1 critical finding``)."""
        return f"{plural(self.count, self.severity + ' finding')}, at most {self.limit} allowed"


@dataclass
class GateResult:
    """What the gate counted and decided. ``findings`` holds the counted findings (as dicts of
    :data:`GATE_FIELDS`), ``ignored`` how many of the filter's findings the baseline left out."""

    thresholds: list[Threshold]
    counts: dict[str, int]
    findings: list[dict[str, Any]] = field(default_factory=list)
    ignored: int = 0
    baseline: str | None = None
    new_only: bool = False
    open_only: bool = True
    filters: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        """No limit exceeded."""
        return not self.exceeded

    @property
    def exceeded(self) -> list[Threshold]:
        """The limits exceeded, worst severity first."""
        return [t for t in self.thresholds if t.exceeded]

    @property
    def exit_code(self) -> int:
        """0 passed, 4 (:data:`EXCEEDED`) a limit was exceeded."""
        return 0 if self.passed else EXCEEDED

    @property
    def total(self) -> int:
        """Findings counted."""
        return len(self.findings)

    def worst(self, n: int = SHOWN) -> list[dict[str, Any]]:
        """The ``n`` counted findings of the highest severity and score."""
        return sorted(
            self.findings, key=lambda f: (-(place(f.get("severity")) or 0), -_number(f.get("score")))
        )[:n]

    def _verdict(self) -> str:
        n = len(self.thresholds)
        if self.passed:
            return f"passed ({plural(n, 'limit')} held)"
        return f"FAILED ({len(self.exceeded)} of {plural(n, 'limit')} exceeded)"

    def _scope(self, markdown: bool = False) -> str:
        what = "open finding" if self.open_only else "finding"
        text = f"counted {plural(self.total, what)}"
        if self.filters is not None:
            tree = json.dumps(self.filters, separators=(",", ":"), ensure_ascii=False)[:200]
            text += f" of filter {markdown_text(tree) if markdown else tree}"
        if self.new_only:
            where = markdown_text(self.baseline) if markdown else self.baseline
            text += f"; {self.ignored} in baseline {where} not counted"
        return text

    def _rows(self) -> list[tuple[str, Threshold | None]]:
        """The rows of a summary: the five severities, and unknown when it counted or is limited."""
        limits = {t.severity: t for t in self.thresholds}
        return [
            (sev, limits.get(sev))
            for sev in _ROWS
            if sev != UNKNOWN or self.counts.get(UNKNOWN) or UNKNOWN in limits
        ]

    @staticmethod
    def _id(f: Mapping[str, Any]) -> str:
        found = f.get("id_int") if f.get("id_int") is not None else f.get("id")
        return "?" if found is None else str(found)

    @staticmethod
    def _score(f: Mapping[str, Any]) -> str:
        score = f.get("score")
        return str(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else ""

    def to_text(self) -> str:
        """A one-screen summary: the verdict, counts against limits, the worst findings."""
        lines = [f"secfindings gate: {self._verdict()}", "  severity   found    max"]
        for sev, t in self._rows():
            mark = "  exceeded" if t is not None and t.exceeded else ""
            lines.append(f"  {sev:<9} {self.counts.get(sev, 0):>6} {t.limit if t else '-':>6}{mark}")
        lines.append(line_text(self._scope()))
        worst = self.worst()
        if worst:
            lines.append("worst:")
            for f in worst:
                where = line_text(f.get("resource_name"))
                title = line_text(f.get("title"), 70)
                line = f"  {severity_name(place(f.get('severity'))) or '?':<8} {self._score(f) or 0:>5} "
                line += f"#{self._id(f)}  {title}" + (f"  ({where})" if where else "")
                lines.append(line.rstrip())
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """A Markdown summary (what ``$GITHUB_STEP_SUMMARY`` gets). Every text of a finding or
        of the caller is escaped for Markdown (:func:`secfindings.formats.markdown_text`)."""
        out = [
            f"### secfindings gate: {self._verdict()}",
            "",
            "| severity | found | max | |",
            "|---|---:|---:|---|",
        ]
        for sev, t in self._rows():
            mark = "**exceeded**" if t is not None and t.exceeded else ""
            out.append(f"| {sev} | {self.counts.get(sev, 0)} | {t.limit if t else '-'} | {mark} |")
        out += ["", self._scope(markdown=True) + "."]
        worst = self.worst()
        if worst:
            out += ["", "| severity | score | id | title | resource |", "|---|---:|---|---|---|"]
            for f in worst:
                cells = [
                    severity_name(place(f.get("severity"))) or "?",
                    self._score(f),
                    markdown_text(self._id(f)),
                    markdown_text(f.get("title"), 100),
                    markdown_text(f.get("resource_name")),
                ]
                out.append("| " + " | ".join(cells) + " |")
        return "\n".join(out) + "\n"

    def to_junit(self) -> str:
        """JUnit XML: a test case per limit, a failure per exceeded limit listing its findings."""
        suites = ET.Element("testsuites", name="secfindings gate")
        suite = ET.SubElement(suites, "testsuite", name="secfindings gate")
        for el in (suites, suite):
            el.set("tests", str(len(self.thresholds)))
            el.set("failures", str(len(self.exceeded)))
            el.set("errors", "0")
        suite.set("skipped", "0")
        for t in self.thresholds:
            case = ET.SubElement(suite, "testcase", classname="secfindings.gate", name=t.name)
            if t.exceeded:
                failure = ET.SubElement(case, "failure", message=t.message, type="threshold")
                sev = SEVERITY_OF.get(t.severity)
                lines = [
                    xml_text(f"#{self._id(f)} {line_text(f.get('title'))}")
                    for f in self.findings
                    if place(f.get("severity")) == sev
                ]
                failure.text = "\n".join(lines[:200]) + (
                    f"\n... {len(lines) - 200} more" if len(lines) > 200 else ""
                )
        ET.indent(suites)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"

    def to_sarif(self) -> str:
        """A SARIF 2.1.0 log of the counted findings (see :mod:`secfindings.formats.sarif`)."""
        return strict_dumps(sarif_log(self.findings), ensure_ascii=False, indent=1) + "\n"

    def to_dict(self) -> dict[str, Any]:
        """The verdict, counts, limits and counted findings (JSON-ready)."""
        return {
            "passed": self.passed,
            "exit_code": self.exit_code,
            "counts": dict(self.counts),
            "thresholds": [
                {"severity": t.severity, "max": t.limit, "count": t.count, "exceeded": t.exceeded}
                for t in self.thresholds
            ],
            "counted": self.total,
            "ignored_by_baseline": self.ignored,
            "baseline": self.baseline,
            "new_only": self.new_only,
            "open_only": self.open_only,
            "filters": self.filters,
            "findings": self.findings,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return strict_dumps(self.to_dict(), ensure_ascii=False, indent=1, default=str) + "\n"

    def render(self, fmt: str) -> str:
        """The result as ``text``, ``markdown``, ``junit``, ``sarif`` or ``json``."""
        renders = {
            "text": self.to_text,
            "markdown": self.to_markdown,
            "junit": self.to_junit,
            "sarif": self.to_sarif,
            "json": self.to_json,
        }
        if fmt not in renders:
            raise ValidationError(f"unknown format {fmt!r}: one of {', '.join(renders)}")
        return renders[fmt]()


def baseline_ids(path: str | os.PathLike[str]) -> tuple[str, set[Any]]:
    """The id column a baseline export has (``id_int``, else ``id``) and its ids. A column of
    anything but whole numbers (``id_int``) or text (``id``) is a
    :class:`~secfindings.ValidationError`."""
    table = read_snapshot(path, "the gate's baseline")
    pa = need("pyarrow", "arrow", "the gate's baseline")  # read_snapshot has loaded it

    where = os.fspath(path)
    for key, fits, what in (
        ("id_int", pa.types.is_integer, "whole numbers"),
        ("id", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "text"),
    ):
        if key in table.column_names:
            column = table.column(key)
            if pa.types.is_dictionary(column.type):
                column = column.cast(column.type.value_type)
            if not fits(column.type):
                raise ValidationError(
                    f"the baseline {where}: its {key} column holds {column.type}, not {what}: "
                    "give an export of findings (secfindings export findings)"
                )
            return key, set(column.drop_null().to_pylist())
    raise ValidationError(
        f"the baseline {where} has no id column (id_int or id): export it with them selected"
    )


#: The top-level fields of :data:`GATE_FIELDS` a counted finding keeps (and its status).
_KEPT = (
    "id",
    "id_int",
    "title",
    "severity",
    "score",
    "sla_status",
    "due_date",
    "source",
    "resource_name",
    "resource_type",
    "cloud_provider",
    "cloud_account",
    "finding_id",
    "package_name",
)


def _row(item: Any) -> dict[str, Any]:
    """A finding (a model or a node, nested or flattened) as the dict a result keeps. A null
    node (a finding the server sent nothing of) is a row of nulls: it is counted, as unknown."""
    data = item.to_dict() if hasattr(item, "to_dict") else item
    if not isinstance(data, Mapping):
        data = {}
    row = {k: value(data, k) for k in _KEPT}
    row["actual_status"] = {
        "key": value(data, "actual_status.key"),
        "category": value(data, "actual_status.category"),
    }
    return row


def _hashable(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float))


def count(
    findings: Iterable[Any],
    *,
    max: str | Mapping[str, int] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    new_only: bool | None = None,
    open_only: bool = True,
    filters: dict[str, Any] | None = None,
    known: tuple[str, set[Any]] | None = None,
) -> GateResult:
    """The gate over findings already at hand (models or dicts of :data:`GATE_FIELDS`); see
    :func:`gate`. ``known``: the baseline's id column and ids, when already read."""
    limits = parse_max(max)
    new_only = _new_only(baseline, new_only)
    if known is None:
        known = baseline_ids(baseline) if baseline is not None else ("id_int", set())
    key, ids = known
    counts = dict.fromkeys(_ROWS, 0)
    counted: list[dict[str, Any]] = []
    ignored = 0
    for item in findings:
        row = _row(item)
        if open_only and row["actual_status"]["category"] not in (None, "OPEN"):
            continue
        if new_only and _hashable(row.get(key)) and row.get(key) in ids:
            ignored += 1
            continue
        counts[severity_name(place(row.get("severity"))) or UNKNOWN] += 1
        counted.append(row)
    # A finding of no severity fails the gate unless max limits them: never passes unseen.
    if counts[UNKNOWN] and UNKNOWN not in limits:
        limits[UNKNOWN] = 0
    thresholds = [Threshold(sev, limit, counts[sev]) for sev, limit in limits.items()]
    return GateResult(
        thresholds=thresholds,
        counts=counts,
        findings=counted,
        ignored=ignored,
        baseline=None if baseline is None else os.fspath(baseline),
        new_only=new_only,
        open_only=open_only,
        filters=filters,
    )


def _new_only(baseline: Any, new_only: bool | None) -> bool:
    """``new_only`` as given, or implied by a baseline; a baseline with ``new_only=False`` (it
    would be read for nothing) and ``new_only`` without one are refused."""
    if new_only is None:
        return baseline is not None
    if new_only and baseline is None:
        raise ValidationError("new_only needs a baseline: give the export file of an earlier run")
    if not new_only and baseline is not None:
        raise ValidationError(
            "a baseline is only used to leave its findings out (new_only): drop new_only=False, "
            "or the baseline"
        )
    return new_only


def _and(*trees: Any) -> Any:
    operands = [t for t in trees if t is not None]
    if not operands:
        return None
    return operands[0] if len(operands) == 1 else {"operator": "and", "operands": operands}


#: The findings of no severity level: a value other than "1".."5", or none.
_NO_LEVEL = {
    "operator": "or",
    "operands": [
        {"field": "severity", "condition": "not_in", "value": [str(s) for s in SEVERITIES]},
        {"field": "severity", "condition": "exists", "value": "false"},
    ],
}


def _walk(client: Any, server: Any, page_size: int, need: str | None) -> Iterator[Any]:
    """The findings of the filter ``server``, with the fields the live schema has. Where
    ``FindingsView`` has no ``severity``, one walk per level with the filter field ``severity``
    places them (and one walk those of no level); a finding seen twice counts once."""
    schema = client.schema()
    have = set(schema.fields("FindingsView")) if schema is not None else None
    severity = have is None or "severity" in have
    note = "" if severity else "severity: one walk per level, filtered on severity"
    fields = selection(client, GATE_FIELDS, "gate", note=note)
    if need is not None and have is not None and need not in have:
        raise ValidationError(
            f"gate --baseline matches findings by {need}, and this server's FindingsView has no {need}"
        )
    if severity:
        yield from client.findings_view(filters=server, fields=fields, page_size=page_size)
        return
    seen: set[Any] = set()
    levels: list[tuple[int | None, Any]] = [
        (sev, {"field": "severity", "condition": "in", "value": [str(sev)]})
        for sev in sorted(SEVERITIES, reverse=True)
    ]
    for sev, leaf in [*levels, (None, _NO_LEVEL)]:
        items: Iterator[Any] = iter(
            client.findings_view(filters=_and(server, leaf), fields=fields, page_size=page_size)
        )
        if sev == levels[0][0]:
            try:
                first = next(items, _END)
            except GraphQLError as exc:
                # The one thing the gate cannot do without: placing a finding by its severity.
                raise ValidationError(
                    "the gate counts findings per severity, and this server has no severity on "
                    f"FindingsView and refused a filter on it: {line_text(exc, 200)}"
                ) from None
            items = _chain(first, items)
        for item in items:
            row = _row(item)
            ident = row.get("id") if row.get("id") is not None else row.get("id_int")
            if ident is not None and _hashable(ident):
                if ident in seen:
                    continue
                seen.add(ident)
            row["severity"] = sev
            yield row


_END = object()


def _chain(first: Any, rest: Any) -> Iterator[Any]:
    """``first`` (unless the walk had nothing: :data:`_END`), then the rest of the walk."""
    if first is _END:
        return
    yield first
    yield from rest


def gate(
    client: Any,
    *,
    filters: Filter | Mapping[str, Any] | str | None = None,
    max: str | Mapping[str, int] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    new_only: bool | None = None,
    open_only: bool = True,
    page_size: int = 100,
) -> GateResult:
    """Counts the findings ``filters`` selects (the open ones unless ``open_only=False``) per
    severity against ``max`` (see the module) and returns a :class:`GateResult`; with a
    ``baseline`` the findings of that earlier export are not counted (``new_only``, implied by
    a baseline; ``new_only=False`` with a baseline is refused, as it would be read for nothing).

    ``client`` is a :class:`secfindings.Client`. Bad limits, a missing baseline or a bad filter
    (a severity given by name, ``"critical"`` for ``"5"``, among them) raise
    :class:`~secfindings.ValidationError` before the walk."""
    if isinstance(client, AsyncClient):
        raise ValidationError(
            "gate() walks with a secfindings.Client; from async code run it in a thread: "
            "await asyncio.to_thread(secfindings.gate, client, ...) with a Client"
        )
    limits = parse_max(max)
    new_only = _new_only(baseline, new_only)
    tree = None if filters is None else filter_tree(filters)
    if tree is not None:
        check_values(client, tree)
    # A bad baseline fails before the walk.
    known = baseline_ids(baseline) if baseline is not None else None
    server = _and(tree, OPEN if open_only else None)
    walk = _walk(client, server, page_size, known[0] if known is not None else None)
    return count(
        walk,
        max=limits,
        baseline=baseline,
        new_only=new_only,
        open_only=open_only,
        filters=tree,
        known=known,
    )
