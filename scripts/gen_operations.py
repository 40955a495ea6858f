"""Generates python/secfindings/_operations.py (the typed methods of Client and AsyncClient) from the
operation catalog in the Rust core (src/core/operations), so methods, signatures and the catalog
cannot drift apart.

    python scripts/gen_operations.py          # rewrite the file
    python scripts/gen_operations.py --check  # exit 1 if the file is not what the catalog gives

Enum arguments and enum-valued keys of input objects become ``Literal`` types whose values are
read from schema/schema.graphql (with graphql-core), so a type checker catches
``sort="score_desc"``; the server's live schema still judges the value at run time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "python" / "secfindings" / "_operations.py"
SDL = ROOT / "schema" / "schema.graphql"

SCALARS = {
    "ID": "str | int",
    "String": "str",
    "Int": "int",
    "Float": "float",
    "Boolean": "bool",
    "DateTime": "datetime | str",
    "Date": "date | str",
    "JSONString": "Any",
    "JSONText": "Any",
    "GenericScalar": "Any",
}
FILTERS_DOC = (
    "filters: a filter tree (``secfindings.field(...)`` or dicts in the API's filter language),\n"
    "    serialized into ``filters_config.filtersjson``."
)


def schema_enums() -> dict[str, tuple[list[str], str]]:
    """Every enum of the schema file: its values in order and its description."""
    from graphql import GraphQLEnumType, build_schema

    schema = build_schema(SDL.read_text(encoding="utf-8"))
    return {
        name: (list(t.values), " ".join((t.description or "").split()))
        for name, t in sorted(schema.type_map.items())
        if isinstance(t, GraphQLEnumType) and not name.startswith("__")
    }


def py_type(ty: str, inputs: dict[str, Any], enums: Mapping[str, Any]) -> str:
    if ty.endswith("!"):
        return py_type(ty[:-1], inputs, enums)
    if ty.startswith("["):
        inner = py_type(ty[1:-1], inputs, enums)
        # enum and String lists: one value stands for a one-item list
        if inner == "str" or ty[1:-1].rstrip("!") in enums:
            return f"Sequence[{inner}] | {inner}"
        return f"Sequence[{inner}]"
    if ty in SCALARS:
        return SCALARS[ty]
    if ty in inputs or ty in enums:
        return ty  # a TypedDict, or an enum's Literal alias
    raise SystemExit(f"gen_operations: {ty} is neither a scalar, an input object nor an enum of {SDL}")


def used_enums(ops: list[dict[str, Any]], inputs: dict[str, Any], enums: Mapping[str, Any]) -> list[str]:
    """The enums that arguments and input keys take, in name order."""
    types = [t for op in ops for _, t in op["args"]] + [t for fs in inputs.values() for _, t in fs]
    return sorted({t.strip("[]!") for t in types} & set(enums))


def literal_aliases(names: list[str], enums: Mapping[str, tuple[list[str], str]]) -> list[str]:
    out = []
    for name in names:
        values, description = enums[name]
        out.append(f"{name}: TypeAlias = Literal[{', '.join(repr(v) for v in values)}]")
        doc = f"The ``{name}`` enum of the schema file. {description}".strip()
        doc += " The server's live schema judges the value at run time."
        out.append('"""' + "\n".join(textwrap.wrap(doc, 96)) + '"""')
        out.append("")
    return out


def typed_dicts(inputs: dict[str, list[tuple[str, str]]], enums: Mapping[str, Any]) -> list[str]:
    out = []
    for name, fields in sorted(inputs.items()):
        out.append(f"class {name}(TypedDict, total=False):")
        out.append(f'    """The ``{name}`` input object (every key optional)."""')
        out.append("")
        for fname, fty in fields:
            out.append(f"    {fname}: {py_type(fty, inputs, enums)}")
        out.append("")
        out.append("")
    return out


def method(
    op: dict[str, Any], inputs: dict[str, Any], enums: Mapping[str, Any], *, is_async: bool
) -> list[str]:
    name, kind, returns, model = op["name"], op["kind"], op["returns"], op["type"]
    required = [(a, t) for a, t in op["args"] if t.endswith("!")]
    optional = [(a, t) for a, t in op["args"] if not t.endswith("!")]
    has_filters = any(a == "filters_config" for a, _ in op["args"])
    params = ["self"]
    params += [f"{a}: {py_type(t, inputs, enums)}" for a, t in required]
    kw = [f"{a}: {py_type(t, inputs, enums)} | None = None" for a, t in optional]
    if has_filters:
        kw.append("filters: Filter | Mapping[str, Any] | None = None")
    if returns == "connection":
        kw += ["after: str | None = None", "page_size: int = 100", "limit: int | None = None"]
    if returns != "scalar":
        kw.append("fields: Fields | None = None")
    if kw:
        params.append("*")
        params += kw
    pager = "AsyncPaginator" if is_async else "Paginator"
    result = {"connection": f"{pager}[{model}]", "object": model, "scalar": "Any"}[returns]
    head = "async def" if is_async and returns != "connection" else "def"
    owner = "AsyncClient" if is_async else "Client"
    lines = [
        f'    @method_of("{owner}")',
        f"    {head} {name}(",
        *[f"        {p}," for p in params],
        f"    ) -> {result}:",
    ]

    doc = [op["doc"], ""]
    if op["deprecated"]:
        doc += [
            f"Deprecated by the API: use :meth:`{op['deprecated']}` (this emits a DeprecationWarning).",
            "",
        ]
    graphql = f"GraphQL ``{kind} {{ {name} }}``"
    if returns == "connection":
        doc.append(f"{graphql}, a connection of ``{model}``.")
        doc.append("Returns a lazy paginator; ``after=`` resumes from a cursor; ``page_size`` <= 100.")
    elif returns == "object":
        doc.append(f"{graphql} -> ``{model}``.")
    else:
        doc.append(f"{graphql} -> ``{model}`` (JSON, passed through).")
    if returns != "scalar":
        sel = (
            f"Default selection (documented fields only): ``{op['selection']}``; ``fields=`` selects others."
        )
        doc += textwrap.wrap(sel, 96, break_on_hyphens=False, break_long_words=False)
    if has_filters:
        doc.append(FILTERS_DOC)
    if kind == "mutation":
        doc.append("Like every mutation, never resent after a failure that may have reached the server.")
    doc = [w for d in doc for w in (textwrap.wrap(d, 92, break_on_hyphens=False) or [""])]
    lines.append('        """' + doc[0])
    for d in doc[1:]:
        lines.append(f"        {d}" if d else "")
    lines.append('        """')

    if op["deprecated"]:
        lines.append(f'        deprecated("{name}", "{op["deprecated"]}")')
    pairs = []
    for a, _ in op["args"]:
        value = "with_filters(filters_config, filters)" if a == "filters_config" else a
        pairs.append(f'"{a}": {value}')
    if returns == "connection":
        pairs.append('"after": after')
    args = "{" + ", ".join(pairs) + "}"
    fields = f"fields_text(fields, {model})" if returns != "scalar" else "None"
    if returns == "connection":
        lines.append("        pages = self._native.paginate_operation(")
        lines.append(f'            "{name}", {args}, {fields}, page_size, limit')
        lines.append("        )")
        if has_filters:
            # The paginator can run the same walk again with other filters and order (watch()),
            # or split by id (partitions=, which needs to know the walk's limit).
            again = ", ".join(f'"{a}": {a}' for a, _ in op["args"])
            lines.append(
                f"        again = {{{again}, "
                + '"filters": filters, "page_size": page_size, "fields": fields}'
            )
            lines.append(
                f"        return {pager}(pages, {model}, replay=(self.{name}, again), "
                "schema=self._native.loaded_schema, limit=limit)"
            )
        else:
            lines.append(f"        return {pager}(pages, {model}, schema=self._native.loaded_schema)")
    else:
        call = "await self._native.call_async" if is_async else "self._native.call"
        lines.append(f'        raw = {call}("{name}", {args}, {fields})')
        lines.append(
            f'        return wrap("{name}", {model}, raw, self._native.loaded_schema)'
            if returns == "object"
            else "        return raw"
        )
    lines.append("")
    return lines


def generate() -> str:
    from secfindings._native import catalog, input_objects

    ops = catalog()
    inputs = input_objects()
    enums = schema_enums()
    literals = used_enums(ops, inputs, enums)
    models = sorted({op["type"] for op in ops if op["returns"] != "scalar"})
    out = [
        '"""The typed operations of Client and AsyncClient, one method per GraphQL field.',
        "",
        "GENERATED by scripts/gen_operations.py from the operation catalog in src/core/operations.",
        "Do not edit: change the catalog and run `make generate` (a test checks they agree).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from collections.abc import Mapping, Sequence",
        "from datetime import date, datetime",
        "from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict",
        "",
        "from secfindings._opsupport import (",
        "    Fields,",
        "    OperationsBase,",
        "    deprecated,",
        "    fields_text,",
        "    method_of,",
        "    with_filters,",
        "    wrap,",
        ")",
        "from secfindings._paginator import AsyncPaginator, Paginator",
        "from secfindings.models import (",
        *[f"    {m}," for m in models],
        ")",
        "",
        "if TYPE_CHECKING:",
        "    from secfindings.filters import Filter",
        "",
        f"__all__ = {sorted(['AsyncOperations', 'SyncOperations', *inputs, *literals])!r}",
        "",
        "ENUMS: tuple[str, ...] = " + repr(tuple(literals)),
        '"""The enums whose values the arguments and input keys take as ``Literal`` types."""',
        "",
        *literal_aliases(literals, enums),
        "",
        *typed_dicts(inputs, enums),
    ]
    for is_async, cls in ((False, "SyncOperations"), (True, "AsyncOperations")):
        twin = "awaited, connections iterated with ``async for``" if is_async else "blocking"
        out.append(f"class {cls}(OperationsBase):")
        out.append(f'    """Every operation of the API as a typed method ({twin})."""')
        out.append("")
        for op in ops:
            out += method(op, inputs, enums, is_async=is_async)
        out.append("")
    text = "\n".join(out)
    # Unused imports (date/datetime) depend on the catalog; keep the file ruff-clean either way.
    text = text.replace(
        "from datetime import date, datetime\n", "from datetime import date, datetime  # noqa: F401\n"
    )
    # ruff sorts the imports and formats, so the file stays clean under the repo's own checks.
    for command in (["check", "--fix-only", "--select", "I", "--quiet"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(TARGET), "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=TARGET.parents[2],
        ).stdout
    return text


def main() -> int:
    text = generate()
    if "--check" in sys.argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is out of date: run `python scripts/gen_operations.py`", file=sys.stderr)
            return 1
        print(f"{TARGET.name} matches the catalog")
        return 0
    TARGET.write_text(text)
    print(f"wrote {TARGET} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
