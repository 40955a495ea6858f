"""The documentation site builds strictly, and the code in it and in the README runs.

- ``mkdocs build --strict``: no broken link, no warning, every public name documented
  (scripts/docs_hooks.py), the CLI reference generated from click;
- every Python block of the README and of docs/ runs against the emulator (tests/docs_code.py
  says how a block is marked as not runnable, and why), a page's blocks in order in one session,
  with the SECFINDINGS_* settings pointing at an emulator, so ``secfindings.Client()`` works as
  it does for a user with the variables set.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.docs_code import ROOT, Block, blocks, pages

from secfindings.testing import Emulator

pytest.importorskip("mkdocs", reason="the docs extra: pip install -e '.[docs]'")

PAGES = [p for p in pages() if blocks(p)]
# The newer features' guides are written beside this file; until they are, the nav names them.
NAV_GUIDES = ["batching", "performance", "sync", "ci-and-siem"]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # a watchdog against a hang, not a bound on the machine's speed
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode == 0, build.stdout + build.stderr
    return out


def test_the_site_builds_strictly_with_every_page(site: Path) -> None:
    for page in [
        "index.html",
        "getting-started/index.html",
        "guides/live-feeds/index.html",
        "guides/typing/index.html",
        "reference/clients/index.html",
        "reference/errors/index.html",
        "reference/cli/index.html",
        "benchmarks/index.html",
        "changelog/index.html",
        *[f"guides/{name}/index.html" for name in NAV_GUIDES],
    ]:
        assert (site / page).is_file(), page


def test_the_reference_documents_the_clients_methods_and_the_cli(site: Path) -> None:
    clients = (site / "reference/clients/index.html").read_text(encoding="utf-8")
    for anchor in ["secfindings.Client.findings_view", "secfindings.AsyncClient.subscribe"]:
        assert f'id="{anchor}"' in clients, anchor
    cli = (site / "reference/cli/index.html").read_text(encoding="utf-8")
    for command in ["export", "query", "schema", "token", "emulator"]:
        assert re.search(rf"secfindings {command}\b", cli), command
    assert "--version" in cli
    changelog = (site / "changelog/index.html").read_text(encoding="utf-8")
    assert "Keep a Changelog" in changelog


def _hooks() -> Any:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "scripts" / "docs_hooks.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_public_name_check_fails_on_an_undocumented_name(site: Path, tmp_path: Path) -> None:
    hooks = _hooks()
    assert hooks.problems(site) == []
    # The same site without the models page: every model is public and now undocumented.
    copy = tmp_path / "site"
    for page in site.rglob("*.html"):
        if "reference/models" in page.as_posix():
            continue
        target = copy / page.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page.read_text(encoding="utf-8"), encoding="utf-8")
    missing = hooks.problems(copy)
    assert any("secfindings.models.ScoringRule is public but no page documents it" in m for m in missing)


def test_the_public_name_check_finds_a_method_without_a_docstring() -> None:
    hooks = _hooks()

    class Documented:
        """A class."""

        def call(self) -> None:
            """Documented."""

        def bare(self) -> None:
            pass

    Documented.__module__ = "secfindings.fake"
    assert hooks.undocumented_members(Documented) == [
        "test_the_public_name_check_finds_a_method_without_a_docstring.<locals>.Documented.bare"
    ]


# ------------------------------------------------------------------------------ code runs


@pytest.fixture(scope="module")
def docs_emulator() -> Iterator[Emulator]:
    with Emulator(findings=2_000, seed=7) as emu:
        yield emu


def _run_page(page_blocks: list[Block], namespace: dict[str, Any]) -> None:
    loop = asyncio.new_event_loop()
    try:
        for block in page_blocks:
            if not block.run:
                continue
            code = compile(block.code, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
            try:
                if code.co_flags & inspect.CO_COROUTINE:
                    loop.run_until_complete(eval(code, namespace))
                else:
                    exec(code, namespace)
            except Exception as exc:
                raise AssertionError(f"{block.where}: {type(exc).__name__}: {exc}") from exc
    finally:
        for value in list(namespace.values()):
            close = getattr(value, "close", None)
            if callable(close) and type(value).__module__.startswith("secfindings"):
                close()
        loop.close()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_the_python_blocks_run_against_the_emulator(
    page: Path,
    docs_emulator: Emulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The user's settings go; the run's own cache folders (conftest.py) stay.
    keep = {"SECFINDINGS_SCHEMA_CACHE", "SECFINDINGS_BUDGET_DIR"}
    for name in [n for n in os.environ if n.startswith("SECFINDINGS_") and n not in keep]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", docs_emulator.create_api_token("docs"))
    monkeypatch.setenv("SECFINDINGS_BASE_URL", docs_emulator.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", docs_emulator.auth_url)
    monkeypatch.chdir(tmp_path)  # files the examples write land here
    page_blocks = blocks(page)
    for block in page_blocks:
        if not block.run:
            assert len(block.reason) >= 10, f"{block.where}: say why the block does not run"
    _run_page(page_blocks, {"__name__": "__docs__"})
    capsys.readouterr()


def test_a_stale_example_fails(
    tmp_path: Path, docs_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "stale.md"
    page.write_text(
        "```python\nimport secfindings\nclient = secfindings.Client()\n```\n\n"
        "<!-- not run: shows a call that does not exist -->\n```python\nclient.no_such_method()\n```\n\n"
        "```python\nclient.findings_view(sortt='SCORE_DESC')\n```\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("SECFINDINGS_API_TOKEN", docs_emulator.create_api_token("docs"))
    monkeypatch.setenv("SECFINDINGS_BASE_URL", docs_emulator.base_url)
    monkeypatch.setenv("SECFINDINGS_AUTH_URL", docs_emulator.auth_url)
    page_blocks = blocks(page)
    assert [(b.run, b.check) for b in page_blocks] == [(True, True), (False, True), (True, True)]
    with pytest.raises(AssertionError, match=r"stale\.md:\d+: TypeError: .*sortt"):
        _run_page(page_blocks, {"__name__": "__docs__"})


def test_the_version_has_a_release_entry_and_the_command_prints_it() -> None:
    import secfindings

    command = Path(sys.executable).with_name("secfindings")
    out = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == f"secfindings {secfindings.__version__}"
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?$", changelog, re.M)
    assert headings[0] == ("Unreleased", "")
    releases = dict(headings[1:])
    assert secfindings.__version__ in releases, "the version needs a dated release entry"
    assert releases[secfindings.__version__], "the release entry needs its date"


def test_the_exception_tree_on_the_errors_page_is_the_hierarchy() -> None:
    from secfindings import errors

    text = (ROOT / "docs" / "reference" / "errors.md").read_text(encoding="utf-8")
    tree = text.split("```text\n", 1)[1].split("```", 1)[0]
    parents: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    for line in tree.splitlines():
        match = re.match(r"^([│ ├└─]*)(\w+)", line)
        if match is None or not match.group(2)[0].isupper():
            continue
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if stack:
            parents[name] = stack[-1][1]
        stack.append((depth, name))
    assert set(parents) | {"SecFindingsError"} == set(errors.__all__)
    for name, parent in parents.items():
        assert getattr(errors, parent) in getattr(errors, name).__bases__, (name, parent)


def test_the_pytest_example_of_the_testing_guide_passes_under_pytest(tmp_path: Path) -> None:
    # Marked "not run" for the in-page session because pytest, not the page, calls it.
    (module,) = [b for p in pages() for b in blocks(p) if b.reason.startswith("a pytest test module")]
    path = tmp_path / "test_from_the_guide.py"
    path.write_text(module.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECFINDINGS_")}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"^1 passed", out.stdout, re.M), out.stdout


def test_the_readme_is_an_overview_with_the_two_commands_and_working_links() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 300
    # The install-and-demo and test commands (.ci/run runs scripts/test.sh) stay as they are.
    assert re.search(
        r"^\./scripts/demo\.sh +# installs into \.venv and runs examples/quickstart\.py$", readme, re.M
    )
    assert re.search(r"^\./scripts/test\.sh +# every test", readme, re.M)
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [link for link in links if "://" not in link]
    assert len(local) >= 10, local
    for link in local:
        assert (ROOT / link).exists(), link
    # Every guide of the site is reachable from the README or from the page it links first.
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    for guide in sorted((ROOT / "docs" / "guides").glob("*.md")):
        assert f"guides/{guide.name}" in readme + index, guide.name
