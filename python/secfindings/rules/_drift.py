"""Drift: what differs on the server from the file (changes made by hand in the web app), as
text, Markdown or JSON, for a scheduled job. The file is the reference: an object of a kind the
file manages that the server has and the file does not is drift too."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from secfindings.rules._doc import Desired
from secfindings.rules._live import Live
from secfindings.rules._model import BY_KEY, HIERARCHY
from secfindings.rules._plan import Change, diff, show

State = Literal["changed", "missing", "extra", "stale"]

_WHAT = {
    "changed": "changed on the server",
    "missing": "missing on the server",
    "extra": "on the server, not in the file",
    "stale": "the saved scope hierarchy differs from the scope groups",
}


@dataclass
class DriftItem:
    """One object that differs: ``changed``, ``missing`` (on the server), ``extra`` (on the
    server, not in the file) or ``stale`` (the saved scope hierarchy)."""

    kind: str
    name: str
    state: State
    #: Field by field: ``before`` is the server's value, ``after`` the file's.
    changes: list[Change] = field(default_factory=list)

    def title(self) -> str:
        """One line: ``scoring rule 'X': changed on the server``."""
        if self.kind == HIERARCHY:
            return _WHAT["stale"]
        return f"{BY_KEY[self.kind].label} {self.name!r}: {_WHAT[self.state]}"

    def to_dict(self) -> dict[str, Any]:
        """The item as JSON-ready data, each field with its ``server`` and ``file`` value."""
        return {
            "kind": self.kind,
            "name": self.name,
            "state": self.state,
            "fields": [{"field": c.field, "server": c.before, "file": c.after} for c in self.changes],
        }


@dataclass
class Drift:
    """What differs on the server from a file (:func:`secfindings.rules.drift`)."""

    items: list[DriftItem] = field(default_factory=list)
    requests: int = 0

    @property
    def exit_code(self) -> int:
        """0 the server matches the file, 2 it does not."""
        return 2 if self.items else 0

    def to_dict(self) -> dict[str, Any]:
        """The drift as JSON-ready data."""
        return {
            "drift": bool(self.items),
            "items": [i.to_dict() for i in self.items],
            "requests": self.requests,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        """The drift as ``rules drift`` prints it."""
        if not self.items:
            return "No drift: the server matches the file.\n"
        lines = []
        for i in self.items:
            lines.append(i.title())
            lines.extend(f"    {c.field}: server {show(c.before)}, file {show(c.after)}" for c in i.changes)
        lines.append(f"Drift: {len(self.items)} object(s) differ from the file.")
        return "\n".join(lines) + "\n"

    def to_markdown(self) -> str:
        """The drift as a Markdown table (a CI job's summary)."""
        if not self.items:
            return "**No drift**: the server matches the file.\n"
        lines = [
            f"**Drift**: {len(self.items)} object(s) differ from the file.",
            "",
            "| object | field | server | file |",
            "|---|---|---|---|",
        ]
        for i in self.items:
            what = f"`{_cell(i.title())}`"  # a name is text: no image, link, mention or HTML
            if not i.changes:
                lines.append(f"| {what} | | | |")
            for c in i.changes:
                lines.append(
                    f"| {what} | {_cell(c.field)} | `{_cell(show(c.before))}` | `{_cell(show(c.after))}` |"
                )
        return "\n".join(lines) + "\n"

    def render(self, fmt: str) -> str:
        """``text``, ``markdown`` or ``json``."""
        return {"text": self.to_text, "markdown": self.to_markdown, "json": self.to_json}[fmt]()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")


def drift(desired: Desired, live: Live) -> Drift:
    """What differs on ``live`` from ``desired``, one item per object."""
    plan = diff(desired, live, prune=True)
    items: dict[tuple[str, str], DriftItem] = {}
    for a in plan.actions:
        if a.op == "save":
            items[(HIERARCHY, "")] = DriftItem(HIERARCHY, "", "stale", list(a.changes))
            continue
        if a.op == "create":
            state: State = "missing"
        elif a.op == "delete" or (a.op == "unsupported" and not a.changes):
            state = "extra"
        else:
            state = "changed"
        item = items.setdefault((a.kind, a.name), DriftItem(a.kind, a.name, state))
        item.changes.extend(a.changes)
    out = Drift(list(items.values()), live.requests)
    for item in out.items:
        item.changes.sort(key=lambda c: c.field)
    return out
