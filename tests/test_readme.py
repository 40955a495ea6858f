"""The README is the package's page on PyPI (``readme = "README.md"``), where a relative link
leads nowhere: every link and image of it is an absolute https URL, an anchor of the page, or
a file inside the installed package (issue 31: it linked to ``examples/`` and ``docs/``, which
the wheel does not hold). The examples it points at ship in the package
(``secfindings examples``), equal to the source tree's ``examples/``."""

from __future__ import annotations

import html.parser
import re
from importlib import resources
from pathlib import Path

import pytest
from click.testing import CliRunner

from secfindings.cli import main

ROOT = Path(__file__).resolve().parents[1]

markdown = pytest.importorskip("markdown")  # Python-Markdown, with the docs' tools


class _Targets(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.found.append(value)


def targets(text: str) -> list[str]:
    """Every link and image target of a Markdown text (inline, reference, autolink, raw HTML),
    as a Markdown renderer sees them."""
    parser = _Targets()
    parser.feed(markdown.markdown(text, extensions=["fenced_code", "tables"]))
    return parser.found


def broken_on_pypi(text: str) -> list[str]:
    """The targets that lead nowhere on a PyPI page: not https, not an anchor of the page, not a
    file of the installed package."""
    package = resources.files("secfindings")
    bad = []
    for target in targets(text):
        if target.startswith("https://") or target.startswith("#"):
            continue
        path = target.split("#", 1)[0]
        if "://" not in target and not path.startswith("/") and path and (package / path).is_file():
            continue
        bad.append(target)
    return bad


def test_the_readme_has_no_link_that_breaks_on_pypi() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert broken_on_pypi(readme) == []
    assert "https://developers.seemplicity.io/" in targets(readme)


@pytest.mark.parametrize(
    "text",
    [
        "see [the examples](examples/)",
        "the [sync guide](docs/guides/sync.md#tables)",
        "[ref]\n\n[ref]: docs/index.md",
        '<a href="CHANGELOG.md">changes</a>',
        "![logo](docs/logo.png)",
        "[plain http](http://example.com/)",
    ],
)
def test_the_check_finds_each_kind_of_link_that_breaks(text: str) -> None:
    assert len(broken_on_pypi(text)) == 1


def test_a_file_of_the_installed_package_is_a_link_that_holds() -> None:
    assert broken_on_pypi("[quickstart](examples/quickstart.py.txt)") == []


def test_the_packaged_examples_are_the_source_trees() -> None:
    """A change to examples/ is copied to python/secfindings/examples/NAME.txt (the wheel's)."""
    source = {p.name: p.read_bytes() for p in (ROOT / "examples").iterdir() if p.is_file()}
    packaged = {
        item.name.removesuffix(".txt"): item.read_bytes()
        for item in (resources.files("secfindings") / "examples").iterdir()
        if item.name.endswith(".txt")
    }
    assert sorted(packaged) == sorted(source)
    stale = [name for name in source if packaged[name] != source[name]]
    assert not stale, f"copy examples/{stale[0]} to python/secfindings/examples/{stale[0]}.txt"


def test_the_examples_command_lists_and_prints_them() -> None:
    listed = CliRunner().invoke(main, ["examples"])
    assert listed.exit_code == 0, listed.output
    assert [line.split()[0] for line in listed.output.splitlines()] == sorted(
        p.name for p in (ROOT / "examples").iterdir() if p.is_file()
    )
    assert re.search(r"^quickstart\.py +Quickstart: the most severe findings", listed.output, re.M)
    for name in ("quickstart", "quickstart.py"):
        shown = CliRunner().invoke(main, ["examples", name])
        assert shown.exit_code == 0
        assert shown.output == (ROOT / "examples" / "quickstart.py").read_text(encoding="utf-8")
    unknown = CliRunner().invoke(main, ["examples", "quick"])
    assert unknown.exit_code == 2
    assert unknown.output.startswith("error: no example 'quick' (did you mean 'quickstart'?)")
    assert unknown.output.count("\n") == 1
