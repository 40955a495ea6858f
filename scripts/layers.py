"""The import layering of the repository, read from its own source (stdlib only).

Checks, each failure one line on standard output, exit 1 (0 when all hold):

- Python (``python/secfindings``): no import circle among the package's modules, counting every
  import of ours (module level, inside functions, under ``TYPE_CHECKING``; a package's
  ``__init__`` counts too); ``_shared.py`` (the ground floor) imports nothing of the package
  but the Rust core (``_native``); nothing of the library imports the command line
  (``cli``, ``_cli_*``, ``emulator``, ``__main__``) and nothing imports the optional
  integrations users import themselves (``otel``, ``dask``); the library does not import
  ``testing`` (the emulator and the pytest plugin), only the command line and ``testing`` do.
- Rust (``src/`` and ``emulator/src/``): no circle in the graph of module paths (``crate::``,
  ``super::``, ``self::`` and a parent's calls into its child modules; ``mod`` declarations and
  a parent's ``pub use`` re-exports of its children are no edge; unit tests are left out).

  python3 scripts/layers.py [ROOT] [--graph]   (ROOT: default the repository; --graph prints the
                                               edges found, for a look)

docs/architecture.md states the rules; tests/test_layers.py runs this on the repository and on
small trees with a circle.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

PACKAGE = "secfindings"
# Module names (relative to the package) and the rules they are under.
GROUND = {"_shared"}
NATIVE = "_native"  # the Rust core, which imports nothing of Python's: below the ground floor
COMMAND_TOP = {"cli", "emulator", "__main__"}  # and any module named _cli or _cli_*, in any package
USER_IMPORTED = {"otel", "dask", "spark"}
TESTING = "testing"
RUST_CRATES = ("src", "emulator/src")
Graph = dict[str, set[str]]


# ---------------------------------------------------------------------------------- Python


def _python_modules(top: Path) -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for path in sorted([*top.rglob("*.py"), *top.rglob("*.pyi")]):
        if "__pycache__" in path.parts or (path.suffix == ".pyi" and path.with_suffix(".py").exists()):
            continue  # a .pyi alone stands for an extension module (_native)
        parts = list(path.relative_to(top.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _imported(module: str, path: Path, mods: dict[str, Path]) -> set[str]:
    """The package's modules that ``module`` imports, anywhere in its text."""
    if path.suffix == ".pyi":
        return set()  # an extension module: its stub's imports are for the checkers only
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_package = path.name == "__init__.py"
    here = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in mods)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not (source == PACKAGE or source.startswith(PACKAGE + ".")):
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in mods:
                    out.add(sub)
                elif source in mods:
                    out.add(source)
    out.discard(module)
    return out


def python_graph(root: Path) -> tuple[Graph, dict[str, Path]]:
    mods = _python_modules(root / "python" / PACKAGE)
    return {m: _imported(m, p, mods) for m, p in mods.items()}, mods


def _short(module: str) -> str:
    return module.removeprefix(PACKAGE + ".")


def _command(name: str) -> bool:
    parts = name.split(".")
    return parts[0] in COMMAND_TOP or any(p == "_cli" or p.startswith("_cli_") for p in parts)


def python_rules(graph: Graph) -> Iterator[str]:
    for module in sorted(graph):
        name = _short(module)
        first = name.split(".")[0]
        for target in sorted(graph[module]):
            tname = _short(target)
            tfirst = tname.split(".")[0]
            if name in GROUND and tname != NATIVE:
                yield f"python: {name} is the ground floor and imports nothing of the package, not {tname}"
            elif _command(tname) and not _command(name):
                yield (
                    f"python: {name} imports the command line ({tname}); only the command modules "
                    "(cli, emulator, __main__, _cli*) may"
                )
            elif tfirst in USER_IMPORTED and first != tfirst:
                yield f"python: {name} imports {tname}, which only users import (optional)"
            elif tfirst == TESTING and first != TESTING and not _command(name):
                yield f"python: {name} imports {tname}; the library does not import the test helpers"


# ---------------------------------------------------------------------------------- Rust

# Comments, raw strings, strings and char literals (lifetimes are not: 'a has no closing quote).
_NOISE = re.compile(
    r"//[^\n]*|/\*.*?\*/|r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\.[^']*|[^\\'\n])'", re.S
)
_TESTS = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def _code(text: str) -> str:
    """The text without comments, string contents and the unit tests' modules (by convention
    at the end of a file: from the first one on)."""
    text = _NOISE.sub(lambda m: '""' if m.group(0).endswith('"') else " ", text)
    text = text.replace("$crate::", " crate::")
    cut = _TESTS.search(text)
    return text[: cut.start()] if cut else text


def _rust_modules(src: Path) -> dict[str, Path]:
    """Module paths (``a::b``; the crate root is ``""``) of a crate's files."""
    mods: dict[str, Path] = {}
    for path in sorted(src.rglob("*.rs")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] in ("mod", "lib", "main"):
            parts.pop()
        mods["::".join(parts)] = path
    return mods


def _use_paths(text: str, start: int) -> list[tuple[str, str]]:
    """The paths of a ``use`` tree (or a plain path) from ``start``, each with the name it brings
    in: ``a::{b, c::{d as e}}`` gives (a::b, b) and (a::c::d, e)."""
    out: list[tuple[str, str]] = []
    word_re = re.compile(_IDENT + r"|\*")
    alias_re = re.compile(r"\s+as\s+(" + _IDENT + r")")

    def skip(i: int) -> int:
        while i < len(text) and text[i].isspace():
            i += 1
        return i

    def tree(i: int, prefix: list[str]) -> int:
        segs = list(prefix)
        while True:
            i = skip(i)
            if text.startswith("{", i):
                i += 1
                while True:
                    i = skip(tree(i, segs))
                    if text.startswith(",", i):
                        i += 1
                        continue
                    return i + 1 if text.startswith("}", i) else i
            m = word_re.match(text, i)
            if not m:
                if segs:
                    out.append(("::".join(segs), segs[-1]))
                return i
            word, i = m.group(0), m.end()
            if word not in ("self", "*"):
                segs.append(word)
            if text.startswith("::", i):
                i += 2
                continue
            alias = alias_re.match(text, i)
            if alias:
                i = alias.end()
            if segs:
                out.append(("::".join(segs), alias.group(1) if alias else segs[-1]))
            return i

    tree(start, [])
    return out


Aliases = dict[str, dict[str, str]]


def _resolve(
    path: list[str], module: str, mods: dict[str, Path], aliases: Aliases | None = None
) -> str | None:
    """The module of ours a path (``crate::a::B``, ``super::c``, ``self::d``, a child's ``d::f``)
    names: its longest prefix that is a module (an item of a module names that module), or the
    module an item was brought into that module from (``use locks::lock`` in the root makes
    ``crate::lock`` name ``locks``)."""
    here = module.split("::") if module else []
    if path[0] == "crate":
        base: list[str] = []
        rest = path[1:]
    elif path[0] in ("super", "self"):
        base = list(here)
        rest = list(path)
        while rest and rest[0] in ("super", "self"):
            if rest.pop(0) == "super":
                if not base:
                    return None
                base.pop()
    else:
        base, rest = list(here), list(path)  # a child module of this one
        if not rest or "::".join(base + rest[:1]) not in mods:
            return None
    for k in range(len(rest), -1, -1):
        candidate = "::".join(base + rest[:k])
        if candidate in mods:
            if aliases and k < len(rest) and rest[k] in aliases.get(candidate, {}):
                return aliases[candidate][rest[k]]
            return candidate
    return None


def _statements(code: str) -> Iterator[tuple[re.Match[str], str]]:
    """The ``mod`` and ``use`` statements of a file's code, with their bodies."""
    for stmt in re.finditer(r"(?:\bpub(?:\([^)]*\))?\s+)?\b(mod|use)\s+", code):
        end = code.find(";", stmt.end())
        yield stmt, code[stmt.end() : end if end >= 0 else len(code)]


def _aliases(module: str, code: str, mods: dict[str, Path]) -> dict[str, str]:
    """The names a module's ``use`` statements bring in from other modules of ours."""
    out: dict[str, str] = {}
    for stmt, body in _statements(code):
        if stmt.group(1) != "use":
            continue
        for path, name in _use_paths(body, 0):
            target = _resolve(path.split("::"), module, mods)
            if target is not None and target != module and target != "::".join(path.split("::")):
                out[name] = target
    return out


def _is_descendant(target: str | None, module: str) -> bool:
    if target is None or target == module:
        return False
    return module == "" or target.startswith(module + "::")


def _rust_edges(module: str, code: str, mods: dict[str, Path], aliases: Aliases) -> set[str]:
    children = {m.rsplit("::", 1)[-1] for m in mods if m != module and m.rpartition("::")[0] == module}
    # Declarations, and a module's re-exports of its own children, are no dependency.
    for stmt, body in _statements(code):
        if stmt.group(1) == "use":
            if not stmt.group(0).startswith("pub"):
                continue
            paths = [_resolve(p.split("::"), module, mods) for p, _ in _use_paths(body, 0)]
            if not paths or not all(_is_descendant(t, module) for t in paths):
                continue
        gone = stmt.end() + len(body)
        code = code[: stmt.start()] + " " * (gone - stmt.start()) + code[gone:]
    out: set[str] = set()
    for m in re.finditer(r"(?<![\w:])(" + _IDENT + r")::", code):
        word = m.group(1)
        if word not in ("crate", "super", "self") and word not in children:
            continue
        for path, _ in _use_paths(code, m.start()):
            target = _resolve(path.split("::"), module, mods, aliases)
            if target is not None and target != module:
                out.add(target)
    return out


def rust_graph(src: Path) -> tuple[Graph, dict[str, Path]]:
    mods = _rust_modules(src)
    # Files of unit tests (`#[cfg(test)] mod tests;`) are no part of the crate's structure.
    for m, p in list(mods.items()):
        for name in re.findall(r"#\[cfg\(test\)\]\s*mod\s+(\w+)\s*;", p.read_text(encoding="utf-8")):
            test = f"{m}::{name}" if m else name
            for other in [o for o in mods if o == test or o.startswith(test + "::")]:
                del mods[other]
    code = {m: _code(p.read_text(encoding="utf-8")) for m, p in mods.items()}
    aliases = {m: _aliases(m, c, mods) for m, c in code.items()}
    return {m: _rust_edges(m, c, mods, aliases) for m, c in code.items()}, mods


# ---------------------------------------------------------------------------------- circles


def circles(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp: list[str] = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _cycle(graph: Graph, comp: list[str]) -> list[str]:
    """One circle through a component, as a path that returns to its start."""
    members = set(comp)
    start = comp[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[path[-1]] if w in members)
        back = [w for w in nxt if w in seen]
        if start in nxt and len(path) > 1:
            return [*path, start]
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            w = back[0]
            return [*path[path.index(w) :], w]
        path.append(fresh[0])
        seen.add(fresh[0])


def _described(graph: Graph, comp: list[str], mods: dict[str, Path], root: Path) -> str:
    cycle = _cycle(graph, comp)
    text = " -> ".join(mods[m].relative_to(root).as_posix() for m in cycle)
    others = len(comp) - (len(cycle) - 1)
    return text + (f" (and {others} more module(s) in the same circle)" if others else "")


def problems(root: Path) -> Iterator[str]:
    """One line per problem."""
    pgraph, pmods = python_graph(root)
    for comp in circles(pgraph):
        yield f"python: import circle: {_described(pgraph, comp, pmods, root)}"
    yield from python_rules(pgraph)
    for crate in RUST_CRATES:
        if not (root / crate).is_dir():
            continue
        rgraph, rmods = rust_graph(root / crate)
        for comp in circles(rgraph):
            yield f"rust: module circle in {crate}: {_described(rgraph, comp, rmods, root)}"


def _edges(root: Path) -> Iterable[str]:
    pgraph, _ = python_graph(root)
    for m in sorted(pgraph):
        yield f"{m}: {' '.join(sorted(pgraph[m]))}"
    for crate in RUST_CRATES:
        if (root / crate).is_dir():
            rgraph, _ = rust_graph(root / crate)
            for m in sorted(rgraph):
                yield f"{crate} {m or '(root)'}: {' '.join(sorted(x or '(root)' for x in rgraph[m]))}"


def main(argv: list[str]) -> int:
    args = [a for a in argv if not a.startswith("--")]
    root = Path(args[0] if args else Path(__file__).resolve().parents[1]).resolve()
    if not (root / "python" / PACKAGE).is_dir():
        print(f"layers: no python/{PACKAGE} under {root}")
        return 2
    if "--graph" in argv:
        for line in _edges(root):
            print(line)
    found = list(problems(root))
    for line in found:
        print(line)
    print(f"layers: {len(found)} problem(s)", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
