"""The plan: what to change on the server so it holds what the file says, field by field, in
dependency order (what a reference names is created before the reference and deleted after)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from secfindings._shared import did_you_mean, listed
from secfindings.rules._doc import Desired, refs_of
from secfindings.rules._live import Live
from secfindings.rules._model import BY_KEY, HIERARCHY, KINDS, RulesError
from secfindings.rules._names import lookalike

Op = Literal["create", "update", "replace", "enable", "disable", "delete", "save", "unsupported"]

_SIGN = {
    "create": "+",
    "update": "~",
    "replace": "-/+",
    "enable": "~",
    "disable": "~",
    "delete": "-",
    "save": "*",
    "unsupported": "!",
}


@dataclass(frozen=True)
class Change:
    """One field: the server's value and the file's (None: not set)."""

    field: str
    before: Any
    after: Any

    def to_dict(self) -> dict[str, Any]:
        """``{"field", "before", "after"}``."""
        return {"field": self.field, "before": self.before, "after": self.after}


@dataclass
class Action:
    """One step of a plan; ``apply`` sends one mutation for it."""

    op: Op
    kind: str
    name: str
    #: The server's id (update, enable, disable, delete).
    id: str | None = None
    changes: list[Change] = field(default_factory=list)
    #: The object as the file has it (create), or the fields to send (update).
    fields: dict[str, Any] = field(default_factory=dict)
    #: Why the API cannot make the change (unsupported).
    reason: str = ""

    @property
    def label(self) -> str:
        """The kind as text: ``scoring rule``, ``scope group``, ..."""
        return "scope hierarchy" if self.kind == HIERARCHY else BY_KEY[self.kind].label

    def title(self) -> str:
        """One line: ``update scoring rule 'X'``."""
        if self.op == "save":
            return "save the scope hierarchy"
        verb = "cannot change" if self.op == "unsupported" else self.op
        return f"{verb} {self.label} {self.name!r}"

    def to_dict(self) -> dict[str, Any]:
        """The action as JSON-ready data (``--format json``)."""
        out: dict[str, Any] = {"op": self.op, "kind": self.kind, "name": self.name}
        if self.id is not None:
            out["id"] = self.id
        if self.changes:
            out["changes"] = [c.to_dict() for c in self.changes]
        if self.op in ("create", "replace"):
            out["fields"] = self.fields
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass
class Plan:
    """What ``apply`` would do: :attr:`actions` in the order they run."""

    desired: Desired
    live: Live
    actions: list[Action] = field(default_factory=list)
    #: Objects on the server the file does not have (kept without ``prune``): (kind, name).
    unmanaged: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    prune: bool = False

    @property
    def changed(self) -> bool:
        """Whether there is anything to do."""
        return bool(self.actions)

    @property
    def exit_code(self) -> int:
        """0 no change, 2 changes (as ``terraform plan -detailed-exitcode``)."""
        return 2 if self.actions else 0

    @property
    def unsupported(self) -> list[Action]:
        """Changes the API has no mutation for (``apply`` refuses the plan while there are any)."""
        return [a for a in self.actions if a.op == "unsupported"]

    def summary(self) -> dict[str, int]:
        """How many actions of each kind: ``{"create": 2, "update": 1}``."""
        out: dict[str, int] = {}
        for a in self.actions:
            out[a.op] = out.get(a.op, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data: changes, summary, actions, unmanaged, warnings, requests."""
        return {
            "changes": self.changed,
            "summary": self.summary(),
            "actions": [a.to_dict() for a in self.actions],
            "unmanaged": [{"kind": k, "name": n} for k, n in self.unmanaged],
            "warnings": self.warnings,
            "requests": self.live.requests,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text (``rules plan --format json``)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n"

    def to_text(self) -> str:
        """The plan as ``rules plan`` prints it."""
        lines: list[str] = []
        for a in self.actions:
            lines.append(f"{_SIGN[a.op]} {a.title()}")
            if a.op == "create":
                lines.extend(f"    {k}: {show(v)}" for k, v in a.fields.items())
            lines.extend(f"    {c.field}: {show(c.before)} -> {show(c.after)}" for c in a.changes)
            if a.reason:
                lines.append(f"    ({a.reason})")
        for w in self.warnings:
            lines.append(f"warning: {w}")
        if self.unmanaged and not self.prune:
            names = [f"{BY_KEY[k].label} {n!r}" for k, n in self.unmanaged]
            lines.append(f"not in the file, kept (--prune deletes them): {listed(names, 10)}")
        if not self.actions:
            lines.append("No changes: the server matches the file.")
        else:
            counts = ", ".join(
                f"{n} the API cannot change" if op == "unsupported" else f"{n} to {op}"
                for op, n in self.summary().items()
            )
            lines.append(f"Plan: {counts}.")
        return "\n".join(lines) + "\n"


#: What JSON leaves as is but a terminal or a pull request's page would act on: DEL and the C1
#: controls (0x9B is a CSI) and the bidirectional controls (a value that reads otherwise).
_HIDDEN = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def show(v: Any) -> str:
    """A value as plan text shows it: JSON, compact; controls JSON leaves as they are (C1,
    bidirectional) escaped as ``\\uXXXX`` too."""
    if v is None:
        return "(none)"
    text = json.dumps(v, ensure_ascii=False, separators=(", ", ": "), sort_keys=True)
    return _HIDDEN.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def order(graph: Mapping[str, tuple[str, ...] | list[str]]) -> list[str]:
    """The nodes of ``graph`` (node -> what it depends on) with every node after its
    dependencies, ties in the graph's order; a cycle is a :class:`RulesError` naming it."""
    done: list[str] = []
    state: dict[str, int] = {}

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cycle = [*path[path.index(n) :], n]
            raise RulesError(f"a cycle of references: {' -> '.join(cycle)}")
        state[n] = 1
        for d in graph.get(n, ()):
            if d in graph:
                visit(d, [*path, n])
        state[n] = 2
        done.append(n)

    for n in graph:
        visit(n, [])
    return done


def _check_server(desired: Desired, live: Live, prune: bool) -> None:
    """Duplicated names the file touches, and references to kinds the file does not manage that
    name nothing on the server: one-line errors before anything is sent."""
    problems: list[str] = []
    for key, dups in live.duplicates.items():
        if key not in desired.kinds:
            continue
        for name, ids in dups.items():
            if name in desired.objects.get(key, {}) or prune:
                label = BY_KEY[key].label
                problems.append(
                    f"{len(ids)} {label}s are named {name!r} on the server (ids {', '.join(ids)}): rename or "
                    "delete one in the web app (rules as code never guesses between them)"
                )
    for key, objs in desired.objects.items():
        spec = BY_KEY[key]
        for name, obj in objs.items():
            for path, target, ref in refs_of(spec, obj):
                if target in desired.objects:
                    continue
                if target == "filters" and ref not in live.objects.get("filters", {}):
                    target = "scopes" if ref in live.objects.get("scopes", {}) else target
                if ref in live.duplicates.get(target, {}):
                    n = len(live.duplicates[target][ref])
                    where = f"{key}.{name!r}.{path}"
                    problems.append(
                        f"{where}: {n} {BY_KEY[target].label}s are named {ref!r} on the server; rename one"
                    )
                elif ref not in live.objects.get(target, {}):
                    near = did_you_mean(ref, live.objects.get(target, {}))
                    problems.append(
                        f"{key}.{name!r}.{path}: no {BY_KEY[target].label} named {ref!r} on the server{near}"
                    )
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RulesError(problems[0] + more)


def hierarchy_of(groups: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    return {g: sorted(obj.get("scopes", [])) for g, obj in groups.items()}


def diff(desired: Desired, live: Live, *, prune: bool = False) -> Plan:
    """The plan that brings ``live`` to ``desired``."""
    _check_server(desired, live, prune)
    plan = Plan(desired, live, prune=prune)
    kinds = order({k.key: k.deps for k in KINDS})
    deletes: list[Action] = []
    for key in kinds:
        if key not in desired.kinds:
            continue
        spec = BY_KEY[key]
        want = desired.objects.get(key, {})
        have = live.objects.get(key, {})
        for name in sorted(want):
            obj = want[name]
            if name not in have:
                plan.actions.append(Action("create", key, name, fields=dict(obj)))
                continue
            cur = have[name]
            changes = []
            flag_change: Change | None = None
            for f in spec.fields:
                after = obj.get(f.name)
                if after is None and f.server_default:
                    continue
                before = cur.canon.get(f.name)
                if before == after:
                    continue
                change = Change(f.name, before, after)
                if spec.flag is not None and f.name == spec.flag[0]:
                    flag_change = change
                else:
                    changes.append(change)
            cleared = [c.field for c in changes if c.after is None and spec.field(c.field).type == "enum"]
            if cleared and spec.delete and not any(key in k.deps for k in KINDS):
                # An edit keeps a field it sends as null: only a new object has none.
                all_changes = [*changes, *([flag_change] if flag_change else [])]
                reason = (
                    f"an edit cannot clear {', '.join(cleared)}: deleted, then created as the file has it"
                )
                plan.actions.append(
                    Action("replace", key, name, cur.id, all_changes, dict(obj), reason=reason)
                )
                continue
            if changes:
                if spec.update:
                    plan.actions.append(
                        Action("update", key, name, cur.id, changes, {c.field: c.after for c in changes})
                    )
                else:
                    reason = f"the API has no mutation that edits or replaces a {spec.label}; use the web app"
                    plan.actions.append(Action("unsupported", key, name, cur.id, changes, reason=reason))
            if flag_change is not None:
                op: Op = "enable" if flag_change.after else "disable"
                plan.actions.append(
                    Action(op, key, name, cur.id, [flag_change], {flag_change.field: flag_change.after})
                )
        for name in sorted(have):
            if name in want:
                continue
            if not prune:
                plan.unmanaged.append((key, name))
            elif spec.delete:
                deletes.append(Action("delete", key, name, have[name].id))
            else:
                reason = f"the API has no mutation that deletes a {spec.label}"
                deletes.append(Action("unsupported", key, name, have[name].id, reason=reason))
        for name in sorted(live.duplicates.get(key, {})):
            if name not in want and not prune:
                plan.warnings.append(
                    f"{len(live.duplicates[key][name])} {spec.label}s are named {name!r} on the server"
                )
    # Deletes after every create and update (which may move references off what goes), dependents first.
    order_of = {k: i for i, k in enumerate(kinds)}
    deletes.sort(key=lambda a: -order_of[a.kind])
    plan.actions.extend(deletes)
    if desired.hierarchy_saved:
        groups = (
            desired.objects["scope_groups"]
            if "scope_groups" in desired.kinds
            else {n: o.canon for n, o in live.objects.get("scope_groups", {}).items()}
        )
        want_h = hierarchy_of(groups)
        if live.hierarchy != want_h:
            have_h = live.hierarchy or {}
            changes = [
                Change(f"scope group {g!r}", have_h.get(g), want_h.get(g))
                for g in sorted(set(want_h) | set(have_h))
                if have_h.get(g) != want_h.get(g)
            ]
            plan.actions.append(Action("save", HIERARCHY, "", changes=changes, fields={"structure": want_h}))
    for a in plan.actions:
        if a.op == "create":
            names = [*desired.objects.get(a.kind, {}), *live.objects.get(a.kind, {})]
            why = lookalike(a.name, names)
            if why is not None:
                plan.warnings.append(f"the {a.label} {a.name!r} to create {why}")
    return plan
