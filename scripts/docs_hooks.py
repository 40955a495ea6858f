"""MkDocs hooks (mkdocs.yml `hooks:`): fail a strict build when a public name is not documented.

mkdocstrings renders what the reference pages name and skips what has no docstring, so neither
notices a public name that no page shows. After the build this hook takes every name in the
``__all__`` of the public modules, and warns (a strict build fails on a warning) when

- no page of the site has an anchor for it (under any of the paths that lead to the object), or
- it, or a public method or property of a public class, has no docstring.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import re
from pathlib import Path
from typing import Any

# The modules users import from; their __all__ is the public surface.
PUBLIC_MODULES = (
    "secfindings",
    "secfindings.models",
    "secfindings.filters",
    "secfindings.errors",
    "secfindings.types",
    "secfindings.testing",
    "secfindings.testing.control",
    "secfindings.dask",
    "secfindings.spark",
    "secfindings.sync",
    "secfindings.rules",
    "secfindings.gate",
    "secfindings.diff",
    "secfindings.formats",
    "secfindings.otel",
    "secfindings.cache",
    "secfindings.analytics",
    "secfindings.report",
    "secfindings.tickets",
    "secfindings.profiles",
    "secfindings.mcp",
)
# Dunder and inherited members users do not call by name, and class-level data whose meaning is
# their type (the fields of models, TypedDict keys).
SKIP_MEMBERS = {"__init__", "__new__", "__repr__", "__str__", "__eq__", "__hash__", "__reduce__"}

log = logging.getLogger("mkdocs.hooks.public_names")
_ANCHOR = re.compile(r'\sid="([A-Za-z_][\w.]*)"')


def public_names() -> dict[int, tuple[Any, list[str]]]:
    """Every public object once (by identity), with the dotted paths that lead to it."""
    seen: dict[int, tuple[Any, list[str]]] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            paths = seen.setdefault(id(obj), (obj, []))[1]
            paths.append(f"{module_name}.{name}")
            canonical = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
            named = inspect.isclass(obj) or inspect.isfunction(obj)
            if all(isinstance(part, str) for part in canonical) and named:
                paths.append(f"{canonical[0]}.{canonical[1]}")
    return seen


def _own_doc(obj: Any) -> bool:
    doc = getattr(obj, "__doc__", None)
    return isinstance(doc, str) and bool(doc.strip())


def undocumented_members(cls: type) -> list[str]:
    """Public methods and properties the package defines on ``cls`` (or its own bases) without a
    docstring."""
    missing = []
    for klass in cls.__mro__:
        if not (klass.__module__ or "").startswith("secfindings"):
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or name in SKIP_MEMBERS:
                continue
            target = member.fget if isinstance(member, property) else member
            if isinstance(target, (staticmethod, classmethod)):
                target = target.__func__
            if not (inspect.isfunction(target) or isinstance(member, property)):
                continue
            if not _own_doc(target):
                missing.append(f"{klass.__qualname__}.{name}")
    return sorted(set(missing))


def problems(site_dir: Path) -> list[str]:
    anchors: set[str] = set()
    for page in site_dir.rglob("*.html"):
        anchors.update(_ANCHOR.findall(page.read_text(encoding="utf-8")))
    out = []
    for obj, paths in public_names().values():
        if not any(path in anchors for path in paths):
            out.append(f"{paths[0]} is public but no page documents it (add it to docs/reference/)")
        callable_ = inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj)
        if callable_ and not _own_doc(obj):
            out.append(f"{paths[0]} has no docstring")
        if inspect.isclass(obj):
            out += [f"{paths[0]}: {m} has no docstring" for m in undocumented_members(obj)]
    return sorted(set(out))


def on_post_build(config: Any, **_: Any) -> None:
    for problem in problems(Path(config["site_dir"])):
        log.warning(problem)
