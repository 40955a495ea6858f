"""An introspection result printed as SDL (for ``secfindings schema``)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["print_sdl"]

_BUILTIN = {"String", "Int", "Float", "Boolean", "ID"}


def _type(t: dict[str, Any]) -> str:
    kind = t.get("kind")
    if kind == "NON_NULL":
        return _type(t["ofType"]) + "!"
    if kind == "LIST":
        return "[" + _type(t["ofType"]) + "]"
    return str(t.get("name"))


def _description(text: str | None, indent: str) -> list[str]:
    if not text:
        return []
    if "\n" not in text and '"' not in text:
        return [f'{indent}"""{text}"""']
    body = text.replace('"""', '\\"""')
    return [f'{indent}"""', *(f"{indent}{line}" for line in body.splitlines()), f'{indent}"""']


def _deprecated(item: dict[str, Any]) -> str:
    if not item.get("isDeprecated"):
        return ""
    reason = item.get("deprecationReason")
    return f" @deprecated(reason: {json.dumps(reason)})" if reason else " @deprecated"


def _args(args: list[dict[str, Any]]) -> str:
    if not args:
        return ""
    parts = []
    for a in args:
        default = f" = {a['defaultValue']}" if a.get("defaultValue") is not None else ""
        parts.append(f"{a['name']}: {_type(a['type'])}{default}")
    return "(" + ", ".join(parts) + ")"


def print_sdl(schema: dict[str, Any]) -> str:
    """The schema of an introspection answer (``data["__schema"]``) as SDL text."""
    out: list[str] = []
    roots = {k: (schema.get(f"{k}Type") or {}).get("name") for k in ("query", "mutation", "subscription")}
    if any(name and name != default.capitalize() for default, name in roots.items()):
        out.append("schema {")
        out.extend(f"  {k}: {name}" for k, name in roots.items() if name)
        out.append("}\n")
    types = sorted(
        (t for t in schema.get("types", []) if not t["name"].startswith("__") and t["name"] not in _BUILTIN),
        key=lambda t: t["name"],
    )
    for t in types:
        kind, name = t["kind"], t["name"]
        out.extend(_description(t.get("description"), ""))
        if kind == "SCALAR":
            out.append(f"scalar {name}\n")
        elif kind == "ENUM":
            out.append(f"enum {name} {{")
            for v in t.get("enumValues") or []:
                out.extend(_description(v.get("description"), "  "))
                out.append(f"  {v['name']}{_deprecated(v)}")
            out.append("}\n")
        elif kind == "UNION":
            members = " | ".join(p["name"] for p in t.get("possibleTypes") or [])
            out.append(f"union {name} = {members}\n")
        elif kind == "INPUT_OBJECT":
            out.append(f"input {name} {{")
            for f in t.get("inputFields") or []:
                out.extend(_description(f.get("description"), "  "))
                default = f" = {f['defaultValue']}" if f.get("defaultValue") is not None else ""
                out.append(f"  {f['name']}: {_type(f['type'])}{default}")
            out.append("}\n")
        else:
            keyword = "interface" if kind == "INTERFACE" else "type"
            interfaces = [i["name"] for i in t.get("interfaces") or []]
            implements = f" implements {' & '.join(interfaces)}" if interfaces else ""
            out.append(f"{keyword} {name}{implements} {{")
            for f in t.get("fields") or []:
                out.extend(_description(f.get("description"), "  "))
                out.append(f"  {f['name']}{_args(f.get('args') or [])}: {_type(f['type'])}{_deprecated(f)}")
            out.append("}\n")
    return "\n".join(out).rstrip() + "\n"
