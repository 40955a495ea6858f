"""Findings in the shapes other tools read: OCSF for SIEMs (:mod:`secfindings.formats.ocsf`) and
SARIF 2.1.0 for code-scanning dashboards (:mod:`secfindings.formats.sarif`).

Both are written from the nodes of a ``findings_view`` walk as the server sent them (the JSON
lines of :meth:`secfindings.Paginator.write_jsonl`), a page at a time, by
``paginator.write_ocsf(path)`` / ``paginator.write_sarif(path)`` and ``secfindings export
--format ocsf|sarif``. They map what the walk selected: select :data:`FIELDS` (the command does
when ``--fields`` is not given) for the whole mapping. Neither needs an optional dependency.

What is shared here: the severity names (:data:`SEVERITIES`), the selection (:data:`FIELDS`), and
how a value is read from a node (:func:`value`, :func:`epoch_ms`, :func:`cve_of`).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["FIELDS", "SEVERITIES", "SEVERITY_OF", "cve_of", "epoch_ms", "severity_name", "value"]

SEVERITIES: dict[int, str] = {5: "critical", 4: "high", 3: "medium", 2: "low", 1: "info"}
"""Severity names by the API's severity (1..5), as ``gate --max`` and the formats name them."""
SEVERITY_OF: dict[str, int] = {**{name: sev for sev, name in SEVERITIES.items()}, "informational": 1}
"""The API's severity of a name (``informational`` is taken for ``info`` too)."""

FIELDS = (
    "id id_int finding_id title description severity score original_score source "
    "datasource_friendly_name cloud_provider cloud_account cloud_account_friendly_name "
    "resource_name resource_type package_name sla_status due_date remediation_sub_phase "
    "discovered_time last_reported_time original_status datasource_tags_values "
    "actual_status { key title category }"
)
"""The selection the formats map in full (``secfindings export --format ocsf|sarif`` selects it
when ``--fields`` is not given): pass it as ``fields=`` to ``findings_view`` before
``write_ocsf`` / ``write_sarif``. A field not selected is left out of the records."""

_MISSING = object()
#: Compact JSON text, one encoder for every record (``json.dumps`` with options makes one a call).
compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_CVE = re.compile(r"\bCVE-\d{4}-\d{4,}\b", re.IGNORECASE)


def value(node: Mapping[str, Any], name: str) -> Any:
    """The value of ``name`` in a node: a dotted name is looked up as a column of that name (a
    flattened row, as Arrow and CSV have it) or through the nested objects (a node as the server
    sent it). None when it is missing."""
    found = node.get(name, _MISSING)
    if found is not _MISSING:
        return found
    if "." not in name:
        return None
    current: Any = node
    for part in name.split("."):
        if not isinstance(current, dict) and not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def severity_name(severity: Any) -> str | None:
    """``critical`` for 5 ... ``info`` for 1; None for anything else."""
    if isinstance(severity, bool):
        return None
    try:
        return SEVERITIES.get(int(severity))
    except (TypeError, ValueError):
        return None


def epoch_ms(when: Any) -> int | None:
    """Milliseconds since the Unix epoch of a DateTime (ISO 8601 text or a datetime); None when
    missing or unreadable (a naive time is taken as UTC, as the API sends UTC)."""
    if when is None or when == "":
        return None
    if isinstance(when, str):
        try:
            when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(when, dt.datetime):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp() * 1000)


def cve_of(node: Mapping[str, Any]) -> str | None:
    """The CVE a finding is about: the first ``CVE-YYYY-N`` in its title, else in its
    description (the API has no CVE field of its own on a finding); upper-cased."""
    for name in ("title", "description"):
        text = value(node, name)
        if isinstance(text, str):
            found = _CVE.search(text)
            if found:
                return found.group(0).upper()
    return None


def nodes(page: bytes) -> list[Any]:
    """The nodes of a page of JSON lines, parsed in one call."""
    lines = [line for line in page.splitlines() if line.strip()]
    if not lines:
        return []
    parsed: list[Any] = json.loads(b"[" + b",".join(lines) + b"]")
    return parsed
