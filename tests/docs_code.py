r"""The code of the README and of the documentation site, and what it prints, as the tests check them.

A page's ```python blocks form one session, in order (like a notebook): a later block sees the
names of the earlier ones. Top-level ``await`` is allowed. Each block runs (tests/test_docs.py)
against both of the emulator's profiles, ``default`` (our model of the service) and ``known``
(only what the public facts about the service show: what a reader's code meets on the real
service), and is type-checked with ``mypy --strict`` (tests/test_user_types.py), so a rename
cannot leave a stale example behind. An HTML comment on the line right before a fence (blank
lines aside) changes that, and says why:

    <!-- not run: needs a real API token -->     type-checked, not executed
    <!-- not checked: shows a mistake on purpose -->   neither executed nor type-checked
    <!-- our model only: the due_date column -->    run on the default profile only, as it shows
                                                    what only our model offers; later blocks of
                                                    the page must not use its names (the known
                                                    profile's run, without it, fails if they do)

What a page shows as printed comes from a run too:

    <!-- output -->     before a ```text block: exactly what the Python block right before it
                        prints (stdout), run on the default profile (``Emulator(findings=2_000,
                        seed=7)``, the page's own); lines compared with trailing spaces dropped.
                        Before a ```console block: each ``$ command`` (a line ending in ``\``
                        goes on) runs in a shell in the page's folder with the SECFINDINGS_*
                        settings of that emulator, and prints (stdout and stderr) exactly the
                        lines after it; on the known profile the commands must exit 0.
    <!-- file: q.graphql -->   the block's text is written to that file in the page's folder
                               before the page runs (a command of a ```console block reads it)
    <!-- printed: NAME -->     the ```text block after it is checked by a test of its own, which
                               holds the string ``printed: NAME`` (for outputs that vary with the
                               machine, such as a time)

Every ```console block that shows output lines and every ```text block right after a Python block
carries one of these markers (tests/test_docs.py checks it); a ```sh block shows commands only.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# The README's code is checked with the site's (it was left out while the README was the manual).
README_CHECKED = True

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<ticks>`{3,}|~{3,})\s*(?P<info>[^\n`]*)$")
_MARK = re.compile(
    r"^\s*<!--\s*(?P<kind>not run|not checked|our model only|output|file|printed)\s*"
    r"(?::\s*(?P<reason>.+?))?\s*-->\s*$"
)
PYTHON = {"python", "py", "python3"}
# Blocks that show what something printed: every one after code needs a marker saying how it is checked.
PRINTED = {"text", "console", "output"}


@dataclass(frozen=True)
class Fenced:
    """One fenced block of a page, any language, with the marker before it (``""`` if none)."""

    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str  # dedented, ending in a newline
    mark: str  # not run, not checked, our model only, output, file, printed, or ""
    reason: str

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    run: bool
    check: bool
    reason: str
    default_only: bool = False  # <!-- our model only: ... -->: not run on the known profile
    output: Fenced | None = None  # the <!-- output --> ```text block of what it prints

    @property
    def where(self) -> str:
        path = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path
        return f"{path}:{self.line}"

    def runs_on(self, profile: str) -> bool:
        return self.run and (profile == "default" or not self.default_only)


def pages() -> list[Path]:
    """The README and every Markdown page of the site (its copy of the spec aside)."""
    found = [ROOT / "README.md"] if README_CHECKED else []
    found += sorted(p for p in DOCS.rglob("*.md") if "spec" not in p.relative_to(DOCS).parts)
    return found


def fenced(path: Path) -> list[Fenced]:
    """Every fenced block of one page, in order, with its marker."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out: list[Fenced] = []
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
        before = start - 1
        while before >= 0 and not lines[before].strip():
            before -= 1
        mark = _MARK.match(lines[before]) if before >= 0 else None
        out.append(
            Fenced(
                path=path,
                line=start + 1,
                language=language,
                text=textwrap.dedent("\n".join(body)) + "\n",
                mark=mark.group("kind") if mark else "",
                reason=(mark.group("reason") or "") if mark else "",
            )
        )
    return out


def blocks(path: Path) -> list[Block]:
    """The Python blocks of one page, in order, each with the printed output shown after it."""
    out: list[Block] = []
    previous: Fenced | None = None
    for block in fenced(path):
        if block.language in PYTHON:
            out.append(
                Block(
                    path=path,
                    line=block.line,
                    code=block.text,
                    run=block.mark not in ("not run", "not checked"),
                    check=block.mark != "not checked",
                    reason=block.reason,
                    default_only=block.mark == "our model only",
                )
            )
        elif block.mark == "output" and block.language != "console":
            if previous is None or previous.language not in PYTHON:
                raise ValueError(f"{block.where}: an output block follows the Python block that prints it")
            out[-1] = replace(out[-1], output=block)
        previous = block
    return out


def files(path: Path) -> list[Fenced]:
    """The page's ``<!-- file: NAME -->`` blocks (``reason`` is the name)."""
    return [b for b in fenced(path) if b.mark == "file"]


def consoles(path: Path) -> list[Fenced]:
    """The page's ``<!-- output -->`` ```console blocks, whose commands the tests run."""
    return [b for b in fenced(path) if b.mark == "output" and b.language == "console"]


def unchecked_outputs(path: Path) -> list[str]:
    """The printed outputs of a page that no test compares with a run: a ```console block with
    output lines, or a ```text block right after a Python block, without a marker that says how
    it is checked."""
    problems = []
    previous: Fenced | None = None
    for block in fenced(path):
        shows_output = block.language == "console" and any(
            line.strip() and not line.startswith("$") for line in _commands_and_outputs_lines(block.text)
        )
        after_code = (
            block.language in PRINTED - {"console"} and previous is not None and previous.language in PYTHON
        )
        if (shows_output or after_code) and block.mark not in ("output", "printed"):
            problems.append(block.where)
        previous = block
    return problems


def _commands_and_outputs_lines(text: str) -> list[str]:
    """The lines of a console block, each command's continuation lines folded into it."""
    out: list[str] = []
    going_on = False
    for line in text.splitlines():
        if going_on:
            out[-1] = out[-1][:-1].rstrip() + " " + line.strip()
        else:
            out.append(line)
        going_on = out[-1].startswith("$") and out[-1].endswith("\\")
    return out


def commands(text: str) -> list[tuple[str, str]]:
    """A console block's commands, each with the output shown after it (``$ `` dropped)."""
    out: list[tuple[str, list[str]]] = []
    for line in _commands_and_outputs_lines(text):
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out:
            out[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"output before the first command: {line!r}")
    return [(command, "".join(f"{line}\n" for line in shown)) for command, shown in out]


def same_text(a: str, b: str) -> bool:
    """Equal, but for spaces at line ends and blank lines at the end."""

    def lines(text: str) -> list[str]:
        return [line.rstrip() for line in text.rstrip().splitlines()]

    return lines(a) == lines(b)


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
