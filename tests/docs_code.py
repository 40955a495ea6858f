"""The Python code of the README and of the documentation site, as the tests run and type-check it.

A page's ```python blocks form one session, in order (like a notebook): a later block sees the
names of the earlier ones. Top-level ``await`` is allowed. A block is left out when the line
right before its fence (blank lines aside) is an HTML comment that says why:

    <!-- not run: needs a real API token -->     type-checked, not executed
    <!-- not checked: shows a mistake on purpose -->   neither executed nor type-checked

Any other Python block runs against the emulator (tests/test_docs.py) and is type-checked with
``mypy --strict`` (tests/test_user_types.py), so a rename cannot leave a stale example behind.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The README's code is checked with the site's (it was left out while the README was the manual).
README_CHECKED = True

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})\s*(?P<info>[^\n`]*)$")
_MARK = re.compile(r"^\s*<!--\s*(?P<kind>not run|not checked)\s*:\s*(?P<reason>.+?)\s*-->\s*$")
PYTHON = {"python", "py", "python3"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    run: bool
    check: bool
    reason: str

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


def pages() -> list[Path]:
    """The README and every Markdown page of the site (its copy of the spec aside)."""
    found = [ROOT / "README.md"] if README_CHECKED else []
    found += sorted(p for p in DOCS.rglob("*.md") if "spec" not in p.relative_to(DOCS).parts)
    return found


def blocks(path: Path) -> list[Block]:
    """The Python blocks of one page, in order."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start, ticks = i, m.group("ticks")
        language = (m.group("info").split() or [""])[0].strip("{}.").lower()
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(ticks):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if language not in PYTHON:
            continue
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        mark = _MARK.match(lines[before]) if before >= 0 else None
        kind = mark.group("kind") if mark else ""
        out.append(
            Block(
                path=path,
                line=start + 1,
                code=textwrap.dedent("\n".join(body)) + "\n",
                run=mark is None,
                check=kind != "not checked",
                reason=mark.group("reason") if mark else "",
            )
        )
    return out


def as_module(page_blocks: list[Block]) -> str:
    """The page's checked blocks as one module for a type checker: the blocks become the body of
    one ``async def`` (so top-level ``await`` is legal), each after a comment naming its line."""
    body = []
    for block in page_blocks:
        if not block.check:
            continue
        body.append(f"# {block.where}")
        body.append(block.code)
    code = textwrap.indent("\n".join(body) or "pass\n", "    ")
    return f"async def _page() -> None:\n{code}"


def locate(module: str, line: int) -> str:
    """The page and line that line ``line`` of :func:`as_module`'s text came from."""
    lines = module.splitlines()
    for i in range(min(line, len(lines)) - 1, -1, -1):
        text = lines[i].strip()
        if text.startswith("# ") and re.search(r":\d+$", text):
            where, fence = text[2:].rsplit(":", 1)
            return f"{where}:{int(fence) + line - 1 - i}"
    return f"<page>:{line}"
