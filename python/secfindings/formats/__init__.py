"""Findings in the shapes other tools read: OCSF for SIEMs (:mod:`secfindings.formats.ocsf`) and
SARIF 2.1.0 for code-scanning dashboards (:mod:`secfindings.formats.sarif`).

Both are written from the nodes of a ``findings_view`` walk as the server sent them (the JSON
lines of :meth:`secfindings.Paginator.write_jsonl`), a page at a time, by
``paginator.write_ocsf(path)`` / ``paginator.write_sarif(path)`` and ``secfindings export
--format ocsf|sarif``. They map what the walk selected: select :data:`FIELDS` (the command does
when ``--fields`` is not given) for the whole mapping. Neither needs an optional dependency.

What is shared here: the severity names (:data:`SEVERITIES`), the selection (:data:`FIELDS`) and
its part that a server has (:func:`selection`), how a value is read from a node (:func:`value`,
:func:`epoch_ms`, :func:`cve_of`), strict JSON text (:func:`compact`, :func:`strict_dumps`: a
non-finite number is written as null) and text made safe for Markdown (:func:`markdown_text`).
"""

from __future__ import annotations

import datetime as dt
import html
import json
import logging
import math
import re
from collections.abc import Mapping
from typing import Any

from secfindings._shared import parse_datetime

__all__ = [
    "FIELDS",
    "SEVERITIES",
    "SEVERITY_OF",
    "compact",
    "cve_of",
    "epoch_ms",
    "line_text",
    "markdown_text",
    "selection",
    "severity_name",
    "strict_dumps",
    "value",
]

log = logging.getLogger("secfindings.formats")

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
#: Compact strict JSON, one encoder for every record (``json.dumps`` with options makes one a call).
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
_CVE = re.compile(r"\bCVE-\d{4}-\d{4,}\b", re.IGNORECASE)


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (``1e999`` reads as infinity, NaN) as None, at any
    depth of its dicts and lists: JSON has no such numbers, so they are written as null."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def compact(obj: Any) -> str:
    """Compact JSON text that any JSON parser reads: a non-finite number (``Infinity``,
    ``NaN``, which Python's json would write) is null."""
    try:
        return _compact(obj)
    except ValueError:  # a non-finite float somewhere: rare, so looked for only then
        return _compact(finite(obj))


def strict_dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, **kwargs)`` with non-finite numbers as null (strict JSON, always)."""
    kwargs["allow_nan"] = False
    try:
        return json.dumps(obj, **kwargs)
    except ValueError:
        return json.dumps(finite(obj), **kwargs)


#: What Markdown (CommonMark and GitHub's) reads as structure inside a line: cell ends, escapes,
#: code spans, emphasis, links and images; each gets a backslash. HTML is escaped as entities.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]!|~])")
#: Line ends (CR, LF, and the Unicode ones a renderer may honour) and other control characters.
_MD_BREAKS = re.compile(r"[\x00-\x1f\x7f\x85\u2028\u2029]+")


def markdown_text(text: Any, limit: int | None = None) -> str:
    """``text`` as plain text inside one line of Markdown (a table cell or a heading): every
    line end (CR, LF, U+2028, ...) and control character is a space, HTML is escaped (``<img>``
    shows as text), and backslashes, ``|`` and Markdown's punctuation are escaped, so a finding's
    title cannot end its cell, start a heading or hide what follows. Cut to ``limit``
    characters first (before escaping)."""
    s = "" if text is None else str(text)
    s = _MD_BREAKS.sub(" ", s)
    s = _BIDI.sub("\ufffd", s)  # "Trojan Source": text shown in another order than it is
    if limit is not None and len(s) > limit:
        s = s[:limit]
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return html.escape(s, quote=False)


#: Control characters (C0, DEL, C1) and the bidirectional controls that reorder what a terminal
#: shows ("Trojan Source"), none of which a line of a report may carry.
_NOT_SHOWN = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")


def line_text(text: Any, limit: int | None = None) -> str:
    """``text`` as one line of a report for a terminal or a CI log: every run of whitespace
    (line ends of any kind among them) is one space, and control characters (ESC, which would
    drive the terminal, NUL, ...) and bidirectional controls show as U+FFFD. Cut to ``limit``
    characters."""
    s = " ".join(("" if text is None else str(text)).split())
    s = _NOT_SHOWN.sub("\ufffd", s)
    return s if limit is None else s[:limit]


def selection(client: Any, wanted: str, what: str, type_name: str = "FindingsView", note: str = "") -> str:
    """``wanted`` (a selection on ``type_name``) less the fields the server's live schema lacks,
    with one WARNING on the ``secfindings.formats`` logger naming them (``what`` says who
    asked, ``note`` what is done instead). Unchanged when the client checks nothing
    (``schema="off"``)."""
    schema = client.schema() if hasattr(client, "schema") else None
    if schema is None:
        return wanted
    trimmed: str = schema.trim(type_name, wanted)
    missing = _top_names(wanted) - _top_names(trimmed)
    if missing:
        log.warning(
            "%s: the server's %s has no %s; left out%s",
            what,
            type_name,
            ", ".join(sorted(missing)),
            f" ({note})" if note else "",
        )
    return trimmed


def _top_names(selection_text: str) -> set[str]:
    """The field names at the top level of a selection text (``a b { c } d`` -> a, b, d)."""
    names: set[str] = set()
    depth = 0
    for token in re.findall(r"[{}]|[A-Za-z_][A-Za-z0-9_]*", selection_text):
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
        elif depth == 0:
            names.add(token)
    return names


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
        when = parse_datetime(when)
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
    """The nodes of a page of JSON lines, parsed in one call (null ones left out)."""
    lines = [line for line in page.splitlines() if line.strip()]
    if not lines:
        return []
    parsed: list[Any] = json.loads(b"[" + b",".join(lines) + b"]")
    # A null node (a server may send one for a row it could not resolve) is no finding: skipped.
    return [n for n in parsed if isinstance(n, dict)]
