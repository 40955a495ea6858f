"""The JSON Schema of a rules file, made from the kinds' table (``schema.json`` in the package is
this function's output; a test keeps them equal)."""

from __future__ import annotations

import json
from typing import Any

from secfindings.rules._model import _FC_JSON, _FC_LISTS, _FC_REFS, FORMAT_VERSION, HIERARCHY, KINDS, Field

_FILTER = {
    "description": "A filter in the API's filter language (a mapping, or its JSON text).",
    "type": ["object", "array", "string"],
}


def _fc() -> dict[str, Any]:
    props: dict[str, Any] = dict.fromkeys(_FC_JSON, _FILTER)
    for key, (api, target) in _FC_REFS.items():
        props[key] = {
            "type": "string",
            "description": f"The name of a {target[:-1].replace('_', ' ')} (the API's {api}).",
        }
    for key in _FC_LISTS:
        props[key] = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    return {"type": "object", "additionalProperties": False, "properties": props}


def _field(f: Field) -> dict[str, Any]:
    if f.type in ("str", "ref"):
        out: dict[str, Any] = {"type": "string"}
        if f.type == "ref":
            out["description"] = f"The name of a {f.ref[:-1].replace('_', ' ')}."
        return out
    if f.type == "enum":
        return {"type": "string", "enum": list(f.enum)}
    if f.type == "int":
        return {"type": "integer", "minimum": -(2**31 - 1), "maximum": 2**31 - 1}
    if f.type == "float":
        return {"type": "number"}
    if f.type == "bool":
        return {"type": "boolean"}
    if f.type == "json":
        return _FILTER
    if f.type in ("refset", "strset"):
        return {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
    return {"$ref": "#/$defs/filters_config"}


def generate() -> dict[str, Any]:
    props: dict[str, Any] = {"version": {"const": FORMAT_VERSION}}
    for k in KINDS:
        obj = {
            "type": "object",
            "additionalProperties": False,
            "required": [f.name for f in k.fields if f.required],
            "properties": {f.name: _field(f) for f in k.fields},
        }
        props[k.key] = {
            "type": ["object", "null"],
            "description": f"{k.label[0].upper()}{k.label[1:]}s by name.",
            "additionalProperties": obj,
        }
    props[HIERARCHY] = {
        "type": "object",
        "additionalProperties": False,
        "required": ["saved"],
        "properties": {
            "saved": {"type": "boolean", "description": "The saved scope hierarchy shows the scope groups."}
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "secfindings rules file",
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "$defs": {"filters_config": _fc()},
    }


def text() -> str:
    return json.dumps(generate(), indent=2, sort_keys=True) + "\n"
