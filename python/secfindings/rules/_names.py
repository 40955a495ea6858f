"""Names that may read as another: a rule, filter or scope named with letters of two scripts
(a Cyrillic o, U+043E, in a Latin name), with invisible characters, or equal to another name once
compatibility forms and case are folded. A plan warns of each name it would create that way, so
that a reviewer of the plan sees that such a name is not the one it reads as."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

__all__ = ["lookalike"]

#: Categories of characters that do not show: format (zero-width, bidirectional), control,
#: private use, unassigned.
_HIDDEN = ("Cf", "Cc", "Co", "Cn")


def _scripts(name: str) -> list[str]:
    found: list[str] = []
    for ch in unicodedata.normalize("NFKC", name):  # a fullwidth B is a Latin B
        if ch.isalpha():
            script = unicodedata.name(ch, "UNKNOWN").split(" ")[0]
            if script not in found:
                found.append(script)
    return found


def _fold(name: str) -> str:
    return unicodedata.normalize("NFKC", name).casefold()


def lookalike(name: str, others: Iterable[str]) -> str | None:
    """Why ``name`` may read as another (``others``: the names beside it), or None."""
    hidden = sorted(
        {f"U+{ord(ch):04X}" for ch in name if unicodedata.category(ch) in ("Cf", "Cc", "Co", "Cn")}
    )
    if hidden:
        return f"holds characters that do not show ({', '.join(hidden)})"
    scripts = _scripts(name)
    if len(scripts) > 1:
        return f"mixes the letters of {' and '.join(s.title() for s in scripts)}: it may read as another name"
    folded = _fold(name)
    for other in others:
        if other != name and _fold(other) == folded:
            return f"reads as {other!r} once width and case are folded"
    return None
