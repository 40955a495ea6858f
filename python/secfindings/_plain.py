"""Plain words for what everyone filters on, and the values a filter compares that can only be
mistakes: the command's ``--severity critical,high`` and ``--status open`` (for ``export``,
``gate`` and ``sync``), and the checks that keep ``{"field": "severity", "condition": "in",
"value": ["critical"]}`` from matching nothing in silence.

- A severity is compared as the text of a number, ``"1"`` (info) .. ``"5"`` (critical), as the
  service's filters have it: a name or any other value is refused with the number it means.
- A value of ``sla_status`` or ``cloud_provider`` that equals a value the package knows but for
  case (``overdue``, ``aws``) is tried against the server: when it matches no finding and the
  known spelling does, it is refused with that spelling (at most two requests of one finding
  each, only for such values; the server, not the package, says what its values are).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from secfindings._shared import suggestions
from secfindings.errors import ValidationError
from secfindings.filters import leaves

__all__ = ["KNOWN_VALUES", "check_values", "plural", "severity_filter", "status_filter"]

#: The API's severities by name (``gate --max`` and the formats name them so too).
SEVERITY_NAMES = {"critical": 5, "high": 4, "medium": 3, "low": 2, "info": 1, "informational": 1}
_NAME_OF = {5: "critical", 4: "high", 3: "medium", 2: "low", 1: "info"}
_SEVERITY_FIELDS = frozenset({"severity", "finding_score.severity"})
#: Conditions that compare values exactly (a severity name there matches nothing).
_EXACT = frozenset({"in", "not_in", "equals", "not_equals", "overlap", "notoverlapping"})
#: Values the package knows of text fields (the emulator's spelling): only ever suggested, after
#: the server showed that the value given matches nothing and the suggestion matches something.
KNOWN_VALUES: dict[str, tuple[str, ...]] = {
    "sla_status": ("OVERDUE", "AT_RISK", "ON_TRACK", "NO_SLA", "CLOSED"),
    "cloud_provider": ("AWS", "Azure", "GCP", "GitHub"),
}
#: At most this many nodes of a filter tree are looked at (filter_tree bounds the depth).
_MAX_NODES = 100_000


def plural(n: int, noun: str) -> str:
    """``1 page``, ``2 pages``, ``0 critical findings``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _severity_value(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if 1 <= v <= 5 else None
    if isinstance(v, str) and v.isascii() and v.isdigit() and 1 <= int(v) <= 5:
        return int(v)
    return None


def _severity_problem(v: Any) -> str:
    if isinstance(v, str):
        key = v.strip().lower()
        close = [key] if key in SEVERITY_NAMES else suggestions(key, list(SEVERITY_NAMES), n=1)
        if close:
            sev = SEVERITY_NAMES[close[0]]
            return f"{v!r} is not a severity (did you mean '{sev}' ({_NAME_OF[sev]})?)"
    return f"{v!r} is not a severity"


def check_values(client: Any, tree: Any) -> None:
    """Refuses a filter whose exact comparisons can only match nothing (see the module):
    severities by name, and case-only misspellings of known values that the server confirms.
    ``client``: a :class:`secfindings.Client` (None: no server checks)."""
    suspects: list[tuple[Mapping[str, Any], str, str, str]] = []
    for leaf, full in leaves(tree, _MAX_NODES):
        if leaf["condition"].lower() not in _EXACT:
            continue
        given = leaf.get("value")
        values = given if isinstance(given, (list, tuple)) else [given]
        if full in _SEVERITY_FIELDS:
            for v in values:
                if _severity_value(v) is None:
                    raise ValidationError(
                        f"filter field {full!r}: {_severity_problem(v)}; severities are "
                        "'1' (info) .. '5' (critical)"
                    )
        known = KNOWN_VALUES.get(full)
        if known and leaf["condition"].lower() in ("in", "equals"):
            for v in values:
                if isinstance(v, str) and v not in known:
                    same = [k for k in known if k.casefold() == v.casefold()]
                    if same:
                        suspects.append((leaf, full, v, same[0]))
    if client is None:
        return
    for leaf, full, v, spelling in suspects:
        if not _matches(client, leaf["field"], v) and _matches(client, leaf["field"], spelling):
            raise ValidationError(
                f"filter field {full!r}: {v!r} matches no finding; did you mean {spelling!r}? "
                "(the server compares values by case)"
            )


def _matches(client: Any, field: str, v: str) -> bool:
    """Whether any finding has ``field`` equal to ``v`` (one request of one finding)."""
    probe = {"field": field, "condition": "in", "value": [v]}
    for _ in client.findings_view(filters=probe, fields="id", page_size=1, limit=1):
        return True
    return False


def _words(spec: str | Sequence[str], option: str) -> list[str]:
    items = spec.split(",") if isinstance(spec, str) else list(spec)
    words = [str(w).strip() for w in items if str(w).strip()]
    if not words:
        raise ValidationError(f"{option}: give at least one value")
    return words


def severity_filter(spec: str | Sequence[str]) -> dict[str, Any]:
    """``critical,high`` (names or the API's numbers 1..5) as the filter on ``severity``."""
    levels: list[str] = []
    for word in _words(spec, "--severity"):
        sev = SEVERITY_NAMES.get(word.lower()) or _severity_value(word)
        if sev is None:
            close = suggestions(word.lower(), list(SEVERITY_NAMES), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValidationError(
                f"--severity: {word!r} is not a severity{hint}: critical, high, medium, low, info or 1..5"
            )
        if str(sev) not in levels:
            levels.append(str(sev))
    return {"field": "severity", "condition": "in", "value": levels}


def status_filter(spec: str | Sequence[str]) -> dict[str, Any]:
    """``open,fixed`` as the filter on the status category (``actual_status``), upper-cased as
    the schema's StatusCategoryEnum has them; a word that is none of its values is refused by
    the client's check against the live schema, with a "did you mean"."""
    wanted: list[str] = []
    for word in _words(spec, "--status"):
        value = word.upper()
        if value not in wanted:
            wanted.append(value)
    return {
        "field": "actual_status",
        "condition": "",
        "value": {"field": "category", "condition": "in", "value": wanted},
    }
