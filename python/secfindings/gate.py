"""A CI gate on findings: ``secfindings.gate(client, ...)`` and ``secfindings gate``.

Counts the findings a filter selects (open ones only, unless ``open_only=False``) per severity and
compares each count with its limit (``max``: ``{"critical": 0, "high": 5}`` or the command's
``critical=0,high=5``; severities critical, high, medium, low, info are 5..1; a severity without a
limit is not limited, and no ``max`` at all means no finding may be counted). With a
``baseline`` (an export file of an earlier run: Parquet, JSON lines or CSV) and ``new_only``,
every finding of the baseline is left out, so only new findings can fail the gate, as
snyk-delta does.

The result (:class:`GateResult`) says whether the gate passed and renders as a one-screen text,
Markdown (for ``$GITHUB_STEP_SUMMARY``), JUnit XML (one test case per limit, a failure per
exceeded limit), SARIF 2.1.0 (the counted findings) or JSON. The command exits 0 when it passed,
4 when a limit was exceeded, and as every command does otherwise: 1 the API or network failed,
2 bad usage, 3 authentication failed.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from secfindings.errors import ValidationError
from secfindings.filters import Filter, filter_tree
from secfindings.formats import SEVERITIES, SEVERITY_OF, severity_name, value

__all__ = ["EXCEEDED", "GATE_FIELDS", "GateResult", "Threshold", "gate", "parse_max"]

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
_ORDER = [name for _, name in sorted(SEVERITIES.items(), reverse=True)]


def parse_max(spec: str | Mapping[str, int] | None) -> dict[str, int]:
    """Limits per severity name from ``critical=0,high=5`` (or a mapping): names are critical,
    high, medium, low, info (or informational); counts are whole numbers >= 0. None: every
    severity at 0. Raises :class:`~secfindings.ValidationError` naming the bad part."""
    accepted = "critical, high, medium, low, info"
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
        if key not in SEVERITY_OF:
            raise ValidationError(f"--max: unknown severity {name!r}: one of {accepted}")
        sev = SEVERITIES[SEVERITY_OF[key]]
        if sev in limits:
            raise ValidationError(f"--max: {sev} is given twice")
        try:
            n = int(count) if not isinstance(count, bool) else -1
        except (TypeError, ValueError):
            n = -1
        if n < 0 or (isinstance(count, float) and count != n):
            raise ValidationError(f"--max: {name}={count!r}: the count must be a whole number >= 0")
        limits[sev] = n
    return {sev: limits[sev] for sev in _ORDER if sev in limits}


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
        """``3 critical findings, at most 0 allowed``."""
        return f"{self.count} {self.severity} findings, at most {self.limit} allowed"


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
        return sorted(self.findings, key=lambda f: (-(f.get("severity") or 0), -(f.get("score") or 0)))[:n]

    def _verdict(self) -> str:
        n = len(self.thresholds)
        if self.passed:
            return f"passed ({n} {'limit' if n == 1 else 'limits'} held)"
        return f"FAILED ({len(self.exceeded)} of {n} {'limit' if n == 1 else 'limits'} exceeded)"

    def _scope(self) -> str:
        what = "open findings" if self.open_only else "findings"
        text = f"counted {self.total} {what}"
        if self.filters is not None:
            text += f" of filter {json.dumps(self.filters, separators=(',', ':'))[:200]}"
        if self.new_only:
            text += f"; {self.ignored} in baseline {self.baseline} not counted"
        return text

    def to_text(self) -> str:
        """A one-screen summary: the verdict, counts against limits, the worst findings."""
        limits = {t.severity: t for t in self.thresholds}
        lines = [f"secfindings gate: {self._verdict()}", "  severity   found    max"]
        for sev in _ORDER:
            t = limits.get(sev)
            mark = "  exceeded" if t is not None and t.exceeded else ""
            lines.append(f"  {sev:<9} {self.counts.get(sev, 0):>6} {t.limit if t else '-':>6}{mark}")
        lines.append(self._scope())
        worst = self.worst()
        if worst:
            lines.append("worst:")
            for f in worst:
                where = f.get("resource_name") or ""
                title = str(f.get("title") or "")[:70]
                lines.append(
                    f"  {severity_name(f.get('severity')) or '?':<8} {f.get('score') or 0:>5} "
                    f"#{f.get('id_int') or f.get('id')}  {title}" + (f"  ({where})" if where else "")
                )
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """A Markdown summary (what ``$GITHUB_STEP_SUMMARY`` gets)."""
        limits = {t.severity: t for t in self.thresholds}
        out = [
            f"### secfindings gate: {self._verdict()}",
            "",
            "| severity | found | max | |",
            "|---|---:|---:|---|",
        ]
        for sev in _ORDER:
            t = limits.get(sev)
            mark = "**exceeded**" if t is not None and t.exceeded else ""
            out.append(f"| {sev} | {self.counts.get(sev, 0)} | {t.limit if t else '-'} | {mark} |")
        out += ["", self._scope() + "."]
        worst = self.worst()
        if worst:
            out += ["", "| severity | score | id | title | resource |", "|---|---:|---|---|---|"]
            for f in worst:
                cells = [
                    severity_name(f.get("severity")) or "?",
                    str(f.get("score") if f.get("score") is not None else ""),
                    str(f.get("id_int") or f.get("id")),
                    str(f.get("title") or "")[:100],
                    str(f.get("resource_name") or ""),
                ]
                out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
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
                sev = SEVERITY_OF[t.severity]
                lines = [
                    f"#{f.get('id_int') or f.get('id')} {f.get('title') or ''}"
                    for f in self.findings
                    if f.get("severity") == sev
                ]
                failure.text = "\n".join(lines[:200]) + (
                    f"\n... {len(lines) - 200} more" if len(lines) > 200 else ""
                )
        ET.indent(suites)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"

    def to_sarif(self) -> str:
        """A SARIF 2.1.0 log of the counted findings (see :mod:`secfindings.formats.sarif`)."""
        from secfindings.formats.sarif import sarif_log

        return json.dumps(sarif_log(self.findings), ensure_ascii=False, indent=1) + "\n"

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
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=1, default=str) + "\n"

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
    """The id column a baseline export has (``id_int``, else ``id``) and its ids."""
    from secfindings.diff import read_snapshot

    table = read_snapshot(path)
    for key in ("id_int", "id"):
        if key in table.column_names:
            return key, set(table.column(key).drop_null().to_pylist())
    raise ValidationError(
        f"the baseline {os.fspath(path)} has no id column (id_int or id): export it with them selected"
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
    """A finding (a model or a node, nested or flattened) as the dict a result keeps."""
    data = item.to_dict() if hasattr(item, "to_dict") else item
    row = {k: value(data, k) for k in _KEPT}
    row["actual_status"] = {
        "key": value(data, "actual_status.key"),
        "category": value(data, "actual_status.category"),
    }
    return row


def count(
    findings: Iterable[Any],
    *,
    max: str | Mapping[str, int] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    new_only: bool = False,
    open_only: bool = True,
    filters: dict[str, Any] | None = None,
    known: tuple[str, set[Any]] | None = None,
) -> GateResult:
    """The gate over findings already at hand (models or dicts of :data:`GATE_FIELDS`); see
    :func:`gate`. ``known``: the baseline's id column and ids, when already read."""
    limits = parse_max(max)
    if new_only and baseline is None:
        raise ValidationError("new_only needs a baseline: give the export file of an earlier run")
    if known is None:
        known = baseline_ids(baseline) if baseline is not None else ("id_int", set())
    key, ids = known
    counts = dict.fromkeys(_ORDER, 0)
    counted: list[dict[str, Any]] = []
    ignored = 0
    for item in findings:
        row = _row(item)
        if open_only and row["actual_status"]["category"] not in (None, "OPEN"):
            continue
        if new_only and row.get(key) in ids:
            ignored += 1
            continue
        sev = severity_name(row.get("severity"))
        if sev is not None:
            counts[sev] += 1
        counted.append(row)
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


def gate(
    client: Any,
    *,
    filters: Filter | Mapping[str, Any] | str | None = None,
    max: str | Mapping[str, int] | None = None,
    baseline: str | os.PathLike[str] | None = None,
    new_only: bool = False,
    open_only: bool = True,
    page_size: int = 100,
) -> GateResult:
    """Counts the findings ``filters`` selects (the open ones unless ``open_only=False``) per
    severity against ``max`` (see the module) and returns a :class:`GateResult`; with
    ``baseline`` and ``new_only`` the findings of that earlier export are not counted.

    ``client`` is a :class:`secfindings.Client`. Bad limits, a missing baseline or a bad filter
    raise :class:`~secfindings.ValidationError` before anything is fetched."""
    from secfindings._client import AsyncClient

    if isinstance(client, AsyncClient):
        raise ValidationError(
            "gate() walks with a secfindings.Client; from async code run it in a thread: "
            "await asyncio.to_thread(secfindings.gate, client, ...) with a Client"
        )
    limits = parse_max(max)
    if new_only and baseline is None:
        raise ValidationError("new_only needs a baseline: give the export file of an earlier run")
    tree = None if filters is None else filter_tree(filters)
    # A bad baseline fails before the walk.
    known = baseline_ids(baseline) if baseline is not None else None
    server = tree
    if open_only:
        server = OPEN if tree is None else {"operator": "and", "operands": [tree, OPEN]}
    walk = client.findings_view(filters=server, fields=GATE_FIELDS, page_size=page_size)
    return count(
        walk,
        max=limits,
        baseline=baseline,
        new_only=new_only,
        open_only=open_only,
        filters=tree,
        known=known,
    )
