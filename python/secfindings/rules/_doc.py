"""The rules file: YAML in (checked field by field, one-line errors with a "did you mean"), the
canonical form in memory (:class:`Desired`), and canonical YAML out (byte-stable: the same
state always prints the same bytes)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from secfindings._shared import did_you_mean, kind, need
from secfindings.rules._model import (
    _FC_JSON,
    _FC_REFS,
    ALL_KINDS,
    BY_KEY,
    FC_KEYS,
    FORMAT_VERSION,
    HIERARCHY,
    TOP_KEYS,
    Field,
    Kind,
    RulesError,
    json_value,
    prune_empty,
    sort_json,
    targets,
    valid_float,
)

INT_MAX = 2**31 - 1


def yaml_module() -> Any:
    """PyYAML, or an ImportError that names the extra."""
    return need("yaml", "rules", "rules as code")


@dataclass
class Desired:
    """A rules file in canonical form: per kind, the objects by name (canonical dicts)."""

    objects: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    #: ``scope_hierarchy: {saved: ...}``; None when the file leaves the hierarchy alone.
    hierarchy_saved: bool | None = None
    #: The kinds the file manages (present in it), in dependency order.
    kinds: tuple[str, ...] = ()


# ------------------------------------------------------------------------------ reading


def _where(*parts: str) -> str:
    return ".".join(p if p.isidentifier() else repr(p) for p in parts)


def _fail(source: str, where: str, message: str) -> RulesError:
    return RulesError(f"{source}: {where}: {message}")


def load_yaml(text: str, source: str = "rules file") -> Any:
    """YAML text as data; a key given twice in one mapping is an error (PyYAML keeps the last)."""
    yaml = yaml_module()
    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _Loader(base):  # type: ignore[misc, valid-type]
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        loader.flatten_mapping(node)
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            if key in seen:
                line = key_node.start_mark.line + 1
                twice = f"{key!r} is given twice in one mapping (names are unique per kind)"
                raise RulesError(f"{source}: line {line}: {twice}")
            seen[key] = loader.construct_object(value_node, deep=True)
        return seen

    _Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    try:
        # No anchors and aliases: the format has no use for them, and a few nested aliases
        # make a small file a huge (or a self-containing) structure to walk.
        for event in yaml.parse(text, Loader=base):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1
                raise RulesError(f"{source}: line {line}: an alias (*{event.anchor}): a rules file has none")
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise RulesError(f"{source}: {at}not YAML: {problem}") from None


def parse(data: Any, source: str = "rules file") -> Desired:
    """Checks a loaded rules file and brings it to canonical form."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise RulesError(f"{source}: the top level must be a mapping of kinds, not {kind(data)}")
    for key in data:
        if key not in TOP_KEYS:
            near = did_you_mean(str(key), TOP_KEYS)
            raise _fail(source, str(key), f"unknown kind{near or '; kinds: ' + ', '.join(ALL_KINDS)}")
    version = data.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise _fail(
            source, "version", f"this version of secfindings reads version {FORMAT_VERSION}, not {version!r}"
        )
    out = Desired()
    for key, spec in BY_KEY.items():
        if key not in data:
            continue
        section = data[key]
        if section is None:
            section = {}
        if not isinstance(section, Mapping):
            raise _fail(source, key, f"must be a mapping of names to {spec.label}s, not {kind(section)}")
        objs: dict[str, dict[str, Any]] = {}
        for name, body in section.items():
            if not isinstance(name, str):
                raise _fail(
                    source, key, f"the name {name!r} is {kind(name)}: names are text, quote it ('{name}')"
                )
            if not name.strip():
                raise _fail(source, key, "an empty name")
            objs[name] = _object(spec, name, body, source)
        out.objects[key] = objs
    if HIERARCHY in data:
        h = data[HIERARCHY]
        if not isinstance(h, Mapping):
            raise _fail(source, HIERARCHY, f"must be a mapping ({{saved: true}}), not {kind(h)}")
        for k in h:
            if k != "saved":
                raise _fail(
                    source, _where(HIERARCHY, str(k)), f"unknown field{did_you_mean(str(k), ['saved'])}"
                )
        saved = h.get("saved")
        if not isinstance(saved, bool):
            raise _fail(source, _where(HIERARCHY, "saved"), f"must be true or false, not {kind(saved)}")
        out.hierarchy_saved = saved
    out.kinds = tuple(k for k in ALL_KINDS if k in data)
    check_refs(out, source)
    return out


def _object(spec: Kind, name: str, body: Any, source: str) -> dict[str, Any]:
    where = _where(spec.key, name)
    if body is None:
        body = {}
    if not isinstance(body, Mapping):
        raise _fail(source, where, f"must be a mapping of fields, not {kind(body)}")
    names = spec.field_names
    out: dict[str, Any] = {}
    for k, v in body.items():
        if k == "name":
            raise _fail(source, _where(spec.key, name, "name"), "the name is the key: leave the field out")
        if k not in names:
            raise _fail(
                source,
                _where(spec.key, name, str(k)),
                f"unknown field of a {spec.label}{did_you_mean(str(k), names)}",
            )
        out[k] = _value(spec.field(k), v, source, _where(spec.key, name, k))
    for f in spec.fields:
        if f.required and out.get(f.name) is None:
            raise _fail(source, where, f"{f.name} is required for a {spec.label}")
    return prune_empty(out)


def _value(f: Field, v: Any, source: str, where: str) -> Any:
    if v is None:
        return None
    t = f.type
    if t in ("str", "enum", "ref"):
        if not isinstance(v, str):
            raise _fail(source, where, f"must be text, not {kind(v)}")
        if t == "enum" and f.enum and v not in f.enum:
            raise _fail(source, where, f"{v!r} is not one of {', '.join(f.enum)}{did_you_mean(v, f.enum)}")
        return v
    if t == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise _fail(source, where, f"must be a whole number, not {kind(v)}")
        if not -INT_MAX <= v <= INT_MAX:
            raise _fail(source, where, f"{v} is outside the API's Int range")
        return v
    if t == "float":
        if not valid_float(v):
            raise _fail(source, where, f"must be a finite number, not {kind(v)}")
        return float(v)
    if t == "bool":
        if not isinstance(v, bool):
            raise _fail(source, where, f"must be true or false, not {kind(v)}")
        return v
    if t == "json":
        return _json(v, source, where)
    if t in ("refset", "strset"):
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise _fail(source, where, "must be a list of text")
        return sorted(set(v))
    return _filters_config(v, source, where)


def _json(v: Any, source: str, where: str) -> Any:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except json.JSONDecodeError as exc:
            raise _fail(source, where, f"is text but no JSON ({exc.msg}); write the filter as YAML") from None
        except RecursionError:
            raise _fail(source, where, "nests too deep") from None
    if not isinstance(v, (Mapping, list)):
        raise _fail(source, where, f"must be a filter (a mapping), not {kind(v)}")
    try:
        out = sort_json(v)
        json.dumps(out, allow_nan=False)
    except RecursionError:
        raise _fail(source, where, "nests too deep (does it contain itself?)") from None
    except (TypeError, ValueError) as exc:
        raise _fail(
            source, where, f"holds a value JSON cannot ({exc}): quote dates, leave out .nan and .inf"
        ) from None
    return out


def _filters_config(v: Any, source: str, where: str) -> dict[str, Any]:
    if not isinstance(v, Mapping):
        raise _fail(source, where, f"must be a mapping, not {kind(v)}")
    out: dict[str, Any] = {}
    for k, x in v.items():
        at = f"{where}.{k}"
        if k not in FC_KEYS:
            raise _fail(source, at, f"unknown key of a filters_config{did_you_mean(str(k), FC_KEYS)}")
        if x is None:
            continue
        if k in _FC_JSON:
            out[k] = _json(x, source, at)
        elif k in _FC_REFS:
            if not isinstance(x, str):
                raise _fail(source, at, f"must be a name, not {kind(x)}")
            out[k] = x
        else:
            if not isinstance(x, list) or not all(isinstance(i, str) for i in x):
                raise _fail(source, at, "must be a list of field names")
            out[k] = sorted(set(x))
    return prune_empty(out)


def refs_of(spec: Kind, obj: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """The references of a canonical object: (field path, kind, name)."""
    out: list[tuple[str, str, str]] = []
    for f in spec.fields:
        v = obj.get(f.name)
        if v is None:
            continue
        if f.type == "ref":
            out.append((f.name, f.ref, v))
        elif f.type == "refset":
            out.extend((f.name, f.ref, n) for n in v)
        elif f.type == "filters_config":
            for key, (_api, target) in _FC_REFS.items():
                if key in v:
                    out.append((f"{f.name}.{key}", target, v[key]))
    return out


def check_refs(d: Desired, source: str) -> None:
    """Every reference to a kind the file manages names an object of the file."""
    for key, objs in d.objects.items():
        spec = BY_KEY[key]
        for name, obj in objs.items():
            for path, target, ref in refs_of(spec, obj):
                if target in d.objects and not any(ref in d.objects.get(t, {}) for t in targets(target)):
                    label = BY_KEY[target].label
                    raise _fail(
                        source,
                        _where(key, name, *path.split(".")),
                        f"no {label} named {ref!r} in the file{did_you_mean(ref, d.objects[target])}",
                    )


def load(text: str, source: str = "rules file") -> Desired:
    return parse(load_yaml(text, source), source)


# ------------------------------------------------------------------------------ writing


def to_data(
    objects: Mapping[str, Mapping[str, Mapping[str, Any]]],
    kinds: tuple[str, ...],
    hierarchy_saved: bool | None,
) -> dict[str, Any]:
    """The file's data: kinds in dependency order, names and fields sorted."""
    out: dict[str, Any] = {"version": FORMAT_VERSION}
    for key in kinds:
        if key == HIERARCHY:
            if hierarchy_saved is not None:
                out[HIERARCHY] = {"saved": hierarchy_saved}
            continue
        objs = objects.get(key, {})
        out[key] = {name: dict(objs[name]) for name in sorted(objs)}
    return out


def dump(data: Mapping[str, Any]) -> str:
    """Canonical YAML: block style, mappings in the order given (already sorted), no line folding."""
    yaml = yaml_module()
    # The pure-Python dumper everywhere: libyaml's may differ by a byte, and the text must not.
    text: str = yaml.dump(
        dict(data),
        Dumper=yaml.SafeDumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=1 << 20,
    )
    return text


def dump_desired(d: Desired) -> str:
    return dump(to_data(d.objects, d.kinds, d.hierarchy_saved))


__all__ = [
    "Desired",
    "dump",
    "dump_desired",
    "json_value",
    "load",
    "load_yaml",
    "parse",
    "refs_of",
    "to_data",
]
