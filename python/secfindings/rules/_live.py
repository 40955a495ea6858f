"""The server's rules, read afresh: every kind asked for (and those its references name) in one
document of aliased connections, the next pages of all of them together in the next one, so
a tenant of a few hundred rules is read in a handful of requests. Ids become names here; a name
that two objects of one kind share is kept aside (:attr:`Live.duplicates`), never guessed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from secfindings.rules._model import (
    _FC_JSON,
    _FC_LISTS,
    _FC_REFS,
    BY_KEY,
    HIERARCHY,
    Executor,
    Kind,
    RulesError,
    json_value,
    prune_empty,
)

PAGE = 100
#: More objects of one kind than this is a server paging without end, not a tenant's rules.
MAX_OBJECTS = 100_000

#: The kinds whose names a kind's references need.
_REF_KINDS = {"filters", "scopes", "scope_groups", "sla_groups"}


@dataclass
class LiveObject:
    id: str
    name: str
    #: The canonical fields (references as names), as the file would hold them.
    canon: dict[str, Any]


@dataclass
class Live:
    """The server's state: per kind, the objects by name."""

    objects: dict[str, dict[str, LiveObject]] = field(default_factory=dict)
    #: Names two or more objects of a kind share: kind -> name -> their ids.
    duplicates: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    #: kind -> id -> name, duplicates included (references are resolved through it).
    names: dict[str, dict[str, str]] = field(default_factory=dict)
    #: The saved scope hierarchy: scope group name -> its scopes' names (sorted); None unread.
    hierarchy: dict[str, list[str]] | None = None
    #: References to objects that do not exist: (kind, name, field, id).
    dangling: list[tuple[str, str, str, str]] = field(default_factory=list)
    #: Requests this read made.
    requests: int = 0

    def id_of(self, kind: str, name: str) -> str | None:
        obj = self.objects.get(kind, {}).get(name)
        return obj.id if obj is not None else None


def needed(kinds: Iterable[str]) -> tuple[str, ...]:
    """The kinds to read for ``kinds``: they and every kind their references may name."""
    out: set[str] = set()
    todo = [k for k in kinds if k != HIERARCHY]
    if HIERARCHY in kinds:
        todo += ["scope_groups", "scopes"]
    while todo:
        k = todo.pop()
        if k in out:
            continue
        out.add(k)
        todo.extend(BY_KEY[k].deps)
    return tuple(k for k in BY_KEY if k in out)


def _connection(spec: Kind, alias: str, var: str) -> str:
    args = [a for a in (spec.query_args, f"first: {PAGE}", f"after: ${var}") if a]
    body = f"pageInfo {{ hasNextPage endCursor }} edges {{ node {{ {spec.selection} }} }}"
    if spec.key == "scope_groups":
        return f"{alias}: scope_hierarchy {{ scope_groups({', '.join(args[1:])}) {{ {body} }} }}"
    return f"{alias}: {spec.query}({', '.join(args)}) {{ {body} }}"


_HIERARCHY_SELECTION = "rules_hierarchy: scope_hierarchy { nodes { name node_type children { name } } }"


def _document(kinds: list[str], hierarchy: bool) -> str:
    variables = ", ".join(f"$after_{k}: String" for k in kinds)
    parts = [_connection(BY_KEY[k], f"rules_{k}", f"after_{k}") for k in kinds]
    if hierarchy:
        parts.append(_HIERARCHY_SELECTION)
    head = f"query RulesLive({variables})" if variables else "query RulesLive"
    return head + " { " + " ".join(parts) + " }"


def _conn(data: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = data.get(f"rules_{key}") or {}
    if key == "scope_groups":
        value = value.get("scope_groups") or {}
    return value


def read(client: Executor, kinds: Iterable[str]) -> Live:
    """Reads the kinds asked for (with what their references name) from the server."""
    kinds = tuple(kinds)
    todo = list(needed(kinds))
    hierarchy = HIERARCHY in kinds
    nodes: dict[str, list[Mapping[str, Any]]] = {k: [] for k in todo}
    cursors: dict[str, str | None] = dict.fromkeys(todo)
    live = Live()
    while todo or hierarchy:
        data = client.execute(_document(todo, hierarchy), {f"after_{k}": cursors[k] for k in todo})
        live.requests += 1
        if hierarchy:
            live.hierarchy = _hierarchy(data.get("rules_hierarchy"))
            hierarchy = False
        following = []
        for k in todo:
            conn = _conn(data, k)
            nodes[k].extend(e["node"] for e in conn.get("edges") or [] if e and e.get("node"))
            if len(nodes[k]) > MAX_OBJECTS:
                raise RulesError(
                    f"the server's {BY_KEY[k].query} has more than {MAX_OBJECTS:,} objects; stopped"
                )
            info = conn.get("pageInfo") or {}
            if info.get("hasNextPage"):
                if not info.get("endCursor") or info.get("endCursor") == cursors[k]:
                    cursor = info.get("endCursor")
                    raise RulesError(
                        f"the server's {BY_KEY[k].query} pages make no progress (cursor {cursor!r})"
                    )
                cursors[k] = info["endCursor"]
                following.append(k)
        todo = following
    for k, items in nodes.items():
        live.names[k] = {str(n["id"]): str(n.get("name") or "") for n in items}
    for k, items in nodes.items():
        objs: dict[str, LiveObject] = {}
        dups: dict[str, list[str]] = {}
        for n in items:
            name = str(n.get("name") or "")
            obj = LiveObject(str(n["id"]), name, _canon(BY_KEY[k], n, live))
            if name in dups:
                dups[name].append(obj.id)
            elif name in objs:
                dups[name] = [objs.pop(name).id, obj.id]
            else:
                objs[name] = obj
        live.objects[k] = objs
        if dups:
            live.duplicates[k] = dups
    return live


def _hierarchy(h: Any) -> dict[str, list[str]] | None:
    if not isinstance(h, Mapping):
        return None
    out: dict[str, list[str]] = {}
    for n in h.get("nodes") or []:
        if n and n.get("node_type") == "SCOPE_GROUP":
            out[str(n.get("name"))] = sorted(str(c.get("name")) for c in n.get("children") or [] if c)
    return out


def _ref(live: Live, target: str, ident: Any, kind: str, name: str, path: str) -> str | None:
    if ident is None:
        return None
    found = live.names.get(target, {}).get(str(ident))
    if found is None and target == "filters":  # a rule may name a scope as its saved filter
        found = live.names.get("scopes", {}).get(str(ident))
    if found is None:
        live.dangling.append((kind, name, path, str(ident)))
        return f"<missing {BY_KEY[target].label} {ident}>"
    return found


def _canon(spec: Kind, node: Mapping[str, Any], live: Live) -> dict[str, Any]:
    name = str(node.get("name") or "")
    out: dict[str, Any] = {}
    for f in spec.fields:
        if f.type == "refset":
            out[f.name] = sorted(
                {
                    live.names.get(f.ref, {}).get(str(s.get("id")), str(s.get("name")))
                    for s in node.get(f.name) or []
                    if s
                }
            )
            continue
        v = node.get(f.api_name)
        if f.type == "ref":
            out[f.name] = _ref(live, f.ref, v, spec.key, name, f.name)
        elif f.type == "json":
            out[f.name] = None if v is None else json_value(v)
        elif f.type == "float":
            out[f.name] = None if v is None else float(v)
        elif f.type == "strset":
            out[f.name] = sorted({str(x) for x in v or [] if x is not None})
        elif f.type == "filters_config":
            out[f.name] = _filters_config(v, live, spec.key, name)
        else:
            out[f.name] = v
    return prune_empty(out)


def _filters_config(fc: Any, live: Live, kind: str, name: str) -> dict[str, Any]:
    if not isinstance(fc, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key in _FC_JSON:
        text = fc.get(key)
        if text not in (None, ""):
            out[key] = json_value(text)
    for key, (api, target) in _FC_REFS.items():
        out[key] = _ref(live, target, fc.get(api), kind, name, f"filters_config.{key}")
    for key in _FC_LISTS:
        out[key] = sorted({str(x) for x in fc.get(key) or [] if x is not None})
    return prune_empty(out)
