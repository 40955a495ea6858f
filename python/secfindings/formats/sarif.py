"""Findings as a SARIF 2.1.0 log (Static Analysis Results Interchange Format), for code-scanning
dashboards and anything else that reads SARIF.

One run of the tool ``secfindings``; one result per finding; one rule per kind of finding: the
CVE when the finding has one, else its title (``ruleId`` a slug of it, the title as the rule's
``shortDescription``). The level comes from the severity: critical and high ``error``, medium
``warning``, low and info ``note``; a rule's ``security-severity`` (what GitHub code scanning
ranks by) from the highest severity of its results: 9.5, 8.0, 5.5, 2.0 (info: none). A closed
finding (FIXED) is a result of kind ``pass`` (level ``none``), an ignored one (IGNORED) a result
with an external, accepted suppression.

Findings are about cloud resources, not lines of files, so a result has no physical location:
it has a **logical location** naming the resource (``provider/account/type/name`` as its fully
qualified name) when the finding names one, and no ``locations`` at all when it does not, as
SARIF allows (§3.27.12). Nothing is made up: a viewer that requires a file location (GitHub
code scanning documents one as required) may refuse or drop such results.

The log is written as it streams: the results a page at a time, then the rules at the end of the
run (JSON does not order an object's members), so memory stays at about a page whatever the size.
A failed export still ends the log properly (the file holds a valid log of the pages written),
and ``append=True`` continues the same run of a log this module wrote (its end is taken off and
written again after the new results): resume with ``after=paginator.cursor`` and
``append=True``, as for JSON lines.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from secfindings._export import Export
from secfindings._native import __version__
from secfindings.errors import ValidationError
from secfindings.formats import compact, cve_of, nodes, severity_name, value

__all__ = ["SARIF_SCHEMA", "SarifExport", "result_of", "rule_id_of", "sarif_log"]

#: ``$schema`` of the log (the SARIF 2.1.0 schema's own id in the OASIS errata is this one too).
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_HEADER = ('{"$schema":"' + SARIF_SCHEMA + '","version":"2.1.0","runs":[{"results":[\n').encode()
#: The run's end starts with this line: results are one a line, so no result line starts so.
_FOOTER_MARK = b'\n],"tool":'
_FOOTER_END = b"}]}\n"
_LEVELS = {5: "error", 4: "error", 3: "warning", 2: "note", 1: "note"}
_SECURITY_SEVERITY = {5: "9.5", 4: "8.0", 3: "5.5", 2: "2.0"}
_PROPERTIES = (
    "id_int",
    "finding_id",
    "score",
    "original_score",
    "sla_status",
    "due_date",
    "source",
    "cloud_provider",
    "cloud_account",
    "resource_type",
    "package_name",
    "remediation_sub_phase",
)
#: What a rule's end is written with, from the highest severity of its results.
_DERIVED = ("properties", "defaultConfiguration")
_SLUG = re.compile(r"[^a-z0-9]+")


def _version() -> str:
    return str(__version__)


def _severity(node: Mapping[str, Any]) -> int:
    sev = value(node, "severity")
    return sev if isinstance(sev, int) and not isinstance(sev, bool) and 1 <= sev <= 5 else 0


def rule_id_of(node: Mapping[str, Any]) -> str:
    """The rule of a finding: its CVE, else a slug of its title (``finding`` without one)."""
    cve = cve_of(node)
    if cve:
        return cve
    title = value(node, "title")
    slug = _SLUG.sub("-", str(title).lower()).strip("-")[:100] if title else ""
    return slug or "finding"


def result_of(node: Mapping[str, Any]) -> dict[str, Any]:
    """One finding (a node of ``findings_view``, nested or with dotted names) as a SARIF result
    (see the module for the mapping)."""
    sev = _severity(node)
    title = value(node, "title")
    uid = value(node, "id")
    if uid is None or uid == "":
        uid = value(node, "id_int")
    category = value(node, "actual_status.category")
    result: dict[str, Any] = {
        "ruleId": rule_id_of(node),
        "message": {"text": str(title) if title else ("finding" if uid is None else f"finding {uid}")},
    }
    if category == "FIXED":
        result["kind"] = "pass"
        result["level"] = "none"
    else:
        result["level"] = _LEVELS.get(sev, "warning")
    if category == "IGNORED":
        result["suppressions"] = [{"kind": "external", "status": "accepted"}]
    name = value(node, "resource_name")
    if name:
        parts = [value(node, "cloud_provider"), value(node, "cloud_account"), value(node, "resource_type")]
        qualified = "/".join([str(p) for p in parts if p] + [str(name)])
        result["locations"] = [
            {"logicalLocations": [{"name": str(name), "fullyQualifiedName": qualified, "kind": "resource"}]}
        ]
    if uid is not None and uid != "":
        result["partialFingerprints"] = {"secfindingsFindingId/v1": str(uid)}
    props: dict[str, Any] = {}
    if sev:
        props["severity"] = severity_name(sev)
    if category is not None:
        props["status"] = category
    for prop in _PROPERTIES:
        v = value(node, prop)
        if v is not None and v != "":
            props[prop] = v if isinstance(v, (str, int, float, bool)) else str(v)
    if props:
        result["properties"] = props
    return result


class _Rules:
    """The rules of a run, in the order first seen, with the highest severity of each."""

    def __init__(self) -> None:
        self.rules: dict[str, dict[str, Any]] = {}
        self.severity: dict[str, int] = {}

    def add(self, node: Mapping[str, Any], rule_id: str) -> None:
        sev = _severity(node)
        if rule_id not in self.rules:
            title = value(node, "title")
            rule: dict[str, Any] = {"id": rule_id, "shortDescription": {"text": str(title or rule_id)}}
            if rule_id.startswith("CVE-"):
                rule["helpUri"] = f"https://nvd.nist.gov/vuln/detail/{rule_id}"
            self.rules[rule_id] = rule
            self.severity[rule_id] = 0
        self.severity[rule_id] = max(self.severity[rule_id], sev)

    def restore(self, rules: list[Any]) -> None:
        """The rules of a log this module wrote (to append to it)."""
        levels = {v: k for k, v in _SECURITY_SEVERITY.items()}
        for rule in rules:
            if isinstance(rule, dict) and isinstance(rule.get("id"), str):
                rid = rule["id"]
                props = rule.get("properties")
                sev = levels.get(str(props.get("security-severity")), 1) if isinstance(props, dict) else 1
                self.rules[rid] = {k: v for k, v in rule.items() if k not in _DERIVED}
                self.severity[rid] = sev

    def tool(self, version: str) -> dict[str, Any]:
        rules = []
        for rid, rule in self.rules.items():
            sev = self.severity[rid]
            full = dict(rule)
            full["defaultConfiguration"] = {"level": _LEVELS.get(sev, "warning")}
            props: dict[str, Any] = {"tags": ["security"]}
            if sev in _SECURITY_SEVERITY:
                props["security-severity"] = _SECURITY_SEVERITY[sev]
            full["properties"] = props
            rules.append(full)
        return {
            "driver": {
                "name": "secfindings",
                "version": version,
                "informationUri": "https://pypi.org/project/secfindings/",
                "rules": rules,
            }
        }


def _read_end(fd: int, size: int) -> tuple[int, bool, list[Any]]:
    """Where the end of the run starts in a log this module wrote, whether it has results, and
    its rules. Reads backwards from the end, a block at a time (the end is one line)."""
    block = 1 << 16
    tail = b""
    pos = size
    while pos > 0:
        step = min(block, pos)
        pos -= step
        tail = os.pread(fd, step, pos) + tail
        at = tail.rfind(_FOOTER_MARK)
        if at >= 0:
            start = pos + at
            end = tail[at + len(_FOOTER_MARK) :].rstrip()
            if not end.endswith(_FOOTER_END.rstrip()):
                break
            try:
                tool = json.loads(end[: -len(_FOOTER_END.rstrip())])
                rules = tool["driver"]["rules"]
            except (ValueError, KeyError, TypeError):
                break
            before = os.pread(fd, 2, start - 2) if start >= 2 else b""
            return start, before != b"[\n", rules if isinstance(rules, list) else []
    raise ValidationError(
        "cannot append: the file does not end as a SARIF log written by secfindings does "
        "(was the export killed before it could end the log?): write to a new file"
    )


class SarifExport(Export):
    """A streaming SARIF export: the header with the first page, a page of results at a time
    (each taken out whole when its write is interrupted), the rules when the export ends, also
    when it fails."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        fmt: str,
        append: bool,
        native: Any = None,
        escape_formulas: bool = True,
    ) -> None:
        super().__init__(path, fmt, append, native, escape_formulas)
        self._version = _version()
        self._rules = _Rules()
        self._count = 0  # results in the file
        self._count_before = 0
        self._run_open = False  # the file has a header (or a run whose end was taken off)
        self._end_at: int | None = None  # where the end of an existing run starts
        if append and self._seekable:
            size = os.fstat(self._file.fileno()).st_size
            if size:
                try:
                    with open(self.path, "rb") as f:  # the export's own file is write-only
                        self._end_at, has_results, rules = _read_end(f.fileno(), size)
                except BaseException:
                    self._file.close()
                    raise
                self._rules.restore(rules)
                self._count = 1 if has_results else 0

    def _begin(self) -> None:
        """Before the first results: takes off the end of a run appended to, or writes the header."""
        started = self._started
        super()._begin()
        if started or self._file is None:
            return
        if self._end_at is not None:
            os.ftruncate(self._file.fileno(), self._end_at)
            self._end_at = None
        else:
            self._write_all(_HEADER)
        self._run_open = True

    def encode(self, data: bytes) -> tuple[bytes, int]:
        """A page of nodes (JSON lines) as result lines (comma first but for the run's first)."""
        self._count_before = self._count
        out = []
        count = self._count
        for node in nodes(data):
            result = result_of(node)
            self._rules.add(node, result["ruleId"])
            text = compact(result)
            out.append(text if count == 0 else "," + text)
            count += 1
        added = count - self._count
        self._count = count
        if not out:
            return b"", 0
        return ("\n".join(out) + "\n").encode("utf-8"), added

    def rollback(self, cause: BaseException) -> None:
        """Takes a page out again (see :meth:`Export.rollback`); its results are not counted."""
        self._count = self._count_before
        super().rollback(cause)

    def close(self, ok: bool = True) -> None:
        """Ends the run (the rules) and closes the file; also after a failure, when anything
        was written, so the file is a valid log of the pages written."""
        try:
            if ok:
                self._begin()
            if self._run_open and self._file is not None:
                tool = compact(self._rules.tool(self._version))
                self._write_all(_FOOTER_MARK + tool.encode("utf-8") + _FOOTER_END)
                self._run_open = False
        finally:
            super().close(ok)


def sarif_log(nodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A whole SARIF log of a few findings in memory (``gate --format sarif``); for a walk use
    ``paginator.write_sarif``, which streams."""
    rules = _Rules()
    results = []
    for node in nodes:
        result = result_of(node)
        rules.add(node, result["ruleId"])
        results.append(result)
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"results": results, "tool": rules.tool(_version())}],
    }
