"""Rules as code: the tenant's scoring, status, SLA and ticket SLA rules, SLA groups, finding
filters, scopes, scope groups and the saved scope hierarchy as one canonical YAML file, kept in
git and applied to one server or many (docs/guides/rules-as-code.md).

    import secfindings

    client = secfindings.Client()
    text = client.rules.export()                 # or secfindings.rules.export(client)
    plan = client.rules.plan(text)               # reads the server afresh; plan.actions
    client.rules.apply(plan, journal="rules.journal")
    print(client.rules.drift(text).to_text())

Needs PyYAML: ``pip install 'secfindings[rules]'``."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from secfindings.rules._apply import ApplyError, ApplyResult, Journal
from secfindings.rules._apply import run as _run
from secfindings.rules._doc import Desired, dump, load, parse, to_data
from secfindings.rules._drift import Drift, DriftItem
from secfindings.rules._drift import drift as _drift
from secfindings.rules._live import Live, read
from secfindings.rules._model import ALL_KINDS, BY_KEY, HIERARCHY, Executor, RulesError, parse_kinds
from secfindings.rules._plan import Action, Change, Plan, diff, hierarchy_of

Document = str | os.PathLike[str] | Mapping[str, Any] | Desired
"""A rules file: YAML text, a path to one, its data loaded, or a parsed :class:`Desired`."""


def _desired(doc: Document) -> Desired:
    if isinstance(doc, Desired):
        return doc
    if isinstance(doc, os.PathLike):
        path = Path(doc)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise RulesError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
        return load(text, str(path))
    if isinstance(doc, str):
        return load(doc)
    return parse(doc)


def export_state(
    client: Executor, kinds: str | list[str] | tuple[str, ...] | None = None
) -> tuple[str, Live]:
    """:func:`export`, with the state it read."""
    wanted = parse_kinds(kinds)
    live = read(client, wanted)
    for key, dups in live.duplicates.items():
        if key in wanted and dups:
            name, ids = next(iter(sorted(dups.items())))
            raise RulesError(
                f"{len(ids)} {BY_KEY[key].label}s are named {name!r} on the server (ids {', '.join(ids)}): "
                "rename or delete one in the web app; an export keyed by name cannot hold both"
            )
    for kind, name, path, ident in live.dangling:
        if kind in wanted:
            raise RulesError(
                f"{kind} {name!r}: {path} refers to id {ident}, which does not exist on the server; "
                "fix it in the web app"
            )
    objects = {k: {n: o.canon for n, o in live.objects.get(k, {}).items()} for k in wanted if k != HIERARCHY}
    saved: bool | None = None
    if HIERARCHY in wanted:
        groups = {n: o.canon for n, o in live.objects.get("scope_groups", {}).items()}
        saved = live.hierarchy == hierarchy_of(groups)
    return dump(to_data(objects, wanted, saved)), live


def export(client: Executor, kinds: str | list[str] | tuple[str, ...] | None = None) -> str:
    """The server's rules as canonical YAML (every kind, or ``kinds``): keyed by name, references
    by name, no ids or server-computed fields, sets sorted, the same bytes for the same state.
    ``scope_hierarchy: {saved: true}`` when the saved hierarchy shows the current scope groups."""
    return export_state(client, kinds)[0]


def plan(client: Executor, doc: Document, *, prune: bool = False) -> Plan:
    """What :func:`apply` would change (reads the server afresh). Objects on the server that the
    file lacks are deleted only with ``prune`` (in the kinds the file has)."""
    desired = _desired(doc)
    return diff(desired, read(client, desired.kinds), prune=prune)


def apply(
    client: Executor,
    doc: Document | Plan,
    *,
    prune: bool = False,
    journal: str | os.PathLike[str] | None = None,
) -> ApplyResult:
    """Makes the server hold what the file says: the plan's mutations in order (a :class:`Plan`
    is planned afresh, since the server may have changed since). Raises :class:`ApplyError`
    when a change is refused or its outcome is lost and not seen on the server; rerun to finish
    (``journal``, a file path, records each step and is removed when a run completes)."""
    if isinstance(doc, Plan):
        prune = doc.prune
        desired = doc.desired
    else:
        desired = _desired(doc)
    fresh = diff(desired, read(client, desired.kinds), prune=prune)
    return _run(client, fresh, journal)


def drift(client: Executor, doc: Document) -> Drift:
    """What differs on the server from the file; ``.exit_code`` is 2 when anything does."""
    desired = _desired(doc)
    return _drift(desired, read(client, desired.kinds))


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a rules file (for editors: ``# yaml-language-server: $schema=...``)."""
    text = resources.files("secfindings.rules").joinpath("schema.json").read_text(encoding="utf-8")
    value: dict[str, Any] = json.loads(text)
    return value


class Rules:
    """``client.rules``: the functions of :mod:`secfindings.rules` bound to one client."""

    def __init__(self, client: Executor) -> None:
        self._client = client

    def export(self, kinds: str | list[str] | tuple[str, ...] | None = None) -> str:
        """:func:`secfindings.rules.export` with this client."""
        return export(self._client, kinds)

    def plan(self, doc: Document, *, prune: bool = False) -> Plan:
        """:func:`secfindings.rules.plan` with this client."""
        return plan(self._client, doc, prune=prune)

    def apply(
        self, doc: Document | Plan, *, prune: bool = False, journal: str | os.PathLike[str] | None = None
    ) -> ApplyResult:
        """:func:`secfindings.rules.apply` with this client."""
        return apply(self._client, doc, prune=prune, journal=journal)

    def drift(self, doc: Document) -> Drift:
        """:func:`secfindings.rules.drift` with this client."""
        return drift(self._client, doc)

    def __repr__(self) -> str:
        return f"<Rules of {self._client!r}>"


__all__ = [
    "ALL_KINDS",
    "Action",
    "ApplyError",
    "ApplyResult",
    "Change",
    "Desired",
    "Drift",
    "DriftItem",
    "Journal",
    "Plan",
    "Rules",
    "RulesError",
    "apply",
    "drift",
    "export",
    "json_schema",
    "plan",
]
